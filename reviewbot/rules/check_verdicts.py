"""A check's verdict, judged from the review's own data, and the commit status of all checks
(pure).

:func:`judge` answers a deterministic check (``no_findings``, ``no_secrets``,
``no_new_analyzer_findings``) from :class:`CheckEvidence`: the MR's file diffs, the review's final
findings (after dedupe, anchoring and the learnings), the chunks the model never answered and,
when the review collected them, the analyzers' findings. What it cannot see, it does not pass:

- ``no_findings``: a changed file in the check's paths that the model did not review (a chunk
  not answered, a diff too large for GitLab) makes the check *cannot tell*;
- ``no_secrets``: the added lines of the check's files are scanned with the token shapes of
  :mod:`reviewbot.redaction`, plus the analyzers' secret findings and any finding whose text
  had to be masked; a diff too large to read is *cannot tell*;
- ``no_new_analyzer_findings``: without the analyzer's results in this review (it did not run,
  or analyzers are not part of the review) the check is *cannot tell*, never a pass.

:func:`commit_state` turns the verdicts and the review's completeness into one GitLab commit
status: ``success`` only when the review is complete and every check passed.

Owns: :class:`CheckOutcome`, :class:`CheckVerdict`, :class:`CheckEvidence`, :class:`CommitState`
and how a verdict and a commit status are decided. Must not: call the model (model-judged checks
are answered by ``reviewbot.rules.check_questions``) or talk to GitLab.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from reviewbot.analyzer_findings import AnalyzerRun
from reviewbot.diff import FileDiff, LineKind
from reviewbot.findings import Finding
from reviewbot.redaction import mask_secrets
from reviewbot.rules.checks import Check, CheckKind
from reviewbot.unreviewed import UnreviewedPart

__all__ = [
    "CheckEvidence",
    "CheckOutcome",
    "CheckVerdict",
    "CommitState",
    "CommitStatus",
    "commit_state",
    "evidence_of",
    "judge",
    "judge_all",
]

MAX_NAMED = 3  # files or findings named in a verdict's reason
MAX_DESCRIPTION_CHARS = 255  # GitLab keeps a commit status description of this length


class CheckOutcome(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    CANNOT_TELL = "cannot_tell"


class CommitState(StrEnum):
    """The states of a GitLab commit status (``POST /projects/:id/statuses/:sha``)."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    CANCELED = "canceled"


@dataclass(frozen=True)
class CheckVerdict:
    """What one check came to, and why, in a sentence."""

    name: str
    outcome: CheckOutcome
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "outcome": self.outcome.value, "reason": self.reason}


@dataclass(frozen=True)
class CommitStatus:
    """One commit status to write: its state and its description."""

    state: CommitState
    description: str


@dataclass(frozen=True)
class CheckEvidence:
    """The review's data the deterministic checks are judged from."""

    files: Sequence[FileDiff]
    findings: Sequence[Finding]
    unreviewed: Sequence[UnreviewedPart] = ()
    analyzers: AnalyzerRun | None = None  # None: the review collected no analyzer results

    def changed_paths(self) -> list[str]:
        return [file.path for file in self.files]

    def unreviewed_paths(self) -> dict[str, str]:
        """The changed files the model did not see in full, and why."""
        missing = {
            path: f"chunk {part.chunk_index + 1} not reviewed"
            for part in self.unreviewed
            for path, _ in part.lines_by_path
        }
        missing.update(
            {file.path: "diff too large to read" for file in self.files if file.too_large}
        )
        return missing


def evidence_of(
    files: Sequence[FileDiff],
    findings: Sequence[Finding],
    unreviewed: Sequence[UnreviewedPart],
    analyzers: AnalyzerRun | None = None,
) -> CheckEvidence:
    return CheckEvidence(tuple(files), tuple(findings), tuple(unreviewed), analyzers)


def judge_all(
    checks: Sequence[Check], evidence: CheckEvidence, asked: Mapping[str, CheckVerdict]
) -> list[CheckVerdict]:
    """A verdict per check, in order: deterministic ones judged here, model-judged ones taken
    from ``asked`` (a question not asked is *cannot tell*)."""
    verdicts = []
    for check in checks:
        if check.model_judged:
            verdicts.append(
                asked.get(check.name)
                or CheckVerdict(check.name, CheckOutcome.CANNOT_TELL, "the model was not asked")
            )
        else:
            verdicts.append(judge(check, evidence))
    return verdicts


def judge(check: Check, evidence: CheckEvidence) -> CheckVerdict:
    """The verdict of a deterministic check on ``evidence``."""
    scope = [path for path in evidence.changed_paths() if check.applies_to(path)]
    if check.kind is CheckKind.NO_FINDINGS:
        return _no_findings(check, evidence, scope)
    if check.kind is CheckKind.NO_SECRETS:
        return _no_secrets(check, evidence, scope)
    if check.kind is CheckKind.NO_NEW_ANALYZER_FINDINGS:
        return _no_analyzer_findings(check, evidence, scope)
    return CheckVerdict(check.name, CheckOutcome.CANNOT_TELL, "a question for the model")


def _no_findings(check: Check, evidence: CheckEvidence, scope: list[str]) -> CheckVerdict:
    wanted = set(scope)
    failing = [
        finding
        for finding in evidence.findings
        if finding.path in wanted
        and finding.severity.rank <= check.min_severity.rank
        and (check.categories is None or finding.category in check.categories)
    ]
    if failing:
        named = "; ".join(
            f"{f.path}:{f.line or 'file'} {f.severity.value} {f.title}" for f in failing[:MAX_NAMED]
        )
        return _verdict(check, CheckOutcome.FAIL, f"{len(failing)} finding(s): {named}")
    missing = _missing(evidence, scope)
    if missing:
        return _verdict(check, CheckOutcome.CANNOT_TELL, f"not reviewed: {missing}")
    return _verdict(check, CheckOutcome.PASS, _passed(scope, "no such finding"))


def _no_secrets(check: Check, evidence: CheckEvidence, scope: list[str]) -> CheckVerdict:
    wanted = set(scope)
    where = [
        f"{file.path}:{line.new_no}"
        for file in evidence.files
        if file.path in wanted
        for line in file.lines()
        if line.kind is LineKind.ADDED and mask_secrets(line.text)[1]
    ]
    where += [f"{f.path}:{f.line or 'file'} (in a finding)" for f in evidence.findings if f.masked]
    if evidence.analyzers is not None:
        where += [
            f"{f.path}:{f.line} ({f.tool})"
            for f in evidence.analyzers.findings
            if f.secret and f.path in wanted
        ]
    if where:
        named = ", ".join(where[:MAX_NAMED])
        return _verdict(check, CheckOutcome.FAIL, f"{len(where)} secret(s) added: {named}")
    too_large = [file.path for file in evidence.files if file.too_large and file.path in wanted]
    if too_large:
        return _verdict(
            check, CheckOutcome.CANNOT_TELL, f"diff too large to read: {_names(too_large)}"
        )
    return _verdict(check, CheckOutcome.PASS, _passed(scope, "no added line holds a token or key"))


def _no_analyzer_findings(check: Check, evidence: CheckEvidence, scope: list[str]) -> CheckVerdict:
    run = evidence.analyzers
    tool = check.tool.casefold()
    if run is None:
        return _verdict(check, CheckOutcome.CANNOT_TELL, "this review has no analyzer results")
    problems = [p.sentence() for p in run.problems if tool in p.name.casefold()]
    if problems:
        return _verdict(check, CheckOutcome.CANNOT_TELL, problems[0])
    if not any(tool in used.casefold() for used in run.used):
        return _verdict(check, CheckOutcome.CANNOT_TELL, f"analyzer {check.tool} did not run")
    wanted = set(scope)
    found = [f for f in run.findings if f.tool.casefold() == tool and f.path in wanted]
    if found:
        named = "; ".join(f"{f.path}:{f.line} {f.rule}" for f in found[:MAX_NAMED])
        return _verdict(
            check, CheckOutcome.FAIL, f"{len(found)} finding(s) of {check.tool}: {named}"
        )
    return _verdict(check, CheckOutcome.PASS, _passed(scope, f"{check.tool} reported nothing"))


def _missing(evidence: CheckEvidence, scope: list[str]) -> str:
    missing = evidence.unreviewed_paths()
    named = [f"{path} ({missing[path]})" for path in scope if path in missing]
    if not named:
        return ""
    more = f" and {len(named) - MAX_NAMED} more" if len(named) > MAX_NAMED else ""
    return ", ".join(named[:MAX_NAMED]) + more


def _names(paths: Sequence[str]) -> str:
    more = f" and {len(paths) - MAX_NAMED} more" if len(paths) > MAX_NAMED else ""
    return ", ".join(paths[:MAX_NAMED]) + more


def _passed(scope: Sequence[str], what: str) -> str:
    if not scope:
        return "no changed file in its paths"
    return f"{what} in {len(scope)} changed file(s)"


def _verdict(check: Check, outcome: CheckOutcome, reason: str) -> CheckVerdict:
    return CheckVerdict(check.name, outcome, reason)


# --- the commit status --------------------------------------------------------------------------


def commit_state(verdicts: Sequence[CheckVerdict], chunks: int, unreviewed: int) -> CommitStatus:
    """The commit status of a finished review: ``success`` only when every chunk was reviewed
    and every check passed; ``failed`` otherwise, saying why."""
    if unreviewed:
        return _status(
            CommitState.FAILED, f"review incomplete: {unreviewed} of {chunks} chunks not reviewed"
        )
    failed = [v.name for v in verdicts if v.outcome is CheckOutcome.FAIL]
    unknown = [v.name for v in verdicts if v.outcome is CheckOutcome.CANNOT_TELL]
    if failed:
        return _status(
            CommitState.FAILED, f"{len(failed)} of {len(verdicts)} checks failed: {_names(failed)}"
        )
    if unknown:
        return _status(
            CommitState.FAILED,
            f"{len(unknown)} of {len(verdicts)} checks cannot tell: {_names(unknown)}",
        )
    return _status(CommitState.SUCCESS, f"all {len(verdicts)} checks passed")


def _status(state: CommitState, description: str) -> CommitStatus:
    cut = (
        description
        if len(description) <= MAX_DESCRIPTION_CHARS
        else (description[: MAX_DESCRIPTION_CHARS - 1] + "…")
    )
    return CommitStatus(state, cut)
