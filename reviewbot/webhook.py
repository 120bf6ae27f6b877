"""The webhook listener: check, validate, enqueue, answer 202 in milliseconds.

`POST /webhook/gitlab` receives GitLab's Merge Request, Note and Emoji hooks. Nothing slow
happens while GitLab waits (it gives up after about 10 s and disables hooks that keep failing):
a review becomes a row in the jobs table (`reviewbot.queue`) that a worker runs later; a
thumbs up/down becomes a row in `feedback`; only the answer to `/reviewbot help` talks to
GitLab, in a background task after the response is sent.

GitLab rules relied on (doc/user/project/integrations/webhook_events.md and
app/services/web_hook_service.rb in gitlabhq/gitlabhq):

* Headers: ``X-Gitlab-Event`` names the hook ("Merge Request Hook", "Note Hook",
  "Emoji Hook"); ``X-Gitlab-Token`` carries the secret; ``Idempotency-Key`` (GitLab >= 17.4)
  is kept across retries of one event; ``X-Gitlab-Event-UUID`` (recursion detection) is shared
  by the hooks of one event, hence combined here with a hash of the body.
* Merge request actions: open, close, reopen, update, approved, unapproved, approval,
  unapproval, merge. ``object_attributes.oldrev`` is present only when code changed (a push,
  an applied suggestion); ``changes.draft`` = {previous, current} when the draft flag flips.
* Note hooks: ``object_attributes.noteable_type`` is MergeRequest, Issue, Commit or Snippet;
  ``object_attributes.action`` is create or update (GitLab >= 16.11; absent before).
  ``/reviewbot`` is not one of GitLab's quick actions, and GitLab only strips the commands it
  knows (lib/gitlab/quick_actions/extractor.rb), so the line reaches us unchanged.
* Emoji hooks: ``object_attributes`` has name, awardable_type ("Note" for a comment),
  awardable_id (the note id) and action (award or revoke).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

import click
import uvicorn
from sqlalchemy import Engine, case, extract, func, select, text
from sqlalchemy.exc import SQLAlchemyError
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reviewbot.config import ConfigError, Settings, load_settings
from reviewbot.gitlab import GitLabClient, GitLabError, GitLabSettings
from reviewbot.metrics import (
    CONTENT_TYPE,
    MetricFamily,
    MetricKind,
    Sample,
    histogram_from_counts,
    render,
)
from reviewbot.queue import EnqueueResult, JobQueue, JobStatus
from reviewbot.store import Store, upgrade
from reviewbot.store.models import FeedbackKind, Trigger
from reviewbot.store.models import Finding as FindingRow
from reviewbot.store.models import LLMCall as LLMCallRow
from reviewbot.store.models import Review as ReviewRow

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "WEBHOOK_PATH",
    "Command",
    "DeliveryCounter",
    "NotePoster",
    "create_app",
    "delivery_key",
    "help_text",
    "openapi_spec",
    "parse_command",
    "serve_command",
]

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/webhook/gitlab"
DEFAULT_MAX_BODY_BYTES = 1_000_000
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080

HTTP_OK = 200
HTTP_ACCEPTED = 202
HTTP_NO_CONTENT = 204
HTTP_BAD_REQUEST = 400
HTTP_UNAUTHORIZED = 401
HTTP_PAYLOAD_TOO_LARGE = 413
HTTP_SERVICE_UNAVAILABLE = 503

# Header values used as keys are bounded: longer ones are replaced by their SHA-256.
MAX_KEY_VALUE_CHARS = 128
# How many help answers this process remembers, so a redelivered `/reviewbot help` is
# answered once (per process: several listeners may each answer a redelivery once).
RECENT_HELP_KEYS = 4096

MERGE_REQUEST_HOOK = "Merge Request Hook"
NOTE_HOOK = "Note Hook"
EMOJI_HOOK = "Emoji Hook"

COMMAND_PREFIX = "/reviewbot"
REVIEW_ACTIONS = {"open": "opened", "reopen": "reopened"}
CANCEL_ACTIONS = {"close": "closed", "merge": "merged"}
INACTIVE_MR_STATES = frozenset({"closed", "merged", "locked"})
NOTE_CREATED = "create"
FEEDBACK_EMOJI = {"thumbsup": "thumbsup", "+1": "thumbsup", "thumbsdown": "thumbsdown",
                  "-1": "thumbsdown"}  # fmt: skip
EMOJI_REVOKE = "revoke"

MS_PER_SECOND = 1000.0
SECONDS_PER_DAY = 86_400.0
REVIEW_DURATION_BUCKETS_S = (5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0)
LLM_TTFT_BUCKETS_S = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0)
LLM_LATENCY_BUCKETS_S = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)


class Command(StrEnum):
    REVIEW = "review"
    HELP = "help"


class Outcome(StrEnum):
    """What became of a delivery (the label of `reviewbot_webhook_deliveries_total`)."""

    QUEUED = "queued"
    DUPLICATE = "duplicate"
    CANCELLED = "cancelled"
    FEEDBACK = "feedback"
    HELP = "help"
    IGNORED = "ignored"
    UNKNOWN_EVENT = "unknown_event"
    UNAUTHORIZED = "unauthorized"
    TOO_LARGE = "too_large"
    BAD_REQUEST = "bad_request"
    UNAVAILABLE = "unavailable"


# ---------------------------------------------------------------------------------------------
# Collaborators


class JobSink(Protocol):
    """The part of `reviewbot.queue.JobQueue` the listener uses."""

    def enqueue(
        self,
        *,
        project: str,
        mr_iid: int,
        head_sha: str | None,
        trigger: str,
        dedupe_key: str | None = None,
        payload: dict[str, Any] | None = None,
    ) -> EnqueueResult: ...

    def cancel_for_mr(self, project: str, mr_iid: int, reason: str) -> int: ...

    def counts(self) -> dict[str, int]: ...


class NotePoster(Protocol):
    """Posts a comment on a merge request (the answer to `/reviewbot help`)."""

    def post_note(self, project: str, iid: int, body: str) -> int: ...


class DeliveryCounter:
    """Deliveries by outcome, in this process (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, outcome: str) -> None:
        with self._lock:
            self._counts[outcome] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {outcome.value: self._counts[outcome.value] for outcome in Outcome}


class RecentKeys:
    """A bounded set of recently seen keys; `add` is False for a key already there."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._keys: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, key: str) -> bool:
        with self._lock:
            if key in self._keys:
                return False
            self._keys[key] = None
            if len(self._keys) > self._capacity:
                self._keys.popitem(last=False)
            return True


@dataclass
class ListenerContext:
    store: Store
    queue: JobSink
    secret: str | None
    bot_username: str
    review_drafts: bool
    max_body_bytes: int
    note_poster: NotePoster | None
    deliveries: DeliveryCounter = field(default_factory=DeliveryCounter)
    answered_help: RecentKeys = field(default_factory=lambda: RecentKeys(RECENT_HELP_KEYS))


@dataclass(frozen=True)
class Delivery:
    event: str
    key: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class Result:
    status_code: int
    outcome: Outcome
    detail: dict[str, Any] = field(default_factory=dict)
    background: BackgroundTask | None = None


class Rejected(Exception):
    """The request is refused before any handler runs."""

    def __init__(self, status_code: int, outcome: Outcome, reason: str) -> None:
        super().__init__(reason)
        self.result = Result(status_code, outcome, {"error": reason})


class PayloadError(ValueError):
    """The JSON body lacks a field the event needs, or has it with the wrong type."""


def _ignored(reason: str) -> Result:
    return Result(HTTP_OK, Outcome.IGNORED, {"status": Outcome.IGNORED.value, "reason": reason})


# ---------------------------------------------------------------------------------------------
# Pure helpers


def delivery_key(headers: Mapping[str, str], body: bytes) -> str:
    """The key that identifies one event across GitLab's retries and manual redeliveries.

    ``Idempotency-Key`` when GitLab sends it (>= 17.4), else ``X-Gitlab-Event-UUID`` with a
    hash of the body (the UUID alone is shared by every hook of one event), else the hash.
    """
    idempotency_key = headers.get("idempotency-key", "").strip()
    if idempotency_key:
        return f"idempotency:{_bounded(idempotency_key)}"
    body_hash = hashlib.sha256(body).hexdigest()
    event_uuid = headers.get("x-gitlab-event-uuid", "").strip()
    if event_uuid:
        return f"event:{_bounded(event_uuid)}:{body_hash}"
    return f"body:{body_hash}"


def _bounded(value: str) -> str:
    if len(value) <= MAX_KEY_VALUE_CHARS:
        return value
    return hashlib.sha256(value.encode()).hexdigest()


def parse_command(note: str, bot_username: str) -> Command | None:
    """The command on the note's first line: ``/reviewbot review`` or ``@<bot> review``.

    A first line addressed to reviewbot without a known command (``/reviewbot``,
    ``@bot what?``) asks for help. Anything else is not for us: None.
    """
    lines = note.strip().splitlines()
    words = lines[0].split() if lines else []
    if not words or words[0].casefold() not in {COMMAND_PREFIX, f"@{bot_username}".casefold()}:
        return None
    if len(words) > 1 and words[1].casefold() == Command.REVIEW.value:
        return Command.REVIEW
    return Command.HELP


def help_text(bot_username: str) -> str:
    """The answer to `/reviewbot help` (no line starts with `/`: it would be a quick action)."""
    return (
        "**reviewbot** commands, on the first line of a comment on a merge request:\n\n"
        f"- `/reviewbot review` or `@{bot_username} review`: review the latest changes now\n"
        f"- `/reviewbot help` or `@{bot_username} help`: show this message\n\n"
        "Merge requests are also reviewed when they are opened, reopened, pushed to, or marked "
        "ready (drafts are skipped unless the server enables them). React with :thumbsup: or "
        ":thumbsdown: on a reviewbot comment to say whether it helped."
    )


def _walk(payload: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = payload
    for depth, name in enumerate(path):
        if not isinstance(value, Mapping):
            raise PayloadError(f"{'.'.join(path[:depth])} must be an object")
        value = value.get(name)
    return value


def _required(payload: Mapping[str, Any], *path: str) -> Any:
    value = _walk(payload, path)
    if value is None:
        raise PayloadError(f"{'.'.join(path)} is missing")
    return value


def _str_at(payload: Mapping[str, Any], *path: str) -> str:
    value = _required(payload, *path)
    if not isinstance(value, str) or not value:
        raise PayloadError(f"{'.'.join(path)} must be a non-empty string")
    return value


def _int_at(payload: Mapping[str, Any], *path: str) -> int:
    value = _required(payload, *path)
    if isinstance(value, bool) or not isinstance(value, int):
        raise PayloadError(f"{'.'.join(path)} must be an integer")
    return value


def _optional_str_at(payload: Mapping[str, Any], *path: str) -> str | None:
    value = _walk(payload, path)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise PayloadError(f"{'.'.join(path)} must be a string")
    return value


def _object_at(payload: Mapping[str, Any], *path: str) -> dict[str, Any]:
    value = _required(payload, *path)
    if not isinstance(value, dict):
        raise PayloadError(f"{'.'.join(path)} must be an object")
    return value


def _expect_kind(payload: Mapping[str, Any], event: str, kind: str) -> None:
    object_kind = _str_at(payload, "object_kind")
    if object_kind != kind:
        raise PayloadError(f"object_kind {object_kind!r} does not match X-Gitlab-Event {event!r}")


def _is_draft(attributes: Mapping[str, Any]) -> bool:
    # `work_in_progress` is the pre-14.x name of `draft`; GitLab still sends both.
    return bool(attributes.get("draft") or attributes.get("work_in_progress"))


def _review_reason(attributes: Mapping[str, Any], changes: Any) -> str | None:
    """Why this Merge Request Hook asks for a review, or None when it does not."""
    action = attributes.get("action")
    if action in REVIEW_ACTIONS:
        return REVIEW_ACTIONS[action]
    if action != "update":
        return None
    if attributes.get("oldrev"):
        return "pushed"
    draft_change = changes.get("draft") if isinstance(changes, Mapping) else None
    if (
        isinstance(draft_change, Mapping)
        and draft_change.get("previous") is True
        and draft_change.get("current") is False
    ):
        return "marked ready"
    return None


# ---------------------------------------------------------------------------------------------
# Event handlers (run in a worker thread: they talk to the database)


def _enqueue(
    ctx: ListenerContext,
    delivery: Delivery,
    *,
    project: str,
    iid: int,
    head_sha: str | None,
    trigger: Trigger,
    reason: str,
) -> Result:
    result = ctx.queue.enqueue(
        project=project, mr_iid=iid, head_sha=head_sha, trigger=trigger.value,
        dedupe_key=delivery.key, payload={"event": delivery.event, "reason": reason},
    )  # fmt: skip
    outcome = Outcome.QUEUED if result.created else Outcome.DUPLICATE
    detail = {
        "status": outcome.value, "job_id": result.job_id, "superseded": list(result.superseded),
        "reason": reason,
    }  # fmt: skip
    return Result(HTTP_ACCEPTED, outcome, detail)


def on_merge_request(ctx: ListenerContext, delivery: Delivery) -> Result:
    payload = delivery.payload
    _expect_kind(payload, delivery.event, "merge_request")
    attributes = _object_at(payload, "object_attributes")
    project = _str_at(payload, "project", "path_with_namespace")
    iid = _int_at(payload, "object_attributes", "iid")
    action = _optional_str_at(payload, "object_attributes", "action")
    if action in CANCEL_ACTIONS:
        reason = f"merge request {CANCEL_ACTIONS[action]}"
        cancelled = ctx.queue.cancel_for_mr(project, iid, reason)
        detail = {"status": Outcome.CANCELLED.value, "cancelled": cancelled, "reason": reason}
        return Result(HTTP_ACCEPTED, Outcome.CANCELLED, detail)
    reason = _review_reason(attributes, payload.get("changes"))
    if reason is None:
        return _ignored(f"action {action!r} changes no code")
    if attributes.get("state") in INACTIVE_MR_STATES:
        return _ignored(f"merge request is {attributes['state']}")
    if _is_draft(attributes) and not ctx.review_drafts:
        return _ignored("draft merge request (drafts are reviewed when marked ready)")
    head_sha = _optional_str_at(payload, "object_attributes", "last_commit", "id")
    return _enqueue(ctx, delivery, project=project, iid=iid, head_sha=head_sha,
                    trigger=Trigger.WEBHOOK, reason=reason)  # fmt: skip


def on_note(ctx: ListenerContext, delivery: Delivery) -> Result:
    payload = delivery.payload
    _expect_kind(payload, delivery.event, "note")
    attributes = _object_at(payload, "object_attributes")
    noteable_type = _str_at(payload, "object_attributes", "noteable_type")
    if noteable_type != "MergeRequest":
        return _ignored(f"comment on a {noteable_type}, not on a merge request")
    author = _str_at(payload, "user", "username")
    if author.casefold() == ctx.bot_username.casefold():
        return _ignored("comment written by reviewbot itself")
    if attributes.get("system"):
        return _ignored("system note")
    if attributes.get("action", NOTE_CREATED) != NOTE_CREATED:
        return _ignored("edited comment (commands run when a comment is created)")
    command = parse_command(_optional_str_at(payload, "object_attributes", "note") or "",
                            ctx.bot_username)  # fmt: skip
    if command is None:
        return _ignored("no reviewbot command on the first line")
    project = _str_at(payload, "project", "path_with_namespace")
    iid = _int_at(payload, "merge_request", "iid")
    if command is Command.HELP:
        return _answer_help(ctx, delivery, project, iid)
    state = _optional_str_at(payload, "merge_request", "state")
    if state in INACTIVE_MR_STATES:
        return _ignored(f"merge request is {state}")
    head_sha = _optional_str_at(payload, "merge_request", "last_commit", "id")
    return _enqueue(ctx, delivery, project=project, iid=iid, head_sha=head_sha,
                    trigger=Trigger.NOTE, reason=f"requested by @{author}")  # fmt: skip


def _answer_help(ctx: ListenerContext, delivery: Delivery, project: str, iid: int) -> Result:
    if ctx.note_poster is None:
        return _ignored("help requested, but this listener has no GitLab client to answer")
    if not ctx.answered_help.add(delivery.key):
        return Result(HTTP_ACCEPTED, Outcome.DUPLICATE, {"status": Outcome.DUPLICATE.value})
    task = BackgroundTask(_post_help, ctx.note_poster, project, iid, help_text(ctx.bot_username))
    return Result(HTTP_ACCEPTED, Outcome.HELP, {"status": Outcome.HELP.value}, task)


def _post_help(poster: NotePoster, project: str, iid: int, body: str) -> None:
    try:
        poster.post_note(project, iid, body)
    except GitLabError as error:
        log.warning("could not answer /reviewbot help on %s!%d: %s", project, iid, error)


@dataclass(frozen=True)
class BotNote:
    finding_id: int | None
    mr_iid: int | None


def _bot_note(engine: Engine, note_id: int) -> BotNote | None:
    """The finding (or review summary) reviewbot posted as note `note_id`, if any."""
    finding_query = (
        select(FindingRow.id, FindingRow.mr_iid)
        .where(FindingRow.note_id == note_id)
        .order_by(FindingRow.id.desc())
        .limit(1)
    )
    summary_query = (
        select(ReviewRow.mr_iid)
        .where(ReviewRow.summary_note_id == note_id)
        .order_by(ReviewRow.id.desc())
        .limit(1)
    )
    with engine.connect() as connection:
        finding = connection.execute(finding_query).first()
        if finding is not None:
            return BotNote(finding_id=finding.id, mr_iid=finding.mr_iid)
        summary = connection.execute(summary_query).first()
    return None if summary is None else BotNote(finding_id=None, mr_iid=summary.mr_iid)


def on_emoji(ctx: ListenerContext, delivery: Delivery) -> Result:
    payload = delivery.payload
    _expect_kind(payload, delivery.event, "emoji")
    name = _str_at(payload, "object_attributes", "name")
    awardable_type = _str_at(payload, "object_attributes", "awardable_type")
    if awardable_type != "Note":
        return _ignored(f"reaction on a {awardable_type}, not on a comment")
    vote = FEEDBACK_EMOJI.get(name)
    if vote is None:
        return _ignored(f"reaction {name!r} is not feedback (thumbsup/thumbsdown)")
    username = _str_at(payload, "user", "username")
    if username.casefold() == ctx.bot_username.casefold():
        return _ignored("reaction by reviewbot itself")
    note_id = _int_at(payload, "object_attributes", "awardable_id")
    target = _bot_note(ctx.store.engine, note_id)
    if target is None:
        return _ignored("reaction on a comment reviewbot did not write")
    revoked = _optional_str_at(payload, "object_attributes", "action") == EMOJI_REVOKE
    merge_request = payload.get("merge_request")
    mr_iid = merge_request.get("iid") if isinstance(merge_request, Mapping) else None
    recorded = ctx.store.record_feedback(
        finding_id=target.finding_id,
        project=_str_at(payload, "project", "path_with_namespace"),
        mr_iid=mr_iid if isinstance(mr_iid, int) else target.mr_iid,
        note_id=note_id,
        kind=FeedbackKind.AWARD.value,
        value=f"{vote}:revoked" if revoked else vote,
        username=username,
        event_key=delivery.key,
    )
    outcome = Outcome.FEEDBACK if recorded else Outcome.DUPLICATE
    detail = {"status": outcome.value, "finding_id": target.finding_id}
    return Result(HTTP_ACCEPTED, outcome, detail)


Handler = Callable[[ListenerContext, Delivery], Result]
HANDLERS: dict[str, Handler] = {
    MERGE_REQUEST_HOOK: on_merge_request,
    NOTE_HOOK: on_note,
    EMOJI_HOOK: on_emoji,
}


# ---------------------------------------------------------------------------------------------
# HTTP


def _check_token(ctx: ListenerContext, request: Request) -> None:
    if ctx.secret is None:
        return
    given = request.headers.get("x-gitlab-token")
    # compare_digest: the time taken does not tell how much of the secret was right.
    if given is None or not hmac.compare_digest(given.encode(), ctx.secret.encode()):
        raise Rejected(HTTP_UNAUTHORIZED, Outcome.UNAUTHORIZED, "invalid or missing X-Gitlab-Token")


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise Rejected(HTTP_BAD_REQUEST, Outcome.BAD_REQUEST, "invalid Content-Length")
        if int(declared) > limit:
            raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> Rejected:
    return Rejected(HTTP_PAYLOAD_TOO_LARGE, Outcome.TOO_LARGE, f"body larger than {limit} bytes")


def _parse_json(body: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError) as error:
        reason = f"body is not valid JSON: {error}"[:200]
        raise Rejected(HTTP_BAD_REQUEST, Outcome.BAD_REQUEST, reason) from None
    if not isinstance(payload, dict):
        raise Rejected(HTTP_BAD_REQUEST, Outcome.BAD_REQUEST, "body must be a JSON object")
    return payload


async def _handle_delivery(ctx: ListenerContext, request: Request) -> Result:
    _check_token(ctx, request)
    event = request.headers.get("x-gitlab-event", "").strip()
    if not event:
        raise Rejected(HTTP_BAD_REQUEST, Outcome.BAD_REQUEST, "missing X-Gitlab-Event header")
    handler = HANDLERS.get(event)
    if handler is None:
        log.info("ignoring GitLab event %r (not handled by reviewbot)", event)
        return Result(HTTP_NO_CONTENT, Outcome.UNKNOWN_EVENT)
    body = await _read_body(request, ctx.max_body_bytes)
    payload = _parse_json(body)
    delivery = Delivery(event=event, key=delivery_key(request.headers, body), payload=payload)
    return await run_in_threadpool(handler, ctx, delivery)


async def webhook_endpoint(request: Request) -> Response:
    ctx: ListenerContext = request.app.state.listener
    try:
        result = await _handle_delivery(ctx, request)
    except Rejected as rejected:
        result = rejected.result
    except PayloadError as error:
        result = Result(HTTP_BAD_REQUEST, Outcome.BAD_REQUEST, {"error": str(error)})
    except SQLAlchemyError as error:
        log.warning("database unavailable while handling a webhook: %s", error)
        reason = "database unavailable, retry later"
        result = Result(HTTP_SERVICE_UNAVAILABLE, Outcome.UNAVAILABLE, {"error": reason})
    ctx.deliveries.add(result.outcome.value)
    if result.status_code == HTTP_NO_CONTENT:
        return Response(status_code=HTTP_NO_CONTENT)
    return JSONResponse(result.detail, status_code=result.status_code, background=result.background)


def _ping(engine: Engine) -> None:
    with engine.connect() as connection:
        connection.execute(text("SELECT 1"))


async def healthz_endpoint(request: Request) -> Response:
    ctx: ListenerContext = request.app.state.listener
    try:
        await run_in_threadpool(_ping, ctx.store.engine)
    except SQLAlchemyError as error:
        body = {"status": "unavailable", "database": type(error).__name__}
        return JSONResponse(body, status_code=HTTP_SERVICE_UNAVAILABLE)
    return JSONResponse({"status": "ok", "database": "ok"})


async def metrics_endpoint(request: Request) -> Response:
    ctx: ListenerContext = request.app.state.listener
    try:
        families = await run_in_threadpool(collect_metrics, ctx)
    except SQLAlchemyError as error:
        log.warning("database unavailable while collecting metrics: %s", error)
        return Response("database unavailable\n", status_code=HTTP_SERVICE_UNAVAILABLE)
    return Response(render(families), media_type=CONTENT_TYPE)


async def openapi_endpoint(_request: Request) -> Response:
    return JSONResponse(openapi_spec())


# ---------------------------------------------------------------------------------------------
# Metrics from the database (one aggregate row per query, whatever the table size)


def _histogram_query(value: Any, bounds: tuple[float, ...]) -> Any:
    buckets = [func.sum(case((value <= bound, 1), else_=0)) for bound in bounds]
    return select(func.count(value), func.sum(value), *buckets)


def _histogram(connection: Any, value: Any, bounds: tuple[float, ...]) -> Sample:
    count, total, *cumulative = connection.execute(_histogram_query(value, bounds)).one()
    return Sample(histogram_from_counts(bounds, cumulative, count, total))


def _review_seconds(engine: Engine) -> Any:
    if engine.dialect.name == "sqlite":
        # SQLite keeps datetimes as text; julianday() reads them (https://sqlite.org/lang_datefunc.html)
        days = func.julianday(ReviewRow.finished_at) - func.julianday(ReviewRow.started_at)
        return days * SECONDS_PER_DAY
    return extract("epoch", ReviewRow.finished_at - ReviewRow.started_at)


def _ms_to_s(column: Any) -> Any:
    return column / MS_PER_SECOND


def collect_metrics(ctx: ListenerContext) -> list[MetricFamily]:
    """Every family `/metrics` shows; database figures are shared by all listener processes."""
    engine = ctx.store.engine
    jobs = ctx.queue.counts()
    deliveries = ctx.deliveries.snapshot()
    with engine.connect() as connection:
        durations = _histogram(connection, _review_seconds(engine), REVIEW_DURATION_BUCKETS_S)
        ttft = _histogram(connection, _ms_to_s(LLMCallRow.ttft_ms), LLM_TTFT_BUCKETS_S)
        latency = _histogram(connection, _ms_to_s(LLMCallRow.latency_ms), LLM_LATENCY_BUCKETS_S)
        tokens = connection.execute(
            select(
                func.sum(LLMCallRow.prompt_tokens),
                func.sum(LLMCallRow.completion_tokens),
                func.sum(LLMCallRow.cached_tokens),
            )
        ).one()
        severities = connection.execute(
            select(FindingRow.severity, func.count()).group_by(FindingRow.severity)
        ).all()
        reviews = connection.execute(
            select(ReviewRow.status, func.count()).group_by(ReviewRow.status)
        ).all()
    status_values = [status.value for status in JobStatus]
    return [
        MetricFamily("reviewbot_jobs", MetricKind.GAUGE, "Review jobs in the queue, by status.",
                     tuple(Sample(jobs.get(s, 0), {"status": s}) for s in status_values)),
        MetricFamily("reviewbot_webhook_deliveries_total", MetricKind.COUNTER,
                     "Webhook deliveries received by this process, by outcome.",
                     tuple(Sample(n, {"outcome": o}) for o, n in deliveries.items())),
        MetricFamily("reviewbot_reviews_total", MetricKind.COUNTER, "Reviews run, by status.",
                     tuple(Sample(n, {"status": s}) for s, n in sorted(reviews))),
        MetricFamily("reviewbot_review_duration_seconds", MetricKind.HISTOGRAM,
                     "Wall time of finished reviews.", (durations,)),
        MetricFamily("reviewbot_llm_time_to_first_token_seconds", MetricKind.HISTOGRAM,
                     "Time to the first streamed token of model calls.", (ttft,)),
        MetricFamily("reviewbot_llm_call_duration_seconds", MetricKind.HISTOGRAM,
                     "Latency of model calls.", (latency,)),
        MetricFamily("reviewbot_llm_tokens_total", MetricKind.COUNTER,
                     "Tokens of model calls, by kind.",
                     tuple(Sample(int(n or 0), {"kind": kind}) for kind, n
                           in zip(("prompt", "completion", "cached"), tokens, strict=True))),
        MetricFamily("reviewbot_findings_total", MetricKind.COUNTER,
                     "Findings recorded, by severity.",
                     tuple(Sample(n, {"severity": s}) for s, n in sorted(severities))),
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# OpenAPI


def _json_response(description: str) -> dict[str, Any]:
    schema = {"type": "object", "additionalProperties": True}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def openapi_spec() -> dict[str, Any]:
    """The OpenAPI 3.1 description of the listener's endpoints."""
    headers = [
        ("X-Gitlab-Token", True, "The webhook's secret token."),
        ("X-Gitlab-Event", True, "Merge Request Hook, Note Hook or Emoji Hook; others get 204."),
        ("Idempotency-Key", False, "Same value on every retry of one event (GitLab >= 17.4)."),
        ("X-Gitlab-Event-UUID", False, "Identifies the event (used with a body hash)."),
    ]
    parameters = [
        {"name": name, "in": "header", "required": required, "description": description,
         "schema": {"type": "string"}}
        for name, required, description in headers
    ]  # fmt: skip
    webhook = {
        "summary": "Receive a GitLab webhook",
        "parameters": parameters,
        "requestBody": {"required": True,
                        "content": {"application/json": {"schema": {"type": "object"}}}},
        "responses": {
            "200": _json_response("Valid event that needs no action (reason given)."),
            "202": _json_response("Review queued, jobs cancelled, feedback recorded, help sent."),
            "204": {"description": "Event type not handled."},
            "400": _json_response("Missing header, invalid JSON or missing field (reason given)."),
            "401": _json_response("Wrong or missing X-Gitlab-Token."),
            "413": _json_response("Body over the size limit."),
            "503": _json_response("Database unavailable: GitLab should retry."),
        },
    }  # fmt: skip
    return {
        "openapi": "3.1.0",
        "info": {"title": "reviewbot webhook listener", "version": "1"},
        "paths": {
            WEBHOOK_PATH: {"post": webhook},
            "/healthz": {"get": {"summary": "Process and database health", "responses": {
                "200": _json_response("Healthy."),
                "503": _json_response("Database unreachable.")}}},
            "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {
                "200": {"description": "Text exposition format 0.0.4.",
                        "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
            "/openapi.json": {"get": {"summary": "This document", "responses": {
                "200": _json_response("OpenAPI 3.1 document.")}}},
        },
    }  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Application and command


def create_app(
    settings: Settings,
    store: Store,
    queue: JobSink,
    *,
    secret: str | None,
    bot_username: str,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    note_poster: NotePoster | None = None,
) -> Starlette:
    """The ASGI app. `secret=None` accepts unsigned deliveries (``--insecure-no-secret``)."""
    if not bot_username:
        raise ConfigError("bot_username is required (notes by the bot itself are ignored)")
    app = Starlette(
        routes=[
            Route(WEBHOOK_PATH, webhook_endpoint, methods=["POST"]),
            Route("/healthz", healthz_endpoint, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
            Route("/openapi.json", openapi_endpoint, methods=["GET"]),
        ]
    )
    app.state.listener = ListenerContext(
        store=store, queue=queue, secret=secret, bot_username=bot_username,
        review_drafts=settings.review_drafts, max_body_bytes=max_body_bytes,
        note_poster=note_poster,
    )  # fmt: skip
    return app


def _gitlab_client(settings: Settings) -> GitLabClient | None:
    if not settings.gitlab_url or not settings.gitlab_token:
        return None
    return GitLabClient(GitLabSettings(url=settings.gitlab_url, token=settings.gitlab_token))


def app_from_settings(settings: Settings, *, insecure_no_secret: bool = False) -> Starlette:
    """Check the settings, migrate the database and build the app `reviewbot serve` runs."""
    if not settings.webhook_secret and not insecure_no_secret:
        raise ConfigError(
            "set REVIEWBOT_WEBHOOK_SECRET (the webhook's secret token in GitLab), "
            "or pass --insecure-no-secret to accept unsigned deliveries"
        )
    client = _gitlab_client(settings)
    bot_username = settings.bot_username or (client.bot_username() if client else None)
    if not bot_username:
        raise ConfigError("set REVIEWBOT_BOT_USERNAME, or REVIEWBOT_GITLAB_URL and _TOKEN")
    upgrade(settings.database_url)
    store = Store.from_url(settings.database_url)
    return create_app(
        settings, store, JobQueue(store), secret=settings.webhook_secret or None,
        bot_username=bot_username, max_body_bytes=settings.webhook_max_body_bytes,
        note_poster=client,
    )  # fmt: skip


@click.command("serve")
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="Address to listen on.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=int, help="Port.")
@click.option(
    "--insecure-no-secret",
    is_flag=True,
    help="Accept deliveries without X-Gitlab-Token (only behind a trusted proxy).",
)
def serve_command(host: str, port: int, insecure_no_secret: bool) -> None:
    """Listen for GitLab webhooks on POST /webhook/gitlab and queue reviews."""
    try:
        app = app_from_settings(load_settings(), insecure_no_secret=insecure_no_secret)
    except ConfigError as error:
        raise click.UsageError(str(error)) from None
    except (GitLabError, SQLAlchemyError) as error:
        raise click.ClickException(str(error)) from None
    if insecure_no_secret:
        log.warning("accepting webhook deliveries without a secret token")
    try:
        uvicorn.run(app, host=host, port=port, log_level="info")
    finally:
        app.state.listener.store.close()
