"""reviewbot.markdown: what model text and MR text may and may not do once posted on GitLab.

Quick actions: a line starting with "/" and a command (lib/gitlab/quick_actions/extractor.rb);
mentions, HTML and images are neutralised; suggestions: https://docs.gitlab.com/user/project/merge_requests/reviews/suggestions/
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from reviewbot.markdown import (
    TRUNCATION_MARKER,
    code_span_text,
    link_cell,
    markdown_cell,
    sanitize_markdown,
    sanitize_title,
    suggestion_block,
    table_cell,
)
from reviewbot.weburl import web_url
from tests.hostile_text import SCRIPT_URLS, hostile_text, hostile_url
from tests.hypothesis_profiles import examples


def lines_of(text: str) -> list[str]:
    return text.split("\n") + text.splitlines()


@pytest.mark.parametrize("command", ["/merge", "/approve", "  /close", "\t/label ~bug", "/MERGE"])
def test_quick_actions_are_neutralised(command: str) -> None:
    out = sanitize_markdown(f"Looks good.\n{command}\nThanks", max_chars=500)
    assert all(not line.lstrip().startswith("/") for line in lines_of(out))
    assert command.strip().lstrip("/") in out


@pytest.mark.parametrize("mention", ["@all", "@here", "@channel", "@someone", "@group/sub"])
def test_mentions_are_put_in_code(mention: str) -> None:
    out = sanitize_markdown(f"cc {mention}, please look", max_chars=500)
    assert f"`{mention}`" in out


def test_email_addresses_are_not_mentions() -> None:
    assert sanitize_markdown("mail dev@example.com", max_chars=100) == "mail dev@example.com"


@pytest.mark.parametrize(
    "html",
    ["<!-- reviewbot:x -->", "<img src=x>", "<details><summary>x</summary></details>"],
)
def test_html_is_escaped(html: str) -> None:
    out = sanitize_markdown(f"see {html} here", max_chars=500)
    assert "<" not in out and ">" not in out
    assert "&lt;" in out


@pytest.mark.parametrize("trick", ["\\<!-- x -->", "&#64;all", "\\@all", "![x](http://t/p.png)"])
def test_escape_tricks_do_not_get_through(trick: str) -> None:
    out = sanitize_markdown(trick, max_chars=500)
    assert "<!--" not in out
    assert "&#64;" not in out.replace("&amp;#64;", "")
    assert "![" not in out
    assert "\\@" not in out


def test_fenced_code_block_is_kept_verbatim() -> None:
    code = "```python\nif a < b and c > d:\n    print('@all', x & y)\n```"
    text = f"Try this:\n\n{code}\n\nok"
    assert sanitize_markdown(text, max_chars=500) == text


def test_inline_code_is_kept() -> None:
    text = "Use `Vec<u8>` or ``a ` b`` here"
    assert sanitize_markdown(text, max_chars=500) == text


def test_unmatched_backtick_is_escaped_so_code_cannot_swallow_text() -> None:
    out = sanitize_markdown("a `b\nc <img> d`", max_chars=500)
    assert out == "a \\`b\nc &lt;img&gt; d\\`"


def test_open_fence_is_closed() -> None:
    out = sanitize_markdown("Fix:\n```python\nx = 1\n", max_chars=500)
    assert out.endswith("```")
    assert out.count("```") == 2


def test_lines_starting_with_slash_inside_code_are_shifted() -> None:
    out = sanitize_markdown("```\n/merge\n```", max_chars=500)
    assert "\n /merge\n" in out


def test_suggestion_fence_in_body_loses_its_info_string() -> None:
    out = sanitize_markdown("```suggestion:-0+0\nx = 2\n```", max_chars=500)
    assert "suggestion" not in out


def test_long_text_is_cut_on_a_line_boundary_and_fences_stay_closed() -> None:
    text = "intro\n```python\n" + "\n".join(f"line_{i} = {i}" for i in range(200)) + "\n```"
    out = sanitize_markdown(text, max_chars=300)
    assert len(out) <= 300
    assert out.endswith(TRUNCATION_MARKER)
    body = out[: -len(TRUNCATION_MARKER)].rstrip("\n").split("\n")
    assert body[-1] == "```"
    assert all(line in text.split("\n") for line in body)


def test_single_long_line_is_cut() -> None:
    out = sanitize_markdown("<" * 1000, max_chars=100)
    assert len(out) <= 100 and out.endswith(TRUNCATION_MARKER)
    assert "<" not in out


def test_title_is_one_capped_line() -> None:
    title = sanitize_title("Null check\nmissing /merge @all " + "x" * 300, max_chars=80)
    assert "\n" not in title
    assert len(title) <= 80
    assert title.endswith("…")
    assert "`@all`" in title


def test_suggestion_block_fence_is_longer_than_any_inner_fence() -> None:
    block = suggestion_block("```\ncode\n```")
    assert block.startswith("````suggestion:-0+0\n")
    assert block.endswith("\n````")


MARKDOWN_TOKENS = [*"/@<>!-`~ \t\n\r\\&#|[]()ab1_.\u2028", "<!--", "```", "@all", "/merge"]
MARKDOWNISH = st.lists(st.sampled_from(MARKDOWN_TOKENS), max_size=150).map("".join)


@settings(max_examples=examples(300), deadline=None)
@given(text=MARKDOWNISH, max_chars=st.integers(min_value=0, max_value=400))
def test_sanitize_properties(text: str, max_chars: int) -> None:
    out = sanitize_markdown(text, max_chars=max_chars)
    assert len(out) <= max_chars + len(TRUNCATION_MARKER)
    assert "<!--" not in out
    for line in lines_of(out):
        assert not line.startswith("/")


@settings(max_examples=examples(200), deadline=None)
@given(text=MARKDOWNISH, max_chars=st.integers(min_value=1, max_value=200))
def test_title_properties(text: str, max_chars: int) -> None:
    title = sanitize_title(text, max_chars=max_chars)
    assert len(title) <= max(max_chars, 1)
    assert "\n" not in title and "\r" not in title
    assert "<!--" not in title and not title.startswith("/")


RENDER_TOKENS = [
    *MARKDOWN_TOKENS,
    *"*",
    "~~~",
    "    ",
    "- ",
    "> ",
    "&#64;",
    "<img src=x>",
    "\\`",
    "``",
]
DANGEROUS_TOKENS = {"html_block", "html_inline", "image"}
RENDERED_MENTION = re.compile(r"(?<![A-Za-z0-9])@[A-Za-z0-9_]")


@example(text="@\\_", max_chars=3)  # once rendered as the mention "@_"
@example(text="see @\\_team", max_chars=200)
@settings(max_examples=examples(300), deadline=None)
@given(
    text=st.lists(st.sampled_from(RENDER_TOKENS), max_size=150).map("".join),
    max_chars=st.integers(min_value=0, max_value=400),
)
def test_rendered_output_has_no_html_images_or_mentions(text: str, max_chars: int) -> None:
    """Render with a real CommonMark parser (markdown-it-py, installed with rich)."""
    markdown_it = pytest.importorskip("markdown_it")
    out = sanitize_markdown(text, max_chars=max_chars)
    stack = list(markdown_it.MarkdownIt("commonmark").parse(out))
    while stack:
        token = stack.pop()
        stack.extend(token.children or [])
        assert token.type not in DANGEROUS_TOKENS
        if token.type == "text":
            assert not RENDERED_MENTION.search(token.content)


# ---------------------------------------------------------------------------------------------
# Table cells: text from the merge request (paths, settings keys, reasons) in the summary


@pytest.mark.parametrize("text", ["@all", "ignored key '@here'", "/merge now", "<img src=x>"])
def test_table_cell_neutralises_mr_text_like_model_text(text: str) -> None:
    cell = table_cell(text)
    assert not re.search(r"(?<![`\w])@(all|here)\b(?!`)", cell)
    assert not cell.startswith("/") and "<img" not in cell


def test_table_cell_is_one_line_without_bare_pipes() -> None:
    cell = table_cell("a | b\nc")
    assert "\n" not in cell and re.search(r"(?<!\\)\|", cell) is None


def test_markdown_cell_escapes_pipes_of_sanitised_titles() -> None:
    assert markdown_cell("a|b  c") == "a\\|b c"


def test_code_span_text_cannot_close_the_span_or_split_the_table() -> None:
    assert code_span_text("we`ird|name.py") == "we'ird/name.py"


# ---------------------------------------------------------------------------------------------
# Table cells of the report: text from the database makes no link, and a link goes to http(s)

CELL_SCHEME_AUTOLINK = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://")
WEB_LINK = re.compile(r"(?i:https?)://[^\s\"'<>`\\()\[\]|\x00-\x1f\x7f]+\Z")


def _table_row(*cells: str) -> list[Any]:
    """The tokens of a one-row GFM table holding ``cells``, links unchecked by the parser."""
    parser = MarkdownIt("commonmark").enable("table")
    parser.validateLink = lambda url: True  # see javascript: links too
    header = "| " + " | ".join("h" for _ in cells) + " |"
    rule = "|" + "---|" * len(cells)
    return parser.parse("\n".join([header, rule, "| " + " | ".join(cells) + " |"]))


def _cells(tokens: list[Any]) -> list[Any]:
    """The inline token of each body cell."""
    body = tokens[[t.type for t in tokens].index("tbody_open") :]
    return [body[i + 1] for i, token in enumerate(body) if token.type == "td_open"]


def _rendered_text(inline: Any) -> str:
    return "".join(
        child.content if child.type == "text" else "`"
        for child in inline.children or []
        if child.type not in ("link_open", "link_close")
    )


@pytest.mark.parametrize(
    "text", ["[x](javascript:alert(1))", "[x][1]", "<https://evil.example>", "![i](x.png)"]
)
def test_table_cell_makes_no_link_or_image(text: str) -> None:
    [cell, after] = _cells(_table_row(table_cell(text), "after"))
    kinds = {child.type for child in cell.children}
    assert not kinds & {"link_open", "image", "html_inline"}, table_cell(text)
    assert after.content == "after"


@pytest.mark.parametrize("url", [*SCRIPT_URLS, "https://gitlab.example.com/a b)|x"])
def test_link_cell_links_only_to_web_addresses(url: str) -> None:
    [cell] = _cells(_table_row(link_cell("group/app!1", url)))
    hrefs = [child.attrs["href"] for child in cell.children if child.type == "link_open"]
    assert all(WEB_LINK.match(str(href)) for href in hrefs), hrefs
    assert _rendered_text(cell) == "group/app!1"
    assert bool(hrefs) == url.startswith("https://gitlab")


@example(text="group/app\\", url="https://gitlab.example.com/x")  # "\]" ended no link
@settings(max_examples=examples(300), deadline=None)
@given(text=hostile_text, url=st.none() | hostile_url)
def test_table_cells_stay_one_inert_cell(text: str, url: str | None) -> None:
    """Any text in a cell is one cell, with no HTML, image, mention or link of its own (nor a
    scheme GitLab would autolink); a link cell links to an http(s) address, whatever its text,
    or not at all."""
    row = _table_row(table_cell(text), link_cell(text, url), "after")
    first, linked, after = _cells(row)
    assert after.content == "after"  # nothing split or merged the cells before it
    for cell in (first, linked):
        kinds = {child.type for child in cell.children}
        assert not kinds & {"html_inline", "image"}, kinds
        rendered = _rendered_text(cell)
        assert not RENDERED_MENTION.search(rendered), rendered
        schemes = {m.group(1).lower() for m in CELL_SCHEME_AUTOLINK.finditer(rendered)}
        assert schemes <= {"http", "https"}, rendered
    assert not any(child.type == "link_open" for child in first.children)
    hrefs = [child.attrs["href"] for child in linked.children if child.type == "link_open"]
    assert len(hrefs) == (web_url(url) is not None), link_cell(text, url)
    assert all(WEB_LINK.match(str(href)) for href in hrefs), hrefs
