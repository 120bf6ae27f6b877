"""Teaching the reviewer: make, list and steer a project's (or a group's) learnings.

The CLI (``reviewbot learnings``) and the thread command (``/reviewbot learn``) both come here:
the text, globs and category are checked (``reviewbot.learnings``), the project is read from
GitLab (its id, so a renamed project keeps its learnings, and its group), and the learning is
stored (``reviewbot.store.LearningBook``). Who may teach is checked by the caller that knows
who asks: the thread command with ``GitLabClient.can_teach``; a CLI user has the database.

A review reads the learnings in force for its project once (:func:`active_learnings`): they
go into the prompt as rules (``reviewbot.review``, budget ``learnings_tokens``) and
:func:`suppress` drops the findings one explicitly excludes before anything is posted; those
are stored with state ``suppressed_by_learning`` and the learning's id.

Owns: :func:`add_learning`, :func:`project_learnings`, :func:`learning_book`,
:func:`active_learnings` and :func:`suppress`. Must not: render anything, or decide whether a
learning applies to a finding (``reviewbot.learnings``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from reviewbot.app import App
from reviewbot.findings import Finding, FindingsOptions, FindingsResult, FindingState, without
from reviewbot.learnings import (
    Learning,
    LearningError,
    LearningSource,
    LearningStatus,
    checked_category,
    checked_globs,
    checked_text,
    learning_excludes,
)
from reviewbot.store import LearningBook, MergeRequestKey
from reviewbot.stored_findings import StoredFinding

__all__ = [
    "Suppressed",
    "active_learnings",
    "add_learning",
    "learning_book",
    "project_learnings",
    "suppress",
    "suppressed_stored",
]


@dataclass(frozen=True)
class Suppressed:
    """A finding a team learning explicitly excludes: never posted."""

    finding: Finding
    learning_id: int


def learning_book(app: App) -> LearningBook:
    """The learnings of the App's database (migrated on first use)."""
    return LearningBook(app.store.engine)


def add_learning(
    app: App,
    text: str,
    *,
    project: str | None = None,
    group: str | None = None,
    globs: Sequence[str] = (),
    category: str | None = None,
    author: str | None = None,
    source: LearningSource = LearningSource.CLI,
) -> Learning:
    """Check and store a learning for ``project`` (id or path, read from GitLab) or for
    ``group`` (a group path: every project under it); the stored learning."""
    if (project is None) == (group is None):
        raise LearningError("name exactly one of a project or a group")
    draft = Learning(
        text=checked_text(text),
        gitlab_url=app.gitlab().url,
        path_globs=checked_globs(globs),
        category=checked_category(category),
        status=LearningStatus.ACTIVE,
        source=source,
        author=author,
    )
    if project is not None:
        identity = app.gitlab().project_identity(project)
        draft = _for_project(draft, identity)
    else:
        draft = _for_group(draft, (group or "").strip("/"))
    book = learning_book(app)
    return book.get(book.add(draft))


def _for_project(draft: Learning, identity: dict[str, object]) -> Learning:
    return replace(
        draft,
        project_id=int(str(identity["id"])),
        project=str(identity["path_with_namespace"]),
        group_path=str(identity["group_path"]) if identity.get("group_path") else None,
    )


def _for_group(draft: Learning, group: str) -> Learning:
    if not group:
        raise LearningError("the group path is empty")
    return replace(draft, project_id=None, project=None, group_path=group)


def project_learnings(
    app: App,
    *,
    project: str | None = None,
    group: str | None = None,
    statuses: Iterable[LearningStatus] = (),
) -> list[Learning]:
    """The learnings of a project (id or path, read from GitLab), of a group, or (neither
    given) of the whole GitLab, oldest first."""
    book = learning_book(app)
    url = app.gitlab().url
    if project is None:
        return book.list(url, group_path=group.strip("/") if group else None, statuses=statuses)
    project_id = int(app.gitlab().project_identity(project)["id"])
    return book.list(url, project_id=project_id, statuses=statuses)


def active_learnings(app: App, key: MergeRequestKey, project_path: str) -> list[Learning]:
    """The learnings in force for the MR's project: its own, then its groups'."""
    return learning_book(app).active_for_project(key.gitlab_url, key.project_id, project_path)


def suppress(
    result: FindingsResult, learnings: Iterable[Learning], options: FindingsOptions
) -> tuple[FindingsResult, list[Suppressed]]:
    """``result`` without the findings a learning explicitly excludes (the first such learning
    is recorded with each), and those findings."""
    excluding = [learning for learning in learnings if learning.excludes]
    suppressed = []
    for finding in result.findings if excluding else ():
        for learning in excluding:
            if learning.id is not None and learning_excludes(
                learning, finding.path, str(finding.category)
            ):
                suppressed.append(Suppressed(finding, learning.id))
                break
    return without(result, [item.finding for item in suppressed], options), suppressed


def suppressed_stored(suppressed: Iterable[Suppressed]) -> list[StoredFinding]:
    """The suppressed findings as the store keeps them."""
    return [
        replace(
            StoredFinding.of(item.finding, FindingState.SUPPRESSED), learning_id=item.learning_id
        )
        for item in suppressed
    ]
