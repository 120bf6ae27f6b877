"""What accuracy needs from GitLab: what became of the bot's comments, and the report issue.

Owns: :class:`AccuracyReader`: the MR's state, its discussions and award emoji for feedback
sync (``reviewbot.feedback``), and the weekly report's issue (``reviewbot.report.document``:
found by its marker, created once, edited in place). Must not: post on a merge request.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from gitlab.exceptions import GitlabHttpError

from reviewbot.gitlab.connection import HTTP_NOT_FOUND, MAX_PER_PAGE, GitLabConnection

__all__ = ["AccuracyReader"]


class AccuracyReader(GitLabConnection):
    """Feedback sync's reads and the report issue."""

    def merge_request(self, project_id: int | str, iid: int) -> dict[str, Any]:
        """The MR as https://docs.gitlab.com/api/merge_requests/#get-single-mr gives it
        (``state``, ``merged_at``, ``web_url``...)."""
        missing = f"merge request !{iid} not found in {project_id}"
        with self._translated(f"reading merge request !{iid}", not_found=missing):
            return dict(self._get(self._mr_path(project_id, iid)))

    def discussions(self, project_id: int | str, iid: int) -> list[dict[str, Any]]:
        """Every discussion of the MR with its notes, all pages
        (https://docs.gitlab.com/api/discussions/#list-project-merge-request-discussion-items)."""
        missing = f"merge request !{iid} not found in {project_id}"
        with self._translated(f"listing discussions of !{iid}", not_found=missing):
            return self._list(
                f"{self._mr_path(project_id, iid)}/discussions", per_page=MAX_PER_PAGE
            )

    def note_awards(self, project_id: int | str, iid: int, note_id: int) -> list[dict[str, Any]]:
        """Award emoji on one MR note, all pages; [] when the note is gone
        (https://docs.gitlab.com/api/emoji_reactions/#list-a-comments-emoji-reactions)."""
        path = f"{self._mr_path(project_id, iid)}/notes/{note_id}/award_emoji"
        with self._translated(f"listing reactions to note {note_id}"):
            try:
                return self._list(path, per_page=MAX_PER_PAGE)
            except GitlabHttpError as error:
                if error.response_code == HTTP_NOT_FOUND:
                    return []
                raise

    def find_issue(self, project: int | str, title: str, marker: str) -> dict[str, Any] | None:
        """The oldest issue of ``project`` titled exactly ``title`` whose description holds
        ``marker`` (https://docs.gitlab.com/api/issues/#list-project-issues), or None."""
        path = f"/projects/{quote(str(project), safe='')}/issues"
        with self._translated(
            f"searching the issues of {project}", not_found=f"project {project} not found"
        ):
            issues = self._list(
                path, search=title, state="all", per_page=MAX_PER_PAGE, **{"in": "title"}
            )
        matching = [
            issue
            for issue in issues
            if issue.get("title") == title and marker in str(issue.get("description") or "")
        ]
        return min(matching, key=lambda issue: int(issue["iid"]), default=None)

    def create_issue(
        self, project: int | str, title: str, description: str, marker: str
    ) -> dict[str, Any]:
        """Open an issue (https://docs.gitlab.com/api/issues/#new-issue) whose description
        holds ``marker``; one whose answer was lost is found by it, not opened twice."""
        path = f"/projects/{quote(str(project), safe='')}/issues"
        with self._translated(
            f"creating an issue in {project}", not_found=f"project {project} not found"
        ):
            return dict(
                self._write_once(
                    lambda: self._create(path, {"title": title, "description": description}),
                    lambda: self.find_issue(project, title, marker),
                )
            )

    def update_issue(self, project: int | str, issue_iid: int, description: str) -> dict[str, Any]:
        """Replace an issue's description (https://docs.gitlab.com/api/issues/#edit-an-issue)."""
        path = f"/projects/{quote(str(project), safe='')}/issues/{issue_iid}"
        with self._translated(
            f"editing issue #{issue_iid} of {project}",
            not_found=f"issue #{issue_iid} not found in {project}",
        ):
            return dict(self._put(path, {"description": description}))
