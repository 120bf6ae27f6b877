"""The walkthrough's block between hidden markers in text people write (reviewbot.marked_block):
the author's text outside it is kept byte for byte, the block is replaced in place or appended
once, and the walkthrough's text cannot close it (docs/walkthrough.md)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reviewbot.marked_block import (
    BLOCK_END,
    BLOCK_START,
    block_safe,
    block_text,
    find_block,
    with_block,
    without_block,
)

AUTHOR = "Adds a parser.\n\nCloses #12."


def test_appended_once_after_a_blank_line_then_replaced_in_place() -> None:
    first = with_block(AUTHOR, "It parses.")
    assert first == f"{AUTHOR}\n\n{BLOCK_START}\nIt parses.\n{BLOCK_END}"
    assert with_block(first, "It parses.") == first  # the same text: nothing to write
    edited = "Intro by the author.\n" + first + "\n\nA note the author added below."
    second = with_block(edited, "It parses, now faster.")
    assert second == edited.replace("It parses.", "It parses, now faster.")
    assert second.count(BLOCK_START) == 1 and block_text(second) == "It parses, now faster."


def test_separator_follows_how_the_author_text_ends() -> None:
    assert with_block("", "W") == f"{BLOCK_START}\nW\n{BLOCK_END}"
    assert with_block("a\n", "W") == f"a\n\n{BLOCK_START}\nW\n{BLOCK_END}"
    assert with_block("a\n\n", "W") == f"a\n\n{BLOCK_START}\nW\n{BLOCK_END}"
    crlf = "line one\r\nline two"
    written = with_block(crlf, "W1\nW2")
    assert written == f"{crlf}\r\n\r\n{BLOCK_START}\r\nW1\r\nW2\r\n{BLOCK_END}"
    assert with_block(written, "W1\nW2") == written


def test_marker_like_author_text_is_not_the_block() -> None:
    author = (
        f"Mentions `{BLOCK_START}` inline.\n\n```\n{BLOCK_START}\nexample\n{BLOCK_END}\n```\n\n"
        f"{BLOCK_START}\na start marker the author left without its end"
    )
    assert find_block(author) is None
    written = with_block(author, "W")
    assert written.startswith(author) and block_text(written) == "W"
    assert with_block(written, "W") == written


def test_a_copy_of_the_block_higher_up_is_kept_the_last_one_is_the_bots() -> None:
    pasted = f"Quoting the bot:\n{BLOCK_START}\nold copy\n{BLOCK_END}\n"
    written = with_block(pasted, "W")  # the author's copy is taken as the block: replaced
    assert written == f"Quoting the bot:\n{BLOCK_START}\nW\n{BLOCK_END}\n"
    twice = f"{pasted}\nmore\n\n{BLOCK_START}\nbot's\n{BLOCK_END}"
    assert with_block(twice, "W") == f"{pasted}\nmore\n\n{BLOCK_START}\nW\n{BLOCK_END}"


def test_an_unclosed_fence_of_the_author_does_not_hide_the_block() -> None:
    author = "Code:\n```python\nprint(1)"
    written = with_block(author, "W")
    assert with_block(written, "W") == written and written.count(BLOCK_START) == 1


def test_the_walkthrough_cannot_close_or_hide_the_block() -> None:
    hostile = f"one\n{BLOCK_END}\n<!-- a comment\n```\n{BLOCK_START}\ntwo"
    written = with_block(AUTHOR, hostile)
    assert written.startswith(AUTHOR)
    block = find_block(written)
    assert block is not None and written[block.end :] == ""
    assert written.count(f"\n{BLOCK_END}") == 1 and "<!-- a comment" not in written
    assert block_text(written) == block_safe(hostile)
    assert with_block(written, hostile) == written


@given(st.text(), st.text())
def test_the_author_text_outside_the_block_is_kept_byte_for_byte(author: str, text: str) -> None:
    written = with_block(author, text)
    before = find_block(author)
    if before is None:
        assert written.startswith(author)
    else:
        assert written[: before.start] == author[: before.start]
        assert written.endswith(author[before.end :])
    assert with_block(written, text) == written  # written once: the same text again writes none
    assert block_text(written) is not None


MARKERISH = st.lists(
    st.sampled_from([BLOCK_START, BLOCK_END, "```", "~~~~", "text", "", "\r", f" {BLOCK_START} "]),
    max_size=12,
).map("\n".join)


@given(MARKERISH, MARKERISH)
def test_marker_rich_texts_keep_the_author_text_and_one_block(author: str, text: str) -> None:
    written = with_block(author, text)
    before = find_block(author)
    kept = author if before is None else author[: before.start]
    assert written.startswith(kept)
    assert with_block(written, text) == written
    assert (block_text(written) or "").replace("\r\n", "\n") == block_safe(text)


def test_references_in_the_walkthrough_are_inert() -> None:
    written = with_block(AUTHOR, "Closes #12 and follows !3; see group/app#4.")
    text = block_text(written) or ""
    assert "#12" not in text and "!3" not in text and "app#4" not in text
    assert "Closes #\u200b12" in text and AUTHOR in written  # the author's own #12 untouched


def test_without_the_block_is_the_authors_text() -> None:
    written = with_block(AUTHOR, "W")
    assert without_block(written) == AUTHOR and without_block(AUTHOR) == AUTHOR
    around = f"Before.\n\n{BLOCK_START}\nW\n{BLOCK_END}\n\nAfter."
    assert without_block(around) == "Before.\n\nAfter."
