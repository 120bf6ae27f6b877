"""The review of the MR as a whole, after its chunks: the walkthrough (written whole, or updated
from what changed on an incremental review), where it goes (the summary note, or the MR's
description between hidden markers), and the requirements check against the linked issues
(docs/walkthrough.md, docs/linked-issues.md).

Each model call is recorded with its own purpose (``walkthrough``, ``requirements``). What
fails here never fails the review: a walkthrough not written or a description GitLab would
not let the bot edit is said in the summary; a requirements call that failed leaves every
issue *cannot tell*. A rejected token stops the run, as it would anywhere.

Owns: the order of these steps, reading the linked issues (once a run) and the previous
walkthrough, and writing the description's
block through the GitLab adapter. Must not: build a prompt or read an answer
(:mod:`reviewbot.walkthrough`, :mod:`reviewbot.requirements`), or write into an issue.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from reviewbot.config import Settings
from reviewbot.gitlab.connection import GitLabAuthError, GitLabError
from reviewbot.gitlab.descriptions import BlockWrite
from reviewbot.incremental import Increment
from reviewbot.linked_issues import LinkedIssue, LinkedIssues, run_detail, within_budget
from reviewbot.marked_block import block_text
from reviewbot.mergerequest import MergeRequestSnapshot
from reviewbot.model import CallRecord, ChunkRequest, LLMClient
from reviewbot.mr_overview_settings import DESCRIPTION, ON
from reviewbot.mr_walkthrough import Previous, WalkthroughStep, wanted, write_walkthrough
from reviewbot.prompts import file_summaries
from reviewbot.requirements import (
    ANSWER_TOKENS_PER_ISSUE,
    read_requirements,
    requirement_tool,
    requirements_messages,
    summary_lines,
)
from reviewbot.rules.check_questions import shown_diff
from reviewbot.states import CallPurpose
from reviewbot.tokens import TokenCounter
from reviewbot.walkthrough import Walkthrough

__all__ = ["Overview", "OverviewGitLab", "OverviewRun", "read_linked_issues", "review_overview"]

REQUIREMENTS_CHUNK_INDEX = -1  # the call belongs to no chunk
IN_DESCRIPTION = "the merge request's description"


class OverviewGitLab(Protocol):
    """What this step asks of GitLab (reviewbot.gitlab.GitLabClient)."""

    def linked_issues(self, project_id: int, iid: int) -> LinkedIssues: ...

    def mr_description(self, project_id: int | str, iid: int) -> str: ...

    def write_description_block(self, project_id: int | str, iid: int, text: str) -> BlockWrite: ...

    def summary_note_body(self, project_id: int | str, iid: int) -> str | None: ...


@dataclass(frozen=True)
class Overview:
    """The walkthrough as the summary shows it (None: not asked for), the requirements
    check's lines (empty: off), and the model calls made."""

    walkthrough: Walkthrough | None = None
    requirements: tuple[str, ...] = ()
    calls: tuple[CallRecord, ...] = ()


@dataclass(frozen=True)
class OverviewRun:
    """What the step needs of the run."""

    llm: LLMClient
    gitlab: OverviewGitLab
    snapshot: MergeRequestSnapshot
    increment: Increment
    counter: TokenCounter
    dry_run: bool = False
    session: str | None = None
    priority: int | None = None


def read_linked_issues(
    gitlab: OverviewGitLab,
    snapshot: MergeRequestSnapshot,
    settings: Settings,
    warnings: list[str],
    say: Callable[[str], None],
) -> list[LinkedIssue]:
    """The MR's linked issues within their budget (reviewbot.linked_issues), read once for
    the review's prompt and the requirements check; an endpoint this GitLab lacks is said
    once in the run details (``warnings``), never a failure."""
    if settings.linked_issues != ON:
        return []
    linked = gitlab.linked_issues(snapshot.project_id, snapshot.iid)
    warnings.extend(linked.unavailable)
    shown, left_out = within_budget(linked.issues, settings.linked_issues_tokens)
    say(run_detail(linked, len(shown), left_out))
    return shown


def review_overview(
    run: OverviewRun, settings: Settings, issues: Sequence[LinkedIssue]
) -> Overview:
    """The walkthrough (placed where the settings say) and the requirements check."""
    step = WalkthroughStep()
    if wanted(run.snapshot, settings):
        step = write_walkthrough(
            run.llm,
            run.snapshot,
            settings,
            session=run.session,
            priority=run.priority,
            previous=_previous(run, settings),
        )
    walkthrough = step.walkthrough
    if walkthrough is not None and settings.walkthrough_target == DESCRIPTION:
        walkthrough = _into_description(run, walkthrough)
    calls = [step.call] if step.call is not None else []
    lines: tuple[str, ...] = ()
    if settings.requirements_check == ON:
        lines, call = _requirements(run, settings, issues)
        calls += [call] if call is not None else []
    return Overview(walkthrough, lines, tuple(calls))


def _previous(run: OverviewRun, settings: Settings) -> Previous | None:
    """On an incremental review, the walkthrough as the MR holds it (in the description's
    block or the summary note's) and the files changed since; None: write it whole."""
    if run.increment.carried_over is None:
        return None
    snapshot = run.snapshot
    if settings.walkthrough_target == DESCRIPTION:
        where = run.gitlab.mr_description(snapshot.project_id, snapshot.iid)
    else:
        where = run.gitlab.summary_note_body(snapshot.project_id, snapshot.iid) or ""
    text = block_text(where)
    if not text or not text.strip():
        return None
    skipped = run.increment.skipped
    changed = frozenset(f.path for f in run.increment.files if f.path not in skipped)
    unchanged = not run.increment.needs_model
    return Previous(text, frozenset() if unchanged else changed, run.increment.gone)


def _into_description(run: OverviewRun, walkthrough: Walkthrough) -> Walkthrough:
    """Write the walkthrough into the description's block; the summary says where it is, or
    why it is not there."""
    if not walkthrough.text:
        return walkthrough
    if run.dry_run:
        return Walkthrough(walkthrough.text, elsewhere=f"{IN_DESCRIPTION} (dry run: not written)")
    snapshot = run.snapshot
    try:
        done = run.gitlab.write_description_block(
            snapshot.project_id, snapshot.iid, walkthrough.text
        )
    except GitLabAuthError:
        raise
    except GitLabError as error:
        return Walkthrough(not_written=f"the description could not be edited: {error}")
    if done is BlockWrite.TOO_LONG:
        return Walkthrough(not_written="the description would pass GitLab's length limit")
    return Walkthrough(walkthrough.text, elsewhere=IN_DESCRIPTION)


def _requirements(
    run: OverviewRun, settings: Settings, issues: Sequence[LinkedIssue]
) -> tuple[tuple[str, ...], CallRecord | None]:
    """One call asking whether the change meets each issue's requirements, and its lines."""
    if not issues:
        return ("no linked issues to check",), None
    files = file_summaries(run.snapshot.files)
    shown = shown_diff(run.snapshot.files, run.counter, settings.requirements_check_tokens)
    request = ChunkRequest(
        REQUIREMENTS_CHUNK_INDEX,
        requirements_messages(run.snapshot.title, issues, files, shown.text, shown.not_shown),
        [requirement_tool()],
        session=run.session,
        priority=run.priority,
        max_output_tokens=ANSWER_TOKENS_PER_ISSUE * len(issues),
        enable_thinking=False,
    )
    answer, record = run.llm.one_call(request, CallPurpose.REQUIREMENTS)
    verdicts = read_requirements(answer, issues, record.error or "")
    return tuple(summary_lines(verdicts)), record
