"""Hostile strings for the report's property tests: what a database row could hold.

Families: HTML and SVG that would run or open elements, attribute breakers, script URLs (in
every disguise a browser still runs), Markdown links, images and reference definitions, GitLab
quick actions and mentions, table breakers, mathtext, and the characters readers disagree on
(U+2028, NUL, lone surrogates, other controls). :data:`hostile_text` joins a few fragments
with arbitrary text; :data:`hostile_url` is a web address or a script URL with such a tail.

For what the commands print on a terminal, :data:`TERMINAL` adds rich markup and emoji codes
and terminal control sequences (CSI and OSC, as ESC sequences and as C1 characters, OSC 8
hyperlinks, BEL, backspace, a carriage return); :data:`hostile_terminal_text` draws from every
family.
"""

from __future__ import annotations

import re

from hypothesis import strategies as st

HTML = (
    "<script>document.title='pwned'</script>",
    "<img src=x onerror=document.title='pwned'>",
    "</svg><script>document.title='pwned'</script>",
    "</td></tr></tbody></table><h1>injected</h1>",
    "</title><script>alert(1)</script>",
    "</style><script>alert(1)</script>",
    "<svg onload=alert(1)>",
    "<a href=javascript:alert(1)>x</a>",
    "<math><mi xlink:href=javascript:alert(1)>x</mi></math>",
    "<!--",
    "-->",
    "--!>",
    "<![CDATA[",
    "]]>",
    "&lt;script&gt;",
    "&#x3C;script&#x3E;",
    "<",
    ">",
    "&",
)
ATTRIBUTE_BREAKERS = (
    '"',
    "'",
    "`",
    "=",
    '" onmouseover="alert(1)',
    "' autofocus onfocus='alert(1)",
    '"><script>alert(1)</script>',
)
SCRIPT_URLS = (
    "javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    " javascript:alert(1)",
    "\tjava\nscript:alert(1)",
    "\x01javascript:alert(1)",
    "javascript://%0aalert(1)",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:msgbox(1)",
    "//evil.example/x",
    "http:\\\\evil.example",
    "https:evil.example",
    "smb://evil.example/share",
    "https://",
)
MARKDOWN = (
    "[x](javascript:alert(1))",
    "![x](https://evil.example/x.png)",
    "[x]: javascript:alert(1)",
    "<javascript:alert(1)>",
    "<https://evil.example>",
    "[x][y]",
    "[",
    "]",
    "(",
    ")",
    "*b* _i_ ~~s~~",
    "`",
    "``",
    "```",
    "~~~",
    "|",
    "\\|",
    "\\",
    "\\\\|",
    "|---|",
    "# h",
    "> q",
    "- i",
)
QUICK_ACTIONS = ("/close", "\n/merge", "  /label ~bug", "\r/approve", "\u2028/close", "\n  /assign")
MENTIONS = ("@all", "@here", "@channel", "@someone", "\\@all", "x@all", "`@all`", "@\\_x", "@a.")
CHARACTERS = (
    "\u2028",
    "\u2029",
    "\x00",
    "\ud800",
    "\udfff",
    "\x85",
    "\r\n",
    "\x0b",
    "\x1b",
    "\u202e",
    "\ufeff",
    "👍",
    "$\\frac$",
    "$x$",
)
TERMINAL = (
    "[bold red]x[/]",
    "[bold]",
    "[/]",
    "[link=https://evil.example]click[/link]",
    "[blink]x[/blink]",
    "\\[bold]",
    ":smile:",
    ":thumbs_up:",
    "\x1b]8;;https://evil.example\x07link\x1b]8;;\x07",
    "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\",
    "\x1b]0;title\x07",
    "\x1b[2J",
    "\x1b[31mred\x1b[0m",
    "\x1b[1A\x1b[2K",
    "\x1bc",
    "\x9b2J",
    "\x9d8;;https://evil.example\x9c",
    "\r",
    "over\rwritten",
    "\x07",
    "\x08",
    "\x7f",
)
FRAGMENTS = HTML + ATTRIBUTE_BREAKERS + SCRIPT_URLS + MARKDOWN + QUICK_ACTIONS + MENTIONS
FRAGMENTS += CHARACTERS

hostile_text = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), min_size=1, max_size=4
).map("".join)
hostile_terminal_text = st.lists(
    st.one_of(st.sampled_from(TERMINAL + FRAGMENTS), st.text(max_size=6)), min_size=1, max_size=3
).map("".join)
hostile_url = st.one_of(
    st.sampled_from(SCRIPT_URLS),
    st.builds(
        str.__add__,
        st.sampled_from(("https://gitlab.example.com", "HTTP://h.example/", *SCRIPT_URLS)),
        hostile_text,
    ),
)

LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def storable(text: str, dialect: str, length: int | None) -> str:
    """``text`` as a database can hold it: no lone surrogate (UTF-8 has none), no NUL on
    PostgreSQL (its text type refuses it), at most ``length`` characters."""
    text = LONE_SURROGATE.sub("?", text)
    if dialect == "postgresql":
        text = text.replace("\x00", "")
    return text if length is None else text[:length]
