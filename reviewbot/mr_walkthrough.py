"""The walkthrough step of an MR's run: one model call after the chunks, its own purpose
(``walkthrough``) in the run's model calls (docs/walkthrough.md).

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

WALKTHROUGH_CHUNK_INDEX = -1  # the call belongs to no chunk


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
) -> WalkthroughStep:
    """Ask the model for the MR's walkthrough when the settings want one."""
    if settings.walkthrough != ON:
        return WalkthroughStep()
    files = file_summaries(snapshot.files)
    if changed_lines(files) < settings.walkthrough_min_changed_lines:
        return WalkthroughStep()
    request = ChunkRequest(
        WALKTHROUGH_CHUNK_INDEX,
        walkthrough_messages(snapshot.title, snapshot.description, files),
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
    return WalkthroughStep(read_walkthrough(answer.content), record)
