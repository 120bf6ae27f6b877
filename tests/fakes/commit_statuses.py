"""The fake GitLab's commit statuses, kept as GitLab keeps them (``Ci::CreateCommitStatusService``).

``POST /projects/:id/statuses/:sha`` finds the status of that ``name`` (and ``ref``) that is
still pending or running and moves it along the state machine with the event of the new state
(``pending``: enqueue, ``running``: run, ``success``: success, ``failed``: drop,
``canceled``: cancel); with no such status it opens a new one (a finished one stays, as the
older entry). An event the current state has no transition for is a 400 with GitLab's text,
e.g. ``Cannot transition status via :enqueue from :pending (Reason(s): Status cannot
transition via "enqueue")``. ``GET /projects/:id/repository/commits/:sha/statuses`` lists the
latest status of each name (``all=true``: every one), filtered by ``name`` and ``ref``.

API: https://docs.gitlab.com/api/commits/#set-the-pipeline-status-of-a-commit
"""

from __future__ import annotations

from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

STATES = ("pending", "running", "success", "failed", "canceled")
EVENT_OF = {
    "pending": "enqueue",
    "running": "run",
    "success": "success",
    "failed": "drop",
    "canceled": "cancel",
}
# from-state -> the states its events may reach (CommitStatus' state machine, for generic
# statuses; a fresh status is `created`, from which every event goes)
TRANSITIONS = {
    "created": frozenset(STATES),
    "pending": frozenset({"running", "success", "failed", "canceled"}),
    "running": frozenset({"success", "failed", "canceled"}),
}
UNFINISHED = frozenset({"pending", "running"})
MAX_DESCRIPTION = 255


class StatusRefused(Exception):
    """GitLab's answer to a refused status: its HTTP status and body."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(body)
        self.status = status
        self.body = body


@dataclass
class CommitStatuses:
    """Every commit status of one project, by SHA, oldest first."""

    by_sha: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def post(
        self, sha: str, params: dict[str, Any], new_id: int, when: str, author: dict[str, Any]
    ) -> dict[str, Any]:
        state = str(params.get("state") or "")
        if not state:
            raise StatusRefused(HTTPStatus.BAD_REQUEST, {"error": "state is missing"})
        if state not in STATES:
            raise StatusRefused(
                HTTPStatus.BAD_REQUEST, {"error": "state does not have a valid value"}
            )
        name = str(params.get("name") or params.get("context") or "default")
        ref = str(params.get("ref") or "main")
        statuses = self.by_sha.setdefault(sha, [])
        current = next(
            (
                s
                for s in reversed(statuses)
                if s["name"] == name and s["ref"] == ref and s["status"] in UNFINISHED
            ),
            None,
        )
        if current is None:
            current = {
                "id": new_id,
                "sha": sha,
                "ref": ref,
                "status": "created",
                "name": name,
                "target_url": None,
                "description": None,
                "created_at": when,
                "started_at": None,
                "finished_at": None,
                "allow_failure": False,
                "coverage": None,
                "pipeline_id": int(params.get("pipeline_id") or new_id),
                "author": author,
            }
            statuses.append(current)
        if state not in TRANSITIONS.get(current["status"], frozenset()):
            event = EVENT_OF[state]
            raise StatusRefused(
                HTTPStatus.BAD_REQUEST,
                {
                    "message": f"Cannot transition status via :{event} from "
                    f':{current["status"]} (Reason(s): Status cannot transition via "{event}")'
                },
            )
        for key in ("target_url", "description"):
            if key in params:
                current[key] = str(params[key])[:MAX_DESCRIPTION] if params[key] else None
        current["status"] = state
        if state == "running":
            current["started_at"] = when
        if state not in UNFINISHED:
            current["finished_at"] = when
        return dict(current)

    def listed(self, sha: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        statuses = [s for s in self.by_sha.get(sha, []) if s["status"] != "created"]
        if params.get("name"):
            statuses = [s for s in statuses if s["name"] == params["name"]]
        if params.get("ref"):
            statuses = [s for s in statuses if s["ref"] == params["ref"]]
        if str(params.get("all", "")).lower() != "true":
            latest: dict[tuple[str, str], dict[str, Any]] = {}
            for status in statuses:
                latest[(status["name"], status["ref"])] = status
            statuses = list(latest.values())
        return [dict(s) for s in statuses]
