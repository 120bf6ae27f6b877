"""A stateful fake GitLab (REST API v4) on 127.0.0.1, for adapter and end-to-end tests.

Merge requests are built from a REAL local git repository (subprocess ``git``), so diffs,
SHAs and raw files are exactly what git produces. The fake answers with GitLab's JSON shapes,
status codes, error texts and pagination headers, and it validates diff-note positions the
way GitLab does: a position must name a line that exists in the diff of one of the MR's
versions, else 400 ``Note {:line_code=>["can't be blank", "must be a valid line code"]}``.

It deliberately does NOT import ``reviewbot``: its small diff parser is its own, so a bug in
the product's parser cannot hide behind a fake that shares it.

References (checked against gitlabhq source):
- app/models/diff_note.rb: ``validates :line_code, presence: true, line_code: true``; the
  line code comes from ``position.line_code(repository)`` (lib/gitlab/diff/position.rb).
- lib/gitlab/diff/file.rb ``line_for_position``: a line matches when ``line.old_line ==
  pos.old_line && line.new_line == pos.new_line``; lib/gitlab/diff/line.rb: an added line has
  no old_line, a removed line no new_line, a context line both.
- lib/gitlab/diff/parser.rb: old/new counters (``old_pos``/``new_pos``) used in line codes.
- lib/api/draft_notes.rb, app/models/draft_note.rb: drafts are stored without line
  validation; an invalid one is only refused when published.
- Rate limiting (doc/administration/settings/user_and_ip_rate_limits.md): 429, plain text
  body ``Retry later``, ``Retry-After`` header.
- Tokens (https://docs.gitlab.com/api/personal_access_tokens/): ``GET
  /personal_access_tokens/self`` answers the token's own record (id, name, revoked,
  created_at, scopes, user_id, last_used_at, active, expires_at), for personal, project and
  group access tokens alike. A token without the ``api`` scope gets 403 ``insufficient_scope``
  on every write, and without ``read_api`` (or ``api``) on every read but ``/user``,
  ``/version`` and its own record (lib/api/helpers.rb, Gitlab::Auth scopes).
- Members (https://docs.gitlab.com/api/members/): ``GET /projects/:id/members/all/:user_id``
  answers the member with its ``access_level`` (10 Guest, 20 Reporter, 30 Developer, 40
  Maintainer, 50 Owner), 404 ``Not found`` for a user who is not one. Membership is recorded
  (:meth:`FakeGitLab.add_member`) but not enforced on the other routes.
- lib/api/entities/note.rb: an MR DiffNote carries ``suggestions`` (lib/api/entities/
  suggestion.rb: id, from_line, to_line, appliable, applied, from_content, to_content);
  applying one (app/services/suggestions/apply_service.rb) resolves its thread by the user.
  A reply in a diff thread is a DiffNote on the thread's position, so its suggestions apply to
  the thread's line; one on a position older than the MR's latest version is outdated
  (``appliable`` false, as Suggestion#appliable? says for an outdated diff note).
- lib/api/users.rb ``GET /users/:id``: the user with its ``bot`` flag (access-token bots and
  other bot users are ``bot: true``).
- lib/api/repositories.rb ``GET /projects/:id/repository/compare`` (``from``, ``to``,
  ``straight``: false compares from the merge base, as ``git diff from...to``).
- lib/api/merge_requests.rb: ``GET /merge_requests/:iid/closes_issues`` (the issues the
  description's closing pattern names, "Closes #12", as the token may see them: a confidential
  issue only for its author or a member from Reporter up), ``GET .../related_issues`` (every
  issue referenced in the title, description or notes; since GitLab 17.1, before it the
  route's 404). Both paginated, API::Entities::Issue fields.
- lib/api/issues.rb: ``GET/POST /projects/:id/issues`` (``search`` in title and description,
  or ``in=title``; ``state``), ``GET/PUT /projects/:id/issues/:issue_iid``.
- lib/api/commit_statuses.rb: ``POST /projects/:id/statuses/:sha`` and ``GET
  /projects/:id/repository/commits/:sha/statuses``, with GitLab's state machine and its 400
  ``Cannot transition status via ...`` (``tests.fakes.commit_statuses``).
- lib/api/ci/pipelines.rb, jobs.rb, job_artifacts.rb: ``GET /projects/:id/pipelines``,
  ``GET /projects/:id/pipelines/:pipeline_id/jobs`` and ``GET
  /projects/:id/jobs/:job_id/artifacts/*artifact_path`` (``tests.fakes.pipelines``).

- lib/api/repositories.rb ``GET /projects/:id/repository/tree`` (``ref``, ``path``,
  ``recursive``, ``per_page``; ``pagination=keyset`` with ``page_token``: each page's Link
  header has only a ``rel="next"`` link, no X-Total headers; without it offset pages). Entries:
  ``id, name, type (blob|tree|commit), path, mode`` (``120000`` a symlink, ``commit`` a
  submodule); a path or ref that is not there: 404 ``Tree Not Found``.
- Git over HTTP (``/<namespace>/<project>.git/...``): ``tests/fakes/git_http.py``, a real
  ``git http-backend`` behind GitLab's basic-auth check.

GitLab's API itself answers every success with ``application/json`` (a raw file: the file's
own type; 204: nothing). What stands in front of it may not: :meth:`FakeGitLab.answer_with`
makes requests get any status, content type and body without reaching the API (a sign-in
page, a proxy's text/plain page, a body cut short, JSON of another service).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import itertools
import json
import re
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import formatdate
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from tests.fakes.commit_statuses import CommitStatuses, StatusRefused
from tests.fakes.git_http import (
    ACCESS_DENIED,
    GIT,
    GIT_PATH,
    GIT_SCOPES,
    PROJECT_NOT_FOUND_TEXT,
    asks_for_objects,
    basic_auth_password,
    http_backend,
    read_chunked,
)
from tests.fakes.pipelines import PipelineMissing, Pipelines

API_PREFIX = "/api/v4"
STORED_FIRST = "stored:"
CUT_SHORT_FAULT = "cut"  # 200, JSON cut short ("stored:cut": the write was stored first)
CUT_SHORT_BODY = '{"id": "cut sh'
DEFAULT_VERSION = "17.5.0"
# The /merge_requests/:iid/diffs endpoint appeared in GitLab 15.7 (docs: "Introduced in 15.7").
DIFFS_ENDPOINT_SINCE = (15, 7)
RELATED_ISSUES_SINCE = (17, 1)  # GET /merge_requests/:iid/related_issues (gitlab!155422)
REPORTER = 20  # the role from which a member reads the project's confidential issues
DEVELOPER = 30  # the role from which a member edits others' merge requests (update_merge_request)
MAX_MR_DESCRIPTION_CHARS = 1_048_576  # MergeRequest's description length validation
# PUT /merge_requests/:iid's optional parameters (API::MergeRequests); at least one is required
MR_UPDATE_PARAMS = (
    "title",
    "description",
    "target_branch",
    "state_event",
    "labels",
    "add_labels",
    "remove_labels",
    "assignee_id",
    "assignee_ids",
    "reviewer_ids",
    "milestone_id",
    "remove_source_branch",
    "squash",
    "discussion_locked",
    "allow_collaboration",
)
# Gitlab::ClosingIssueExtractor's default issue_closing_pattern, for same-project references.
CLOSING_PATTERN = re.compile(
    r"\b(?:clos(?:e|es|ed|ing)|fix(?:|es|ed|ing)|resolv(?:e|es|ed|ing)|implement(?:s|ed|ing)?)"
    r":? +(?:issues? +)?((?:#\d+(?:,? *(?:and +)?)?)+)",
    re.IGNORECASE,
)
ISSUE_REFERENCE = re.compile(r"(?<![\w&])#(\d+)\b")
DEFAULT_PER_PAGE = 20
MAX_PER_PAGE = 100
# GitLab's default "diff_max_patch_bytes" application setting is 200 KiB.
DEFAULT_MAX_PATCH_BYTES = 204_800
RETRY_AFTER_SECONDS = 1
RATE_LIMIT = 600
GIT_TIMEOUT_SECONDS = 30
# How often serve_forever checks for shutdown(); small so tests stop fast.
SHUTDOWN_POLL_SECONDS = 0.02

POSITION_ERROR = '400 Bad request - Note {:position=>["is invalid"]}'
LINE_CODE_ERROR = (
    '400 Bad request - Note {:line_code=>["can\'t be blank", "must be a valid line code"]}'
)
UNAUTHORIZED = {"message": "401 Unauthorized"}
PROJECT_NOT_FOUND = {"message": "404 Project Not Found"}
NOT_FOUND = {"message": "404 Not found"}
ROUTE_NOT_FOUND = {"error": "404 Not Found"}
FILE_NOT_FOUND = {"message": "404 File Not Found"}
COMMIT_NOT_FOUND = {"message": "404 Commit Not Found"}
TREE_NOT_FOUND = {"message": "404 Tree Not Found"}
GIT_STALL_LIMIT_S = 30.0  # a stalled git request is let go after this long (or at stop())
FORBIDDEN = {"message": "403 Forbidden"}
INSUFFICIENT_SCOPE = {
    "error": "insufficient_scope",
    "error_description": (
        "The request requires higher privileges than provided by the access token."
    ),
}
DEFAULT_TOKEN_SCOPES = ("api",)
WRITE_SCOPE = "api"
READ_SCOPES = frozenset({"api", "read_api"})
# Routes a token with only read_user may read (its user, the version, its own record).
USER_SCOPE_ROUTES = frozenset({"/user", "/version", "/personal_access_tokens/self"})
USER_SCOPE = "read_user"
SERVER_ERROR = {"message": "500 Internal Server Error"}
# What GitLab's Workhorse/NGINX answer when Puma is down or too slow.
GATEWAY_HTML = (
    "<!DOCTYPE html>\n<html>\n<head>\n  <title>GitLab is not responding ({code})</title>\n"
    "</head>\n<body>\n  <h1>{code}</h1>\n  <h3>Whoops, GitLab is taking too much time to "
    "respond.</h3>\n</body>\n</html>\n"
)
HTML_FAULTS = {"502", "503", "504"}
# What a browser-facing login in front of the API answers to an API call: GitLab's own
# /users/sign_in after a redirect followed by the client, or a single sign-on proxy's page,
# with status 200 and HTML (Rails' text/html; charset=utf-8).
SIGN_IN_CONTENT_TYPE = "text/html; charset=utf-8"
JSON_CONTENT_TYPE = "application/json"
SIGN_IN_HTML = (
    '<!DOCTYPE html>\n<html class="gl-light" lang="en">\n<head>\n'
    '<meta charset="utf-8">\n<title>Sign in · GitLab</title>\n</head>\n<body>\n'
    '<form class="gl-show-field-errors" action="/users/sign_in" method="post">\n'
    '<label for="user_login">Username or primary email</label>\n'
    '<input type="text" name="user[login]" id="user_login">\n'
    '<label for="user_password">Password</label>\n'
    '<input type="password" name="user[password]" id="user_password">\n'
    '<button type="submit">Sign in</button>\n</form>\n</body>\n</html>\n'
)
DRAFT_PREFIX = "Draft: "
SUGGESTION_FENCE = re.compile(r"^(`{3,})suggestion(?::-(\d+)\+(\d+))?\s*$")
ISSUE_NOT_FOUND = {"message": "404 Issue Not Found"}
HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")
LINE_CODE_FORMAT = re.compile(r"\A[0-9a-f]{40}_\d+_\d+\Z")
POSITION_REQUIRED = ("base_sha", "start_sha", "head_sha", "position_type")
POSITION_TYPES = ("text", "image", "file")
POSITION_INTEGERS = ("old_line", "new_line", "width", "height", "x", "y")


@dataclass
class CannedAnswer:
    """What :meth:`FakeGitLab.answer_with` makes matching requests get instead of the API."""

    status: int
    body: bytes
    content_type: str | None
    method: str | None
    path: re.Pattern[str] | None
    times: int | None

    def matches(self, method: str, route: str) -> bool:
        return (
            (self.times is None or self.times > 0)
            and (self.method is None or self.method == method)
            and (self.path is None or self.path.search(route) is not None)
        )

    def response(self) -> Response:
        if self.times is not None:
            self.times -= 1
        headers = {} if self.content_type is None else {"Content-Type": self.content_type}
        return Response(self.status, self.body, headers)


def _now() -> str:
    """GitLab's timestamp format: ISO 8601, milliseconds, UTC ``Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def line_code(path: str, old_pos: int, new_pos: int) -> str:
    """GitLab's line code: ``sha1(path)_old_new`` (lib/gitlab/git.rb diff_line_code)."""
    return f"{hashlib.sha1(path.encode()).hexdigest()}_{old_pos}_{new_pos}"


class ApiError(Exception):
    """An HTTP error answer: status and JSON (or text) body."""

    def __init__(
        self, status: int, body: dict[str, Any] | str, headers: dict[str, str] | None = None
    ):
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers or {}


# --------------------------------------------------------------------------- git


def _git(repo: Path, *args: str) -> bytes:
    return subprocess.run(
        [GIT, "-C", str(repo), *args],
        check=True,
        capture_output=True,
        timeout=GIT_TIMEOUT_SECONDS,
    ).stdout


def _rev_parse(repo: Path, ref: str) -> str:
    return _git(repo, "rev-parse", "--verify", f"{ref}^{{commit}}").decode().strip()


@dataclass(frozen=True)
class DiffLine:
    """One diff line as GitLab's parser sees it: kind is "new", "old" or None (context)."""

    kind: str | None
    old_pos: int
    new_pos: int

    @property
    def old_line(self) -> int | None:
        return None if self.kind == "new" else self.old_pos

    @property
    def new_line(self) -> int | None:
        return None if self.kind == "old" else self.new_pos


def parse_diff_lines(diff: str) -> list[DiffLine]:
    """Parse a GitLab-style diff (starting at the first ``@@``) into discussable lines.

    Counters follow lib/gitlab/diff/parser.rb: an added line keeps the current old counter,
    a removed line the current new counter. ``\\ No newline`` markers are meta lines.
    """
    lines: list[DiffLine] = []
    old_pos = new_pos = 0
    for text in diff.splitlines():
        header = HUNK_HEADER.match(text)
        if header:
            old_pos, new_pos = int(header.group(1)), int(header.group(2))
            continue
        if text.startswith("\\"):
            continue
        if text.startswith("+"):
            lines.append(DiffLine("new", old_pos, new_pos))
            new_pos += 1
        elif text.startswith("-"):
            lines.append(DiffLine("old", old_pos, new_pos))
            old_pos += 1
        else:
            lines.append(DiffLine(None, old_pos, new_pos))
            old_pos += 1
            new_pos += 1
    return lines


@dataclass
class FileChange:
    """One file of a version's diff (GitLab's Diff entity) plus its parsed lines."""

    old_path: str
    new_path: str
    a_mode: str
    b_mode: str
    new_file: bool
    renamed_file: bool
    deleted_file: bool
    diff: str
    lines: list[DiffLine] = field(default_factory=list)

    def to_json(self, too_large_bytes: int) -> dict[str, Any]:
        too_large = len(self.diff.encode()) > too_large_bytes
        return {
            "old_path": self.old_path,
            "new_path": self.new_path,
            "a_mode": self.a_mode,
            "b_mode": self.b_mode,
            "new_file": self.new_file,
            "renamed_file": self.renamed_file,
            "deleted_file": self.deleted_file,
            "generated_file": False,
            "collapsed": False,
            "too_large": too_large,
            "diff": "" if too_large else self.diff,
        }

    def line_for(self, old_line: int | None, new_line: int | None) -> DiffLine | None:
        for line in self.lines:
            if line.old_line == old_line and line.new_line == new_line:
                return line
        return None

    def has_line_code(self, code: str) -> bool:
        return any(line_code(self.new_path, ln.old_pos, ln.new_pos) == code for ln in self.lines)


def _strip_git_header(patch: str) -> str:
    """GitLab's ``diff`` starts at the first ``@@`` (or the ``Binary files`` line)."""
    for marker in ("\n@@ ", "\nBinary files "):
        index = patch.find(marker)
        if index >= 0:
            return patch[index + 1 :]
    return ""


def _mode(raw_mode: str) -> str:
    return "0" if int(raw_mode, 8) == 0 else raw_mode


def _read_changes(repo: Path, base_sha: str, head_sha: str) -> list[FileChange]:
    """Files changed between the merge base and head, as GitLab lists them."""
    raw = _git(repo, "diff", "--raw", "-z", "-M", "--full-index", base_sha, head_sha).decode()
    fields = raw.split("\0")
    changes: list[FileChange] = []
    index = 0
    while index < len(fields) and fields[index].startswith(":"):
        meta = fields[index][1:].split()
        status = meta[4][0]
        if status in "RC":
            old_path, new_path = fields[index + 1], fields[index + 2]
            index += 3
        else:
            old_path = new_path = fields[index + 1]
            index += 2
        patch = _git(
            repo, "diff", "--full-index", "-M", base_sha, head_sha, "--", *{old_path, new_path}
        ).decode(errors="replace")
        diff = _strip_git_header(patch)
        changes.append(
            FileChange(
                old_path=old_path,
                new_path=new_path,
                a_mode=_mode(meta[0]),
                b_mode=_mode(meta[1]),
                new_file=status == "A",
                renamed_file=status == "R",
                deleted_file=status == "D",
                diff=diff,
                lines=parse_diff_lines(diff),
            )
        )
    return changes


def _read_commits(repo: Path, base_sha: str, head_sha: str) -> list[dict[str, Any]]:
    fmt = "%H%x1f%h%x1f%s%x1f%B%x1f%an%x1f%ae%x1f%aI%x1f%cn%x1f%ce%x1f%cI%x1f%P%x1e"
    out = _git(repo, "log", f"--format={fmt}", f"{base_sha}..{head_sha}").decode()
    commits = []
    for record in filter(None, (r.strip("\n") for r in out.split("\x1e"))):
        sha, short, title, message, an, ae, ad, cn, ce, cd, parents = record.split("\x1f")
        commits.append(
            {
                "id": sha,
                "short_id": short,
                "title": title,
                "message": message,
                "author_name": an,
                "author_email": ae,
                "authored_date": ad,
                "committer_name": cn,
                "committer_email": ce,
                "committed_date": cd,
                "created_at": cd,
                "parent_ids": parents.split(),
            }
        )
    return commits


# --------------------------------------------------------------------------- state


@dataclass
class Version:
    """One MR diff version (GitLab's MergeRequestDiff)."""

    id: int
    base_sha: str
    start_sha: str
    head_sha: str
    created_at: str
    files: list[FileChange]
    commits: list[dict[str, Any]]

    def refs(self) -> tuple[str, str, str]:
        return (self.base_sha, self.start_sha, self.head_sha)


@dataclass
class Note:
    """A stored note; ``position`` and ``line_code`` only for DiffNotes."""

    id: int
    type: str | None
    body: str
    author: dict[str, Any]
    created_at: str
    updated_at: str
    resolvable: bool
    position: dict[str, Any] | None = None
    line_code: str | None = None
    resolved_by: dict[str, Any] | None = None
    resolved_at: str | None = None
    awards: list[dict[str, Any]] = field(default_factory=list)
    suggestions: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Discussion:
    id: str
    individual_note: bool
    notes: list[Note]


@dataclass
class MergeRequest:
    id: int
    iid: int
    project_id: int
    title: str
    description: str
    author: dict[str, Any]
    source_branch: str
    target_branch: str
    repo: Path
    created_at: str
    updated_at: str
    versions: list[Version] = field(default_factory=list)
    discussions: list[Discussion] = field(default_factory=list)
    drafts: list[dict[str, Any]] = field(default_factory=list)
    empty_diff_refs_left: int = 0
    state: str = "opened"
    merged_by: dict[str, Any] | None = None
    merged_at: str | None = None

    @property
    def latest(self) -> Version:
        return self.versions[-1]


@dataclass
class Project:
    id: int
    path_with_namespace: str
    created_at: str
    repo: Path | None = None
    default_branch: str = "main"
    mrs: dict[int, MergeRequest] = field(default_factory=dict)
    members: dict[int, int] = field(default_factory=dict)  # user id -> access level
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    statuses: CommitStatuses = field(default_factory=CommitStatuses)
    pipelines: Pipelines = field(default_factory=Pipelines)


@dataclass(frozen=True)
class AccessToken:
    """A token's record as GitLab keeps it (the secret itself is the key it is stored under)."""

    id: int
    name: str
    user_id: int
    scopes: tuple[str, ...]
    created_at: str
    expires_at: str | None

    def to_json(self) -> dict[str, Any]:
        # API::Entities::PersonalAccessToken
        return {
            "id": self.id,
            "name": self.name,
            "revoked": False,
            "created_at": self.created_at,
            "description": None,
            "scopes": list(self.scopes),
            "user_id": self.user_id,
            "last_used_at": _now(),
            "active": True,
            "expires_at": self.expires_at,
        }


# --------------------------------------------------------------------------- the fake


class FakeGitLab:
    """A GitLab REST API v4 on 127.0.0.1 with a random free port (context manager)."""

    def __init__(self, version: str = DEFAULT_VERSION) -> None:
        self.version = version
        self.requests: list[tuple[str, str]] = []
        # (time.time(), method, path) of each API request (git over HTTP is not the API)
        self.api_log: list[tuple[float, str, str]] = []
        self.too_large_bytes: int = DEFAULT_MAX_PATCH_BYTES
        self.dropped_drafts: list[dict[str, Any]] = []
        self.mr_updates: list[tuple[int, dict[str, Any]]] = []  # (iid, params) of each MR edit
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._users: dict[int, dict[str, Any]] = {}
        self._tokens: dict[str, AccessToken] = {}
        self._projects: dict[int, Project] = {}
        self._faults: list[str] = []
        self._targeted_faults: list[list[Any]] = []
        self._outage_countdown: int | None = None
        self._outage_fault = "502"
        self._canned: list[CannedAnswer] = []
        self.git_requests: list[tuple[str, str]] = []  # (method, path) of git over HTTP
        # False: /repository/tree ignores pagination=keyset and answers offset pages, as a
        # GitLab did while keyset pagination of trees was behind the feature flag
        # repository_tree_gitaly_pagination (removed by gitlab!154897).
        self.tree_keyset = True
        self._git_stalled = False
        self._git_fetch_count = 0
        self._git_release = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # ---- lifecycle

    def start(self) -> FakeGitLab:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = False
        server.block_on_close = True
        server.fake = self  # type: ignore[attr-defined]
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": SHUTDOWN_POLL_SECONDS},
            name="fake-gitlab",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._git_release.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeGitLab:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ---- set-up

    def add_user(
        self,
        username: str,
        *,
        token: str | None = None,
        bot: bool = False,
        scopes: tuple[str, ...] = DEFAULT_TOKEN_SCOPES,
        expires_at: str | None = None,
    ) -> dict[str, Any]:
        """A user, and a token of it with ``scopes`` (``expires_at``: ``YYYY-MM-DD``)."""
        with self._lock:
            existing = self._user_by_name(username)
            user = existing or self._new_user(username, bot)
            if token is not None:
                self._tokens[token] = AccessToken(
                    id=next(self._ids),
                    name=f"{username}-token",
                    user_id=user["id"],
                    scopes=tuple(scopes),
                    created_at=_now(),
                    expires_at=expires_at,
                )
            return copy.deepcopy(user)

    def add_issue(
        self,
        project: str | int,
        title: str,
        description: str = "",
        *,
        labels: tuple[str, ...] = (),
        confidential: bool = False,
    ) -> dict[str, Any]:
        """An issue a person opened in ``project`` (API::Entities::Issue); returns it."""
        with self._lock:
            proj = self._project(project)
            author = self._user_by_name("issue_author") or self._new_user("issue_author", False)
            when = _now()
            number = max(proj.issues, default=0) + 1
            proj.issues[number] = {
                "id": next(self._ids),
                "iid": number,
                "project_id": proj.id,
                "title": title,
                "description": description,
                "state": "opened",
                "created_at": when,
                "updated_at": when,
                "closed_at": None,
                "labels": list(labels),
                "confidential": confidential,
                "author": _user_basic(author),
                "web_url": f"{self.url}/{proj.path_with_namespace}/-/issues/{number}",
            }
            return copy.deepcopy(proj.issues[number])

    def add_member(self, project: str | int, username: str, access_level: int) -> None:
        """Make ``username`` a member of ``project`` with that role (30 = Developer)."""
        with self._lock:
            user = self._user_by_name(username) or self._new_user(username, False)
            self._project(project).members[user["id"]] = access_level

    def add_project(
        self, path_with_namespace: str, *, project_id: int | None = None
    ) -> dict[str, Any]:
        with self._lock:
            pid = project_id
            while pid is None or (project_id is None and pid in self._projects):
                pid = next(self._ids)  # never an id a project was given explicitly
            project = Project(pid, path_with_namespace, _now())
            self._projects[pid] = project
            return self._project_json(project)

    def set_repository(self, project: str | int, repo_dir: str | Path, default_branch: str) -> None:
        """Give ``project`` the real repository at ``repo_dir`` (its tree, raw files, git
        over HTTP) without opening a merge request."""
        with self._lock:
            proj = self._project(project)
            proj.repo = Path(repo_dir)
            proj.default_branch = default_branch

    def add_mr_from_git(
        self,
        project: str | int,
        repo_dir: str | Path,
        base: str,
        head: str,
        *,
        iid: int | None = None,
        title: str = "",
        description: str = "",
        author: str = "alice",
        draft: bool = False,
    ) -> dict[str, Any]:
        """Open an MR whose target is ``base`` and source is ``head`` (refs of ``repo_dir``)."""
        repo = Path(repo_dir)
        version = self._build_version(repo, base, _rev_parse(repo, head))
        with self._lock:
            proj = self._project(project)
            proj.repo = repo
            proj.default_branch = base
            number = iid if iid is not None else max(proj.mrs, default=0) + 1
            when = _now()
            mr = MergeRequest(
                id=next(self._ids),
                iid=number,
                project_id=proj.id,
                title=_draft_title(title or f"Merge {head} into {base}", draft),
                description=description,
                author=self._user_by_name(author) or self._new_user(author, False),
                source_branch=head,
                target_branch=base,
                repo=repo,
                created_at=when,
                updated_at=when,
                versions=[version],
            )
            proj.mrs[number] = mr
            return self._mr_json(proj, mr)

    def edit_description(self, project: str | int, iid: int, description: str) -> None:
        """The MR's author edits its description in the web UI."""
        with self._lock:
            mr = self._mr(project, iid)
            mr.description = description
            mr.updated_at = _now()

    def push(self, project: str | int, iid: int, new_head: str) -> None:
        """Record a push: a new diff version, newest first in /versions."""
        with self._lock:
            mr = self._mr(project, iid)
        version = self._build_version(mr.repo, mr.target_branch, _rev_parse(mr.repo, new_head))
        with self._lock:
            mr.versions.append(version)
            mr.updated_at = version.created_at

    def stall_git(self, on: bool = True) -> None:
        """Git over HTTP takes connections and never answers (until :meth:`stop`)."""
        with self._lock:
            self._git_stalled = on

    def git_fetches(self) -> int:
        """How many fetches git made: ``git-upload-pack`` requests that ask for objects
        (protocol v2 ``command=fetch``, or v0 ``want`` lines), not ref listings."""
        with self._lock:
            return self._git_fetch_count

    def add_faults(self, *faults: str) -> None:
        """Queue faults, one per request: "429", "429-date" (Retry-After as an HTTP date),
        "429:SECONDS" (that Retry-After), "500", "502", "503", "504", "slow:SECONDS"; prefixed
        with "stored:", the request is handled first (a write is stored) and then the fault
        is what the client gets (e.g. "stored:502", or "stored:slow:5" past its timeout)."""
        with self._lock:
            self._faults.extend(faults)

    def add_fault_for(self, method: str, path_pattern: str, fault: str, times: int = 1) -> None:
        """Answer the next ``times`` requests whose method is ``method`` and whose path (after
        /api/v4) matches the regex ``path_pattern`` with ``fault`` (see :meth:`add_faults`)."""
        with self._lock:
            self._targeted_faults.append([method, re.compile(path_pattern), fault, times])

    def outage_after(self, requests: int, fault: str = "502") -> None:
        """After ``requests`` more requests, answer every request with ``fault`` until
        :meth:`end_outage` (GitLab down for a while, as seen through its proxy)."""
        with self._lock:
            self._outage_countdown = requests
            self._outage_fault = fault

    def end_outage(self) -> None:
        with self._lock:
            self._outage_countdown = None

    def answer_with(
        self,
        body: str | bytes,
        *,
        status: int = HTTPStatus.OK,
        content_type: str | None = JSON_CONTENT_TYPE,
        method: str | None = None,
        path_pattern: str | None = None,
        times: int | None = None,
    ) -> None:
        """Answer /api/v4 requests with ``status``, ``body`` and ``content_type`` (None: no
        Content-Type header at all) instead of the API: every request, or only those whose
        method is ``method`` and whose path after /api/v4 matches the regex ``path_pattern``;
        until :meth:`clear_answers`, or for the next ``times`` of them. Nothing is stored: the
        request never reached the API. Answers given earlier take precedence."""
        with self._lock:
            self._canned.append(
                CannedAnswer(
                    status=int(status),
                    body=body.encode() if isinstance(body, str) else body,
                    content_type=content_type,
                    method=method,
                    path=None if path_pattern is None else re.compile(path_pattern),
                    times=times,
                )
            )

    def clear_answers(self) -> None:
        """Forget every :meth:`answer_with`: the API answers again."""
        with self._lock:
            self._canned.clear()

    def answer_sign_in_page(self, on: bool = True) -> None:
        """While on, every /api/v4 request is answered 200 with a sign-in page (HTML), as
        when the configured URL reaches a login in front of GitLab instead of its API
        (:meth:`answer_with`; off forgets every such answer)."""
        if on:
            self.answer_with(SIGN_IN_HTML, content_type=SIGN_IN_CONTENT_TYPE)
        else:
            self.clear_answers()

    def set_empty_diff_refs(self, project: str | int, iid: int, times: int) -> None:
        """The next ``times`` GETs of the MR answer ``diff_refs: null`` (diff not ready yet)."""
        with self._lock:
            self._mr(project, iid).empty_diff_refs_left = times

    def add_award_emoji(
        self, project: str | int, iid: int, note_id: int, name: str, username: str
    ) -> dict[str, Any]:
        """A user reacts to a note (e.g. ``thumbsup``/``thumbsdown`` as feedback)."""
        with self._lock:
            note = self._note(self._mr(project, iid), note_id)
            user = self._user_by_name(username) or self._new_user(username, False)
            when = _now()
            award = {
                "id": next(self._ids),
                "name": name,
                "user": _user_basic(user),
                "created_at": when,
                "updated_at": when,
                "awardable_id": note.id,
                "awardable_type": "Note",
            }
            note.awards.append(award)
            return copy.deepcopy(award)

    def merge(self, project: str | int, iid: int, username: str) -> None:
        """A user merges the MR (state ``merged``, ``merged_by``, ``merged_at``)."""
        with self._lock:
            mr = self._mr(project, iid)
            user = self._user_by_name(username) or self._new_user(username, False)
            mr.state, mr.merged_by, mr.merged_at = "merged", user, _now()
            mr.updated_at = mr.merged_at

    def apply_suggestion(self, project: str | int, iid: int, note_id: int, username: str) -> None:
        """A user applies the note's suggestions; GitLab then resolves the thread by that user.

        (GitLab also commits the change, which makes a new version: push one with ``push``.)
        """
        with self._lock:
            mr = self._mr(project, iid)
            note = self._note(mr, note_id)
            if not note.suggestions:
                raise ValueError(f"note {note_id} has no suggestion")
            user = self._user_by_name(username) or self._new_user(username, False)
            for suggestion in note.suggestions:
                suggestion["applied"], suggestion["appliable"] = True, False
            when = _now()
            for discussion in mr.discussions:
                if note in discussion.notes:
                    for each in discussion.notes:
                        if each.resolvable:
                            each.resolved_by, each.resolved_at = user, when

    def delete_note(self, project: str | int, iid: int, note_id: int) -> None:
        """A human deletes a note (a discussion without notes disappears, as on GitLab)."""
        with self._lock:
            self._remove_note(self._mr(project, iid), note_id)

    # ---- inspection

    def discussions(self, project: str | int, iid: int) -> list[dict[str, Any]]:
        with self._lock:
            mr = self._mr(project, iid)
            return [self._discussion_json(mr, d) for d in mr.discussions]

    def notes(self, project: str | int, iid: int) -> list[dict[str, Any]]:
        with self._lock:
            mr = self._mr(project, iid)
            return [self._note_json(mr, n) for d in mr.discussions for n in d.notes]

    def issues(self, project: str | int) -> list[dict[str, Any]]:
        with self._lock:
            return [copy.deepcopy(i) for i in self._project(project).issues.values()]

    def line_code_of(self, project: str | int, iid: int, note_id: int) -> str | None:
        """The line code GitLab stored for a DiffNote (not exposed by the REST API)."""
        with self._lock:
            return self._note(self._mr(project, iid), note_id).line_code

    # ---- internals: lookups

    def _new_user(self, username: str, bot: bool) -> dict[str, Any]:
        uid = next(self._ids)
        user = {
            "id": uid,
            "username": username,
            "name": username.replace("_", " ").title(),
            "state": "active",
            "locked": False,
            "avatar_url": None,
            "web_url": f"{self.url}/{username}",
            "bot": bot,
            "created_at": _now(),
        }
        self._users[uid] = user
        return user

    def _user_by_name(self, username: str) -> dict[str, Any] | None:
        return next((u for u in self._users.values() if u["username"] == username), None)

    def _project(self, ref: str | int) -> Project:
        text = unquote(str(ref))
        if text.isdigit() and int(text) in self._projects:
            return self._projects[int(text)]
        for project in self._projects.values():
            if project.path_with_namespace == text:
                return project
        raise ApiError(HTTPStatus.NOT_FOUND, PROJECT_NOT_FOUND)

    def _mr(self, project: str | int, iid: int | str) -> MergeRequest:
        proj = self._project(project)
        mr = proj.mrs.get(int(iid)) if str(iid).isdigit() else None
        if mr is None:
            raise ApiError(HTTPStatus.NOT_FOUND, NOT_FOUND)
        return mr

    def _discussion(self, mr: MergeRequest, discussion_id: str) -> Discussion:
        for discussion in mr.discussions:
            if discussion.id == discussion_id:
                return discussion
        raise ApiError(HTTPStatus.NOT_FOUND, {"message": "404 Discussion Not Found"})

    def _note(self, mr: MergeRequest, note_id: int | str) -> Note:
        for discussion in mr.discussions:
            for note in discussion.notes:
                if str(note.id) == str(note_id):
                    return note
        raise ApiError(HTTPStatus.NOT_FOUND, {"message": "404 Note Not Found"})

    def _remove_note(self, mr: MergeRequest, note_id: int | str) -> None:
        note = self._note(mr, note_id)
        for discussion in mr.discussions:
            if note in discussion.notes:
                discussion.notes.remove(note)
        mr.discussions = [d for d in mr.discussions if d.notes]

    def _build_version(self, repo: Path, target: str, head_sha: str) -> Version:
        start_sha = _rev_parse(repo, target)
        base_sha = _git(repo, "merge-base", start_sha, head_sha).decode().strip()
        files = _read_changes(repo, base_sha, head_sha)
        commits = _read_commits(repo, base_sha, head_sha)
        with self._lock:
            vid = next(self._ids)
        return Version(vid, base_sha, start_sha, head_sha, _now(), files, commits)

    # ---- internals: JSON shapes

    def _project_json(self, project: Project) -> dict[str, Any]:
        namespace, _, name = project.path_with_namespace.rpartition("/")
        return {
            "id": project.id,
            "description": "",
            "name": name,
            "name_with_namespace": f"{namespace} / {name}" if namespace else name,
            "path": name,
            "path_with_namespace": project.path_with_namespace,
            "created_at": project.created_at,
            "default_branch": project.default_branch,
            "http_url_to_repo": f"{self.url}/{project.path_with_namespace}.git",
            "visibility": "private",
            "archived": False,
            "web_url": f"{self.url}/{project.path_with_namespace}",
            "namespace": {
                "id": 1,
                "name": namespace,
                "path": namespace,
                "kind": "group",
                "full_path": namespace,
            },
        }

    def _mr_json(
        self, project: Project, mr: MergeRequest, *, count_get: bool = False
    ) -> dict[str, Any]:
        latest = mr.latest
        diff_refs: dict[str, str] | None = {
            "base_sha": latest.base_sha,
            "head_sha": latest.head_sha,
            "start_sha": latest.start_sha,
        }
        if count_get and mr.empty_diff_refs_left > 0:
            mr.empty_diff_refs_left -= 1
            diff_refs = None
        web_url = f"{self.url}/{project.path_with_namespace}/-/merge_requests/{mr.iid}"
        user_notes = sum(1 for d in mr.discussions for n in d.notes)
        return {
            "id": mr.id,
            "iid": mr.iid,
            "project_id": mr.project_id,
            "title": mr.title,
            "description": mr.description,
            "state": mr.state,
            "created_at": mr.created_at,
            "updated_at": mr.updated_at,
            "merged_by": _user_basic(mr.merged_by) if mr.merged_by else None,
            "merged_at": mr.merged_at,
            "closed_by": None,
            "closed_at": None,
            "target_branch": mr.target_branch,
            "source_branch": mr.source_branch,
            "user_notes_count": user_notes,
            "upvotes": 0,
            "downvotes": 0,
            "author": _user_basic(mr.author),
            "assignees": [],
            "assignee": None,
            "reviewers": [],
            "source_project_id": mr.project_id,
            "target_project_id": mr.project_id,
            "labels": [],
            "draft": mr.title.startswith(DRAFT_PREFIX),
            "work_in_progress": mr.title.startswith(DRAFT_PREFIX),
            "milestone": None,
            "merge_when_pipeline_succeeds": False,
            "merge_status": "can_be_merged",
            "detailed_merge_status": "mergeable",
            "sha": latest.head_sha,
            "merge_commit_sha": None,
            "squash_commit_sha": None,
            "discussion_locked": None,
            "should_remove_source_branch": None,
            "force_remove_source_branch": False,
            "reference": f"!{mr.iid}",
            "references": {
                "short": f"!{mr.iid}",
                "relative": f"!{mr.iid}",
                "full": f"{project.path_with_namespace}!{mr.iid}",
            },
            "web_url": web_url,
            "squash": False,
            "has_conflicts": False,
            "blocking_discussions_resolved": all(
                n.resolved_by is not None for d in mr.discussions for n in d.notes if n.resolvable
            ),
            "changes_count": str(len(latest.files)),
            "diff_refs": diff_refs,
            "merge_error": None,
            "head_pipeline": None,
            "pipeline": None,
            "first_contribution": False,
            "user": {"can_merge": True},
        }

    def _version_json(self, mr: MergeRequest, version: Version) -> dict[str, Any]:
        return {
            "id": version.id,
            "head_commit_sha": version.head_sha,
            "base_commit_sha": version.base_sha,
            "start_commit_sha": version.start_sha,
            "created_at": version.created_at,
            "merge_request_id": mr.id,
            "state": "collected",
            "real_size": str(len(version.files)),
            "patch_id_sha": hashlib.sha1(version.head_sha.encode()).hexdigest(),
        }

    def _note_json(self, mr: MergeRequest, note: Note) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": note.id,
            "type": note.type,
            "body": note.body,
            "attachment": None,
            "author": _user_basic(note.author),
            "created_at": note.created_at,
            "updated_at": note.updated_at,
            "system": False,
            "noteable_id": mr.id,
            "noteable_type": "MergeRequest",
            "project_id": mr.project_id,
        }
        if note.type == "DiffNote":
            data["commit_id"] = None
            data["position"] = copy.deepcopy(note.position)
            data["suggestions"] = copy.deepcopy(note.suggestions)
        data["resolvable"] = note.resolvable
        if note.resolvable:
            data["resolved"] = note.resolved_by is not None
            data["resolved_by"] = _user_basic(note.resolved_by) if note.resolved_by else None
            data["resolved_at"] = note.resolved_at
        data.update(
            {
                "confidential": False,
                "internal": False,
                "imported": False,
                "imported_from": "none",
                "noteable_iid": mr.iid,
                "commands_changes": {},
            }
        )
        return data

    def _discussion_json(self, mr: MergeRequest, discussion: Discussion) -> dict[str, Any]:
        return {
            "id": discussion.id,
            "individual_note": discussion.individual_note,
            "notes": [self._note_json(mr, note) for note in discussion.notes],
        }

    # ---- internals: notes and positions

    def _validated_position(self, mr: MergeRequest, raw: Any) -> tuple[dict[str, Any], str | None]:
        """Coerce like Grape, then find the line like GitLab; 400 when there is none."""
        position = _coerce_position(raw)
        change = _position_file(mr, position)
        if position["position_type"] != "text":
            if change is None:
                raise ApiError(HTTPStatus.BAD_REQUEST, {"message": POSITION_ERROR})
            return position, None
        code = _text_line_code(change, position) if change else None
        # A diff too large to show has no diff lines in GitLab (Gitlab::Diff::File#too_large?),
        # so no line code can be found for a position in it: the same 400.
        if code is None or (change and len(change.diff.encode()) > self.too_large_bytes):
            raise ApiError(HTTPStatus.BAD_REQUEST, {"message": LINE_CODE_ERROR})
        return position, code

    def _new_discussion(
        self, mr: MergeRequest, user: dict[str, Any], body: str, position: Any, *, individual: bool
    ) -> Discussion:
        stored_position, code = (None, None)
        if position is not None:
            stored_position, code = self._validated_position(mr, position)
        when = _now()
        if stored_position is not None:
            note_type: str | None = "DiffNote"
        else:
            note_type = None if individual else "DiscussionNote"
        note = Note(
            id=next(self._ids),
            type=note_type,
            body=body,
            author=user,
            created_at=when,
            updated_at=when,
            resolvable=note_type is not None,
            position=stored_position,
            line_code=code,
        )
        if stored_position is not None:
            note.suggestions = self._suggestions(body, stored_position)
        discussion_id = hashlib.sha1(
            f"{mr.id}-{note.id}-{time.monotonic_ns()}".encode()
        ).hexdigest()
        discussion = Discussion(discussion_id, individual, [note])
        mr.discussions.append(discussion)
        mr.updated_at = when
        return discussion

    def _suggestions(self, body: str, position: dict[str, Any]) -> list[dict[str, Any]]:
        """Suggestion blocks of a diff note (```suggestion:-A+B), as GitLab parses them."""
        line = position.get("new_line") or position.get("old_line") or 0
        found, lines, index = [], body.splitlines(), 0
        while index < len(lines):
            opening = SUGGESTION_FENCE.match(lines[index])
            index += 1
            if opening is None:
                continue
            fence, above, below = opening.group(1), opening.group(2), opening.group(3)
            content = []
            while index < len(lines) and lines[index] != fence:
                content.append(lines[index] + "\n")
                index += 1
            index += 1
            found.append(
                {
                    "id": next(self._ids),
                    "from_line": line - int(above or 0),
                    "to_line": line + int(below or 0),
                    "appliable": True,
                    "applied": False,
                    "from_content": "",
                    "to_content": "".join(content),
                }
            )
        return found

    def _reply(
        self, mr: MergeRequest, discussion: Discussion, user: dict[str, Any], body: str
    ) -> Note:
        first = discussion.notes[0]
        when = _now()
        note = Note(
            id=next(self._ids),
            type=first.type or "DiscussionNote",
            body=body,
            author=user,
            created_at=when,
            updated_at=when,
            resolvable=True,
            position=copy.deepcopy(first.position),
            line_code=first.line_code,
        )
        if first.position is not None:
            note.suggestions = self._suggestions(body, first.position)
            outdated = first.position.get("head_sha") != mr.latest.head_sha
            for suggestion in note.suggestions:
                suggestion["appliable"] = not outdated
        discussion.notes.append(note)
        discussion.individual_note = False
        mr.updated_at = when
        return note

    def _publish_drafts(self, mr: MergeRequest, user: dict[str, Any]) -> None:
        """Turn the user's drafts into discussions; drafts GitLab cannot save are lost."""
        mine = [d for d in mr.drafts if d["author_id"] == user["id"]]
        mr.drafts = [d for d in mr.drafts if d["author_id"] != user["id"]]
        for draft in mine:
            try:
                if draft["discussion_id"]:
                    self._reply(
                        mr, self._discussion(mr, draft["discussion_id"]), user, draft["note"]
                    )
                else:
                    self._new_discussion(
                        mr, user, draft["note"], draft["position"], individual=False
                    )
            except ApiError:
                # DraftNotes::PublishService ignores a note that fails validation.
                self.dropped_drafts.append(draft)

    # ---- git over HTTP (called by the handler)

    def serve_git(
        self, method: str, path: str, query: str, headers: dict[str, str], body: bytes
    ) -> Response:
        """Smart HTTP for ``/<project>.git/...``: GitLab's basic-auth check, then a real
        ``git http-backend`` on the project's repository."""
        match = GIT_PATH.match(path)
        assert match is not None
        with self._lock:
            self.requests.append((method, path))
            self.git_requests.append((method, path))
            if method == "POST" and asks_for_objects(body, headers):
                self._git_fetch_count += 1
            stalled = self._git_stalled
            record = self._tokens.get(basic_auth_password(headers.get("authorization", "")) or "")
            project = next(
                (p for p in self._projects.values() if p.path_with_namespace == match["project"]),
                None,
            )
        if stalled:
            self._git_release.wait(GIT_STALL_LIMIT_S)
            return Response(HTTPStatus.GATEWAY_TIMEOUT, "stalled\n", {"Content-Type": "text/plain"})
        if record is None or not (set(record.scopes) & GIT_SCOPES):
            return Response(
                HTTPStatus.UNAUTHORIZED,
                ACCESS_DENIED.format(url=self.url),
                {"Content-Type": "text/plain", "WWW-Authenticate": 'Basic realm="GitLab"'},
            )
        if project is None or project.repo is None:
            return Response(
                HTTPStatus.NOT_FOUND, PROJECT_NOT_FOUND_TEXT, {"Content-Type": "text/plain"}
            )
        status, answer_headers, payload = http_backend(
            project.repo, method, match["rest"], query, headers, body
        )
        return Response(status, payload, answer_headers)

    # ---- request dispatch (called by the handler)

    def handle(self, request: Request) -> Response:
        with self._lock:
            self.requests.append((request.method, request.path))
            self.api_log.append((time.time(), request.method, request.path))
            canned = self._canned_answer(request)
            if canned is not None:
                return canned
            fault = self._faults.pop(0) if self._faults else None
            if fault is None:
                fault = self._targeted_fault(request)
            if fault is None and self._outage_countdown is not None:
                if self._outage_countdown <= 0:
                    fault = self._outage_fault
                self._outage_countdown -= 1
        stored_first = fault is not None and fault.startswith(STORED_FIRST)
        if fault is not None and not stored_first:
            answer = _fault_response(fault)
            if answer is not None:
                return answer
        try:
            response = self._route(request)
        except ApiError as error:
            response = Response(error.status, error.body, error.headers)
        if stored_first:
            # The request was handled (a write is stored), then the answer is lost or late:
            # a proxy answering 502, or a client that gave up waiting.
            assert fault is not None
            lost = _fault_response(fault[len(STORED_FIRST) :])
            return lost if lost is not None else response
        return response

    def _canned_answer(self, request: Request) -> Response | None:
        if not request.path.startswith(API_PREFIX + "/"):
            return None
        route = request.path[len(API_PREFIX) :]
        for canned in self._canned:
            if canned.matches(request.method, route):
                return canned.response()
        return None

    def _targeted_fault(self, request: Request) -> str | None:
        route = request.path[len(API_PREFIX) :]
        for target in self._targeted_faults:
            method, pattern, fault, times = target
            if method == request.method and pattern.search(route) and times > 0:
                target[3] -= 1
                return str(fault)
        return None

    def _route(self, request: Request) -> Response:
        if not request.path.startswith(API_PREFIX + "/"):
            raise ApiError(HTTPStatus.NOT_FOUND, ROUTE_NOT_FOUND)
        route = request.path[len(API_PREFIX) :]
        for method, pattern, handler_name in _ROUTES:
            match = pattern.fullmatch(route)
            if match and method == request.method:
                with self._lock:
                    request.token = self._authenticate(request)
                    _check_scope(request.token, request.method, route)
                    request.user = self._users[request.token.user_id]
                    return getattr(self, handler_name)(request, *match.groups())
        raise ApiError(HTTPStatus.NOT_FOUND, ROUTE_NOT_FOUND)

    def _authenticate(self, request: Request) -> AccessToken:
        token = request.headers.get("private-token")
        authorization = request.headers.get("authorization", "")
        if token is None and authorization.lower().startswith("bearer "):
            token = authorization[len("bearer ") :].strip()
        record = self._tokens.get(token or "")
        if record is None:
            raise ApiError(HTTPStatus.UNAUTHORIZED, UNAUTHORIZED)
        return record

    # ---- endpoint handlers (lock held)

    def _get_version(self, request: Request) -> Response:
        return Response(
            HTTPStatus.OK,
            {
                "version": self.version,
                "revision": "fake0000",
                "kas": {"enabled": False, "externalUrl": None, "version": None},
                "enterprise": False,
            },
        )

    def _get_user(self, request: Request) -> Response:
        return Response(HTTPStatus.OK, copy.deepcopy(request.user))

    def _get_user_by_id(self, request: Request, uid: str) -> Response:
        user = self._users.get(int(uid))
        if user is None:
            raise ApiError(HTTPStatus.NOT_FOUND, {"message": "404 User Not Found"})
        return Response(HTTPStatus.OK, copy.deepcopy(user))

    def _get_project(self, request: Request, pid: str) -> Response:
        return Response(HTTPStatus.OK, self._project_json(self._project(pid)))

    def _get_token_self(self, request: Request) -> Response:
        assert request.token is not None
        return Response(HTTPStatus.OK, request.token.to_json())

    def _get_member_all(self, request: Request, pid: str, uid: str) -> Response:
        project = self._project(pid)
        level = project.members.get(int(uid))
        user = self._users.get(int(uid))
        if level is None or user is None:
            raise ApiError(HTTPStatus.NOT_FOUND, NOT_FOUND)
        # API::Entities::Member
        member = {
            **_user_basic(user),
            "created_at": user["created_at"],
            "expires_at": None,
            "access_level": level,
            "membership_state": "active",
        }
        return Response(HTTPStatus.OK, member)

    def _get_mr(self, request: Request, pid: str, iid: str) -> Response:
        mr = self._mr(pid, iid)
        return Response(HTTPStatus.OK, self._mr_json(self._project(pid), mr, count_get=True))

    def _get_versions(self, request: Request, pid: str, iid: str) -> Response:
        mr = self._mr(pid, iid)
        items = [self._version_json(mr, v) for v in reversed(mr.versions)]
        return self._paginated(request, items)

    def _get_one_version(self, request: Request, pid: str, iid: str, vid: str) -> Response:
        mr = self._mr(pid, iid)
        version = next((v for v in mr.versions if str(v.id) == vid), None)
        if version is None:
            raise ApiError(HTTPStatus.NOT_FOUND, NOT_FOUND)
        data = self._version_json(mr, version)
        data["commits"] = copy.deepcopy(version.commits)
        data["diffs"] = [f.to_json(self.too_large_bytes) for f in version.files]
        return Response(HTTPStatus.OK, data)

    def _get_closes_issues(self, request: Request, pid: str, iid: str) -> Response:
        mr = self._mr(pid, iid)
        numbers: list[int] = []
        for match in CLOSING_PATTERN.finditer(mr.description):
            numbers.extend(int(n) for n in ISSUE_REFERENCE.findall(match.group(1)))
        return self._paginated(request, self._visible_issues(request, pid, numbers))

    def _get_related_issues(self, request: Request, pid: str, iid: str) -> Response:
        if _version_tuple(self.version) < RELATED_ISSUES_SINCE:
            raise ApiError(HTTPStatus.NOT_FOUND, ROUTE_NOT_FOUND)
        mr = self._mr(pid, iid)
        texts = [mr.title, mr.description] + [n.body for d in mr.discussions for n in d.notes]
        numbers = [int(n) for text in texts for n in ISSUE_REFERENCE.findall(text)]
        return self._paginated(request, self._visible_issues(request, pid, numbers))

    def _visible_issues(self, request: Request, pid: str, numbers: list[int]) -> list[Any]:
        """The project's issues of ``numbers`` (each once, in order) the user may read."""
        project = self._project(pid)
        assert request.user is not None
        uid = request.user["id"]
        found = []
        for number in dict.fromkeys(numbers):
            issue = project.issues.get(number)
            if issue is None:
                continue
            readable = (
                not issue.get("confidential")
                or issue["author"]["id"] == uid
                or project.members.get(uid, 0) >= REPORTER
            )
            if readable:
                found.append(copy.deepcopy(issue))
        return found

    def _get_diffs(self, request: Request, pid: str, iid: str) -> Response:
        if _version_tuple(self.version) < DIFFS_ENDPOINT_SINCE:
            raise ApiError(HTTPStatus.NOT_FOUND, ROUTE_NOT_FOUND)
        mr = self._mr(pid, iid)
        return self._paginated(request, [f.to_json(self.too_large_bytes) for f in mr.latest.files])

    def _get_changes(self, request: Request, pid: str, iid: str) -> Response:
        mr = self._mr(pid, iid)
        data = self._mr_json(self._project(pid), mr)
        data["changes"] = [f.to_json(self.too_large_bytes) for f in mr.latest.files]
        data["overflow"] = False
        return Response(HTTPStatus.OK, data)

    def _get_raw_file(self, request: Request, pid: str, file_path: str) -> Response:
        project = self._project(pid)
        if project.repo is None:
            raise ApiError(HTTPStatus.NOT_FOUND, FILE_NOT_FOUND)
        ref = request.params.get("ref") or project.default_branch
        try:
            sha = _rev_parse(project.repo, str(ref))
        except subprocess.CalledProcessError as error:
            raise ApiError(HTTPStatus.NOT_FOUND, COMMIT_NOT_FOUND) from error
        try:
            content = _git(project.repo, "show", f"{sha}:{unquote(file_path)}")
        except subprocess.CalledProcessError as error:
            raise ApiError(HTTPStatus.NOT_FOUND, FILE_NOT_FOUND) from error
        return Response(HTTPStatus.OK, content, {"Content-Type": "text/plain; charset=utf-8"})

    def _get_tree(self, request: Request, pid: str) -> Response:
        """The tree at ``ref`` under ``path``: one level, or every level (``recursive``)."""
        project = self._project(pid)
        if project.repo is None:
            raise ApiError(HTTPStatus.NOT_FOUND, TREE_NOT_FOUND)
        ref = str(request.params.get("ref") or project.default_branch)
        folder = str(request.params.get("path") or "").strip("/")
        try:
            sha = _rev_parse(project.repo, ref)
            args = [
                "ls-tree",
                "-z",
                *(["-r", "-t"] if _boolean(request.params, "recursive") else []),
            ]
            output = _git(project.repo, *args, f"{sha}:{folder}" if folder else sha)
        except subprocess.CalledProcessError as error:
            raise ApiError(HTTPStatus.NOT_FOUND, TREE_NOT_FOUND) from error
        items = []
        for record in output.split(b"\0"):
            if not record:
                continue
            meta, _, name = record.partition(b"\t")
            mode, kind, object_id = meta.decode().split()
            path = f"{folder}/{name.decode()}" if folder else name.decode()
            items.append(
                {
                    "id": object_id,
                    "name": path.rsplit("/", 1)[-1],
                    "type": kind,
                    "path": path,
                    "mode": mode,
                }
            )
        if request.params.get("pagination") == "keyset" and self.tree_keyset:
            return self._keyset_page(request, items)
        return self._paginated(request, items)

    def _keyset_page(self, request: Request, items: list[dict[str, Any]]) -> Response:
        """Keyset pages: the entries after ``page_token`` (an opaque cursor), a Link header
        with only ``rel="next"`` while more remain, and no X-Total headers."""
        per_page = _bounded_int(request.params.get("per_page"), DEFAULT_PER_PAGE, MAX_PER_PAGE)
        token = str(request.params.get("page_token") or "")
        start = 0
        if token:
            after = base64.urlsafe_b64decode(token.encode()).decode()
            start = next(
                (i + 1 for i, item in enumerate(items) if item["path"] == after), len(items)
            )
        chunk = items[start : start + per_page]
        headers = {"X-Per-Page": str(per_page)}
        if start + per_page < len(items):
            query = {k: v for k, v in request.query.items() if k != "page_token"}
            query["page_token"] = base64.urlsafe_b64encode(chunk[-1]["path"].encode()).decode()
            headers["Link"] = f'<{self.url}{request.path}?{urlencode(query)}>; rel="next"'
        return Response(HTTPStatus.OK, chunk, headers)

    def _get_compare(self, request: Request, pid: str) -> Response:
        """Two commits' diff: from the merge base, or ``straight`` from ``from`` itself."""
        project = self._project(pid)
        if project.repo is None:
            raise ApiError(HTTPStatus.NOT_FOUND, COMMIT_NOT_FOUND)
        try:
            start = _rev_parse(project.repo, _required_text(request.params, "from"))
            end = _rev_parse(project.repo, _required_text(request.params, "to"))
        except subprocess.CalledProcessError as error:
            raise ApiError(HTTPStatus.NOT_FOUND, COMMIT_NOT_FOUND) from error
        if not _boolean(request.params, "straight"):
            start = _git(project.repo, "merge-base", start, end).decode().strip()
        commits = _read_commits(project.repo, start, end)
        diffs = [
            change.to_json(self.too_large_bytes)
            for change in _read_changes(project.repo, start, end)
        ]
        return Response(
            HTTPStatus.OK,
            {
                "commit": commits[0] if commits else None,
                "commits": commits,
                "diffs": diffs,
                "compare_timeout": False,
                "compare_same_ref": start == end,
                "web_url": f"{self.url}/{project.path_with_namespace}/-/compare/{start}...{end}",
            },
        )

    def _get_issues(self, request: Request, pid: str) -> Response:
        project = self._project(pid)
        search = str(request.params.get("search") or "").casefold()
        fields = str(request.params.get("in") or "title,description").split(",")
        state = str(request.params.get("state") or "all")
        found = []
        for issue in sorted(project.issues.values(), key=lambda i: i["id"], reverse=True):
            text = " ".join(str(issue.get(name) or "") for name in fields).casefold()
            if search and search not in text:
                continue
            if state in ("opened", "closed") and issue["state"] != state:
                continue
            found.append(copy.deepcopy(issue))
        return self._paginated(request, found)

    def _post_issue(self, request: Request, pid: str) -> Response:
        project = self._project(pid)
        when = _now()
        number = max(project.issues, default=0) + 1
        issue = {
            "id": next(self._ids),
            "iid": number,
            "project_id": project.id,
            "title": _required_text(request.params, "title"),
            "description": str(request.params.get("description") or ""),
            "state": "opened",
            "created_at": when,
            "updated_at": when,
            "closed_at": None,
            "labels": [],
            "confidential": False,
            "author": _user_basic(request.user),
            "web_url": f"{self.url}/{project.path_with_namespace}/-/issues/{number}",
        }
        project.issues[number] = issue
        return Response(HTTPStatus.CREATED, copy.deepcopy(issue))

    def _post_status(self, request: Request, pid: str, sha: str) -> Response:
        project = self._project(pid)
        self._commit(project, sha)
        params = {"ref": project.default_branch, **request.params}
        try:
            status = project.statuses.post(
                sha, params, next(self._ids), _now(), _user_basic(request.user)
            )
        except StatusRefused as refused:
            raise ApiError(refused.status, refused.body) from refused
        return Response(HTTPStatus.CREATED, status)

    def _get_statuses(self, request: Request, pid: str, sha: str) -> Response:
        project = self._project(pid)
        self._commit(project, sha)
        return self._paginated(request, project.statuses.listed(sha, request.params))

    def add_pipeline(
        self,
        project: str | int,
        sha: str,
        jobs: Mapping[str, Mapping[str, bytes] | None],
        *,
        ref: str = "main",
        status: str = "success",
    ) -> int:
        """A finished pipeline of ``sha`` with ``jobs`` (name -> artifact files by path, None
        for a job that kept none); its id."""
        with self._lock:
            target = self._project(project)
            pipeline_id = next(self._ids)
            when = _now()
            web_url = f"{self.url}/{target.path_with_namespace}"
            pipeline = {
                "id": pipeline_id,
                "iid": len(target.pipelines.pipelines) + 1,
                "project_id": target.id,
                "sha": sha,
                "ref": ref,
                "status": status,
                "source": "merge_request_event",
                "created_at": when,
                "updated_at": when,
                "web_url": f"{web_url}/-/pipelines/{pipeline_id}",
            }
            job_ids = [next(self._ids) for _ in jobs]
            target.pipelines.add(pipeline, jobs, job_ids, web_url)
            return pipeline_id

    def _get_pipelines(self, request: Request, pid: str) -> Response:
        project = self._project(pid)
        return self._paginated(request, project.pipelines.listed(request.params))

    def _get_pipeline_jobs(self, request: Request, pid: str, pipeline_id: str) -> Response:
        project = self._project(pid)
        try:
            return self._paginated(request, project.pipelines.jobs_of(int(pipeline_id)))
        except PipelineMissing as missing:
            raise ApiError(missing.status, missing.body) from missing

    def _get_job_artifact(self, request: Request, pid: str, job_id: str, path: str) -> Response:
        project = self._project(pid)
        try:
            content = project.pipelines.artifact(int(job_id), unquote(path))
        except PipelineMissing as missing:
            raise ApiError(missing.status, missing.body) from missing
        name = unquote(path).rsplit("/", 1)[-1]
        headers = {
            "Content-Type": "application/octet-stream",
            "Content-Disposition": f'attachment; filename="{name}"',
        }
        return Response(HTTPStatus.OK, content, headers)

    def commit_statuses(self, project: str | int, sha: str) -> list[dict[str, Any]]:
        """Every status of ``sha``, oldest first (what GitLab keeps, for tests)."""
        with self._lock:
            return self._project(project).statuses.listed(sha, {"all": "true"})

    def _commit(self, project: Project, sha: str) -> None:
        """404 Commit Not Found for a SHA the project's repository does not have."""
        if project.repo is None:
            return
        try:
            _rev_parse(project.repo, sha)
        except subprocess.CalledProcessError as error:
            raise ApiError(HTTPStatus.NOT_FOUND, COMMIT_NOT_FOUND) from error

    def _issue(self, pid: str, issue_iid: str) -> dict[str, Any]:
        issue = self._project(pid).issues.get(int(issue_iid))
        if issue is None:
            raise ApiError(HTTPStatus.NOT_FOUND, ISSUE_NOT_FOUND)
        return issue

    def _get_issue(self, request: Request, pid: str, issue_iid: str) -> Response:
        return Response(HTTPStatus.OK, copy.deepcopy(self._issue(pid, issue_iid)))

    def _put_issue(self, request: Request, pid: str, issue_iid: str) -> Response:
        issue = self._issue(pid, issue_iid)
        for name in ("title", "description"):
            if name in request.params:
                issue[name] = str(request.params[name])
        issue["updated_at"] = _now()
        return Response(HTTPStatus.OK, copy.deepcopy(issue))

    def _get_discussions(self, request: Request, pid: str, iid: str) -> Response:
        mr = self._mr(pid, iid)
        return self._paginated(request, [self._discussion_json(mr, d) for d in mr.discussions])

    def _get_discussion(self, request: Request, pid: str, iid: str, did: str) -> Response:
        mr = self._mr(pid, iid)
        return Response(HTTPStatus.OK, self._discussion_json(mr, self._discussion(mr, did)))

    def _post_discussion(self, request: Request, pid: str, iid: str) -> Response:
        mr = self._mr(pid, iid)
        body = _required_text(request.params, "body")
        discussion = self._new_discussion(
            mr, request.user, body, request.params.get("position"), individual=False
        )
        return Response(HTTPStatus.CREATED, self._discussion_json(mr, discussion))

    def _put_mr(self, request: Request, pid: str, iid: str) -> Response:
        """PUT /projects/:id/merge_requests/:iid (https://docs.gitlab.com/api/merge_requests/
        #update-mr): the author or a Developer edits it; title and description are modelled."""
        project, mr = self._project(pid), self._mr(pid, iid)
        user = request.user
        if mr.author["id"] != user["id"] and project.members.get(user["id"], 0) < DEVELOPER:
            raise ApiError(HTTPStatus.FORBIDDEN, FORBIDDEN)
        if not any(name in request.params for name in MR_UPDATE_PARAMS):
            missing = ", ".join(MR_UPDATE_PARAMS)
            raise ApiError(
                HTTPStatus.BAD_REQUEST,
                {"error": f"{missing} are missing, at least one parameter must be provided"},
            )
        if "description" in request.params:
            description = str(request.params["description"] or "")
            if len(description) > MAX_MR_DESCRIPTION_CHARS:
                too_long = f"is too long (maximum is {MAX_MR_DESCRIPTION_CHARS} characters)"
                raise ApiError(HTTPStatus.BAD_REQUEST, {"message": {"description": [too_long]}})
            mr.description = description
        if "title" in request.params:
            mr.title = _required_text(request.params, "title")
        mr.updated_at = _now()
        self.mr_updates.append((mr.iid, dict(request.params)))
        return Response(HTTPStatus.OK, self._mr_json(project, mr))

    def description(self, project: str | int, iid: int) -> str:
        """The MR's description as GitLab has it now."""
        with self._lock:
            return self._mr(project, iid).description

    def _put_discussion(self, request: Request, pid: str, iid: str, did: str) -> Response:
        mr = self._mr(pid, iid)
        discussion = self._discussion(mr, did)
        resolved = _boolean(request.params, "resolved")
        when = _now()
        for note in discussion.notes:
            if note.resolvable:
                note.resolved_by = request.user if resolved else None
                note.resolved_at = when if resolved else None
        return Response(HTTPStatus.OK, self._discussion_json(mr, discussion))

    def _post_discussion_note(self, request: Request, pid: str, iid: str, did: str) -> Response:
        mr = self._mr(pid, iid)
        note = self._reply(
            mr, self._discussion(mr, did), request.user, _required_text(request.params, "body")
        )
        return Response(HTTPStatus.CREATED, self._note_json(mr, note))

    def _get_notes(self, request: Request, pid: str, iid: str) -> Response:
        mr = self._mr(pid, iid)
        notes = [n for d in mr.discussions for n in d.notes]
        order_by = str(request.params.get("order_by", "created_at"))
        if order_by not in ("created_at", "updated_at"):
            raise ApiError(
                HTTPStatus.BAD_REQUEST, {"error": "order_by does not have a valid value"}
            )
        sort = str(request.params.get("sort", "desc"))
        if sort not in ("asc", "desc"):
            raise ApiError(HTTPStatus.BAD_REQUEST, {"error": "sort does not have a valid value"})
        notes.sort(key=lambda n: (getattr(n, order_by), n.id), reverse=sort == "desc")
        return self._paginated(request, [self._note_json(mr, n) for n in notes])

    def _get_note(self, request: Request, pid: str, iid: str, nid: str) -> Response:
        mr = self._mr(pid, iid)
        return Response(HTTPStatus.OK, self._note_json(mr, self._note(mr, nid)))

    def _post_note(self, request: Request, pid: str, iid: str) -> Response:
        mr = self._mr(pid, iid)
        body = _required_text(request.params, "body")
        discussion = self._new_discussion(mr, request.user, body, None, individual=True)
        return Response(HTTPStatus.CREATED, self._note_json(mr, discussion.notes[0]))

    def _put_note(self, request: Request, pid: str, iid: str, nid: str) -> Response:
        mr = self._mr(pid, iid)
        note = self._note(mr, nid)
        if note.author["id"] != request.user["id"]:
            raise ApiError(HTTPStatus.FORBIDDEN, FORBIDDEN)
        note.body = _required_text(request.params, "body")
        note.updated_at = _now()
        return Response(HTTPStatus.OK, self._note_json(mr, note))

    def _delete_note(self, request: Request, pid: str, iid: str, nid: str) -> Response:
        """DELETE .../notes/:id: the author (or a maintainer; not modelled) deletes a note."""
        mr = self._mr(pid, iid)
        note = self._note(mr, nid)
        if note.author["id"] != request.user["id"]:
            raise ApiError(HTTPStatus.FORBIDDEN, FORBIDDEN)
        self._remove_note(mr, nid)
        return Response(HTTPStatus.NO_CONTENT, None)

    def _get_award_emoji(self, request: Request, pid: str, iid: str, nid: str) -> Response:
        note = self._note(self._mr(pid, iid), nid)
        return self._paginated(request, copy.deepcopy(note.awards))

    def _get_drafts(self, request: Request, pid: str, iid: str) -> Response:
        mr = self._mr(pid, iid)
        mine = [_draft_json(d) for d in mr.drafts if d["author_id"] == request.user["id"]]
        return self._paginated(request, mine)

    def _post_draft(self, request: Request, pid: str, iid: str) -> Response:
        mr = self._mr(pid, iid)
        note = _required_text(request.params, "note")
        raw_position = request.params.get("position")
        position = _coerce_position(raw_position) if raw_position is not None else None
        change = _position_file(mr, position) if position is not None else None
        code = None
        if change is not None and position is not None and position["position_type"] == "text":
            code = _text_line_code(change, position)
        draft = {
            "id": next(self._ids),
            "author_id": request.user["id"],
            "merge_request_id": mr.id,
            "resolve_discussion": _boolean(request.params, "resolve_discussion"),
            "discussion_id": request.params.get("in_reply_to_discussion_id"),
            "note": note,
            "commit_id": request.params.get("commit_id"),
            "line_code": code,
            "position": position,
        }
        if draft["discussion_id"]:
            self._discussion(mr, str(draft["discussion_id"]))
        mr.drafts.append(draft)
        return Response(HTTPStatus.CREATED, _draft_json(draft))

    def _post_bulk_publish(self, request: Request, pid: str, iid: str) -> Response:
        self._publish_drafts(self._mr(pid, iid), request.user)
        return Response(HTTPStatus.NO_CONTENT, None)

    # ---- pagination

    def _paginated(self, request: Request, items: list[Any]) -> Response:
        """GitLab offset pagination: X-* headers and an RFC 5988 Link header."""
        per_page = _bounded_int(request.params.get("per_page"), DEFAULT_PER_PAGE, MAX_PER_PAGE)
        page = _bounded_int(request.params.get("page"), 1, None)
        total_pages = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        headers = {
            "X-Page": str(page),
            "X-Per-Page": str(per_page),
            "X-Total": str(len(items)),
            "X-Total-Pages": str(total_pages),
            "X-Next-Page": str(page + 1) if page < total_pages else "",
            "X-Prev-Page": str(page - 1) if page > 1 else "",
        }
        links = []
        if page > 1:
            links.append(self._link(request, page - 1, per_page, "prev"))
        if page < total_pages:
            links.append(self._link(request, page + 1, per_page, "next"))
        links.append(self._link(request, 1, per_page, "first"))
        links.append(self._link(request, total_pages, per_page, "last"))
        headers["Link"] = ", ".join(links)
        return Response(HTTPStatus.OK, chunk, headers)

    def _link(self, request: Request, page: int, per_page: int, rel: str) -> str:
        query = {k: v for k, v in request.query.items() if k not in ("page", "per_page")}
        query.update({"page": str(page), "per_page": str(per_page)})
        return f'<{self.url}{request.path}?{urlencode(query)}>; rel="{rel}"'


# --------------------------------------------------------------------------- helpers


def _draft_title(title: str, draft: bool) -> str:
    return f"{DRAFT_PREFIX}{title}" if draft and not title.startswith(DRAFT_PREFIX) else title


def _user_basic(user: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "username", "name", "state", "locked", "avatar_url", "web_url")
    return {key: user[key] for key in keys}


def _draft_json(draft: dict[str, Any]) -> dict[str, Any]:
    return {key: copy.deepcopy(value) for key, value in draft.items()}


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:2])


def _bounded_int(raw: Any, default: int, upper: int | None) -> int:
    try:
        value = int(raw)
    except (TypeError, ValueError):
        return default
    if value < 1:
        return default
    return min(value, upper) if upper is not None else value


def _required_text(params: dict[str, Any], name: str) -> str:
    value = params.get(name)
    if value is None or value == "":
        raise ApiError(HTTPStatus.BAD_REQUEST, {"error": f"{name} is missing"})
    return str(value)


def _boolean(params: dict[str, Any], name: str) -> bool:
    value = params.get(name, False)
    if isinstance(value, bool):
        return value
    return str(value).lower() in ("true", "1", "yes")


def _coerce_position(raw: Any) -> dict[str, Any]:
    """Grape's checks on ``position`` (lib/api/discussions.rb): required keys, integer lines."""
    if not isinstance(raw, dict):
        raise ApiError(HTTPStatus.BAD_REQUEST, {"error": "position is invalid"})
    position = copy.deepcopy(raw)
    for key in POSITION_REQUIRED:
        if not position.get(key):
            raise ApiError(HTTPStatus.BAD_REQUEST, {"error": f"position[{key}] is missing"})
    if position["position_type"] not in POSITION_TYPES:
        raise ApiError(
            HTTPStatus.BAD_REQUEST, {"error": "position[position_type] does not have a valid value"}
        )
    for key in POSITION_INTEGERS:
        value = position.get(key)
        if value in (None, ""):
            position[key] = None
            continue
        try:
            position[key] = int(value)
        except (TypeError, ValueError) as error:
            raise ApiError(
                HTTPStatus.BAD_REQUEST, {"error": f"position[{key}] is invalid"}
            ) from error
    stored = {
        "base_sha": position["base_sha"],
        "start_sha": position["start_sha"],
        "head_sha": position["head_sha"],
        "old_path": position.get("old_path"),
        "new_path": position.get("new_path"),
        "position_type": position["position_type"],
    }
    if position["position_type"] == "text":
        stored.update(
            {
                "old_line": position["old_line"],
                "new_line": position["new_line"],
                "line_range": position.get("line_range"),
                "ignore_whitespace_change": False,
            }
        )
    return stored


def _position_file(mr: MergeRequest, position: dict[str, Any]) -> FileChange | None:
    """The diff file a position names, in the MR version whose diff_refs it carries.

    lib/gitlab/diff/position.rb filters the diff by ``[old_path, new_path]``. Real GitLab
    diffs any two commits it has; this fake only knows the MR's versions (stricter).
    """
    refs = (position["base_sha"], position["start_sha"], position["head_sha"])
    version = next((v for v in mr.versions if v.refs() == refs), None)
    if version is None:
        return None
    paths = {p for p in (position.get("old_path"), position.get("new_path")) if p}
    return next((f for f in version.files if f.old_path in paths or f.new_path in paths), None)


def _text_line_code(change: FileChange, position: dict[str, Any]) -> str | None:
    """The line code GitLab would compute, or None when the position names no diff line."""
    line = change.line_for(position["old_line"], position["new_line"])
    if line is None or not _line_range_is_valid(change, position.get("line_range")):
        return None
    return line_code(change.new_path, line.old_pos, line.new_pos)


def _line_range_is_valid(change: FileChange, line_range: Any) -> bool:
    """Stricter than GitLab: both ends of a multi-line range must be lines of this diff."""
    if line_range in (None, {}):
        return True
    if not isinstance(line_range, dict):
        return False
    for end in ("start", "end"):
        point = line_range.get(end)
        if not isinstance(point, dict):
            return False
        code = str(point.get("line_code", ""))
        if not LINE_CODE_FORMAT.match(code) or not change.has_line_code(code):
            return False
        if point.get("type") not in ("new", "old", None):
            return False
    return True


def _check_scope(token: AccessToken, method: str, route: str) -> None:
    """403 insufficient_scope, as GitLab answers a token whose scopes do not allow the call."""
    scopes = set(token.scopes)
    if method == "GET":
        allowed = bool(scopes & READ_SCOPES) or (
            route in USER_SCOPE_ROUTES and USER_SCOPE in scopes
        )
    else:
        allowed = WRITE_SCOPE in scopes
    if not allowed:
        needed = WRITE_SCOPE if method != "GET" else "read_api api"
        raise ApiError(HTTPStatus.FORBIDDEN, {**INSUFFICIENT_SCOPE, "scope": needed})


def _fault_response(fault: str) -> Response | None:
    """Answer for a queued fault, or None when the request should then proceed (slow)."""
    if fault.startswith("slow:"):
        time.sleep(float(fault.split(":", 1)[1]))
        return None
    if fault == "429" or fault.startswith(("429:", "429-date")):
        wait = int(fault.split(":", 1)[1]) if ":" in fault else RETRY_AFTER_SECONDS
        reset = int(time.time()) + wait
        # Retry-After is delta-seconds or an HTTP-date (RFC 9110 section 10.2.3)
        retry_after = formatdate(reset, usegmt=True) if fault == "429-date" else str(wait)
        return Response(
            HTTPStatus.TOO_MANY_REQUESTS,
            "Retry later\n",
            {
                "Content-Type": "text/plain",
                "Retry-After": retry_after,
                "RateLimit-Name": "throttle_authenticated_api",
                "RateLimit-Limit": str(RATE_LIMIT),
                "RateLimit-Observed": str(RATE_LIMIT + 1),
                "RateLimit-Remaining": "0",
                "RateLimit-Reset": str(reset),
            },
        )
    if fault == CUT_SHORT_FAULT:  # a proxy cut the JSON answer short on its way back
        return Response(HTTPStatus.OK, CUT_SHORT_BODY, {"Content-Type": "application/json"})
    if fault in HTML_FAULTS:
        return Response(int(fault), GATEWAY_HTML.format(code=fault), {"Content-Type": "text/html"})
    if fault.isdigit():
        return Response(
            int(fault), SERVER_ERROR if fault == "500" else {"message": f"{fault} Error"}
        )
    raise ValueError(f"unknown fault {fault!r}")


# --------------------------------------------------------------------------- HTTP


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    params: dict[str, Any]
    headers: dict[str, str]
    user: dict[str, Any] = field(default_factory=dict)
    token: AccessToken | None = None


@dataclass
class Response:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


def _nest_form(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Rack-style nesting: ``position[line_range][start][line_code]=x`` → nested dicts."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        parts = re.findall(r"[^\[\]]+", key)
        target = result
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        if parts:
            target[parts[-1]] = value
    return result


def _parse_body(content_type: str, raw: bytes) -> dict[str, Any]:
    if not raw:
        return {}
    if content_type.startswith("application/json"):
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as error:
            raise ApiError(HTTPStatus.BAD_REQUEST, {"error": "body is invalid JSON"}) from error
        return data if isinstance(data, dict) else {}
    if content_type.startswith("application/x-www-form-urlencoded"):
        return _nest_form(parse_qsl(raw.decode(), keep_blank_values=True))
    return {}


_P = r"/projects/([^/]+)"
_MR = _P + r"/merge_requests/(\d+)"
_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    (m, re.compile(p), h)
    for m, p, h in [
        ("GET", r"/version", "_get_version"),
        ("GET", r"/user", "_get_user"),
        ("GET", r"/users/(\d+)", "_get_user_by_id"),
        ("GET", r"/personal_access_tokens/self", "_get_token_self"),
        ("GET", _P, "_get_project"),
        ("GET", _P + r"/members/all/(\d+)", "_get_member_all"),
        ("GET", _P + r"/repository/files/([^/]+)/raw", "_get_raw_file"),
        ("GET", _P + r"/repository/compare", "_get_compare"),
        ("GET", _P + r"/repository/tree", "_get_tree"),
        ("GET", _P + r"/issues", "_get_issues"),
        ("POST", _P + r"/issues", "_post_issue"),
        ("GET", _P + r"/issues/(\d+)", "_get_issue"),
        ("PUT", _P + r"/issues/(\d+)", "_put_issue"),
        ("POST", _P + r"/statuses/([0-9a-f]{7,40})", "_post_status"),
        ("GET", _P + r"/repository/commits/([0-9a-f]{7,40})/statuses", "_get_statuses"),
        ("GET", _P + r"/pipelines", "_get_pipelines"),
        ("GET", _P + r"/pipelines/(\d+)/jobs", "_get_pipeline_jobs"),
        ("GET", _P + r"/jobs/(\d+)/artifacts/(.+)", "_get_job_artifact"),
        ("GET", _MR, "_get_mr"),
        ("PUT", _MR, "_put_mr"),
        ("GET", _MR + r"/versions", "_get_versions"),
        ("GET", _MR + r"/versions/(\d+)", "_get_one_version"),
        ("GET", _MR + r"/diffs", "_get_diffs"),
        ("GET", _MR + r"/closes_issues", "_get_closes_issues"),
        ("GET", _MR + r"/related_issues", "_get_related_issues"),
        ("GET", _MR + r"/changes", "_get_changes"),
        ("GET", _MR + r"/discussions", "_get_discussions"),
        ("POST", _MR + r"/discussions", "_post_discussion"),
        ("GET", _MR + r"/discussions/([0-9a-f]+)", "_get_discussion"),
        ("PUT", _MR + r"/discussions/([0-9a-f]+)", "_put_discussion"),
        ("POST", _MR + r"/discussions/([0-9a-f]+)/notes", "_post_discussion_note"),
        ("GET", _MR + r"/notes", "_get_notes"),
        ("POST", _MR + r"/notes", "_post_note"),
        ("GET", _MR + r"/notes/(\d+)", "_get_note"),
        ("PUT", _MR + r"/notes/(\d+)", "_put_note"),
        ("DELETE", _MR + r"/notes/(\d+)", "_delete_note"),
        ("GET", _MR + r"/notes/(\d+)/award_emoji", "_get_award_emoji"),
        ("GET", _MR + r"/draft_notes", "_get_drafts"),
        ("POST", _MR + r"/draft_notes", "_post_draft"),
        ("POST", _MR + r"/draft_notes/bulk_publish", "_post_bulk_publish"),
    ]
]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    server_version = "nginx"
    sys_version = ""

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging."""

    def _serve(self, method: str) -> None:
        fake: FakeGitLab = self.server.fake  # type: ignore[attr-defined]
        parts = urlsplit(self.path)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        length = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = read_chunked(self.rfile)
        else:
            raw = self.rfile.read(length) if length else b""
        if GIT_PATH.match(parts.path):
            headers = {k.lower(): v for k, v in self.headers.items()}
            self._send(fake.serve_git(method, parts.path, parts.query, headers, raw))
            return
        try:
            body = _parse_body(self.headers.get("Content-Type", ""), raw)
        except ApiError as error:
            self._send(Response(error.status, error.body))
            return
        params: dict[str, Any] = {**_nest_form(list(query.items())), **body}
        headers = {k.lower(): v for k, v in self.headers.items()}
        self._send(fake.handle(Request(method, parts.path, query, params, headers)))

    def _send(self, response: Response) -> None:
        headers = dict(response.headers)
        if response.body is None:
            payload = b""
        elif isinstance(response.body, bytes):
            payload = response.body
        elif isinstance(response.body, str):
            payload = response.body.encode()
        else:
            payload = json.dumps(response.body).encode()
            headers.setdefault("Content-Type", JSON_CONTENT_TYPE)
        self.send_response(response.status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if payload and self.command != "HEAD":
            self.wfile.write(payload)


__all__ = ["FakeGitLab", "line_code", "parse_diff_lines"]
