"""What ``reviewbot doctor`` asks GitLab about the token: version, user, scopes, role.

Owns: :class:`AccountReader` (read-only). Must not: read or write merge requests.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from reviewbot.gitlab.connection import GitLabConnection, GitLabNotFoundError

__all__ = ["AccountReader"]


class AccountReader(GitLabConnection):
    """The token and the instance, as ``reviewbot doctor`` checks them."""

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
