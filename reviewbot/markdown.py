r"""Markdown that is safe to post on GitLab: one module for every escaping rule reviewbot uses.

Model text (finding titles, bodies, suggestions) and text taken from a merge request (file
paths, settings warnings) are posted to GitLab as Markdown, so they must not be able to:

* run quick actions. GitLab reads a line as one when it starts with "/" and a command name
  (lib/gitlab/quick_actions/extractor.rb: `^\/(?<cmd>...)`, after deleting "\r"); its own
  redaction wraps the line in a code span. We escape the slash ("\/" renders as "/"), for any
  line whose first non-space character is "/";
* mention people. GitLab's reference filters skip <code>, so "@name" (not preceded by an ASCII
  letter or digit, as in an e-mail address) becomes the code span "`@name`" (or, right next to
  a backtick, "@" + an invisible word joiner + "name", which no username pattern matches);
* inject HTML (markers such as "<!-- reviewbot:... -->", <img>, <details>): "<", ">" and "&"
  are written as entities outside code; Markdown images become literal text.
Inline code spans are only trusted when they open and close on one line and hold no "|" (a
GFM table splits cells before reading code spans); other backticks are escaped, so CommonMark
pairs backticks exactly as we did. Fenced code blocks are kept verbatim, re-emitted at column
0 so no list or quote can end them early, and closed if the model left them open.

Table cells (:func:`table_cell`, :func:`link_cell`, :func:`markdown_cell`) and code spans in
tables (:func:`code_span_text`) have their own, stricter rules: one line, no pipes. Text from a
database or a merge request in a cell (:func:`table_cell`) makes no link either: "[" and "]"
are escaped (no ``[x](javascript:...)``, no reference link), "|" too (the cell cannot split),
and so is a backslash that escapes nothing (a cell ending in one would escape the "]" of a
link around it); an address with a scheme other than http(s) ("smb://", "javascript://") gets
an invisible word joiner after its colon, so GitLab's autolinker does not link it. The only
link in a cell is one :func:`link_cell` makes, to an http(s) address
(:func:`reviewbot.weburl.web_url`).

Pure: strings in, strings out.

Owns: every escaping rule for text posted on GitLab or written in a report table. Must not: build a
comment (`reviewbot.comments` does), decide what is posted, or do I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reviewbot.weburl import WEB_SCHEMES, web_url

__all__ = [
    "HTML_COMMENT_OPEN",
    "QUICK_ACTION_LINE",
    "REPLACEMENT_CHARACTER",
    "TRUNCATION_MARKER",
    "UNPRINTABLE",
    "code_span_text",
    "lines_of",
    "link_cell",
    "markdown_cell",
    "printable_text",
    "sanitize_markdown",
    "sanitize_title",
    "suggestion_block",
    "table_cell",
]

DEFAULT_MAX_TITLE_CHARS = 120
TRUNCATION_MARKER = "… (truncated)"
TITLE_ELLIPSIS = "…"
MIN_FENCE_LENGTH = 3
WHITESPACE_RUN = re.compile(r"\s+")

ASCII_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
HTML_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
HTML_COMMENT_OPEN = "<!--"
BROKEN_COMMENT_OPEN = "<!\u200b--"  # a zero-width space, invisible in code
QUICK_ACTION_LINE = re.compile(r"[ \t]*/\w")
LEADING_SLASH = re.compile(r"^([ \t]*)/")
MENTION = re.compile(r"@[A-Za-z0-9_.][A-Za-z0-9_.\-/]*")
MENTION_TRAILING = "./-"
ESCAPABLE_NAME_CHARS = frozenset("_.-")  # punctuation a username may hold
WORD_JOINER = "\u2060"  # invisible; GitLab usernames cannot contain it
ASCII_ALNUM = re.compile(r"[A-Za-z0-9]")
FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
FENCE_INFO_WORD = re.compile(r"[A-Za-z0-9_+\-.#]+")
SUGGESTION_INFO = "suggestion"
LINK_BRACKETS = frozenset("[]")
TABLE_PIPE = "|"
REPLACEMENT_CHARACTER = "\ufffd"
# Characters no output should carry: a lone surrogate cannot be written as UTF-8 at all, NUL
# and the other control characters (tab, line feed and carriage return aside) are invisible
# and treated differently by every reader (PostgreSQL refuses NUL in text, HTML drops it,
# Markdown replaces it, a font has no glyph for them). Each becomes U+FFFD, so the reader still
# sees that something was there.
UNPRINTABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
SCHEME_CHARS = re.compile(r"[A-Za-z0-9+.\-]*$")  # RFC 3986: what a scheme is made of
SCHEME_START = re.compile(r"[A-Za-z]")
AUTOLINK_SLASHES = "//"


def printable_text(text: str) -> str:
    """``text`` with every unprintable character (see ``UNPRINTABLE``) replaced by U+FFFD."""
    return UNPRINTABLE.sub(REPLACEMENT_CHARACTER, text)


def lines_of(text: str) -> list[str]:
    """Split on every line break Python knows (CommonMark's and Unicode's), "\r" included."""
    return text.splitlines() or [""]


@dataclass(frozen=True, slots=True)
class _Fence:
    char: str
    length: int

    @property
    def marker(self) -> str:
        return self.char * self.length

    def closed_by(self, line: str) -> bool:
        stripped = line.lstrip(" ")
        if len(line) - len(stripped) > MIN_FENCE_LENGTH:
            return False
        run = len(stripped) - len(stripped.lstrip(self.char))
        return run >= self.length and not stripped[run:].strip(" \t")


@dataclass(frozen=True, slots=True)
class _OutLine:
    text: str
    open_fence: _Fence | None  # the fence still open after this line
    raw: str | None  # the source line when it is plain text (can be cut mid-line)


def sanitize_markdown(text: str, *, max_chars: int) -> str:
    """Make model Markdown safe to post: see the notes above. At most ``max_chars`` long."""
    out = _sanitize_lines(lines_of(text))
    return _fit(out, max_chars)


def _sanitize_lines(lines: list[str]) -> list[_OutLine]:
    out: list[_OutLine] = []
    fence: _Fence | None = None
    for line in lines:
        if fence is not None:
            if fence.closed_by(line):
                out.append(_OutLine(fence.marker, None, None))
                fence = None
            else:
                out.append(_OutLine(_sanitize_code_line(line), fence, None))
            continue
        opened = _open_fence(line)
        if opened is not None:
            fence, opener = opened
            out.append(_OutLine(opener, fence, None))
        else:
            out.append(_OutLine(_sanitize_text_line(line), None, line))
    return out


def _open_fence(line: str) -> tuple[_Fence, str] | None:
    match = FENCE_OPEN.match(line)
    if match is None:
        return None
    marker, info = match.group(1), match.group(2)
    if marker[0] == "`" and "`" in info:
        return None  # CommonMark: a backtick fence's info string has no backtick
    word = FENCE_INFO_WORD.match(info.strip())
    language = word.group() if word else ""
    if language.lower().startswith(SUGGESTION_INFO):
        language = ""  # only the publisher writes suggestion blocks
    return _Fence(marker[0], len(marker)), marker + language


def _sanitize_code_line(line: str) -> str:
    line = line.replace(HTML_COMMENT_OPEN, BROKEN_COMMENT_OPEN)
    return " " + line if line.startswith("/") else line


def _sanitize_text_line(line: str, *, in_cell: bool = False) -> str:
    escaped = _escape_inline(line, in_cell=in_cell)
    return LEADING_SLASH.sub(lambda match: match.group(1) + "\\/", escaped, count=1)


def _escape_inline(line: str, *, in_cell: bool = False) -> str:
    """One line of text made inert; ``in_cell``: also no link and no "|" (see the notes)."""
    out: list[str] = []
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\" and i + 1 < len(line) and line[i + 1] in ASCII_PUNCTUATION:
            i = _escaped_pair(line, i, out)
        elif char == "`":
            i = _code_span(line, i, out)
        elif char in HTML_ENTITIES:
            out.append(HTML_ENTITIES[char])
            i += 1
        elif char == "@":
            i = _mention(line, i, out)
        elif char == "!" and line.startswith("[", i + 1):
            out.append("!\\[")  # no Markdown images: they load remote content
            i += 2
        elif in_cell and char == "\\":
            out.append("\\\\")  # literal: a cell ending in "\\" must not escape what follows
            i += 1
        elif in_cell and (char in LINK_BRACKETS or char == TABLE_PIPE):
            out.append("\\" + char)
            i += 1
        elif in_cell and char == ":" and _autolinked_scheme(line, i):
            out.append(":" + WORD_JOINER)
            i += 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _autolinked_scheme(line: str, colon: int) -> bool:
    """The ":" at ``colon`` ends a scheme other than http(s) that "//" follows (GitLab links
    any ``scheme://...`` it finds in text, starting at the first letter of the scheme)."""
    if not line.startswith(AUTOLINK_SLASHES, colon + 1):
        return False
    run = SCHEME_CHARS.search(line, 0, colon)
    scheme = run.group() if run else ""
    first_letter = SCHEME_START.search(scheme)
    if first_letter is None:
        return False
    return scheme[first_letter.start() :].lower() not in WEB_SCHEMES


def _escaped_pair(line: str, i: int, out: list[str]) -> int:
    escaped = line[i + 1]
    if escaped in HTML_ENTITIES:
        out.append(HTML_ENTITIES[escaped])
        return i + 2
    if escaped == "@":
        return i + 1  # "\@" renders as "@": drop the backslash and treat "@" as usual
    out.append(line[i : i + 2])
    return i + 2


def _code_span(line: str, i: int, out: list[str]) -> int:
    run = len(line) - i - len(line[i:].lstrip("`"))
    search = i + run
    while (found := line.find("`" * run, search)) >= 0:
        end = found + len(line[found:]) - len(line[found:].lstrip("`"))
        if end - found == run:
            content = line[i + run : found]
            if "|" in content:
                break
            out.append(line[i:end].replace(HTML_COMMENT_OPEN, BROKEN_COMMENT_OPEN))
            return end
        search = end
    out.append("\\`" * run)
    return i + run


def _mention(line: str, i: int, out: list[str]) -> int:
    match = MENTION.match(line, i)
    # What precedes "@" once rendered: a letter or digit makes it an e-mail address, while
    # anything else (including the end of a code span) leaves a mention GitLab would link.
    previous = out[-1][-1] if out and out[-1] else " "
    if ASCII_ALNUM.fullmatch(previous):
        out.append("@")
        return i + 1
    if match is None:
        # "@\_x" renders as "@_x": a backslash-escaped name character still makes a mention
        escaped_name = line.startswith("\\", i + 1) and line[i + 2 : i + 3] in ESCAPABLE_NAME_CHARS
        out.append("@" + WORD_JOINER if escaped_name else "@")
        return i + 1
    name = match.group().rstrip(MENTION_TRAILING)
    if len(name) <= 1:
        out.append("@")
        return i + 1
    end = i + len(name)
    if previous == "`" or line.startswith("`", end):
        # a code span right next to other backticks would merge with them
        out.append("@" + WORD_JOINER + name[1:])
    else:
        out.append(f"`{name}`")
    return end


def _fit(lines: list[_OutLine], max_chars: int) -> str:
    """Join, cutting on a line boundary with the truncation marker when too long."""
    full = _joined(lines, len(lines))
    if len(full) <= max_chars:
        return full
    # length of lines[:count] joined by "\n", for every count, without joining them all
    prefix = [0]
    for line in lines:
        prefix.append(prefix[-1] + len(line.text) + 1)
    for count in range(len(lines) - 1, 0, -1):
        fence = lines[count - 1].open_fence
        closing = len(fence.marker) + 1 if fence else 0
        if prefix[count] + closing + len(TRUNCATION_MARKER) <= max_chars:
            return _joined(lines, count, truncated=True)
    return _cut_first_line(lines[0], max_chars)


def _joined(lines: list[_OutLine], count: int, *, truncated: bool = False) -> str:
    kept = [line.text for line in lines[:count]]
    fence = lines[count - 1].open_fence if count else None
    if fence is not None:
        kept.append(fence.marker)
    if truncated:
        kept.append(TRUNCATION_MARKER)
    return "\n".join(kept)


def _cut_first_line(line: _OutLine, max_chars: int) -> str:
    """A single line longer than the budget: cut the source text and sanitise it again."""
    room = max_chars - len(TRUNCATION_MARKER) - 1
    if line.raw is None or room <= 0:
        return TRUNCATION_MARKER
    keep = min(room, len(line.raw))
    while keep > 0:
        text = _sanitize_text_line(line.raw[:keep])
        if len(text) <= room:
            return f"{text}\n{TRUNCATION_MARKER}"
        keep -= len(text) - room
    return TRUNCATION_MARKER


def sanitize_title(text: str, *, max_chars: int = DEFAULT_MAX_TITLE_CHARS) -> str:
    """One line of safe Markdown, at most ``max_chars`` long (cut with an ellipsis)."""
    flat = WHITESPACE_RUN.sub(" ", text).strip()
    escaped = _sanitize_text_line(flat)
    if len(escaped) <= max_chars:
        return escaped
    room = max_chars - len(TITLE_ELLIPSIS)
    keep = min(room, len(flat))
    while keep > 0:
        escaped = _sanitize_text_line(flat[:keep].rstrip())
        if len(escaped) <= room:
            return escaped + TITLE_ELLIPSIS
        keep -= len(escaped) - room
    return TITLE_ELLIPSIS


def suggestion_block(suggestion: str, *, lines_above: int = 0, lines_below: int = 0) -> str:
    """A GitLab suggestion block for ``suggestion``, fenced longer than any backtick run in it.

    https://docs.gitlab.com/user/project/merge_requests/reviews/suggestions/ : a suggestion
    that itself contains a code fence needs a longer outer fence. An empty ``suggestion``
    writes an empty block, which deletes the lines.
    """
    longest = max((len(run) for run in re.findall(r"`+", suggestion)), default=0)
    fence = "`" * max(MIN_FENCE_LENGTH, longest + 1)
    body = suggestion if suggestion.endswith("\n") or not suggestion else suggestion + "\n"
    return f"{fence}suggestion:-{lines_above}+{lines_below}\n{body}{fence}"


# ---------------------------------------------------------------------------------------------
# Tables


def table_cell(text: str) -> str:
    """Plain text inside a table cell: one line, pipes escaped, HTML neutralised, no mentions,
    no links.

    Text from a merge request (a settings warning naming a key such as ``@all``, a skip reason)
    or from the database (a project path, a model name in the report) goes through the same
    inline rules as model text, so it cannot mention or run quick actions, and it makes no link
    (see the notes above).
    """
    flat = WHITESPACE_RUN.sub(" ", text).strip()
    return _sanitize_text_line(flat, in_cell=True)


def link_cell(text: str, url: str | None) -> str:
    """``text`` (as :func:`table_cell`) linked to ``url`` when it is an http(s) address;
    otherwise the text alone."""
    cell = table_cell(text)
    target = web_url(url)
    return f"[{cell}]({target})" if target else cell


def markdown_cell(sanitised: str) -> str:
    """Already-sanitised Markdown (a finding title) inside a table cell."""
    return WHITESPACE_RUN.sub(" ", sanitised).replace("|", "\\|")


def code_span_text(text: str) -> str:
    """Text inside a single-backtick code span within a table: no backticks, no pipes."""
    return WHITESPACE_RUN.sub(" ", text).replace("`", "'").replace("|", "/")
