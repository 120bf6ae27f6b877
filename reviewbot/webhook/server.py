"""The HTTP side of the listener: the Starlette app and its endpoints (`reviewbot serve` runs
it: `reviewbot.commands.serve`).

`POST /webhook/gitlab` checks the token, the event header and the body size, parses the
payload (`payloads`), hands the event to its handler (`handlers`, in a worker thread) and
answers in milliseconds; `GET /healthz` pings the database; `GET /metrics` renders the
collector of `reviewbot.webhook.metrics`; `GET /openapi.json` describes all of it (`openapi`).
The database is reached only through the `Store` and the `JobQueue`: no SQL here.

Owns: the ASGI app and what each endpoint answers. Must not: parse command-line options,
print, or run the HTTP server itself.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client.registry import CollectorRegistry
from sqlalchemy.exc import SQLAlchemyError
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reviewbot.app import App
from reviewbot.config import ConfigError, Settings
from reviewbot.queue import JobQueue
from reviewbot.redaction import instance_url
from reviewbot.store import Store
from reviewbot.store.books import reply_book
from reviewbot.webhook.handlers import (
    Delivery,
    Handled,
    HandlerContext,
    JobSink,
    NotePoster,
    Outcome,
    ReplyLimits,
    handle,
)
from reviewbot.webhook.metrics import CONTENT_TYPE, ListenerCollector, listener_registry, render
from reviewbot.webhook.openapi import (
    HEALTH_PATH,
    METRICS_PATH,
    OPENAPI_PATH,
    WEBHOOK_PATH,
    openapi_spec,
)
from reviewbot.webhook.payloads import (
    HOOK_KINDS,
    PayloadError,
    ValueOutOfLimits,
    delivery_key,
    parse_event,
    shown,
)

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DeliveryCounter",
    "ListenerQueue",
    "app_from_settings",
    "create_app",
]

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY_BYTES = 1_000_000
MAX_REASON_CHARS = 200

HTTP_OK = 200
HTTP_ACCEPTED = 202
HTTP_NO_CONTENT = 204
HTTP_BAD_REQUEST = 400
HTTP_UNAUTHORIZED = 401
HTTP_PAYLOAD_TOO_LARGE = 413
HTTP_UNPROCESSABLE = 422
HTTP_SERVICE_UNAVAILABLE = 503

# Handled deliveries: 202 when something was done (or had been done already), 200 when the
# event needs nothing from reviewbot.
HANDLED_STATUS = {
    Outcome.QUEUED: HTTP_ACCEPTED,
    Outcome.DUPLICATE: HTTP_ACCEPTED,
    Outcome.CANCELLED: HTTP_ACCEPTED,
    Outcome.FEEDBACK: HTTP_ACCEPTED,
    Outcome.HELP: HTTP_ACCEPTED,
    Outcome.IGNORED: HTTP_OK,
}


class ListenerQueue(JobSink, Protocol):
    """The job queue as the listener uses it: handlers enqueue, `/metrics` counts."""

    def counts(self) -> dict[str, int]: ...


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


class AsciiJSONResponse(JSONResponse):
    """JSON with every non-ASCII character escaped: text quoted from a payload (a lone
    surrogate, say) can never fail to encode."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, allow_nan=False, separators=(",", ":")).encode("ascii")


@dataclass
class Listener:
    """The app's state: what the endpoints need."""

    store: Store
    handlers: HandlerContext
    secret: str | None
    max_body_bytes: int
    registry: CollectorRegistry
    deliveries: DeliveryCounter = field(default_factory=DeliveryCounter)


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


# -- POST /webhook/gitlab -----------------------------------------------------------------


def _check_token(listener: Listener, request: Request) -> None:
    if listener.secret is None:
        return
    given = request.headers.get("x-gitlab-token")
    # compare_digest: the time taken does not tell how much of the secret was right.
    if given is None or not hmac.compare_digest(given.encode(), listener.secret.encode()):
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
        reason = f"body is not valid JSON: {error}"[:MAX_REASON_CHARS]
        raise Rejected(HTTP_BAD_REQUEST, Outcome.BAD_REQUEST, reason) from None
    if not isinstance(payload, dict):
        raise Rejected(HTTP_BAD_REQUEST, Outcome.BAD_REQUEST, "body must be a JSON object")
    return payload


def _result(handled: Handled) -> Result:
    background = BackgroundTask(handled.follow_up) if handled.follow_up else None
    return Result(HANDLED_STATUS[handled.outcome], handled.outcome, handled.detail, background)


async def _handle_delivery(listener: Listener, request: Request) -> Result:
    _check_token(listener, request)
    hook = request.headers.get("x-gitlab-event", "").strip()
    if not hook:
        raise Rejected(HTTP_BAD_REQUEST, Outcome.BAD_REQUEST, "missing X-Gitlab-Event header")
    if hook not in HOOK_KINDS:
        log.info("ignoring GitLab event %r (not handled by reviewbot)", hook)
        return Result(HTTP_NO_CONTENT, Outcome.UNKNOWN_EVENT)
    body = await _read_body(request, listener.max_body_bytes)
    event = parse_event(hook, _parse_json(body))
    delivery = Delivery(hook=hook, key=delivery_key(request.headers, body), event=event)
    return _result(await run_in_threadpool(handle, listener.handlers, delivery))


async def webhook_endpoint(request: Request) -> Response:
    listener: Listener = request.app.state.listener
    try:
        result = await _handle_delivery(listener, request)
    except Rejected as rejected:
        result = rejected.result
    except ValueOutOfLimits as error:
        result = Result(HTTP_UNPROCESSABLE, Outcome.BAD_REQUEST, {"error": str(error)})
    except PayloadError as error:
        result = Result(HTTP_BAD_REQUEST, Outcome.BAD_REQUEST, {"error": str(error)})
    except SQLAlchemyError as error:
        log.warning("database unavailable while handling a webhook: %s", error)
        reason = "database unavailable, retry later"
        result = Result(HTTP_SERVICE_UNAVAILABLE, Outcome.UNAVAILABLE, {"error": reason})
    except ClientDisconnect:
        # Nothing was read whole, so nothing was done; GitLab delivers it again. The answer
        # goes nowhere, but the app must answer rather than raise (a traceback per connection).
        log.info(
            "webhook delivery cut off before its body was complete (%s): nothing done",
            shown(request.headers.get("x-gitlab-event")),
        )
        reason = "the delivery was cut off before its body was complete"
        result = Result(HTTP_BAD_REQUEST, Outcome.DISCONNECTED, {"error": reason})
    listener.deliveries.add(result.outcome.value)
    if result.status_code == HTTP_NO_CONTENT:
        return Response(status_code=HTTP_NO_CONTENT)
    return AsciiJSONResponse(
        result.detail, status_code=result.status_code, background=result.background
    )


# -- GET /healthz, /metrics, /openapi.json ------------------------------------------------


async def healthz_endpoint(request: Request) -> Response:
    listener: Listener = request.app.state.listener
    try:
        await run_in_threadpool(listener.store.ping)
    except SQLAlchemyError as error:
        body = {"status": "unavailable", "database": type(error).__name__}
        return JSONResponse(body, status_code=HTTP_SERVICE_UNAVAILABLE)
    return JSONResponse({"status": "ok", "database": "ok"})


async def metrics_endpoint(request: Request) -> Response:
    listener: Listener = request.app.state.listener
    try:
        text = await run_in_threadpool(render, listener.registry)
    except SQLAlchemyError as error:
        log.warning("database unavailable while collecting metrics: %s", error)
        return Response("database unavailable\n", status_code=HTTP_SERVICE_UNAVAILABLE)
    return Response(text, media_type=CONTENT_TYPE)


async def openapi_endpoint(_request: Request) -> Response:
    return JSONResponse(openapi_spec())


# -- application ----------------------------------------------------------------------------


def create_app(
    settings: Settings,
    store: Store,
    queue: ListenerQueue,
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
            Route(HEALTH_PATH, healthz_endpoint, methods=["GET"]),
            Route(METRICS_PATH, metrics_endpoint, methods=["GET"]),
            Route(OPENAPI_PATH, openapi_endpoint, methods=["GET"]),
        ]
    )
    handlers = HandlerContext(
        queue=queue,
        store=store,
        bot_username=bot_username,
        review_drafts=settings.review_drafts,
        note_poster=note_poster,
        gitlab_url=instance_url(settings.gitlab_url) if settings.gitlab_url else None,
        replies=reply_book(store),
        reply_limits=ReplyLimits(
            per_mr=settings.reply_max_per_mr_per_hour,
            per_user=settings.reply_max_per_user_per_hour,
        ),
    )
    deliveries = DeliveryCounter()
    registry = listener_registry(ListenerCollector(store, queue, deliveries.snapshot))
    app.state.listener = Listener(
        store=store,
        handlers=handlers,
        secret=secret,
        max_body_bytes=max_body_bytes,
        registry=registry,
        deliveries=deliveries,
    )
    return app


def app_from_settings(
    settings: Settings, *, insecure_no_secret: bool = False, app: App | None = None
) -> Starlette:
    """Check the settings, migrate the database and build the ASGI app `reviewbot serve` runs,
    on the process's ``app`` (built from ``settings`` when not given)."""
    if not settings.webhook_secret and not insecure_no_secret:
        raise ConfigError(
            "set REVIEWBOT_WEBHOOK_SECRET (the webhook's secret token in GitLab), "
            "or pass --insecure-no-secret to accept unsigned deliveries"
        )
    app = app or App(settings)
    client = app.gitlab() if settings.gitlab_url and settings.gitlab_token else None
    bot_username = settings.bot_username or (client.bot_username() if client else None)
    if not bot_username:
        raise ConfigError("set REVIEWBOT_BOT_USERNAME, or REVIEWBOT_GITLAB_URL and _TOKEN")
    store = app.store
    return create_app(
        settings,
        store,
        JobQueue(store),
        secret=settings.webhook_secret or None,
        bot_username=bot_username,
        max_body_bytes=settings.webhook_max_body_bytes,
        note_poster=client,
    )
