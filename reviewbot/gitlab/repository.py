"""Reading a project's repository at a commit through the API: its tree and its raw files.

The fallback source of :mod:`reviewbot.repo.api_view` when git cannot fetch the commit:

* ``GET /projects/:id/repository/tree?recursive=true&ref=SHA`` lists every entry (``id``,
  ``name``, ``type`` ``blob``/``tree``/``commit``, ``path``, ``mode``: ``120000`` a symlink,
  type ``commit`` a submodule; https://docs.gitlab.com/api/repositories/#list-repository-tree).
  It is asked with ``pagination=keyset`` (offset pagination of this endpoint is deprecated):
  each page's ``Link: <…page_token=…>; rel="next"`` is followed; a GitLab that ignores the
  parameter answers offset pages, whose ``next`` link is followed just the same.
* ``GET /projects/:id/repository/files/:path/raw?ref=SHA`` gives one file's bytes; 404 is a
  file that is not there (https://docs.gitlab.com/api/repository_files/#get-raw-file-from-repository).

Owns: :class:`RepositoryReader`, those two calls and the project's own record (its path and
default branch, for ``reviewbot doctor``'s fetch). Must not: decide what a path may be (the
view's tree check does) or decode a file's bytes.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from gitlab.exceptions import GitlabHttpError

from reviewbot.gitlab.connection import HTTP_NOT_FOUND, MAX_PER_PAGE, GitLabConnection

__all__ = ["RepositoryReader"]

SHORT_SHA = 12


class RepositoryReader(GitLabConnection):
    """A project's tree and raw files at a commit."""

    def repository_tree(
        self, project_id: int | str, sha: str, folder: str = "", *, recursive: bool = True
    ) -> list[dict[str, Any]] | None:
        """The entries of the tree at ``sha`` under ``folder`` (the root: ""), every level
        below it or only its own, all pages (blobs, trees, submodules). A folder that is not
        there is an empty list; None when GitLab lists no tree at all: a 404 for the root (a
        proxy that blocks the endpoint, a narrower token, an older GitLab, a commit it lacks)."""
        url = f"/projects/{quote(str(project_id), safe='')}/repository/tree"
        query: dict[str, Any] = {
            "recursive": "true" if recursive else "false",
            "ref": sha,
            "pagination": "keyset",
            "per_page": MAX_PER_PAGE,
        }
        if folder:
            query["path"] = folder
        with self._translated(f"listing the tree at {sha[:SHORT_SHA]}"):
            try:
                return self._list(url, **query)
            except GitlabHttpError as error:
                if error.response_code == HTTP_NOT_FOUND:
                    return [] if folder else None
                raise

    def project(self, project: int | str) -> dict[str, Any]:
        """The project (``path_with_namespace``, ``default_branch``, ...)."""
        missing = f"project {project} not found (or the token's user cannot see it)"
        with self._translated(f"reading project {project}", not_found=missing):
            return self._get(f"/projects/{quote(str(project), safe='')}")

    def raw_file(
        self, project_id: int | str, sha: str, path: str, *, max_bytes: int | None = None
    ) -> bytes | None:
        """The bytes of the file at ``path`` at ``sha``, or None when GitLab has none there.
        With ``max_bytes``, at most ``max_bytes + 1`` of them (more means a larger file)."""
        project = quote(str(project_id), safe="")
        url = f"/projects/{project}/repository/files/{quote(path, safe='')}/raw"
        with self._translated(f"reading {path} at {sha[:SHORT_SHA]}"):
            try:
                return self._raw(url, max_bytes=max_bytes, ref=sha)
            except GitlabHttpError as error:
                if error.response_code == HTTP_NOT_FOUND:
                    return None
                raise
