"""The named checks of one run and the commit status they make (docs/checks.md).

:class:`CheckRun` follows one run of :func:`reviewbot.mr.run_merge_request`: when the rules
define checks (and the setting ``commit_status`` is on, and the run is no dry run) it posts the
status ``pending`` on the head commit as the review starts (:meth:`CheckRun.begin`), judges
every check once the findings are final (:meth:`CheckRun.judge`: the deterministic ones by
``reviewbot.rules.check_verdicts``, the model-judged ones by ``reviewbot.rules.check_questions``)
and posts ``success`` or ``failed`` at the end (:meth:`CheckRun.finish`). A run that ends in an
error posts ``failed`` with the error, a run stopped from outside (SIGTERM, Ctrl-C) posts
``canceled`` (:meth:`CheckRun.abort`), and the next run of the MR cancels what a killed run left
``pending`` (:meth:`CheckRun.cancel_interrupted`): a status never becomes ``success`` for an
incomplete review.

Every write is idempotent (``reviewbot.gitlab.statuses``): a retried job, a lost answer or a
second run on the same head posts nothing twice.

Owns: when the status is posted and what it says about a run. Must not: judge a check itself
(``reviewbot.rules.check_verdicts``), ask the model (``reviewbot.rules.check_questions``), or build
a request (the GitLab adapter does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from reviewbot.check_settings import CheckSettings
from reviewbot.gitlab import GitLabError
from reviewbot.mergerequest import MergeRequestSnapshot
from reviewbot.redaction import scrub_secrets
from reviewbot.rules.check_verdicts import (
    MAX_DESCRIPTION_CHARS,
    CheckEvidence,
    CheckVerdict,
    CommitState,
    CommitStatus,
    commit_state,
    judge_all,
)
from reviewbot.rules.checks import Check

__all__ = ["CheckRun", "StatusWriter", "check_run_for", "no_checks", "summary_url"]

STOPPED = (KeyboardInterrupt, SystemExit, GeneratorExit)  # the run was stopped from outside
UNFINISHED = frozenset({CommitState.PENDING.value, CommitState.RUNNING.value})


class StatusWriter(Protocol):
    """What the checks need of GitLab (``reviewbot.gitlab.statuses.CommitStatusWriter``)."""

    def set_commit_status(
        self,
        project_id: int | str,
        sha: str,
        name: str,
        status: CommitStatus,
        *,
        target_url: str | None = None,
        ref: str | None = None,
        pipeline_id: int | None = None,
    ) -> None: ...

    def commit_status(
        self, project_id: int | str, sha: str, name: str, ref: str | None = None
    ) -> dict | None: ...


@dataclass
class CheckRun:
    """The checks of one run, their verdicts and the commit status posted for them."""

    checks: tuple[Check, ...] = ()
    writer: StatusWriter | None = None  # None: no status is posted
    project_id: int | str = 0
    sha: str = ""
    name: str = ""
    ref: str | None = None
    pipeline_id: int | None = None
    mr_url: str = ""
    say: Callable[[str], None] = field(default=lambda _message: None)
    verdicts: list[CheckVerdict] = field(default_factory=list)
    posted: CommitState | None = None  # the last state this run posted
    final: CommitStatus | None = None

    @property
    def posts(self) -> bool:
        return bool(self.checks) and self.writer is not None

    def begin(self) -> None:
        """``pending`` on the head commit: the review of these checks has started."""
        if self.posts:
            count = len(self.checks)
            self._post(CommitStatus(CommitState.PENDING, f"review started: {count} check(s)"))

    def cancel_interrupted(self, heads: Sequence[str]) -> None:
        """``canceled`` on the heads of this MR's earlier runs that were interrupted (their
        process died, or a newer push superseded them) and left their status unfinished."""
        if not self.posts:
            return
        assert self.writer is not None
        for head in dict.fromkeys(heads):
            if head == self.sha:
                continue  # this run's own pending status takes over
            current = self.writer.commit_status(self.project_id, head, self.name, self.ref)
            if current is not None and current.get("status") in UNFINISHED:
                reason = f"review interrupted; superseded by the review of {self.sha[:8]}"
                self.writer.set_commit_status(
                    self.project_id,
                    head,
                    self.name,
                    CommitStatus(CommitState.CANCELED, reason),
                    target_url=self.mr_url or None,
                    ref=self.ref,
                )
                self.say(f"commit status {self.name!r} of {head[:8]}: canceled ({reason})")

    def judge(
        self,
        evidence: CheckEvidence,
        asked: Mapping[str, CheckVerdict],
        chunks: int,
        unreviewed: int,
    ) -> None:
        """Every check's verdict (model-judged ones from ``asked``) and the status they make
        with the review's completeness (``unreviewed`` of ``chunks`` not reviewed)."""
        if self.checks:
            self.verdicts = judge_all(self.checks, evidence, asked)
            self.final = commit_state(self.verdicts, chunks, unreviewed)

    def finish(self, target_url: str | None) -> None:
        """The final status on the head commit, pointing at ``target_url`` (the summary)."""
        if self.final is not None and self.posts:
            self._post(self.final, target_url)

    def abort(self, error: BaseException) -> None:
        """The run ended without finishing: ``canceled`` when it was stopped, else ``failed``,
        with the error; nothing when no status was posted or the final one already was. A
        failure to post is said, never raised over ``error``."""
        if self.posted not in (CommitState.PENDING, CommitState.RUNNING):
            return
        if isinstance(error, STOPPED):
            status = CommitStatus(CommitState.CANCELED, "review stopped before it finished")
        else:
            text = scrub_secrets(" ".join(str(error).split())) or type(error).__name__
            reason = f"review did not complete: {text}"
            status = CommitStatus(CommitState.FAILED, _cut(reason))
        try:
            self._post(status)
        except GitLabError as failure:  # the run's own error is the one raised
            self.say(f"the commit status could not be set to {status.state.value}: {failure}")

    def rows(self) -> list[tuple[str, str, str]]:
        """(name, outcome, reason) per check, for the summary."""
        return [(v.name, v.outcome.value, v.reason) for v in self.verdicts]

    def status_words(self) -> str:
        if self.final is None:
            return ""
        posted = f" (commit status `{self.name}`)" if self.posts else " (no commit status posted)"
        return f"{self.final.state.value}: {self.final.description}{posted}"

    def _post(self, status: CommitStatus, target_url: str | None = None) -> None:
        assert self.writer is not None
        self.writer.set_commit_status(
            self.project_id,
            self.sha,
            self.name,
            status,
            target_url=target_url or self.mr_url or None,
            ref=self.ref,
            pipeline_id=self.pipeline_id,
        )
        self.posted = status.state
        self.say(f"commit status {self.name!r}: {status.state.value} ({status.description})")


def no_checks() -> CheckRun:
    return CheckRun()


def summary_url(mr_url: str, note_id: int | None) -> str | None:
    return f"{mr_url}#note_{note_id}" if mr_url and note_id else None


def _cut(text: str) -> str:
    return text if len(text) <= MAX_DESCRIPTION_CHARS else text[: MAX_DESCRIPTION_CHARS - 1] + "…"


def check_run_for(
    checks: tuple[Check, ...],
    settings: CheckSettings,
    writer: StatusWriter,
    snapshot: MergeRequestSnapshot,
    *,
    dry_run: bool,
    pipeline_id: int | None,
    say: Callable[[str], None],
) -> CheckRun:
    """The checks of a run on ``snapshot``: a status is posted when there are checks, the
    setting ``commit_status`` is on and the run is no dry run."""
    if dry_run and checks:
        say("dry run: the checks are judged, no commit status is posted")
    return CheckRun(
        checks=checks,
        writer=writer if settings.commit_status and not dry_run else None,
        project_id=snapshot.project_id,
        sha=snapshot.diff_refs.head_sha,
        name=settings.commit_status_name,
        # GitLab looks for the pipeline by SHA, ref and id together: the ref of an MR pipeline
        # is refs/merge-requests/IID/head, not the branch, so with an id the ref is left out
        ref=None if pipeline_id is not None else snapshot.source_branch or None,
        pipeline_id=pipeline_id,
        mr_url=snapshot.web_url,
        say=say,
    )
