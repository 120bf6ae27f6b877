"""The walkthrough's block in a merge request's description, and the earlier walkthrough.

``PUT /projects/:id/merge_requests/:merge_request_iid`` with ``description``
(https://docs.gitlab.com/api/merge_requests/#update-mr) replaces the whole description, so
the block is written into the description as GitLab has it just before the write
(:func:`reviewbot.marked_block.with_block`: the author's text outside the block is kept byte
for byte). Exactly once: when the block already holds the text nothing is written; after a
transient failure (a 5xx, a timeout, a lost answer: the write may have been stored) the
description is read again, and sent again only when its block does not hold the text yet,
built on what the author may have changed meanwhile.

Owns: :class:`DescriptionWriter` (the description's block, the bot's summary note's body).
Must not: decide what the walkthrough says, or whether it goes into the description
(:mod:`reviewbot.mr_overview` does).
"""

from __future__ import annotations

from enum import StrEnum

from reviewbot.comments import MarkerKind, parse_marker
from reviewbot.gitlab.connection import Expected
from reviewbot.gitlab.merge_requests import MergeRequestReader
from reviewbot.marked_block import with_block

__all__ = ["MAX_MR_DESCRIPTION_CHARS", "BlockWrite", "DescriptionWriter"]

MAX_MR_DESCRIPTION_CHARS = 1_048_576  # GitLab's limit on an MR's description


class BlockWrite(StrEnum):
    """What writing the block into the description did."""

    WRITTEN = "written"
    UNCHANGED = "unchanged"  # the block already held the text: nothing was sent
    TOO_LONG = "too long"  # the description would pass GitLab's limit: nothing was sent


class DescriptionWriter(MergeRequestReader):
    """The walkthrough's block in an MR's description (``reviewbot.mr_overview``)."""

    def mr_description(self, project_id: int | str, iid: int) -> str:
        """The MR's description as GitLab has it now ("" when it has none)."""
        path = self._mr_path(project_id, iid)
        with self._translated(f"reading the description of !{iid}"):
            return str(self._get(path).get("description") or "")

    def write_description_block(self, project_id: int | str, iid: int, text: str) -> BlockWrite:
        """Write ``text`` into the description's block (replaced in place, or appended)."""
        path = self._mr_path(project_id, iid)
        current: list[str] = []

        def landed() -> BlockWrite | None:
            current[:] = [str(self._get(path).get("description") or "")]
            return BlockWrite.WRITTEN if with_block(current[0], text) == current[0] else None

        def send() -> BlockWrite:
            wanted = with_block(current[0], text)
            if wanted == current[0]:
                return BlockWrite.UNCHANGED
            if len(wanted) > MAX_MR_DESCRIPTION_CHARS:
                return BlockWrite.TOO_LONG
            self._expecting(
                Expected.OBJECT,
                lambda: self._api.http_put(path, post_data={"description": wanted}, **self._once()),
            )
            return BlockWrite.WRITTEN

        with self._translated(f"writing the walkthrough into the description of !{iid}"):
            current.append(str(self._get(path).get("description") or ""))
            return self._write_once(send, landed)

    def summary_note_body(self, project_id: int | str, iid: int) -> str | None:
        """The body of the bot's summary note on the MR (None: it has none)."""
        me = self.bot_username()
        path = f"{self._mr_path(project_id, iid)}/notes"
        with self._translated(f"reading the summary of !{iid}"):
            for note in self._list(path, sort="asc", order_by="created_at"):
                if (note.get("author") or {}).get("username") != me:
                    continue
                marker = parse_marker(str(note.get("body") or ""))
                if marker is not None and marker.kind is MarkerKind.SUMMARY:
                    return str(note.get("body") or "")
        return None
