"""The GitLab adapter: read a merge request, post findings, keep the summary note up to date.

Built on python-gitlab 8.x's low-level ``http_*`` calls so every request carries our retry
budget. Notable GitLab rules this module relies on:

* Positions and line codes are built by :mod:`reviewbot.positions` (GitLab's rules are
  there); a position GitLab answers 400 to is :class:`PositionRefusedError`.
* ``/merge_requests/:iid/diffs`` is paginated and exists since GitLab 15.7; older servers only
  have ``/changes``. Entries marked ``too_large`` (or collapsed without a diff) come without a
  diff and are rebuilt from the raw files at base and head (``reviewbot.diff.rebuild_diff``).
* A just-created MR answers ``diff_refs: null`` until its diff is computed: wait and retry.
* Retries are ours, not python-gitlab's: its loop re-sends a POST after a 5xx or a timeout
  that came *after* GitLab stored the write (a duplicate comment), sleeps as long as any
  ``Retry-After`` says, and crashes on the header's HTTP-date form (gitlab/utils.py ``Retry``:
  ``int(headers["Retry-After"])``). Here every call is made once by python-gitlab
  (``max_retries=0``); reads are retried after 429, 5xx and transport errors with a capped
  wait (``Retry-After`` in seconds or as an HTTP date, RFC 9110 section 10.2.3), and a write
  whose answer was lost is looked for on the MR (by its hidden marker) before it is sent again.
* The API answers JSON (raw files: their own type, never HTML; 204 nothing). An HTML page with
  status 200 is a login in front of the API (GitLab's /users/sign_in after a redirect, or a
  single sign-on proxy) or a wrong path behind a proxy: python-gitlab hands such an answer
  back as a ``requests.Response`` from ``http_get``/``http_post`` (client.py: "A requests
  result object if ... the content type is not json") and raises ``GitlabParsingError``
  ("Failed to parse the server message") from ``http_put``/``http_list``. Every answer is
  checked here first (a session hook) and refused as :class:`GitLabNotAPIError`.
* Draft notes are validated only at ``bulk_publish`` and an unplaceable draft is dropped
  silently (DraftNotes::PublishService), so :meth:`GitLabClient.publish_drafts` checks what
  was really published.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import quote

import gitlab
import requests
from gitlab.exceptions import GitlabAuthenticationError, GitlabError, GitlabHttpError

from reviewbot.comments import Marker, MarkerKind, parse_marker
from reviewbot.config import DEFAULT_GITLAB_NOTES_PER_MINUTE
from reviewbot.diff import FileDiff, needs_rebuild, parse_gitlab_diffs, rebuild_diff
from reviewbot.findings import Finding
from reviewbot.positions import DiffRefs, note_position
from reviewbot.redaction import hide_url_password
from reviewbot.retry import backoff_s, retry_after_seconds

__all__ = [
    "BotThread",
    "DiffRefs",
    "DraftPublishReport",
    "GitLabAuthError",
    "GitLabClient",
    "GitLabError",
    "GitLabNotAPIError",
    "GitLabNotFoundError",
    "GitLabSettings",
    "GitLabUnavailableError",
    "MergeRequestSnapshot",
    "PositionRefusedError",
    "RequestCounter",
]

DEFAULT_TIMEOUT_S = 30.0
# GitLab < 16 caps /diffs pages at 30 entries; more is silently cut.
DEFAULT_PER_PAGE = 30
# GitLab's largest page: lists read whole (discussions, award emoji, issues) ask for it.
MAX_PER_PAGE = 100
DEFAULT_MAX_RETRIES = 5
DEFAULT_NOTES_PER_MINUTE = DEFAULT_GITLAB_NOTES_PER_MINUTE
# Up to this many notes go out at once before pacing starts: in any minute at most
# burst + notes_per_minute = 140 notes, well under GitLab's 300.
DEFAULT_NOTE_BURST = 20
DEFAULT_DIFF_REFS_WAIT_S = 30.0
DEFAULT_CONTENTS_CONCURRENCY = 8
DIFF_REFS_FIRST_DELAY_S = 0.1
DIFF_REFS_MAX_DELAY_S = 2.0
SECONDS_PER_MINUTE = 60.0
HTTP_BAD_REQUEST = 400
HTTP_NOT_FOUND = 404
HTTP_TOO_MANY_REQUESTS = 429
HTTP_SERVER_ERROR = 500
# 500-504, and the 52x a CDN in front of GitLab answers when GitLab does not
TRANSIENT_SERVER_STATUSES = frozenset({500, 502, 503, 504, 520, 521, 522, 523, 524})
RETRY_BACKOFF_BASE_S = 0.1
RETRY_BACKOFF_MAX_S = 10.0
# A Retry-After is honoured up to this long; more would stall a review (and a worker) for
# longer than waiting for the next attempt is worth.
RETRY_AFTER_CAP_S = 60.0
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    requests.ConnectionError,
    requests.Timeout,
    requests.exceptions.ChunkedEncodingError,
)
HTML_MEDIA_TYPE = "text/html"
HTTP_SUCCESS = range(200, 300)
NOT_THE_API = (
    "GitLab URL answered text/html (a sign-in page?), not the API: "
    "set REVIEWBOT_GITLAB_URL to the instance root"
)
MAX_ERROR_TEXT = 200
_T = TypeVar("_T")


@dataclass(frozen=True)
class GitLabSettings:
    url: str
    token: str = field(repr=False)
    timeout_s: float = DEFAULT_TIMEOUT_S
    per_page: int = DEFAULT_PER_PAGE
    max_retries: int = DEFAULT_MAX_RETRIES
    notes_per_minute: int = DEFAULT_NOTES_PER_MINUTE
    note_burst: int = DEFAULT_NOTE_BURST
    diff_refs_wait_s: float = DEFAULT_DIFF_REFS_WAIT_S
    contents_concurrency: int = DEFAULT_CONTENTS_CONCURRENCY


@dataclass
class MergeRequestSnapshot:
    project_id: int
    project_path: str
    iid: int
    title: str
    description: str
    web_url: str
    author_username: str
    draft: bool
    source_branch: str
    target_branch: str
    diff_refs: DiffRefs
    files: list[FileDiff]

    def file(self, path: str) -> FileDiff | None:
        return next((f for f in self.files if path in (f.new_path, f.old_path)), None)


@dataclass(frozen=True)
class BotThread:
    discussion_id: str
    note_id: int
    marker: Marker
    resolved: bool
    path: str
    new_line: int | None
    old_line: int | None


@dataclass(frozen=True)
class DraftPublishReport:
    """What bulk publishing really produced: threads by fingerprint, and what GitLab dropped."""

    published: dict[str, BotThread]
    missing: list[Finding]


class GitLabError(Exception):
    """A GitLab call failed; the message is one line and never contains the token."""


class GitLabAuthError(GitLabError):
    pass


class GitLabNotFoundError(GitLabError):
    pass


class GitLabUnavailableError(GitLabError):
    pass


class GitLabNotAPIError(GitLabError):
    """What answers at the GitLab URL is a web page, not the API: the setting is wrong, and
    the same URL gives the same page however often it is asked (reviewbot.errors: bad
    input, never retried)."""


class PositionRefusedError(GitLabError):
    """GitLab answered 400 to a diff note's position (usually the line_code refusal)."""


# ---------------------------------------------------------------------------------------------
# The client


class GitLabClient:
    """One GitLab server, one token. Builds the python-gitlab client lazily (no I/O here)."""

    def __init__(
        self,
        settings: GitLabSettings,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._sleep = sleep
        self._clock = clock
        self._gl: gitlab.Gitlab | None = None
        self._username: str | None = None
        self._pace_lock = threading.Lock()
        self._note_tokens = float(max(settings.note_burst, 1))
        self._tokens_at: float | None = None
        self._last_answer = threading.local()

    def __repr__(self) -> str:
        return f"GitLabClient(url={hide_url_password(self._settings.url)!r})"

    @property
    def url(self) -> str:
        """The GitLab instance's URL (part of what identifies an MR in the database)."""
        return self._settings.url.rstrip("/")

    def close(self) -> None:
        """Close the HTTP session and its pooled connections; a later request opens another."""
        api, self._gl = self._gl, None
        if api is not None:
            api.session.close()

    # ---- low level

    @property
    def _api(self) -> gitlab.Gitlab:
        if self._gl is None:
            self._gl = gitlab.Gitlab(
                self._settings.url,
                private_token=self._settings.token,
                timeout=self._settings.timeout_s,
                per_page=self._settings.per_page,
                retry_transient_errors=False,
            )
            # python-gitlab's errors carry no headers: remember Retry-After per thread.
            self._gl.session.hooks["response"].append(self._remember_retry_after)
            self._gl.session.hooks["response"].append(_refuse_web_page)
        return self._gl

    def _remember_retry_after(self, response: requests.Response, *_: Any, **__: Any) -> None:
        self._last_answer.retry_after = response.headers.get("Retry-After")

    def _once(self) -> dict[str, Any]:
        """python-gitlab options for one attempt: the retrying is ours."""
        return {"max_retries": 0, "obey_rate_limit": False, "retry_transient_errors": False}

    def _get(self, path: str, **query: Any) -> Any:
        return self._retrying(lambda: self._api.http_get(path, query_data=query, **self._once()))

    def _list(self, path: str, **query: Any) -> list[dict[str, Any]]:
        # Gitlab(per_page=...) only applies to managers' list(), so pass it on every page.
        query.setdefault("per_page", self._settings.per_page)
        return self._retrying(
            lambda: list(self._api.http_list(path, query_data=query, get_all=True, **self._once()))
        )

    def _post(self, path: str, data: dict[str, Any] | None = None) -> Any:
        """A POST that may be repeated safely (it creates nothing twice)."""
        return self._retrying(lambda: self._api.http_post(path, post_data=data, **self._once()))

    def _put(self, path: str, data: dict[str, Any]) -> Any:
        return self._retrying(lambda: self._api.http_put(path, post_data=data, **self._once()))

    def _retrying(self, call: Callable[[], _T]) -> _T:
        """``call`` (idempotent), again after a transient failure, ``max_retries`` times."""
        return self._write_once(call, None)

    def _write_once(self, send: Callable[[], _T], landed: Callable[[], _T | None] | None) -> _T:
        """A write that must not happen twice (a note, a discussion, a draft).

        After a transient failure (5xx, 429, timeout, connection lost) the write may have been
        stored before the answer was lost: ``landed()`` looks for it on the MR (by its hidden
        marker) and returns it, else it is sent again; ``max_retries`` times at most. Without
        ``landed`` the call is idempotent and simply made again.
        """
        attempt = 0
        while True:
            try:
                if attempt and landed is not None:
                    found = landed()
                    if found is not None:
                        return found
                return send()
            except (*TRANSPORT_ERRORS, GitlabHttpError) as error:
                if not _transient(error) or attempt >= self._settings.max_retries:
                    raise
            self._sleep(self._wait_before_retry(attempt))
            attempt += 1

    def _wait_before_retry(self, attempt: int) -> float:
        """Exponential backoff (no jitter), with the server's Retry-After (seconds or HTTP
        date) as a floor up to ``RETRY_AFTER_CAP_S`` (reviewbot.retry)."""
        header = getattr(self._last_answer, "retry_after", None)
        self._last_answer.retry_after = None
        return backoff_s(
            attempt,
            base_s=RETRY_BACKOFF_BASE_S,
            cap_s=RETRY_BACKOFF_MAX_S,
            retry_after_s=retry_after_seconds(header, now=datetime.now(UTC)),
            retry_after_cap_s=RETRY_AFTER_CAP_S,
        )

    @contextmanager
    def _translated(self, action: str, not_found: str | None = None) -> Iterator[None]:
        """Map python-gitlab/requests errors to one-line GitLabErrors (no token or password)."""
        url = hide_url_password(self._settings.url)
        try:
            yield
        except GitlabAuthenticationError as error:
            raise GitLabAuthError(f"token rejected by {url}") from error
        except GitlabHttpError as error:
            code = error.response_code or 0
            if code == HTTP_NOT_FOUND and not_found:
                raise GitLabNotFoundError(not_found) from error
            if code >= HTTP_SERVER_ERROR or code == HTTP_TOO_MANY_REQUESTS:
                raise GitLabUnavailableError(
                    f"GitLab at {url} answered {code} while {action}, "
                    f"after {self._settings.max_retries} retries"
                ) from error
            raise GitLabError(f"{action} failed: {code} {_short(error)}") from error
        except GitlabError as error:
            raise GitLabError(f"{action} failed: {_short(error)}") from error
        except TRANSPORT_ERRORS as error:
            raise GitLabUnavailableError(
                f"GitLab at {url} is unreachable ({type(error).__name__}) while {action}"
            ) from error

    def _pace_note(self) -> None:
        """Token bucket: ``note_burst`` notes at once, then ``notes_per_minute`` at most."""
        rate = max(self._settings.notes_per_minute, 1) / SECONDS_PER_MINUTE
        capacity = float(max(self._settings.note_burst, 1))
        with self._pace_lock:
            now = self._clock()
            if self._tokens_at is not None:
                self._note_tokens = min(
                    capacity, self._note_tokens + (now - self._tokens_at) * rate
                )
            self._tokens_at = now
            self._note_tokens -= 1.0
            wait = -self._note_tokens / rate if self._note_tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)

    @staticmethod
    def _mr_path(project_id: int | str, iid: int) -> str:
        return f"/projects/{quote(str(project_id), safe='')}/merge_requests/{iid}"

    # ---- reading

    def bot_username(self) -> str:
        """The username the token belongs to (cached)."""
        if self._username is None:
            with self._translated("reading the current user"):
                self._username = str(self._get("/user")["username"])
        return self._username

    def snapshot(self, project: str | int, iid: int) -> MergeRequestSnapshot:
        """The MR, its latest diff version's SHAs and every file's diff."""
        missing = f"merge request !{iid} not found in {project}"
        mr_path = self._mr_path(project, iid)
        with self._translated(f"reading merge request !{iid}", not_found=missing):
            mr = self._mr_with_diff_refs(mr_path, iid, project)
            project_path = str(self._get(f"/projects/{mr['project_id']}")["path_with_namespace"])
            refs = self._latest_refs(mr_path, mr["diff_refs"])
            entries = self._diff_entries(mr_path)
        files = [self._file_diff(mr["project_id"], refs, entry) for entry in entries]
        return MergeRequestSnapshot(
            project_id=int(mr["project_id"]),
            project_path=project_path,
            iid=int(mr["iid"]),
            title=str(mr.get("title") or ""),
            description=str(mr.get("description") or ""),
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
            refs = mr.get("diff_refs") or {}
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
        versions = self._retrying(
            lambda: list(
                self._api.http_list(
                    f"{mr_path}/versions", query_data={"page": 1}, get_all=False, **self._once()
                )
            )
        )
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
        """Raw files at ``sha``, fetched concurrently; a missing file is absent from the result."""
        workers = max(1, min(self._settings.contents_concurrency, len(paths)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gitlab-raw") as pool:
            results = pool.map(lambda p: (p, self._raw_file(project_id, sha, p)), paths)
            return {path: text for path, text in results if text is not None}

    def _raw_file(self, project_id: int, sha: str, path: str) -> str | None:
        url = f"/projects/{project_id}/repository/files/{quote(path, safe='')}/raw"
        with self._translated(f"reading {path} at {sha[:12]}"):
            try:
                response = self._retrying(
                    lambda: self._api.http_get(
                        url, query_data={"ref": sha}, raw=True, **self._once()
                    )
                )
            except GitlabHttpError as error:
                if error.response_code == HTTP_NOT_FOUND:
                    return None
                raise
        content = getattr(response, "content", b"")
        return content.decode("utf-8", errors="replace")

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

    # ---- writing

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
                    lambda: _thread_ids(
                        self._api.http_post(
                            path, post_data={"body": body, "position": position}, **self._once()
                        )
                    ),
                    lambda: self._finding_thread(snapshot, finding.fingerprint),
                )
        except GitLabError as error:
            cause = error.__cause__
            if isinstance(cause, GitlabHttpError) and cause.response_code == HTTP_BAD_REQUEST:
                raise PositionRefusedError(
                    f"GitLab refused the position {finding.path}:{finding.side}:{finding.line}: "
                    f"{_short(cause)}"
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
                lambda: int(
                    self._api.http_post(notes_path, post_data={"body": marked}, **self._once())[
                        "id"
                    ]
                ),
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
                lambda: self._api.http_post(
                    f"{path}/notes", post_data={"body": reply}, **self._once()
                ),
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
            answer = self._api.http_post(notes_path, post_data={"body": body}, **self._once())
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
                    lambda body=body, position=position: self._api.http_post(
                        drafts_path,
                        post_data={"note": body, "position": position},
                        **self._once(),
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

    # ---- what `reviewbot doctor` asks (read-only)

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

    # ---- reading what became of the bot's comments (feedback sync) and the report issue

    @contextmanager
    def counting_requests(self) -> Iterator[RequestCounter]:
        """Count every HTTP answer this client gets inside the block (pages and retries too)."""
        counter = RequestCounter()
        hooks = self._api.session.hooks["response"]
        hooks.append(counter.hook)
        try:
            yield counter
        finally:
            hooks.remove(counter.hook)

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

    def compare(self, project_id: int, from_sha: str, to_sha: str) -> list[FileDiff]:
        """What changed from one commit to another (``git diff from to``, not from the merge
        base: ``straight``), parsed; files GitLab sends without a diff are rebuilt
        (https://docs.gitlab.com/api/repositories/#compare-branches-tags-or-commits)."""
        path = f"/projects/{quote(str(project_id), safe='')}/repository/compare"
        with self._translated(f"comparing {from_sha[:12]} with {to_sha[:12]}"):
            answer = self._get(path, **{"from": from_sha, "to": to_sha, "straight": "true"})
        refs = DiffRefs(from_sha, from_sha, to_sha)
        return [self._file_diff(project_id, refs, entry) for entry in answer.get("diffs") or []]

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
                    lambda: self._api.http_post(
                        path,
                        post_data={"title": title, "description": description},
                        **self._once(),
                    ),
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


class RequestCounter:
    """HTTP answers counted by :meth:`GitLabClient.counting_requests`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def hook(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            self.count += 1


# ---------------------------------------------------------------------------------------------
# Helpers


def _refuse_web_page(response: requests.Response, *_: Any, **__: Any) -> None:
    """A success answered with HTML is not the API (see the module notes): refuse it before
    python-gitlab parses it or hands it back as if it were data."""
    media_type = response.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
    if response.status_code in HTTP_SUCCESS and media_type == HTML_MEDIA_TYPE:
        response.close()
        raise GitLabNotAPIError(NOT_THE_API)


def _transient(error: BaseException) -> bool:
    """Worth another try: a transport error, 429, or a 5xx from GitLab or a proxy."""
    if isinstance(error, GitlabHttpError):
        code = error.response_code or 0
        return code == HTTP_TOO_MANY_REQUESTS or code in TRANSIENT_SERVER_STATUSES
    return isinstance(error, TRANSPORT_ERRORS)


def _thread_ids(discussion: Mapping[str, Any]) -> tuple[str, int]:
    return str(discussion["id"]), int(discussion["notes"][0]["id"])


def write_marker(write_id: str) -> str:
    """A hidden marker that makes one write recognisable on the MR."""
    return f"<!-- reviewbot:write id={write_id} -->"


def _short(error: GitlabError) -> str:
    message = error.error_message
    if isinstance(message, bytes):
        message = message.decode("utf-8", errors="replace")
    text = " ".join(str(message).split())
    return text[:MAX_ERROR_TEXT]


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


def _is_summary_by(note: Mapping[str, Any], username: str) -> bool:
    if (note.get("author") or {}).get("username") != username:
        return False
    marker = parse_marker(str(note.get("body") or ""))
    return marker is not None and marker.kind is MarkerKind.SUMMARY
