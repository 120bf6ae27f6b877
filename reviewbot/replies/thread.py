"""One of the bot's threads with the note to answer: the value every step of an answer takes.

Owns: :class:`Thread`: where the thread is (the project, the MR, the reply's row), what it was
opened for (the stored finding) and the thread and its triggering note as GitLab has them now.
Must not: read GitLab or the database (``reviewbot.replies.answer`` builds one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reviewbot.queue import Job
from reviewbot.store.reply_queries import ReplyRecord, ThreadFinding

__all__ = ["Thread"]


@dataclass(frozen=True)
class Thread:
    """The bot's thread as GitLab has it now, the triggering note in it, and what it is for."""

    project: int | str  # the project's id when the job knows it, else its path
    job: Job
    record: ReplyRecord
    finding: ThreadFinding
    discussion: dict[str, Any]
    note: dict[str, Any]

    @property
    def author(self) -> dict[str, Any]:
        """The triggering note's author, as GitLab has it."""
        return dict(self.note.get("author") or {})

    @property
    def mr_iid(self) -> int:
        return self.job.mr_iid

    @property
    def notes(self) -> list[dict[str, Any]]:
        return list(self.discussion.get("notes") or [])

    def where(self) -> dict[str, Any]:
        """Where a learning made in this thread was made (its ``thread`` fields)."""
        return {
            "author_id": self.author.get("id"),
            "mr_iid": self.mr_iid,
            "discussion_id": self.record.discussion_id,
            "note_id": self.record.trigger_note_id,
        }
