"""Proposed learnings on GitLab: a note where the team turned the findings down, and 👍 on it.

A proposal (``reviewbot.learnings.teaching.propose_learnings``) is made from findings the team
turned down in a project. With ``learning_proposal_notes`` on (the default), ``reviewbot feedback
sync`` posts it once as a reply in the thread of the latest of those findings, where the
people who turned it down see it: the learning's text, its scope, and how to accept it. A 👍 on
that note from a project member with at least the Developer role (``reviewbot.permission``,
the same check as for ``/reviewbot learn``) puts the learning in force at the next sync; a
👍 from anyone else, from a bot or from reviewbot itself is ignored, with the reason in the
log. The CLI
(``reviewbot learnings accept|reject ID``) works as before, whether a note was posted or not.

Exactly once: the note ends with a marker unique to the proposal (its ``proposal_key``), and
``reply_in_thread`` looks for the bot's note holding it before it posts again, so a lost answer
or a sync killed between the post and the database write never posts a second note; the note's
id and thread are stored with the learning.

Owns: :func:`proposal_note_body` (pure), :func:`post_proposal_notes` and
:func:`accept_by_thumbs_up`. Must not: make proposals (``reviewbot.learnings.teaching``) or decide
what a learning suppresses (``reviewbot.learnings.learning``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from reviewbot.gitlab import GitLabNotFoundError
from reviewbot.learnings.learning import EVIDENCE_UNREADABLE, Learning, LearningStatus
from reviewbot.markdown import code_span_text, sanitize_markdown
from reviewbot.permission import Change, refusal
from reviewbot.store import LearningBook

__all__ = [
    "AcceptedByVotes",
    "ProposalGitLab",
    "accept_by_thumbs_up",
    "post_proposal_notes",
    "proposal_marker",
    "proposal_note_body",
    "proposal_thread",
]

log = logging.getLogger(__name__)

THUMBS_UP = "thumbsup"
MAX_NOTE_CHARS = 2000


class ProposalGitLab(Protocol):
    """What the proposal notes need from GitLab (``reviewbot.gitlab.GitLabClient``)."""

    @property
    def url(self) -> str: ...

    def bot_username(self) -> str: ...

    def reply_in_thread(
        self, project_id: int | str, iid: int, discussion_id: str, body: str, marker: str
    ) -> int: ...

    def note_awards(
        self, project_id: int | str, iid: int, note_id: int
    ) -> list[dict[str, Any]]: ...

    def member_access_level(self, project: str | int, user_id: int) -> int | None: ...


@dataclass
class AcceptedByVotes:
    """What one look at the proposal notes' 👍 did."""

    accepted: list[Learning] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # why each 👍 did not accept (logged)


def proposal_marker(learning: Learning) -> str:
    """The hidden marker that makes the proposal's note findable (and posted once)."""
    return f"<!-- reviewbot:{learning.proposal_key} -->"


def proposal_thread(learning: Learning) -> tuple[int, str] | None:
    """The MR and thread to post ``learning``'s proposal in: those of the latest finding of its
    evidence that has a thread (None: none has, or the evidence is unreadable)."""
    threaded = [
        item
        for item in learning.evidence.findings
        if isinstance(item.get("mr_iid"), int) and isinstance(item.get("discussion_id"), str)
    ]
    if not threaded:
        return None
    latest = max(threaded, key=lambda item: _finding_id(item.get("id")))
    return int(latest["mr_iid"]), str(latest["discussion_id"])


def _finding_id(value: object) -> int:
    """A finding id of the evidence, to order by (0: none, or not a whole number)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def proposal_note_body(learning: Learning) -> str:
    """The note that proposes ``learning`` (its text is sanitised when it is made)."""
    count = learning.evidence.count
    globs = ", ".join(f"`{code_span_text(glob)}`" for glob in learning.path_globs)
    category = f"`{code_span_text(learning.category)}`" if learning.category else "every category"
    lines = [
        f"reviewbot suggests a learning: {count} findings of this kind were turned down in this "
        "project (👎, or resolved with the code unchanged).",
        "",
        f"> {sanitize_markdown(learning.text, max_chars=MAX_NOTE_CHARS)}",
        "",
        f"Scope: {sanitize_markdown(learning.scope, max_chars=MAX_NOTE_CHARS)}, "
        f"files {globs or 'every file'}, "
        f"category {category}. Nothing changes until someone accepts it: 👍 this comment "
        f"(Developer role or higher), or `reviewbot learnings accept {learning.id}`; "
        f"`reviewbot learnings reject {learning.id}` turns it down for good.",
        "",
        proposal_marker(learning),
    ]
    return "\n".join(lines)


def post_proposal_notes(book: LearningBook, gitlab: ProposalGitLab) -> list[Learning]:
    """Post every proposal of this GitLab that has no note yet (once each; module notes);
    the proposals posted now, with their note."""
    posted = []
    for learning in book.list(gitlab.url, statuses=[LearningStatus.PROPOSED]):
        if learning.proposal_note_id is not None or learning.id is None:
            continue
        if not learning.evidence.readable:
            log.info(
                "learning %d: not proposed on GitLab: %s (its proposal_evidence is not the "
                "object reviewbot writes); `reviewbot learnings accept %d` still accepts it",
                learning.id,
                EVIDENCE_UNREADABLE,
                learning.id,
            )
            continue
        where = proposal_thread(learning)
        if where is None or learning.project_id is None:
            log.info("learning %d: no thread to propose it in; see `learnings list`", learning.id)
            continue
        mr_iid, discussion_id = where
        try:
            note_id = gitlab.reply_in_thread(
                learning.project_id,
                mr_iid,
                discussion_id,
                proposal_note_body(learning),
                proposal_marker(learning),
            )
        except GitLabNotFoundError as gone:  # the thread was deleted: the CLI can still accept
            log.info("learning %d: not proposed on GitLab (%s)", learning.id, gone)
            continue
        book.set_proposal_note(learning.id, note_id, mr_iid=mr_iid, discussion_id=discussion_id)
        posted.append(book.get(learning.id))
    return posted


def accept_by_thumbs_up(book: LearningBook, gitlab: ProposalGitLab) -> AcceptedByVotes:
    """Accept each posted proposal that a Developer (or more) gave a 👍 (module notes)."""
    outcome = AcceptedByVotes()
    me = gitlab.bot_username()
    for learning in book.list(gitlab.url, statuses=[LearningStatus.PROPOSED]):
        if learning.id is None or learning.project_id is None or learning.mr_iid is None:
            continue
        if learning.proposal_note_id is None:
            continue
        awards = gitlab.note_awards(learning.project_id, learning.mr_iid, learning.proposal_note_id)
        voter = _first_teacher(learning, awards, me, gitlab, outcome.ignored)
        if voter is not None:
            outcome.accepted.append(book.accept(learning.id, by=voter))
    for reason in outcome.ignored:
        log.info("%s", reason)
    return outcome


def _first_teacher(
    learning: Learning,
    awards: Sequence[Mapping[str, Any]],
    me: str,
    gitlab: ProposalGitLab,
    ignored: list[str],
) -> str | None:
    """The username of the first 👍 on the proposal's note by someone who may teach."""
    assert learning.project_id is not None
    ups = [award for award in awards if award.get("name") == THUMBS_UP]
    for award in sorted(ups, key=lambda item: (str(item.get("created_at") or ""), item.get("id"))):
        user = award.get("user") or {}
        name, user_id = user.get("username"), user.get("id")
        if not isinstance(user_id, int) or not isinstance(name, str):
            continue
        if name == me or user.get("bot"):
            ignored.append(f"learning {learning.id}: 👍 by @{name} ignored (a bot)")
            continue
        refused = refusal(gitlab, learning.project_id, user_id, Change.ACCEPT)
        if refused is None:
            return name
        ignored.append(f"learning {learning.id}: 👍 by @{name} ignored ({refused})")
    return None
