"""The walkthrough's block between hidden markers in a text people also write: the MR's
description (``walkthrough_target = "description"``) or the bot's summary note
(docs/walkthrough.md).

The block is a line holding exactly :data:`BLOCK_START`, the walkthrough, and a line holding
exactly :data:`BLOCK_END`. Only whole lines outside fenced code count as markers, and of
several complete blocks the last one is the bot's (the bot appends its block at the end; an
author who pasted a copy of it higher up, or quoted a marker in a sentence or a code block,
keeps that text as written). A start marker without an end marker is no block.

:func:`with_block` returns the text with the block replaced in place, or appended once at the
end after a blank line; everything outside the block is kept byte for byte (line endings
included). The walkthrough's own text can never close the block: a line that is a marker, and
any HTML comment opener, is broken with a zero-width space first, and so are issue and MR
references, which GitLab would otherwise link or even close on merge (:func:`block_safe`).
:func:`without_block` gives the author's text alone, which is what prompts show of the
description.

Owns: the markers, finding the block, and the text with the block written. Must not: read or
write GitLab (:mod:`reviewbot.gitlab.descriptions` does), or know what the walkthrough says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "BLOCK_END",
    "BLOCK_START",
    "Block",
    "block_safe",
    "block_text",
    "find_block",
    "with_block",
    "without_block",
]

BLOCK_START = "<!-- reviewbot:walkthrough -->"
BLOCK_END = "<!-- /reviewbot:walkthrough -->"
COMMENT_OPENER = "<!--"
BROKEN_OPENER = "<!\u200b--"  # as reviewbot.markdown breaks one in code: shown, never parsed
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
LINE = re.compile(r"[^\n]*\n|[^\n]+")  # lines as GitLab splits them (on LF), line breaks kept
ZERO_WIDTH_SPACE = "\u200b"
# An issue or MR reference (#12, !3, group/app#12): in an MR's description GitLab links it, and
# a closing pattern before it ("Closes #12") closes the issue on merge. The model's text never
# refers: a zero-width space after the sign keeps it readable and inert.
REFERENCE = re.compile(r"([#!])(?=\d)")
CRLF = "\r\n"
LF = "\n"


@dataclass(frozen=True)
class Block:
    """Where the block is in its text: ``start`` (the start marker's line) to ``end`` (just
    after the end marker, before its line break), and the text between the markers."""

    start: int
    end: int
    inner: str
    newline: str = "\n"  # the start marker's line break, which the block is written with


def find_block(text: str) -> Block | None:
    """The last complete block of ``text`` outside fenced code, or None."""
    lines = LINE.findall(text)
    fenced = _fenced_lines(lines)
    found: Block | None = None
    opened_at: int | None = None
    inner_from = 0
    newline = LF
    offset = 0
    for index, line in enumerate(lines):
        bare = line.rstrip("\r\n")
        if index in fenced:
            pass
        elif bare.strip() == BLOCK_START:
            opened_at, inner_from = offset, offset + len(line)
            newline = CRLF if line.endswith(CRLF) else LF
        elif bare.strip() == BLOCK_END and opened_at is not None:
            found = Block(opened_at, offset + len(bare), text[inner_from:offset], newline)
            opened_at = None
        offset += len(line)
    return found


def _fenced_lines(lines: list[str]) -> set[int]:
    """The indexes of the lines of closed fenced code blocks, fences included (a fence never
    closed is no code block here: the bot's block after it must still be found)."""
    fenced: set[int] = set()
    opened: tuple[int, str] | None = None
    for index, line in enumerate(lines):
        marker = FENCE.match(line.rstrip("\r\n"))
        if marker is None:
            continue
        fence = marker.group(1)
        if opened is None:
            opened = (index, fence)
        elif fence[0] == opened[1][0] and len(fence) >= len(opened[1]):
            fenced.update(range(opened[0], index + 1))
            opened = None
    return fenced


def block_text(text: str) -> str | None:
    """The walkthrough the block of ``text`` holds (None: no block)."""
    block = find_block(text)
    return None if block is None else block.inner.strip("\r\n")


def block_safe(text: str) -> str:
    """The walkthrough as the block holds it: no line can be a marker, no comment can open,
    no line can open or close fenced code (which would hide a marker from :func:`find_block`),
    no issue or MR reference can link or close anything."""
    inert = REFERENCE.sub(lambda match: match.group(1) + ZERO_WIDTH_SPACE, text.strip("\r\n"))
    lines = inert.replace(COMMENT_OPENER, BROKEN_OPENER).splitlines()
    return "\n".join(ZERO_WIDTH_SPACE + line if FENCE.match(line) else line for line in lines)


def without_block(text: str) -> str:
    """``text`` without its block (the author's text alone, as prompts show it)."""
    block = find_block(text)
    if block is None:
        return text
    return (text[: block.start].rstrip() + "\n\n" + text[block.end :].lstrip()).strip()


def with_block(text: str, walkthrough: str) -> str:
    """``text`` with its block holding ``walkthrough``: replaced in place, or appended at the
    end after a blank line. The same text when the block already holds it."""
    block = find_block(text)
    if block is not None:
        return text[: block.start] + _rendered(walkthrough, block.newline) + text[block.end :]
    newline = CRLF if CRLF in text else LF
    rendered = _rendered(walkthrough, newline)
    if not text:
        return rendered
    if text.endswith(newline * 2):
        separator = ""
    elif text.endswith(newline):
        separator = newline
    else:
        separator = newline * 2
    return text + separator + rendered


def _rendered(walkthrough: str, newline: str) -> str:
    body = newline.join(block_safe(walkthrough).split("\n"))
    return f"{BLOCK_START}{newline}{body}{newline}{BLOCK_END}"
