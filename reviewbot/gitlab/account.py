"""What ``reviewbot doctor`` asks GitLab about the token (version, user, scopes, role), and
a member's role on a project, cached (who may change what: ``reviewbot.permission``).

``GET /projects/:id/members/all/:user_id`` (https://docs.gitlab.com/api/members/, "Get a member
of a group or project, including inherited and invited members") answers the member with its
``access_level`` (30 is Developer) or 404 for a non-member. A role is cached for
:data:`MEMBER_ROLE_TTL_S` per client (the process holds one per GitLab URL): a burst of
``/reviewbot learn`` or ``ignore`` notes asks GitLab once, and a role taken away stops counting
within minutes. Only an ``active`` membership counts (an invitation awaiting acceptance does
not).

Owns: :class:`AccountReader` (read-only). Must not: read or write merge requests.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import quote

from reviewbot.gitlab.connection import GitLabConnection, GitLabNotFoundError, GitLabSettings
from reviewbot.roles import DEVELOPER_ACCESS_LEVEL, ROLE_NAMES

__all__ = ["DEVELOPER_ACCESS_LEVEL", "MEMBER_ROLE_TTL_S", "ROLE_NAMES", "AccountReader"]

MEMBER_ROLE_TTL_S = 300.0  # how long a member's role is trusted without asking again
ACTIVE_MEMBERSHIP = "active"


class AccountReader(GitLabConnection):
    """The token and the instance, as ``reviewbot doctor`` checks them; members' roles."""

    def __init__(self, settings: GitLabSettings, **options: Any) -> None:
        super().__init__(settings, **options)
        self._roles: dict[tuple[str, int], tuple[float, int | None]] = {}
        self._roles_lock = threading.Lock()

    def version(self) -> str:
        """The GitLab version (``GET /version``, which needs a valid token)."""
        with self._translated("reading the GitLab version"):
            return str(self._get("/version")["version"])

    def current_user(self) -> dict[str, Any]:
        """The token's user (``GET /user``): ``id``, ``username``, ``bot`` (access tokens)."""
        with self._translated("reading the current user"):
            return dict(self._get("/user"))

    def token_info(self) -> dict[str, Any]:
        """The token's own record (``GET /personal_access_tokens/self``, also for project and
        group access tokens): ``scopes``, ``expires_at``, ``name``."""
        missing = "GitLab has no record of this token (not a personal, project or group token)"
        with self._translated("reading the token's scopes", not_found=missing):
            return dict(self._get("/personal_access_tokens/self"))

    def project_access_level(self, project: str | int, user_id: int) -> int | None:
        """The user's role on ``project``, inherited ones included (``GET
        /projects/:id/members/all/:user_id``: 30 is Developer); None when not a member."""
        project_path = f"/projects/{quote(str(project), safe='')}"
        missing = f"project {project} not found (or the token's user cannot see it)"
        with self._translated(f"reading project {project}", not_found=missing):
            self._get(project_path)
        try:
            with self._translated(f"reading the members of {project}", not_found="no member"):
                member = self._get(f"{project_path}/members/all/{user_id}")
        except GitLabNotFoundError:
            return None
        return int(member["access_level"])

    def project_identity(self, project: str | int) -> dict[str, Any]:
        """A project's ``id``, ``path_with_namespace`` and group (``namespace.full_path``)
        (``GET /projects/:id``, by id or path)."""
        missing = f"project {project} not found (or the token's user cannot see it)"
        with self._translated(f"reading project {project}", not_found=missing):
            found = self._get(f"/projects/{quote(str(project), safe='')}")
        namespace = found.get("namespace") or {}
        return {
            "id": int(found["id"]),
            "path_with_namespace": str(found["path_with_namespace"]),
            "group_path": namespace.get("full_path") if namespace.get("kind") == "group" else None,
        }

    def member_access_level(self, project: str | int, user_id: int) -> int | None:
        """The user's role on ``project``, inherited ones included; None when not an active
        member. Cached for MEMBER_ROLE_TTL_S (module notes); errors other than 404 raise."""
        key = (str(project), int(user_id))
        now = self._clock()
        with self._roles_lock:
            cached = self._roles.get(key)
        if cached is not None and now - cached[0] < MEMBER_ROLE_TTL_S:
            return cached[1]
        level = self._fetch_member_access_level(project, user_id)
        with self._roles_lock:
            self._roles[key] = (now, level)
        return level

    def _fetch_member_access_level(self, project: str | int, user_id: int) -> int | None:
        path = f"/projects/{quote(str(project), safe='')}/members/all/{int(user_id)}"
        try:
            with self._translated(f"reading the role of user {user_id} on {project}", "no member"):
                member = self._get(path)
        except GitLabNotFoundError:
            return None
        if member.get("membership_state", ACTIVE_MEMBERSHIP) != ACTIVE_MEMBERSHIP:
            return None
        return int(member["access_level"])
