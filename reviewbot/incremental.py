"""What a review of a new version of an MR sends to the model, and what it keeps (pure).

A push reviews only the hunks whose patch changed since the MR's last complete review by the
same model and prompt version; findings on unchanged hunks carry over to their current lines;
a rebase that leaves every patch the same costs no model call. Anything that makes the earlier
findings unreliable (no earlier review, a digest of another version, other review settings)
means a full review.

Owns: from the earlier review as stored (its digest and findings: plain data the run hands in),
the diff to review now, the earlier findings that carry over, and the figures the summary shows
(:class:`CarriedOver`). The hunk-by-hunk comparison is `reviewbot.interdiff`'s. Must not: read
the database or GitLab, or review anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reviewbot.diff import FileDiff, FileStatus
from reviewbot.findings import Finding
from reviewbot.interdiff import DiffDigest, Interdiff, compare
from reviewbot.stored_findings import StoredFinding, restored_finding

__all__ = [
    "CARRIED_CHUNK",
    "CarriedOver",
    "EarlierReview",
    "Increment",
    "plan_increment",
]

CARRIED_CHUNK = -1  # a finding carried over from an earlier review was in no chunk of this one


@dataclass(frozen=True)
class CarriedOver:
    """Hunks reviewed before (unchanged since): their findings were kept, no model call."""

    since_head: str  # the head the earlier review saw
    review_id: int  # the earlier review
    files: int  # reviewed files whose every hunk is unchanged (skipped files never count)
    lines: int  # changed lines of those unchanged hunks
    findings: int  # findings carried over


@dataclass(frozen=True)
class EarlierReview:
    """The MR's last complete review by this model and prompt version, as the store keeps it."""

    review_id: int
    head_sha: str
    model: str
    digest: Mapping[str, Any] | None  # what it saw (DiffDigest.to_json), as stored
    findings: Sequence[StoredFinding]


@dataclass(frozen=True)
class Increment:
    """What this review covers: ``files`` to review (new or changed hunks; skipped files whole,
    so the plan still lists them), the earlier ``carried`` findings at their current lines.
    ``carried_over`` is None for a full review."""

    files: list[FileDiff]
    skipped: Mapping[str, str]  # path -> why it is not reviewed
    carried: list[Finding] = field(default_factory=list)
    carried_over: CarriedOver | None = None
    earlier_model: str | None = None  # the model of the review built upon
    # paths the earlier review saw that the MR no longer changes (a file's changes reverted)
    gone: frozenset[str] = frozenset()

    @property
    def needs_model(self) -> bool:
        """False when an earlier review covers every reviewable hunk: no model call."""
        return self.carried_over is None or any(f.path not in self.skipped for f in self.files)

    def paths_to_read(self) -> list[str]:
        """The head files the review shows: those of files it reviews and that still exist."""
        return [
            f.new_path
            for f in self.files
            if f.path not in self.skipped and f.status is not FileStatus.DELETED
        ]


def plan_increment(
    files: Sequence[FileDiff],
    skipped: Mapping[str, str],
    settings_key: str,
    earlier: EarlierReview | None,
) -> Increment:
    """What to review of ``files`` (the MR's whole diff) given ``earlier`` (None: a full
    review); ``settings_key`` names the settings that shape findings (a review made with other
    settings is not built upon)."""
    previous = DiffDigest.from_json(earlier.digest or {}) if earlier is not None else None
    if earlier is None or previous is None or previous.settings_key != settings_key:
        return Increment(list(files), skipped)
    # A skipped file was not reviewed before and is not now: the plan lists it (whole) with its
    # reason, and it is never counted as carried over too (it would count twice).
    inter = compare(previous, [f for f in files if f.path not in skipped])
    to_review = [*inter.to_review, *(f for f in files if f.path in skipped)]
    carried = _carried(earlier.findings, inter, files)
    return Increment(
        to_review,
        skipped,
        carried,
        CarriedOver(
            since_head=earlier.head_sha,
            review_id=earlier.review_id,
            files=len(inter.reviewed_before),
            lines=inter.carried_lines,
            findings=len(carried),
        ),
        earlier.model,
        frozenset(
            path
            for seen in previous.files
            for path in {seen.old_path, seen.new_path}
            if path not in {name for f in files for name in (f.old_path, f.new_path)}
        ),
    )


def _carried(
    stored: Sequence[StoredFinding], inter: Interdiff, files: Sequence[FileDiff]
) -> list[Finding]:
    """The earlier findings whose hunks are unchanged, moved to their current lines."""
    carried = []
    for finding in stored:
        moved = inter.carry(finding.path, finding.side, finding.line, finding.end_line)
        # the file the finding's path names, old or new (as MergeRequestSnapshot.file finds it)
        file = next((f for f in files if finding.path in (f.new_path, f.old_path)), None)
        if moved is not None and file is not None:
            carried.append(restored_finding(finding, file, *moved, chunk_index=CARRIED_CHUNK))
    return carried
