"""Learnings made in the bot's threads (issue 21; docs/conversation.md, docs/learnings.md).

Only a member with the Developer role or above teaches (``reviewbot.permission``, the one
check of every change; ``reviewbot.replies.answer`` makes it before :func:`learn`, :func:`propose`
makes it itself):

- ``/reviewbot learn <text>``: a learning for the project and the finding's category, scoped
  to the path globs the text names (``reviewbot.replies.intent.mentioned_globs``: "in
  tests/**"; none: every path), in force from the next review;
- ``@bot don't flag this …`` (a wish ``reviewbot.replies.intent.teaching_intent`` recognises):
  the same learning *proposed* (status ``proposed``, scoped to the globs the text names, else
  to the finding's path, with the finding's title for context); the answer quotes it with its
  scope and asks to confirm it with a bare ``/reviewbot learn`` in the thread;
- a bare ``/reviewbot learn``: the thread's newest proposal is accepted (``proposed`` ->
  ``active``, ``accepted_by`` the confirming member), as ``reviewbot learnings accept`` does.

A wish from anyone else is answered as any question; a ``/reviewbot learn`` from anyone else is
refused in the thread with the reason (``reviewbot.replies.answer``). Every learning made in a
thread keeps where: the author's id, the MR's iid, the discussion and the note. Exactly once: a note
whose learning or proposal exists already (an earlier attempt died before it answered) gets
that one back, never a second; a confirmation that finds the proposal accepted says it is in
force.

Owns: :class:`Lesson`, :func:`learn`, :func:`propose`. Must not: post anything
(``reviewbot.replies.answer`` does), write SQL (``reviewbot.store``), or read a note's intent
(``reviewbot.replies.intent``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reviewbot.gitlab import GitLabClient
from reviewbot.learnings.learning import (
    MAX_LEARNING_CHARS,
    Learning,
    LearningError,
    LearningSource,
    LearningStatus,
)
from reviewbot.learnings.teaching import add_learning
from reviewbot.markdown import code_span_text, sanitize_markdown
from reviewbot.permission import Change, refusal
from reviewbot.replies.intent import TeachingIntent, mentioned_globs
from reviewbot.replies.thread import Thread
from reviewbot.store import LearningBook

__all__ = ["LEARN_COMMAND", "Lesson", "learn", "propose"]

LEARN_COMMAND = re.compile(r"\A\s*(?:/reviewbot|@\S+)\s+learn\b", re.IGNORECASE)
MAX_QUOTED_CHARS = 1000  # a learning is at most 500 characters; room for its escapes
MAX_ERROR_CHARS = 500
MIN_TITLE_CHARS = 20  # a proposal names the finding's title only when this much of it fits
TITLE_CONTEXT = " (said of the finding “{title}”)"


@dataclass(frozen=True)
class Lesson:
    """The answer to a note that teaches, and the learning it proposes (None: proposes none)."""

    body: str
    proposal_id: int | None = None


def learn(book: LearningBook, gitlab: GitLabClient, thread: Thread) -> Lesson:
    """The answer to ``/reviewbot learn [text]`` (module notes), from an author the caller
    found may teach (``reviewbot.permission``)."""
    author, record = thread.author, thread.record
    text = LEARN_COMMAND.sub("", str(thread.note.get("body") or ""), count=1).strip()
    earlier = _thread_learnings(book, gitlab, thread)
    made = next((item for item in earlier if item.note_id == record.trigger_note_id), None)
    if made is None and not text:
        return _confirm(book, earlier, author.get("username"))
    if made is None:
        try:
            made = add_learning(
                book,
                gitlab,
                text,
                project=str(thread.project),
                globs=mentioned_globs(text),
                category=thread.finding.category,
                author=author.get("username"),
                source=LearningSource.THREAD,
                thread=thread.where(),
            )
        except LearningError as error:
            return Lesson(f"Nothing learned: {sanitize_markdown(str(error), MAX_ERROR_CHARS)}")
    return Lesson(_learned(made))


def propose(
    book: LearningBook, gitlab: GitLabClient, thread: Thread, intent: TeachingIntent
) -> Lesson | None:
    """The answer proposing the learning a wish states (module notes); None: its author may
    not teach (the note gets an ordinary answer)."""
    author, finding = thread.author, thread.finding
    if refusal(gitlab, thread.project, author.get("id"), Change.PROPOSE) is not None:
        return None
    earlier = _thread_learnings(book, gitlab, thread)
    made = next((item for item in earlier if item.note_id == thread.record.trigger_note_id), None)
    if made is None:
        try:
            made = add_learning(
                book,
                gitlab,
                _with_title(intent.text, finding.title),
                project=str(thread.project),
                globs=intent.globs or (finding.path,),
                category=finding.category,
                author=author.get("username"),
                source=LearningSource.THREAD,
                thread=thread.where(),
                status=LearningStatus.PROPOSED,
            )
        except LearningError as error:
            return Lesson(f"Nothing proposed: {sanitize_markdown(str(error), MAX_ERROR_CHARS)}")
    if made.status is not LearningStatus.PROPOSED:
        return Lesson(_learned(made))  # confirmed (or removed) before this answer was posted
    return Lesson(
        f"Shall I remember this for the next reviews? Proposed learning {made.id} "
        f"({_scope(made)}):\n\n> {_quoted(made)}\n\nTo confirm it, reply `/reviewbot learn` "
        "in this thread (Developer role or above). Until then nothing changes.",
        proposal_id=made.id,
    )


def _confirm(book: LearningBook, earlier: list[Learning], username: str | None) -> Lesson:
    """Accept the thread's newest proposal; what the answer says when there is none."""
    proposed = [item for item in earlier if item.status is LearningStatus.PROPOSED]
    if proposed:
        try:
            return Lesson(_learned(book.accept(int(proposed[-1].id or 0), by=username)))
        except LearningError:
            earlier = [book.get(int(item.id or 0)) for item in earlier]  # accepted meanwhile
    active = [item for item in earlier if item.status is LearningStatus.ACTIVE]
    if active:
        return Lesson(
            f"Already in force: learning {active[-1].id} ({_scope(active[-1])}):\n\n"
            f"> {_quoted(active[-1])}"
        )
    return Lesson(
        "Nothing learned: this thread has no proposed learning to confirm. Say what to allow: "
        '`/reviewbot learn <what to allow>` (name paths with "in tests/**").'
    )


def _learned(learning: Learning) -> str:
    return (
        f"Learned (learning {learning.id}, {_scope(learning)}):\n\n> {_quoted(learning)}\n\n"
        f"It applies from the next review. Remove it with "
        f"`reviewbot learnings remove {learning.id}`."
    )


def _scope(learning: Learning) -> str:
    category = f"category `{learning.category}`" if learning.category else "every category"
    # A glob is a file's path at worst (the finding's): in a code span, it mentions no one.
    paths = ", ".join(f"`{code_span_text(glob)}`" for glob in learning.path_globs)
    return f"{learning.scope}, {category}, {paths or 'every path'}"


def _quoted(learning: Learning) -> str:
    return sanitize_markdown(learning.text, max_chars=MAX_QUOTED_CHARS)


def _with_title(text: str, title: str) -> str:
    """The wish, with the finding's title when it fits (``this`` alone says nothing later)."""
    room = MAX_LEARNING_CHARS - len(text) - len(TITLE_CONTEXT.format(title=""))
    if room < MIN_TITLE_CHARS:
        return text
    shown = title if len(title) <= room else title[: room - 1] + "…"
    return text + TITLE_CONTEXT.format(title=shown)


def _thread_learnings(book: LearningBook, gitlab: GitLabClient, thread: Thread) -> list[Learning]:
    """The project's learnings made in the thread, oldest first (a project holds at most
    MAX_LEARNINGS_PER_PROJECT active or proposed)."""
    project_id = int(gitlab.project_identity(thread.project)["id"])
    every = book.list(gitlab.url, project_id=project_id)
    return [item for item in every if item.discussion_id == thread.record.discussion_id]
