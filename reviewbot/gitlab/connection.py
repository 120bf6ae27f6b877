"""One GitLab server over python-gitlab: the session, the retries, the errors, the pace.

Owns: what every GitLab call shares: the lazily built python-gitlab client (no I/O until the
first request), the retrying (:meth:`GitLabConnection._write_once`), the translation of
python-gitlab's and requests' errors into one-line :class:`GitLabError` s (never the token),
the check that every success is the API's JSON of the shape the call expects (below), the
pace of note creation, and the cached username of the token. The clients of the other
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
* The API answers every success with ``application/json`` (raw files: their own type, never
  HTML; 204: nothing). Anything else is not the API: an HTML page with status 200 is a login in
  front of it (GitLab's /users/sign_in after a redirect, or a single sign-on proxy) or a wrong
  path behind a proxy; a text/plain or XHTML page, or a body without a Content-Type, is some
  other server at that URL. python-gitlab hands such an answer back as a ``requests.Response``
  from ``http_get``/``http_post`` (client.py: "A requests result object if ... the content type
  is not json"; ``utils.get_content_type`` reads a missing header as text/plain), which its
  callers then index as if it were data, and raises ``GitlabParsingError`` ("Failed to parse
  the server message") from ``http_put``/``http_list``. Every answer is checked here first (a
  session hook, :meth:`GitLabConnection._check_answer`, before python-gitlab parses it):
  another type is :class:`GitLabNotAPIError`; JSON that does not parse is
  :class:`GitLabGarbledAnswerError` (retried); JSON nested too deep to parse, or of another
  shape than the call expects (each helper says: an object, an array of objects, a raw file),
  is :class:`GitLabBadAnswerError` (not retried).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

import gitlab
import requests
from gitlab.exceptions import GitlabAuthenticationError, GitlabError, GitlabHttpError
from requests.adapters import HTTPAdapter

from reviewbot.config import DEFAULT_GITLAB_NOTES_PER_MINUTE
from reviewbot.gitlab_budget import GitLabBudget, kinds_of
from reviewbot.redaction import hide_url_password, instance_url
from reviewbot.retry import backoff_s, retry_after_seconds

__all__ = [
    "RETRY_AFTER_CAP_S",
    "RETRY_BACKOFF_BASE_S",
    "Expected",
    "GitLabAuthError",
    "GitLabBadAnswerError",
    "GitLabConnection",
    "GitLabError",
    "GitLabGarbledAnswerError",
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
JSON_MEDIA_TYPE = "application/json"
HTTP_SUCCESS = range(200, 300)
HTTP_NO_CONTENT = 204
NOT_THE_API = (
    "GitLab URL answered text/html (a sign-in page?), not the API: "
    "set REVIEWBOT_GITLAB_URL to the instance root"
)
NOT_THE_API_JSON = (
    "GitLab URL answered {answered}, not the API JSON: "
    "set REVIEWBOT_GITLAB_URL to the instance root"
)
NO_CONTENT_TYPE = "without a Content-Type"
GARBLED_JSON = "JSON that does not parse (cut short on the way?)"
TOO_DEEP_JSON = "JSON nested too deep to parse"
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


class GitLabGarbledAnswerError(GitLabUnavailableError):
    """A success in ``application/json`` whose body does not parse: a body cut short on the
    way (a proxy, a GitLab worker killed mid-answer) is gone on the next try, so this is
    retried like a 502 (and a write looked for on the MR first: it may have been stored)."""


class GitLabBadAnswerError(GitLabError):
    """JSON that parses to another shape than the call expects (an array for an object, a
    string), or is nested too deep to parse: GitLab's API never answers so, and the same
    request gets the same answer, so it is not retried (reviewbot.errors: failed)."""


class PositionRefusedError(GitLabError):
    """GitLab answered 400 to a diff note's position (usually the line_code refusal)."""


class Expected(Enum):
    """What a call's success answers, as :meth:`GitLabConnection._check_answer` checks it."""

    OBJECT = "an object"
    OBJECTS = "an array of objects"
    RAW_FILE = "a raw file"  # its own content type (never HTML), not parsed


STREAM_CHUNK_BYTES = 64 * 1024


def _read_at_most(answer: Any, limit: int) -> bytes:
    """At most ``limit`` bytes of a streamed answer (requests' ``iter_content``)."""
    read = bytearray()
    for chunk in answer.iter_content(chunk_size=min(STREAM_CHUNK_BYTES, limit)):
        read += chunk
        if len(read) >= limit:
            break
    return bytes(read[:limit])


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
        self._expected = threading.local()
        self._budget: GitLabBudget | None = None

    def use_budget(self, budget: GitLabBudget | None) -> None:
        """Take from ``budget`` before every HTTP request (every page and retry), shared with
        the other workers of the deployment (reviewbot.gitlab_budget); None: no budget."""
        self._budget = budget

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={hide_url_password(self._settings.url)!r})"

    @property
    def url(self) -> str:
        """The GitLab instance's URL as it identifies an MR in the database: without a
        password or user name the configured URL may hold, without a trailing slash."""
        return instance_url(self._settings.url)

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
            self._gl.session.hooks["response"].append(self._check_answer)
            adapter = _BudgetedAdapter(lambda: self._budget)
            for scheme in ("http://", "https://"):
                self._gl.session.mount(scheme, adapter)
        return self._gl

    def _remember_retry_after(self, response: requests.Response, *_: Any, **__: Any) -> None:
        self._last_answer.retry_after = response.headers.get("Retry-After")

    def _once(self) -> dict[str, Any]:
        """python-gitlab options for one attempt: the retrying is ours."""
        return {"max_retries": 0, "obey_rate_limit": False, "retry_transient_errors": False}

    def _expecting(self, expected: Expected, call: Callable[[], _T]) -> _T:
        """``call`` (python-gitlab requests on this thread), its answers checked as ``expected``."""
        previous = getattr(self._expected, "value", None)
        self._expected.value = expected
        try:
            return call()
        finally:
            self._expected.value = previous

    def _get(self, path: str, **query: Any) -> dict[str, Any]:
        return self._retrying(
            lambda: self._expecting(
                Expected.OBJECT,
                lambda: self._api.http_get(path, query_data=query, **self._once()),
            )
        )

    def _list(self, path: str, /, **query: Any) -> list[dict[str, Any]]:
        """Every page. Gitlab(per_page=...) only applies to managers' list(), so it is passed
        on every call; ``page`` (with ``get_all=False``) asks for one page only."""
        query.setdefault("per_page", self._settings.per_page)
        get_all = "page" not in query
        return self._retrying(
            lambda: self._expecting(
                Expected.OBJECTS,
                lambda: list(
                    self._api.http_list(path, query_data=query, get_all=get_all, **self._once())
                ),
            )
        )

    def _raw(self, path: str, *, max_bytes: int | None = None, **query: Any) -> bytes:
        """A raw file's bytes (its own content type, never HTML). With ``max_bytes``, the answer
        is streamed and read no further than ``max_bytes + 1`` bytes, then closed: a longer
        result means a larger file, and a file of gigabytes costs one megabyte to refuse."""
        streamed = max_bytes is not None
        answer = self._retrying(
            lambda: self._expecting(
                Expected.RAW_FILE,
                lambda: self._api.http_get(
                    path, query_data=query, raw=True, streamed=streamed, **self._once()
                ),
            )
        )
        if max_bytes is None:
            return bytes(getattr(answer, "content", b""))
        try:
            return _read_at_most(answer, max_bytes + 1)
        finally:
            answer.close()

    def _create(self, path: str, data: dict[str, Any]) -> dict[str, Any]:
        """One POST that creates something and answers it: not retried here (the callers'
        :meth:`_write_once` looks for it on the MR first)."""
        return self._expecting(
            Expected.OBJECT, lambda: self._api.http_post(path, post_data=data, **self._once())
        )

    def _post(self, path: str, data: dict[str, Any] | None = None) -> None:
        """A POST that may be repeated safely (it creates nothing twice) and answers 204."""
        self._retrying(
            lambda: self._expecting(
                Expected.OBJECT, lambda: self._api.http_post(path, post_data=data, **self._once())
            )
        )

    def _put(self, path: str, data: dict[str, Any]) -> dict[str, Any]:
        return self._retrying(
            lambda: self._expecting(
                Expected.OBJECT, lambda: self._api.http_put(path, post_data=data, **self._once())
            )
        )

    def _check_answer(self, response: requests.Response, *_: Any, **__: Any) -> None:
        """A session hook: refuse a success that is not what the API answers (see the module
        notes) before python-gitlab parses it or hands it back as if it were data."""
        if response.status_code not in HTTP_SUCCESS or response.status_code == HTTP_NO_CONTENT:
            return
        media_type = response.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        expected = getattr(self._expected, "value", None)
        if media_type == HTML_MEDIA_TYPE:
            response.close()
            raise GitLabNotAPIError(NOT_THE_API)
        if expected is Expected.RAW_FILE:
            return
        if media_type != JSON_MEDIA_TYPE:
            response.close()
            raise GitLabNotAPIError(NOT_THE_API_JSON.format(answered=media_type or NO_CONTENT_TYPE))
        request = response.request
        answered = (
            f"GitLab at {hide_url_password(self.url)} answered {request.method} "
            f"{urlsplit(response.url).path} with"
        )
        try:
            # Parsed twice (python-gitlab parses it again): a few ms for the largest diff
            # page, against a crash on what it cannot parse.
            data = json.loads(response.content)
        except RecursionError as error:
            raise GitLabBadAnswerError(f"{answered} {TOO_DEEP_JSON}") from error
        except ValueError as error:
            raise GitLabGarbledAnswerError(f"{answered} {GARBLED_JSON}") from error
        problem = _shape_problem(data, expected)
        if problem is not None:
            raise GitLabBadAnswerError(f"{answered} {problem}")

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
            except (*TRANSPORT_ERRORS, GitlabHttpError, GitLabGarbledAnswerError) as error:
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
        """Map python-gitlab/requests errors, and a field missing from an answer, to one-line
        GitLabErrors (no token or password)."""
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
        except KeyError as error:
            # Inside this block only GitLab's answers are indexed: an object without a field
            # the endpoint always has is an answer of the wrong shape, not a bug of ours.
            raise GitLabBadAnswerError(
                f"GitLab at {url} answered without the field {error} while {action}"
            ) from error

    @contextmanager
    def _answer_fields(self, action: str) -> Iterator[None]:
        """Read the fields of answers already checked to be JSON of the right top-level shape:
        a field of the wrong type inside (``diff_refs`` a string, ``project_id`` not a number, a
        diff entry without its paths) is an answer of the wrong shape, one line, not retried.
        Only GitLab's data is read inside this block (no call of ours that could hide a bug)."""
        url = hide_url_password(self._settings.url)
        try:
            yield
        except (TypeError, ValueError, AttributeError) as error:
            detail = " ".join(str(error).split())[:MAX_ERROR_TEXT]
            raise GitLabBadAnswerError(
                f"GitLab at {url} answered a field of the wrong shape while {action}: {detail}"
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


class _BudgetedAdapter(HTTPAdapter):
    """requests' transport that takes from the connection's budget before each request."""

    def __init__(self, budget: Callable[[], GitLabBudget | None]) -> None:
        super().__init__()
        self._budget_of = budget

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> Any:
        budget = self._budget_of()
        if budget is not None:
            budget.take(kinds_of(request.method or "GET", urlsplit(request.url or "").path))
        return super().send(request, *args, **kwargs)


class RequestCounter:
    """HTTP answers counted by :meth:`GitLabConnection.counting_requests`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def hook(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            self.count += 1


def _json_kind(value: object) -> str:
    if isinstance(value, dict):
        return "a JSON object"
    if isinstance(value, list):
        return "a JSON array"
    if isinstance(value, str):
        return "a JSON string"
    if isinstance(value, bool):
        return "a JSON boolean"
    if value is None:
        return "JSON null"
    return "a JSON number"


def _shape_problem(data: object, expected: Expected | None) -> str | None:
    """What is wrong with ``data`` as the answer to a call expecting ``expected`` (None: any
    object or array, the only shapes the API answers), or None."""
    if expected is Expected.OBJECT and not isinstance(data, dict):
        return f"{_json_kind(data)} where the API answers {expected.value}"
    if expected is Expected.OBJECTS:
        if not isinstance(data, list):
            return f"{_json_kind(data)} where the API answers {expected.value}"
        strays = [item for item in data if not isinstance(item, dict)]
        if strays:
            held = _json_kind(strays[0])
            return f"an array holding {held} where the API answers {expected.value}"
    if expected is None and not isinstance(data, dict | list):
        return f"{_json_kind(data)} where the API answers an object or an array"
    return None


def _transient(error: BaseException) -> bool:
    """Worth another try: a transport error, 429, a 5xx from GitLab or a proxy, or a JSON
    body that does not parse (cut short on the way)."""
    if isinstance(error, GitlabHttpError):
        code = error.response_code or 0
        return code == HTTP_TOO_MANY_REQUESTS or code in TRANSIENT_SERVER_STATUSES
    return isinstance(error, (*TRANSPORT_ERRORS, GitLabGarbledAnswerError))


def error_text(error: GitlabError) -> str:
    message = error.error_message
    if isinstance(message, bytes):
        message = message.decode("utf-8", errors="replace")
    text = " ".join(str(message).split())
    return text[:MAX_ERROR_TEXT]
