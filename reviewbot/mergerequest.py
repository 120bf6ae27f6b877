"""A merge request as a review sees it: the SHAs of its diff version, its snapshot (title,
description, branches, files) and the threads the bot started on it.

The ground floor of the vocabulary: the GitLab adapter builds these from the API, the CI entry
point and ``reviewbot review`` from a local repository, and the pipeline, the thread answers and
the publisher read them, none of them loading an adapter to name one.

Owns: :class:`DiffRefs`, :class:`MergeRequestSnapshot` and :class:`BotThread`. Must not: read
GitLab (reviewbot.gitlab does) or decide where a note goes (reviewbot.positions does).
"""

from __future__ import annotations

from dataclasses import dataclass

from reviewbot.comments import Marker
from reviewbot.diff import FileDiff

__all__ = ["BotThread", "DiffRefs", "MergeRequestSnapshot"]


@dataclass(frozen=True)
class DiffRefs:
    """The SHAs of one diff version of an MR: every position names them."""

    base_sha: str
    start_sha: str
    head_sha: str


@dataclass
class MergeRequestSnapshot:
    """One diff version of a merge request and what a review reads of it."""

    project_id: int
    project_path: str
    iid: int
    title: str
    description: str
    web_url: str
    author_username: str
    draft: bool
    source_branch: str
    target_branch: str
    diff_refs: DiffRefs
    files: list[FileDiff]

    def file(self, path: str) -> FileDiff | None:
        return next((f for f in self.files if path in (f.new_path, f.old_path)), None)


@dataclass(frozen=True)
class BotThread:
    """A thread the bot started on the MR: its first note's marker, where it sits, resolved
    or not (the truth for idempotency)."""

    discussion_id: str
    note_id: int
    marker: Marker
    resolved: bool
    path: str
    new_line: int | None
    old_line: int | None
