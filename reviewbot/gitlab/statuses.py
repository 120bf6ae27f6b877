"""A commit status on the head commit: what CI and merge checks read of the review's checks.

* ``POST /projects/:id/statuses/:sha`` (``state``, ``name``, ``target_url``, ``description``,
  ``ref``) sets the status of that name: GitLab moves the running or pending status of that
  name along its state machine, or opens a new one when the last one finished (a new review
  of the same commit starts again at ``pending``). Posting the state a pending or running
  status already has is refused with 400 ``Cannot transition status via :enqueue from
  :pending (Reason(s): Status cannot transition via "enqueue")``.
* ``GET /projects/:id/repository/commits/:sha/statuses?name=NAME`` lists the latest status
  of each name (https://docs.gitlab.com/api/commits/#list-the-statuses-of-a-commit).

Every write is exactly-once in effect: the status of that name is read first (the state is
there already: nothing is written), a write whose answer was lost is looked for before it is
sent again, and the 400 above is read as "already in that state" when the state it names
(``from :pending``), or the status read back, is the one wanted.

Owns: :class:`CommitStatusWriter`. Must not: decide which state to post
(``reviewbot.check_status`` does).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from gitlab.exceptions import GitlabHttpError

from reviewbot.gitlab.connection import HTTP_BAD_REQUEST, GitLabConnection, GitLabError, error_text
from reviewbot.rules.check_verdicts import CommitState, CommitStatus

__all__ = ["TRANSITION_REFUSED", "CommitStatusWriter"]

TRANSITION_REFUSED = "Cannot transition status"  # the start of GitLab's 400 for the same state
REFUSED_FROM = re.compile(r"from :(?P<state>[a-z_]+)")
UNFINISHED = frozenset({CommitState.PENDING.value, CommitState.RUNNING.value})


class CommitStatusWriter(GitLabConnection):
    """The review's commit status on a commit, read and written."""

    def commit_status(
        self, project_id: int | str, sha: str, name: str, ref: str | None = None
    ) -> dict[str, Any] | None:
        """The latest status named ``name`` (of ``ref``, when given) on ``sha``, or None."""
        path = f"/projects/{quote(str(project_id), safe='')}/repository/commits/{sha}/statuses"
        query = {"name": name, **({"ref": ref} if ref else {})}
        with self._translated(f"reading the commit status {name!r} of {sha[:8]}"):
            found = [s for s in self._list(path, **query) if s.get("name") == name]
        return max(found, key=lambda status: int(status["id"])) if found else None

    def set_commit_status(
        self,
        project_id: int | str,
        sha: str,
        name: str,
        status: CommitStatus,
        *,
        target_url: str | None = None,
        ref: str | None = None,
        pipeline_id: int | None = None,
    ) -> None:
        """Make the status ``name`` of ``sha`` say ``status``, once (see the module notes)."""
        if _says(self.commit_status(project_id, sha, name, ref), status):
            return
        path = f"/projects/{quote(str(project_id), safe='')}/statuses/{sha}"
        data: dict[str, Any] = {
            "state": status.state.value,
            "name": name,
            "description": status.description,
        }
        if target_url:
            data["target_url"] = target_url
        if ref:
            data["ref"] = ref
        if pipeline_id is not None:
            data["pipeline_id"] = pipeline_id

        def landed() -> dict[str, Any] | None:
            current = self.commit_status(project_id, sha, name, ref)
            return current if _says(current, status) else None

        action = f"setting the commit status {name!r} of {sha[:8]} to {status.state.value}"
        with self._translated(action):
            try:
                self._write_once(lambda: self._create(path, data), landed)
            except GitlabHttpError as error:
                refused = error.response_code == HTTP_BAD_REQUEST
                text = error_text(error)
                if not (refused and TRANSITION_REFUSED in text):
                    raise
                if _state_refused_from(text) == status.state.value:
                    return  # GitLab says the status already is in that state
                current = self.commit_status(project_id, sha, name, ref)
                if current is None or current.get("status") != status.state.value:
                    now = current.get("status") if current else "none"
                    raise GitLabError(f"{action} failed: {text} (now {now})") from error


def _state_refused_from(text: str) -> str | None:
    """The state GitLab's transition refusal names as the current one (``from :pending``)."""
    found = REFUSED_FROM.search(text)
    return found["state"] if found else None


def _says(current: dict[str, Any] | None, status: CommitStatus) -> bool:
    """Whether ``current`` already is ``status``: the same state (an unfinished one whatever its
    description: GitLab refuses to post it again; a finished one with the same description)."""
    if current is None or current.get("status") != status.state.value:
        return False
    return status.state.value in UNFINISHED or current.get("description") == status.description
