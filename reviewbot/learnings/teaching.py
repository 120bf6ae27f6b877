"""Teaching the reviewer: make, list and steer a project's (or a group's) learnings.

The CLI (``reviewbot learnings``) and the thread command (``/reviewbot learn``) both come here:
the text, globs and category are checked (``reviewbot.learnings.learning``), the project is read
from GitLab (its id, so a renamed project keeps its learnings, and its group), and the learning is
stored (``reviewbot.store.LearningBook``). Who may teach is checked by the caller that knows
who asks: the thread command with ``reviewbot.permission``; a CLI user has the database.

A review reads the learnings in force for its project once (:func:`active_learnings`): they
go into the prompt as rules (``reviewbot.review``, budget ``learnings_tokens``) and
:func:`suppress` drops the findings one explicitly excludes before anything is posted; those
are stored with state ``suppressed_by_learning`` and the learning's id.

After ``reviewbot feedback sync`` has recorded what became of the posted findings,
:func:`propose_learnings` proposes a learning for each kind of finding the team turned down
``learning_proposal_threshold`` times (``reviewbot.learnings.proposals``): 👎 in force and no
👍, or resolved with no sign the code changed (no ``addressed``, no applied suggestion). A
proposal is stored once per kind (its ``proposal_key``, and no near-identical proposal of the
same category and folder before it) and applied only once accepted.

Owns: :func:`add_learning`, :func:`project_learnings`,
:func:`active_learnings`, :func:`suppress`, :func:`withheld_by`, :func:`propose_learnings` and
:func:`learning_figures` (the report's). Must not: render
anything, or decide whether a learning applies to a finding (``reviewbot.learnings.learning``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from reviewbot.comments import Withheld
from reviewbot.findings import Finding, FindingsOptions, FindingsResult, FindingState, without
from reviewbot.gitlab import GitLabClient
from reviewbot.learnings.learning import (
    Learning,
    LearningError,
    LearningSource,
    LearningStatus,
    TurnedDown,
    ancestor_groups,
    checked_category,
    checked_globs,
    checked_group,
    checked_text,
    learning_excludes,
    proposals,
    similar_titles,
)
from reviewbot.report.learnings import learnings_json
from reviewbot.store import LearningBook, MergeRequestKey, Store
from reviewbot.stored_findings import StoredFinding

__all__ = [
    "Suppressed",
    "active_learnings",
    "add_learning",
    "learning_figures",
    "project_learnings",
    "propose_learnings",
    "suppress",
    "suppressed_stored",
    "withheld_by",
]


THREAD_FIELDS = frozenset({"author_id", "mr_iid", "discussion_id", "note_id"})


@dataclass(frozen=True)
class Suppressed:
    """A finding a team learning explicitly excludes: never posted."""

    finding: Finding
    learning_id: int


def add_learning(
    book: LearningBook,
    gitlab: GitLabClient,
    text: str,
    *,
    project: str | None = None,
    group: str | None = None,
    globs: Sequence[str] = (),
    category: str | None = None,
    author: str | None = None,
    source: LearningSource = LearningSource.CLI,
    thread: Mapping[str, Any] | None = None,
    status: LearningStatus = LearningStatus.ACTIVE,
) -> Learning:
    """Check and store a learning for ``project`` (id or path, read from GitLab) or for
    ``group`` (a group path: every project under it); the stored learning. ``thread``: where
    a thread command made it (``author_id``, ``mr_iid``, ``discussion_id``, ``note_id``).
    ``status`` ``proposed``: a thread's proposal, in force only once a human confirms it."""
    if (project is None) == (group is None):
        raise LearningError("name exactly one of a project or a group")
    unknown = sorted(set(thread or {}) - THREAD_FIELDS)
    if unknown:
        raise LearningError(f"unknown thread field(s): {', '.join(unknown)}")
    draft = Learning(
        text=checked_text(text),
        gitlab_url=gitlab.url,
        path_globs=checked_globs(globs),
        category=checked_category(category),
        status=status,
        source=source,
        author=author,
        **dict(thread or {}),
    )
    if project is not None:
        identity = gitlab.project_identity(project)
        draft = _for_project(draft, identity)
    else:
        draft = _for_group(draft, group or "")
    return book.get(book.add(draft))


def _for_project(draft: Learning, identity: dict[str, object]) -> Learning:
    return replace(
        draft,
        project_id=int(str(identity["id"])),
        project=str(identity["path_with_namespace"]),
        group_path=str(identity["group_path"]) if identity.get("group_path") else None,
    )


def _for_group(draft: Learning, group: str) -> Learning:
    return replace(draft, project_id=None, project=None, group_path=checked_group(group))


def project_learnings(
    book: LearningBook,
    gitlab: GitLabClient,
    *,
    project: str | None = None,
    group: str | None = None,
    statuses: Iterable[LearningStatus] = (),
) -> list[Learning]:
    """The learnings of a project (id or path, read from GitLab), of a group, or (neither
    given) of the whole GitLab, oldest first."""
    url = gitlab.url
    if project is None:
        return book.list(url, group_path=group.strip("/") if group else None, statuses=statuses)
    project_id = int(gitlab.project_identity(project)["id"])
    return book.list(url, project_id=project_id, statuses=statuses)


def active_learnings(book: LearningBook, key: MergeRequestKey, project_path: str) -> list[Learning]:
    """The learnings in force for the MR's project: its own, then its groups'."""
    return book.active_for_project(key.gitlab_url, key.project_id, project_path)


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


def withheld_by(learnings: Iterable[Learning], suppressed: Iterable[Suppressed]) -> list[Withheld]:
    """Per learning (in id order), how many of ``suppressed`` it withheld: what the summary
    says, so a review whose findings a learning kept off the MR never reads as clean."""
    counts = Counter(item.learning_id for item in suppressed)
    texts = {learning.id: learning.text for learning in learnings if learning.id is not None}
    return [
        Withheld(learning_id, texts.get(learning_id, ""), count)
        for learning_id, count in sorted(counts.items())
    ]


def suppressed_stored(suppressed: Iterable[Suppressed]) -> list[StoredFinding]:
    """The suppressed findings as the store keeps them."""
    return [
        replace(
            StoredFinding.of(item.finding, FindingState.SUPPRESSED), learning_id=item.learning_id
        )
        for item in suppressed
    ]


THUMBSDOWN, THUMBSUP = "thumbsdown", "thumbsup"
RESOLVED_UNCHANGED = "resolved unchanged"
CHANGED_OUTCOMES = frozenset({"addressed", "suggestion_applied"})


def turned_down(
    book: LearningBook, store: Store, gitlab_url: str, since: datetime
) -> list[TurnedDown]:
    """The posted findings of ``gitlab_url`` since ``since`` the team turned down (module
    notes)."""
    candidates = book.turned_down_candidates(gitlab_url, since)
    ids = [row["id"] for row in candidates]
    votes = store.votes_in_force(ids)
    outcomes = store.outcomes_on_record(ids)
    found = []
    for row in candidates:
        kinds = outcomes.get(row["id"], set())
        down = any(v[0] == row["id"] and v[2] == THUMBSDOWN for v in votes)
        up = any(v[0] == row["id"] and v[2] == THUMBSUP for v in votes)
        if down and not up:
            outcome = THUMBSDOWN
        elif "resolution" in kinds and not kinds & CHANGED_OUTCOMES:
            outcome = RESOLVED_UNCHANGED
        else:
            continue
        found.append(
            TurnedDown(
                row["id"],
                int(row["project_id"]),
                row["project"],
                row["mr_iid"],
                row["path"],
                row["line"],
                row["category"],
                row["title"],
                outcome,
                row["discussion_id"],
            )
        )
    return found


def propose_learnings(
    book: LearningBook, store: Store, gitlab_url: str, threshold: int, since: datetime
) -> list[Learning]:
    """Propose a learning per kind of finding turned down ``threshold`` times since ``since``
    (setting ``learning_proposal_threshold``); the proposals stored now (none twice)."""
    url = gitlab_url
    made = []
    for proposal in proposals(url, turned_down(book, store, url, since), threshold):
        earlier = book.list(url, project_id=proposal.project_id)
        if any(
            _same_kind(learning, proposal.category, proposal.glob, proposal.title)
            for learning in earlier
        ):
            continue
        learning_id = book.propose(proposal.learning())
        if learning_id is not None:
            made.append(book.get(learning_id))
    return made


def _same_kind(learning: Learning, category: str, glob: str, title: str) -> bool:
    known = learning.evidence.title
    if learning.category != category or learning.path_globs != (glob,) or known is None:
        return False
    return similar_titles(known, title)


def learning_figures(
    book: LearningBook,
    gitlab_url: str | None,
    since: datetime,
    until: datetime,
    project: str | None,
) -> dict:
    """The report's learnings section (reviewbot.report.learnings): the learnings in force
    (of ``project``, by path or id, and its groups, when given) with the findings each
    suppressed from ``since`` to ``until``, and the proposals waiting for a human."""
    every = book.list(gitlab_url, statuses=[LearningStatus.ACTIVE, LearningStatus.PROPOSED])
    if project is not None:
        groups = set(ancestor_groups(project))
        every = [
            item
            for item in every
            if project in (item.project, str(item.project_id))
            or (item.project_id is None and item.group_path in groups)
        ]
    in_use = [item for item in every if item.status is LearningStatus.ACTIVE]
    counts = book.suppressed_counts([item.id for item in in_use if item.id], since, until)
    suggested = [item for item in every if item.status is LearningStatus.PROPOSED]
    return learnings_json(in_use, counts, suggested)
