"""One GitLab server over python-gitlab: the session, the retries, the errors, the pace.

Owns: what every GitLab call shares: the lazily built python-gitlab client (no I/O until the
first request), the retrying (:meth:`GitLabConnection._write_once`), the translation of
python-gitlab's and requests' errors into one-line :class:`GitLabError` s (never the token),
the pace of note creation, and the cached username of the token. The clients of the other
modules of this package are built on :class:`GitLabConnection`. Must not: know what they
read or write, nor build a position (``reviewbot.positions``) or a wait (``reviewbot.retry``).

* Retries are ours, not python-gitlab's: its loop re-sends a POST after a 5xx or a timeout
  that came *after* GitLab stored the write (a duplicate comment), sleeps as long as any
  ``Retry-After`` says, and crashes on the header's HTTP-date form (gitlab/utils.py ``Retry``:
  ``int(headers["Retry-After"])``). Here every call is made once by python-gitlab
  (``max_retries=0``); reads are retried after 429, 5xx and transport errors with a capped
  wait (``Retry-After`` in seconds or as an HTTP date, RFC 9110 section 10.2.3, read by
  ``reviewbot.retry``), and a write whose answer was lost is looked for on the MR (by its
  hidden marker) before it is sent again.
* The API answers JSON (raw files: their own type, never HTML; 204 nothing). An HTML page with
  status 200 is a login in front of the API (GitLab's /users/sign_in after a redirect, or a
  single sign-on proxy) or a wrong path behind a proxy: python-gitlab hands such an answer
  back as a ``requests.Response`` from ``http_get``/``http_post`` (client.py: "A requests
  result object if ... the content type is not json") and raises ``GitlabParsingError``
  ("Failed to parse the server message") from ``http_put``/``http_list``. Every answer is
  checked here first (a session hook) and refused as :class:`GitLabNotAPIError`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import quote

import gitlab
import requests
from gitlab.exceptions import GitlabAuthenticationError, GitlabError, GitlabHttpError

from reviewbot.config import DEFAULT_GITLAB_NOTES_PER_MINUTE
from reviewbot.redaction import hide_url_password
from reviewbot.retry import backoff_s, retry_after_seconds

__all__ = [
    "RETRY_AFTER_CAP_S",
    "RETRY_BACKOFF_BASE_S",
    "GitLabAuthError",
    "GitLabConnection",
    "GitLabError",
    "GitLabNotAPIError",
    "GitLabNotFoundError",
    "GitLabSettings",
    "GitLabUnavailableError",
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


class GitLabConnection:
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
        return f"{type(self).__name__}(url={hide_url_password(self._settings.url)!r})"

    @property
    def url(self) -> str:
        """The GitLab instance's URL (part of what identifies an MR in the database)."""
        return self._settings.url.rstrip("/")

    def close(self) -> None:
        """Close the HTTP session and its pooled connections; a later request opens another."""
        api, self._gl = self._gl, None
        if api is not None:
            api.session.close()

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
            raise GitLabError(f"{action} failed: {code} {error_text(error)}") from error
        except GitlabError as error:
            raise GitLabError(f"{action} failed: {error_text(error)}") from error
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

    def bot_username(self) -> str:
        """The username the token belongs to (cached)."""
        if self._username is None:
            with self._translated("reading the current user"):
                self._username = str(self._get("/user")["username"])
        return self._username

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


class RequestCounter:
    """HTTP answers counted by :meth:`GitLabConnection.counting_requests`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def hook(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            self.count += 1


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


def error_text(error: GitlabError) -> str:
    message = error.error_message
    if isinstance(message, bytes):
        message = message.decode("utf-8", errors="replace")
    text = " ".join(str(message).split())
    return text[:MAX_ERROR_TEXT]
