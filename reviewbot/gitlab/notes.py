"""Writing on a merge request: finding threads, drafts, plain notes, the summary, resolving.

Owns: :class:`NoteWriter`. Every write happens once even when its answer is lost, slow or a
5xx after GitLab stored it: before a write is sent again, it is looked for on the MR by its
hidden marker (``reviewbot.comments``; a one-off :func:`write_marker` for plain notes). Every
note creation is paced. Must not: build a position itself (``reviewbot.positions`` does) or
decide what to post (``reviewbot.publish`` does).

* A position GitLab answers 400 to is :class:`PositionRefusedError` (usually the line_code
  refusal of a line the diff does not show).
* Draft notes are validated only at ``bulk_publish`` and an unplaceable draft is dropped
  silently (DraftNotes::PublishService), so :meth:`NoteWriter.publish_drafts` checks what
  was really published.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gitlab.exceptions import GitlabHttpError

from reviewbot.comments import MarkerKind, parse_marker
from reviewbot.findings import Finding
from reviewbot.gitlab.connection import (
    HTTP_BAD_REQUEST,
    GitLabError,
    PositionRefusedError,
    error_text,
)
from reviewbot.gitlab.merge_requests import MergeRequestReader
from reviewbot.mergerequest import BotThread, MergeRequestSnapshot
from reviewbot.positions import note_position

__all__ = ["DraftPublishReport", "NoteWriter", "write_marker"]


@dataclass(frozen=True)
class DraftPublishReport:
    """What bulk publishing really produced: threads by fingerprint, and what GitLab dropped."""

    published: dict[str, BotThread]
    missing: list[Finding]


class NoteWriter(MergeRequestReader):
    """What publishing writes on one MR (``reviewbot.publish``, the webhook's help note)."""

    def post_finding(
        self, snapshot: MergeRequestSnapshot, finding: Finding, body: str
    ) -> tuple[str, int]:
        """Open a diff thread on the finding's line; returns (discussion_id, note_id)."""
        position = note_position(snapshot.diff_refs, snapshot.file(finding.path), finding)
        self._pace_note()
        path = f"{self._mr_path(snapshot.project_id, snapshot.iid)}/discussions"
        try:
            with self._translated(f"posting a finding on {finding.path}"):
                return self._write_once(
                    lambda: _thread_ids(self._create(path, {"body": body, "position": position})),
                    lambda: self._finding_thread(snapshot, finding.fingerprint),
                )
        except GitLabError as error:
            cause = error.__cause__
            if isinstance(cause, GitlabHttpError) and cause.response_code == HTTP_BAD_REQUEST:
                raise PositionRefusedError(
                    f"GitLab refused the position {finding.path}:{finding.side}:{finding.line}: "
                    f"{error_text(cause)}"
                ) from cause
            raise

    def _finding_thread(
        self, snapshot: MergeRequestSnapshot, fingerprint: str
    ) -> tuple[str, int] | None:
        """The bot's thread with this fingerprint's marker, if it is on the MR."""
        for thread in self.bot_threads(snapshot.project_id, snapshot.iid):
            if thread.marker.fingerprint == fingerprint:
                return thread.discussion_id, thread.note_id
        return None

    def post_note(self, project: int | str, iid: int, body: str) -> int:
        """A plain MR comment (https://docs.gitlab.com/api/notes/), paced like every note.

        The body gets a hidden one-off marker, so a write whose answer was lost is found on
        the MR instead of being posted twice."""
        self._pace_note()
        marked = f"{body}\n\n{write_marker(uuid.uuid4().hex)}"
        notes_path = f"{self._mr_path(project, iid)}/notes"
        with self._translated(
            f"commenting on !{iid}", not_found=f"merge request !{iid} not found in {project}"
        ):
            return self._write_once(
                lambda: int(self._create(notes_path, {"body": marked})["id"]),
                lambda: self._note_id_where(notes_path, lambda note: note.get("body") == marked),
            )

    def resolve_thread(self, project_id: int, iid: int, discussion_id: str, reply: str) -> None:
        """Reply to a bot thread (why it is resolved), then resolve it. A reply whose answer
        was lost is found in the thread, not posted twice."""
        path = f"{self._mr_path(project_id, iid)}/discussions/{discussion_id}"
        me = self.bot_username()
        self._pace_note()
        with self._translated(
            f"resolving thread {discussion_id}", not_found=f"thread {discussion_id} not found"
        ):
            self._write_once(
                lambda: self._create(f"{path}/notes", {"body": reply}),
                lambda: next(
                    (
                        note
                        for note in self._get(path).get("notes") or []
                        if note.get("body") == reply
                        and (note.get("author") or {}).get("username") == me
                    ),
                    None,
                ),
            )
            self._put(path, {"resolved": True})

    # -- answers in the bot's threads (reviewbot.replies.answer) ----------------------------------

    def discussion(self, project_id: int | str, iid: int, discussion_id: str) -> dict[str, Any]:
        """One thread with its notes (https://docs.gitlab.com/api/discussions/)."""
        path = f"{self._mr_path(project_id, iid)}/discussions/{discussion_id}"
        with self._translated(
            f"reading thread {discussion_id}", not_found=f"thread {discussion_id} not found"
        ):
            return self._get(path)

    def user_is_bot(self, user_id: int) -> bool:
        """Whether GitLab says user ``user_id`` is a bot (``bot`` of ``GET /users/:id``)."""
        with self._translated(f"looking up user {user_id}", not_found=f"user {user_id} not found"):
            return bool(self._get(f"/users/{user_id}").get("bot"))

    def reply_in_thread(
        self, project_id: int | str, iid: int, discussion_id: str, body: str, marker: str
    ) -> int:
        """Answer in a thread; returns the note id. ``body`` ends with ``marker``, unique to
        the triggering note: a note of the bot holding it is looked for in the thread before
        anything is sent again, so a lost answer never makes a second note."""
        path = f"{self._mr_path(project_id, iid)}/discussions/{discussion_id}"
        self._pace_note()
        with self._translated(
            f"answering in thread {discussion_id}", not_found=f"thread {discussion_id} not found"
        ):
            return self._write_once(
                lambda: int(self._create(f"{path}/notes", {"body": body})["id"]),
                lambda: self.marked_note_in_thread(project_id, iid, discussion_id, marker),
            )

    def marked_note_in_thread(
        self, project_id: int | str, iid: int, discussion_id: str, marker: str
    ) -> int | None:
        """The id of the bot's note in the thread whose body holds ``marker``, or None."""
        me = self.bot_username()
        path = f"{self._mr_path(project_id, iid)}/discussions/{discussion_id}"
        for note in self._get(path).get("notes") or []:
            author = (note.get("author") or {}).get("username")
            if author == me and marker in str(note.get("body") or ""):
                return int(note["id"])
        return None

    def resolve_discussion(self, project_id: int | str, iid: int, discussion_id: str) -> None:
        """Mark a thread resolved (the same PUT again changes nothing: safe to repeat)."""
        path = f"{self._mr_path(project_id, iid)}/discussions/{discussion_id}"
        with self._translated(
            f"resolving thread {discussion_id}", not_found=f"thread {discussion_id} not found"
        ):
            self._put(path, {"resolved": True})

    def summary_note_id(self, project_id: int, iid: int) -> int | None:
        """The id of the bot's summary note on the MR, or None when it has none."""
        me = self.bot_username()
        notes_path = f"{self._mr_path(project_id, iid)}/notes"
        with self._translated(f"looking for the summary of !{iid}"):
            return self._note_id_where(notes_path, lambda note: _is_summary_by(note, me))

    def upsert_summary(self, project_id: int, iid: int, body: str) -> int:
        """Edit the bot's summary note in place, or create it; returns the note id.

        One write when all goes well: the edit, or the creation. Only a creation whose answer
        was lost is followed by an edit: the summary found on the MR then is not known to hold
        this body (another run may have written it)."""
        notes_path = f"{self._mr_path(project_id, iid)}/notes"
        created: list[int] = []

        def existing_summary() -> int | None:
            return self.summary_note_id(project_id, iid)

        def create() -> int:
            answer = self._create(notes_path, {"body": body})
            created.append(int(answer["id"]))
            return created[-1]

        with self._translated(f"updating the summary of !{iid}"):
            note_id = existing_summary()
            if note_id is None:
                self._pace_note()
                note_id = self._write_once(create, existing_summary)
                if created:
                    return note_id
            self._put(f"{notes_path}/{note_id}", {"body": body})
            return note_id

    def _note_id_where(
        self, notes_path: str, wanted: Callable[[Mapping[str, Any]], bool]
    ) -> int | None:
        notes = self._list(notes_path, sort="asc", order_by="created_at")
        return next((int(note["id"]) for note in notes if wanted(note)), None)

    def publish_drafts(
        self, snapshot: MergeRequestSnapshot, items: list[tuple[Finding, str]]
    ) -> DraftPublishReport:
        """Create a draft per finding, publish them in one go, then check what GitLab kept.

        A draft already there (a run that stopped before publishing, or a lost answer) is not
        created again: ``bulk_publish`` would post it twice."""
        mr_path = self._mr_path(snapshot.project_id, snapshot.iid)
        drafts_path = f"{mr_path}/draft_notes"
        with self._translated(f"publishing drafts on !{snapshot.iid}"):
            waiting = self._draft_fingerprints(drafts_path)
            for finding, body in items:
                if finding.fingerprint in waiting:
                    continue
                position = note_position(
                    snapshot.diff_refs, snapshot.file(finding.path), finding, draft=True
                )
                self._write_once(
                    lambda body=body, position=position: self._create(
                        drafts_path, {"note": body, "position": position}
                    ),
                    lambda finding=finding: (
                        True
                        if finding.fingerprint in self._draft_fingerprints(drafts_path)
                        else None
                    ),
                )
            # Publishing what is already published publishes nothing: safe to repeat.
            self._post(f"{drafts_path}/bulk_publish")
        threads = self.bot_threads(snapshot.project_id, snapshot.iid)
        by_fingerprint = {t.marker.fingerprint: t for t in threads}
        published = {
            f.fingerprint: by_fingerprint[f.fingerprint]
            for f, _ in items
            if f.fingerprint in by_fingerprint
        }
        missing = [f for f, _ in items if f.fingerprint not in by_fingerprint]
        return DraftPublishReport(published, missing)

    def _draft_fingerprints(self, drafts_path: str) -> set[str]:
        """Fingerprints of the bot's drafts waiting on the MR (drafts are the author's own)."""
        fingerprints = set()
        for draft in self._list(drafts_path):
            marker = parse_marker(str(draft.get("note") or ""))
            if marker is not None and marker.kind is MarkerKind.FINDING:
                fingerprints.add(marker.fingerprint)
        return fingerprints


def write_marker(write_id: str) -> str:
    """A hidden marker that makes one write recognisable on the MR."""
    return f"<!-- reviewbot:write id={write_id} -->"


def _thread_ids(discussion: Mapping[str, Any]) -> tuple[str, int]:
    return str(discussion["id"]), int(discussion["notes"][0]["id"])


def _is_summary_by(note: Mapping[str, Any], username: str) -> bool:
    if (note.get("author") or {}).get("username") != username:
        return False
    marker = parse_marker(str(note.get("body") or ""))
    return marker is not None and marker.kind is MarkerKind.SUMMARY
