"""Reading a merge request: its diff version, its files, the bot's threads, a comparison.

Owns: :class:`MergeRequestReader`: the snapshot a review starts from, raw files at a SHA,
``compare`` for incremental reviews, and the bot's threads (the truth for idempotency).
Must not: write to GitLab (``reviewbot.gitlab.notes`` does).

* SHAs come from the MR's latest diff version (``/versions``), as positions need them.
* ``/merge_requests/:iid/diffs`` is paginated and exists since GitLab 15.7; older servers only
  have ``/changes``. Entries marked ``too_large`` (or collapsed without a diff) come without a
  diff and are rebuilt from the raw files at base and head (``reviewbot.diff.rebuild_diff``).
* A just-created MR answers ``diff_refs: null`` until its diff is computed: wait and retry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

from gitlab.exceptions import GitlabHttpError

from reviewbot.comments import MarkerKind, parse_marker
from reviewbot.diff import FileDiff, needs_rebuild, parse_gitlab_diffs, rebuild_diff
from reviewbot.gitlab.connection import (
    HTTP_NOT_FOUND,
    GitLabAuthError,
    GitLabConnection,
    GitLabError,
    GitLabNotFoundError,
)
from reviewbot.linked_issues import Link, LinkedIssue, LinkedIssues, merged
from reviewbot.marked_block import without_block
from reviewbot.mergerequest import BotThread, DiffRefs, MergeRequestSnapshot
from reviewbot.retry import backoff_s

__all__ = ["BotThread", "MergeRequestReader", "MergeRequestSnapshot"]

DIFF_REFS_FIRST_DELAY_S = 0.1
DIFF_REFS_MAX_DELAY_S = 2.0


class MergeRequestReader(GitLabConnection):
    """What a review reads of one MR (``reviewbot.mr``, ``reviewbot.ci``, ``reviewbot.publish``)."""

    def snapshot(self, project: str | int, iid: int) -> MergeRequestSnapshot:
        """The MR, its latest diff version's SHAs and every file's diff."""
        missing = f"merge request !{iid} not found in {project}"
        mr_path = self._mr_path(project, iid)
        action = f"reading merge request !{iid}"
        with self._translated(action, not_found=missing), self._answer_fields(action):
            mr = self._mr_with_diff_refs(mr_path, iid, project)
            project_path = str(self._get(f"/projects/{mr['project_id']}")["path_with_namespace"])
            refs = self._latest_refs(mr_path, mr["diff_refs"])
            entries = self._diff_entries(mr_path)
        with self._translated(action), self._answer_fields(action):
            files = [self._file_diff(mr["project_id"], refs, entry) for entry in entries]
            return self._snapshot_of(mr, project_path, refs, files)

    @staticmethod
    def _snapshot_of(
        mr: Mapping[str, Any], project_path: str, refs: DiffRefs, files: list[FileDiff]
    ) -> MergeRequestSnapshot:
        return MergeRequestSnapshot(
            project_id=int(mr["project_id"]),
            project_path=project_path,
            iid=int(mr["iid"]),
            title=str(mr.get("title") or ""),
            # the author's text: the walkthrough's block is the bot's own (reviewbot.marked_block)
            description=without_block(str(mr.get("description") or "")),
            web_url=str(mr.get("web_url") or ""),
            author_username=str((mr.get("author") or {}).get("username", "")),
            draft=bool(mr.get("draft", mr.get("work_in_progress", False))),
            source_branch=str(mr.get("source_branch") or ""),
            target_branch=str(mr.get("target_branch") or ""),
            diff_refs=refs,
            files=files,
        )

    def _mr_with_diff_refs(self, mr_path: str, iid: int, project: str | int) -> dict[str, Any]:
        started = self._clock()
        tries = 0
        while True:
            delay = backoff_s(tries, base_s=DIFF_REFS_FIRST_DELAY_S, cap_s=DIFF_REFS_MAX_DELAY_S)
            mr = self._get(mr_path)
            refs = mr["diff_refs"] or {}  # always there; null until the diff is ready
            if all(refs.get(key) for key in ("base_sha", "start_sha", "head_sha")):
                return dict(mr)
            if self._clock() - started + delay > self._settings.diff_refs_wait_s:
                raise GitLabError(
                    f"merge request !{iid} in {project} has no diff_refs after "
                    f"{self._settings.diff_refs_wait_s:.0f} s: GitLab is still preparing its diff"
                )
            self._sleep(delay)
            tries += 1

    def _latest_refs(self, mr_path: str, fallback: Mapping[str, str]) -> DiffRefs:
        versions = self._list(f"{mr_path}/versions", page=1)
        latest = next(iter(versions), None)  # newest first
        if latest is None:
            return DiffRefs(fallback["base_sha"], fallback["start_sha"], fallback["head_sha"])
        return DiffRefs(
            str(latest["base_commit_sha"]),
            str(latest["start_commit_sha"]),
            str(latest["head_commit_sha"]),
        )

    def _diff_entries(self, mr_path: str) -> list[dict[str, Any]]:
        try:
            return self._list(f"{mr_path}/diffs")
        except GitlabHttpError as error:
            if error.response_code != HTTP_NOT_FOUND:
                raise
        # GitLab < 15.7: no /diffs endpoint; /changes carries them all in one answer.
        return list(self._get(f"{mr_path}/changes").get("changes") or [])

    def _file_diff(self, project_id: int, refs: DiffRefs, entry: dict[str, Any]) -> FileDiff:
        if not needs_rebuild(entry):
            return parse_gitlab_diffs([entry])[0]
        old = (
            {}
            if entry.get("new_file")
            else self.file_contents(project_id, refs.base_sha, [str(entry["old_path"])])
        )
        new = (
            {}
            if entry.get("deleted_file")
            else self.file_contents(project_id, refs.head_sha, [str(entry["new_path"])])
        )
        return rebuild_diff(
            entry, old.get(str(entry["old_path"]), ""), new.get(str(entry["new_path"]), "")
        )

    def file_contents(self, project_id: int, sha: str, paths: Sequence[str]) -> dict[str, str]:
        """Raw files at ``sha`` as text (bytes that are not UTF-8 replaced), fetched
        concurrently; a missing file is absent from the result."""
        found = self.file_bytes(project_id, sha, paths)
        return {path: data.decode("utf-8", errors="replace") for path, data in found.items()}

    def file_bytes(self, project_id: int, sha: str, paths: Sequence[str]) -> dict[str, bytes]:
        """Raw files at ``sha`` as GitLab holds them, fetched concurrently; a missing file is
        absent from the result."""
        workers = max(1, min(self._settings.contents_concurrency, len(paths)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gitlab-raw") as pool:
            results = pool.map(lambda p: (p, self._raw_file(project_id, sha, p)), paths)
            return {path: data for path, data in results if data is not None}

    def _raw_file(self, project_id: int, sha: str, path: str) -> bytes | None:
        url = f"/projects/{project_id}/repository/files/{quote(path, safe='')}/raw"
        with self._translated(f"reading {path} at {sha[:12]}"):
            try:
                content = self._raw(url, ref=sha)
            except GitlabHttpError as error:
                if error.response_code == HTTP_NOT_FOUND:
                    return None
                raise
        return content

    def bot_threads(self, project_id: int, iid: int) -> list[BotThread]:
        """Every discussion the bot started with a finding marker (all pages)."""
        me = self.bot_username()
        with self._translated(f"listing discussions of !{iid}"):
            discussions = self._list(f"{self._mr_path(project_id, iid)}/discussions")
        threads = []
        for discussion in discussions:
            thread = _bot_thread(discussion, me)
            if thread is not None:
                threads.append(thread)
        return threads

    def linked_issues(self, project_id: int, iid: int) -> LinkedIssues:
        """The issues MR ``iid`` closes, then its related ones (all pages), as far as the
        token can read them (GitLab leaves out confidential issues it may not see). An endpoint
        this GitLab does not have (404: ``related_issues`` came with GitLab 17.1), or one that
        fails otherwise (a 403, a 5xx after the retries), is said in ``unavailable``, not
        raised: the issues are context the review can do without."""
        unavailable = []
        found: dict[Link, list[LinkedIssue]] = {}
        for link, endpoint in ((Link.CLOSES, "closes_issues"), (Link.RELATED, "related_issues")):
            missing = f"{endpoint} is not available on this GitLab"
            try:
                with self._translated(f"reading {endpoint} of !{iid}", not_found=missing):
                    answer = self._list(f"{self._mr_path(project_id, iid)}/{endpoint}")
                    found[link] = [_linked_issue(item, link) for item in answer]
            except GitLabNotFoundError:
                unavailable.append(missing)
            except GitLabAuthError:
                raise
            except GitLabError as error:  # context the review can do without: said, not raised
                unavailable.append(f"{endpoint} could not be read: {error}")
        issues = merged(found.get(Link.CLOSES, []), found.get(Link.RELATED, []))
        return LinkedIssues(tuple(issues), tuple(unavailable))

    def compare(self, project_id: int, from_sha: str, to_sha: str) -> list[FileDiff]:
        """What changed from one commit to another (``git diff from to``, not from the merge
        base: ``straight``), parsed; files GitLab sends without a diff are rebuilt
        (https://docs.gitlab.com/api/repositories/#compare-branches-tags-or-commits)."""
        path = f"/projects/{quote(str(project_id), safe='')}/repository/compare"
        with self._translated(f"comparing {from_sha[:12]} with {to_sha[:12]}"):
            answer = self._get(path, **{"from": from_sha, "to": to_sha, "straight": "true"})
        refs = DiffRefs(from_sha, from_sha, to_sha)
        return [self._file_diff(project_id, refs, entry) for entry in answer.get("diffs") or []]


def _linked_issue(item: Mapping[str, Any], link: Link) -> LinkedIssue:
    """One issue of ``closes_issues`` / ``related_issues`` (API::Entities::Issue). A Jira
    issue (an external tracker) has only ``id`` and ``title``: it gets iid 0 and no text."""
    labels = item.get("labels") or []
    return LinkedIssue(
        iid=int(item.get("iid") or 0),
        title=str(item["title"]),
        description=str(item.get("description") or ""),
        labels=tuple(
            str(label.get("name", "")) if isinstance(label, dict) else str(label)
            for label in labels
        ),
        confidential=bool(item.get("confidential")),
        state=str(item.get("state") or ""),
        web_url=str(item.get("web_url") or ""),
        link=link,
    )


def _bot_thread(discussion: Mapping[str, Any], username: str) -> BotThread | None:
    notes = discussion.get("notes") or []
    if not notes:
        return None
    first = notes[0]
    if (first.get("author") or {}).get("username") != username:
        return None
    marker = parse_marker(str(first.get("body") or ""))
    if marker is None or marker.kind is not MarkerKind.FINDING:
        return None
    position = first.get("position") or {}
    return BotThread(
        discussion_id=str(discussion["id"]),
        note_id=int(first["id"]),
        marker=marker,
        resolved=bool(first.get("resolved", False)),
        path=str(position.get("new_path") or marker.path),
        new_line=position.get("new_line"),
        old_line=position.get("old_line"),
    )
