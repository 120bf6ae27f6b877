"""The walkthrough step of an MR's run: one model call after the chunks, its own purpose
(``walkthrough``) in the run's model calls (docs/walkthrough.md).

On an incremental review with a previous walkthrough (:class:`Previous`), the call gets that
walkthrough and the summaries of the files changed since, and returns the updated walkthrough;
when nothing changed, the previous one is kept without a call.

The prompt and the reading of the answer are :mod:`reviewbot.walkthrough`'s; this step decides
whether to ask (the settings ``walkthrough`` and ``walkthrough_min_changed_lines``) and makes
the call. A failed call leaves the review as it is: the summary says "walkthrough: not
written (reason)".

Owns: when the walkthrough is asked for, and its call. Must not: post anything (the summary
note carries it, :mod:`reviewbot.publish`), or touch the review's findings.
"""

from __future__ import annotations

from dataclasses import dataclass

from reviewbot.config import Settings
from reviewbot.mergerequest import MergeRequestSnapshot
from reviewbot.model import MODE_CONTENT, CallRecord, ChunkRequest, LLMClient
from reviewbot.mr_overview_settings import ON
from reviewbot.prompts import file_summaries
from reviewbot.states import CallPurpose
from reviewbot.walkthrough import (
    Walkthrough,
    changed_lines,
    read_walkthrough,
    walkthrough_messages,
)
from reviewbot.walkthrough_update import merged_walkthrough, walkthrough_update_messages

WALKTHROUGH_CHUNK_INDEX = -1  # the call belongs to no chunk


@dataclass(frozen=True)
class Previous:
    """The walkthrough an earlier review wrote (as the MR holds it) and the paths of the files
    changed since (empty: nothing changed, the walkthrough is kept as it is)."""

    text: str
    changed: frozenset[str]
    gone: frozenset[str] = frozenset()  # files the MR no longer changes: their lines dropped


@dataclass(frozen=True)
class WalkthroughStep:
    """The walkthrough (None: not asked for) and its model call (None: none made)."""

    walkthrough: Walkthrough | None = None
    call: CallRecord | None = None


def write_walkthrough(
    llm: LLMClient,
    snapshot: MergeRequestSnapshot,
    settings: Settings,
    *,
    session: str | None = None,
    priority: int | None = None,
    previous: Previous | None = None,
) -> WalkthroughStep:
    """Ask the model for the MR's walkthrough when the settings want one: written whole, or
    updated from ``previous`` (an incremental review's)."""
    if not wanted(snapshot, settings):
        return WalkthroughStep()
    files = file_summaries(snapshot.files)
    if previous is not None and not previous.changed:
        return WalkthroughStep(
            Walkthrough(text=merged_walkthrough(previous.text, "", previous.gone))
        )
    if previous is not None:
        changed = [f for f in files if f.path in previous.changed]
        messages = walkthrough_update_messages(snapshot.title, previous.text, changed, len(files))
    else:
        messages = walkthrough_messages(snapshot.title, snapshot.description, files)
    request = ChunkRequest(
        WALKTHROUGH_CHUNK_INDEX,
        messages,
        [],
        session=session,
        priority=priority,
        max_output_tokens=settings.walkthrough_tokens,
        enable_thinking=False,  # a summary needs no thinking, and its budget is small
    )
    answer, record = llm.one_call(request, CallPurpose.WALKTHROUGH, MODE_CONTENT)
    if answer is None:
        reason = record.error or "the model did not answer"
        return WalkthroughStep(Walkthrough(not_written=reason), record)
    if answer.finish_reason == "length" and not answer.content.strip():
        return WalkthroughStep(Walkthrough(not_written="the answer ran out of tokens"), record)
    written = read_walkthrough(answer.content)
    if previous is not None and written.text:
        merged = merged_walkthrough(previous.text, written.text, previous.gone)
        return WalkthroughStep(Walkthrough(text=merged), record)
    return WalkthroughStep(written, record)


def wanted(snapshot: MergeRequestSnapshot, settings: Settings) -> bool:
    """Whether this MR gets a walkthrough: on, and at least the changed lines asked for."""
    if settings.walkthrough != ON:
        return False
    lines = changed_lines(file_summaries(snapshot.files))
    return lines >= settings.walkthrough_min_changed_lines
