"""What the listener does with each event: queue a review, cancel, record feedback, answer help.

Handlers take a typed event (`reviewbot.webhook.payloads`) and talk to small Protocols: a job
sink (`reviewbot.queue.JobQueue`), the store's feedback queries and a note poster (GitLab).
They run in a worker thread (they wait on the database) and return a `Handled`: the outcome,
the JSON detail for GitLab, and at most one follow-up to run after the answer is sent (posting
the help note: GitLab gives up on a hook after about 10 s, so nothing slow runs before).

Owns: what each event does: which deliveries queue or cancel a review, queue an answer in one of
the bot's threads (a reply job, rate limited per MR and per user), record a vote, or answer
``/reviewbot help`` (once per delivery, throttled per MR). Must not: write SQL (the queue and
the store do), parse a payload (`reviewbot.webhook.payloads` does), or talk to GitLab before
the answer is sent.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any, Protocol

from reviewbot.gitlab import GitLabError
from reviewbot.queue import FULL_REVIEW_KEY, EnqueueResult
from reviewbot.states import FeedbackKind, JobKind, ReplyStatus, Trigger
from reviewbot.store import NoteOwner
from reviewbot.store.reply_queries import ReplyStore, reply_key
from reviewbot.store.store import utc_now
from reviewbot.webhook.payloads import (
    NOTE_CREATED,
    Command,
    EmojiEvent,
    Event,
    MergeRequestEvent,
    NoteEvent,
    parse_command,
    parse_reply_command,
    shown,
)

__all__ = [
    "Delivery",
    "Handled",
    "HandlerContext",
    "HandlerStore",
    "JobSink",
    "NotePoster",
    "Outcome",
    "handle",
    "help_text",
]

log = logging.getLogger(__name__)

# How many help answers this process remembers, so a redelivered `/reviewbot help` is
# answered "duplicate" without asking the database.
RECENT_HELP_KEYS = 4096
# At most one help answer per MR in this long, across every listener sharing the database
# (Store.claim_mr_action): thirty `/reviewbot help` comments get one answer, not thirty.
HELP_ANSWER_INTERVAL_S = 10 * 60.0
SECONDS_PER_MINUTE = 60
HELP_ACTION = "help"
RATE_WINDOW = timedelta(hours=1)  # the window of the per-MR and per-user reply limits

REVIEW_ACTIONS = {"open": "opened", "reopen": "reopened"}
CANCEL_ACTIONS = {"close": "closed", "merge": "merged"}
INACTIVE_MR_STATES = frozenset({"closed", "merged", "locked"})
NOTE_AWARDABLE = "Note"
FEEDBACK_EMOJI = {
    "thumbsup": "thumbsup",
    "+1": "thumbsup",
    "thumbsdown": "thumbsdown",
    "-1": "thumbsdown",
}
EMOJI_REVOKE = "revoke"


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
    DISCONNECTED = "disconnected"  # the delivery was cut off before its body was complete


class JobSink(Protocol):
    """The part of `reviewbot.queue.JobQueue` the handlers use."""

    def enqueue(
        self,
        *,
        project: str,
        mr_iid: int,
        head_sha: str | None,
        trigger: str,
        dedupe_key: str | None = None,
        payload: dict[str, Any] | None = None,
        project_id: int | None = None,
        kind: str = JobKind.REVIEW.value,
    ) -> EnqueueResult: ...

    def cancel_for_mr(self, project: str, mr_iid: int, reason: str) -> int: ...


class HandlerStore(Protocol):
    """The part of `reviewbot.store.Store` the handlers use."""

    def note_owner(self, note_id: int) -> NoteOwner | None: ...

    def record_feedback(self, **fields: Any) -> bool: ...

    def claim_mr_action(
        self, project: str, mr_iid: int, action: str, min_interval_s: float
    ) -> bool: ...


class NotePoster(Protocol):
    """Posts a comment on a merge request (the answer to `/reviewbot help`)."""

    def post_note(self, project: str, iid: int, body: str) -> int: ...


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
class HandlerContext:
    """Everything the handlers work with, built once per app."""

    queue: JobSink
    store: HandlerStore
    bot_username: str
    review_drafts: bool
    note_poster: NotePoster | None
    answered_help: RecentKeys = field(default_factory=lambda: RecentKeys(RECENT_HELP_KEYS))
    gitlab_url: str | None = None  # the GitLab the hooks come from (identifies MRs in feedback)
    replies: ReplyStore | None = None  # None: no answers in threads (reply jobs)
    reply_limits: ReplyLimits = field(default_factory=lambda: ReplyLimits())


@dataclass(frozen=True)
class ReplyLimits:
    """Answers in the bot's threads allowed per hour (Settings.reply_max_per_*_per_hour)."""

    per_mr: int = 30
    per_user: int = 20


@dataclass(frozen=True)
class Delivery:
    """One webhook delivery: its hook (X-Gitlab-Event), its key and its parsed event."""

    hook: str
    key: str
    event: Event


@dataclass(frozen=True)
class Handled:
    outcome: Outcome
    detail: dict[str, Any]
    follow_up: Callable[[], None] | None = None  # runs after the answer is sent


def handle(ctx: HandlerContext, delivery: Delivery) -> Handled:
    """Act on one delivery (talks to the database: call it from a worker thread)."""
    event = delivery.event
    if isinstance(event, MergeRequestEvent):
        return on_merge_request(ctx, delivery, event)
    if isinstance(event, NoteEvent):
        return on_note(ctx, delivery, event)
    return on_emoji(ctx, delivery, event)


def help_text(bot_username: str) -> str:
    """The answer to `/reviewbot help` (no line starts with `/`: it would be a quick action)."""
    return (
        "**reviewbot** commands, on the first line of a comment on a merge request:\n\n"
        f"- `/reviewbot review` or `@{bot_username} review`: review the latest changes now "
        "(only what changed since the last review)\n"
        f"- `/reviewbot review --full` or `@{bot_username} review --full`: review every "
        "change again\n"
        f"- `/reviewbot help` or `@{bot_username} help`: show this message\n"
        f"- in a thread reviewbot started: `@{bot_username}` and a question, "
        "`/reviewbot explain`, `/reviewbot fix` (a suggestion for the lines) or "
        "`/reviewbot ignore` (resolves the thread and notes the finding was not useful), "
        "`/reviewbot learn <text>` (Developer role or above: remember it for next reviews)\n\n"
        "Merge requests are also reviewed when they are opened, reopened, pushed to, or marked "
        "ready (drafts are skipped unless the server enables them). React with :thumbsup: or "
        ":thumbsdown: on a reviewbot comment to say whether it helped."
    )


def _ignored(reason: str) -> Handled:
    return Handled(Outcome.IGNORED, {"status": Outcome.IGNORED.value, "reason": reason})


# -- Merge Request Hook -------------------------------------------------------------------


def review_reason(event: MergeRequestEvent) -> str | None:
    """Why this Merge Request Hook asks for a review, or None when it does not."""
    if event.action in REVIEW_ACTIONS:
        return REVIEW_ACTIONS[event.action]
    if event.action != "update":
        return None
    if event.code_changed:
        return "pushed"
    if event.marked_ready:
        return "marked ready"
    return None


def on_merge_request(ctx: HandlerContext, delivery: Delivery, event: MergeRequestEvent) -> Handled:
    project = event.project
    if event.action in CANCEL_ACTIONS:
        reason = f"merge request {CANCEL_ACTIONS[event.action]}"
        cancelled = ctx.queue.cancel_for_mr(project, event.iid, reason)
        detail = {"status": Outcome.CANCELLED.value, "cancelled": cancelled, "reason": reason}
        return Handled(Outcome.CANCELLED, detail)
    reason = review_reason(event)
    if reason is None:
        return _ignored(f"action {shown(event.action)} changes no code")
    if event.state in INACTIVE_MR_STATES:
        return _ignored(f"merge request is {event.state}")
    if event.draft and not ctx.review_drafts:
        return _ignored("draft merge request (drafts are reviewed when marked ready)")
    return _enqueue(
        ctx,
        delivery,
        iid=event.iid,
        head_sha=event.head_sha,
        trigger=Trigger.WEBHOOK,
        reason=reason,
    )


def _enqueue(
    ctx: HandlerContext,
    delivery: Delivery,
    *,
    iid: int,
    head_sha: str | None,
    trigger: Trigger,
    reason: str,
    full: bool = False,
) -> Handled:
    """Queue a review of MR `iid` of the delivery's project; the job's payload carries the
    hook, the reason, GitLab's project id (None when the hook had none) and, for
    `/reviewbot review --full`, that every hunk is to be reviewed."""
    project, project_id = delivery.event.project, delivery.event.project_id
    payload: dict[str, Any] = {"event": delivery.hook, "reason": reason, "project_id": project_id}
    if full:
        payload[FULL_REVIEW_KEY] = True
    result = ctx.queue.enqueue(
        project=project,
        mr_iid=iid,
        head_sha=head_sha,
        trigger=trigger.value,
        dedupe_key=delivery.key,
        payload=payload,
        project_id=project_id,
    )
    outcome = Outcome.QUEUED if result.created else Outcome.DUPLICATE
    detail = {
        "status": outcome.value,
        "job_id": result.job_id,
        "superseded": list(result.superseded),
        "reason": reason,
    }
    return Handled(outcome, detail)


# -- Note Hook ----------------------------------------------------------------------------


def on_note(ctx: HandlerContext, delivery: Delivery, event: NoteEvent) -> Handled:
    if event.merge_request is None:
        return _ignored(f"comment on a {shown(event.noteable_type)}, not on a merge request")
    if event.author.casefold() == ctx.bot_username.casefold():
        return _ignored("comment written by reviewbot itself")
    if event.system:
        return _ignored("system note")
    if event.action != NOTE_CREATED:
        return _ignored("edited comment (commands run when a comment is created)")
    if event.author_is_bot:
        return _ignored("comment written by a bot user")
    reply = _reply_request(ctx, delivery, event)
    if reply is not None:
        return reply
    command = parse_command(event.note, ctx.bot_username)
    if command is None:
        return _ignored("no reviewbot command on the first line")
    merge_request = event.merge_request
    if command is Command.HELP:
        return _answer_help(ctx, delivery, event.project, merge_request.iid)
    if merge_request.state in INACTIVE_MR_STATES:
        return _ignored(f"merge request is {merge_request.state}")
    full = command is Command.FULL_REVIEW
    return _enqueue(
        ctx,
        delivery,
        iid=merge_request.iid,
        head_sha=merge_request.head_sha,
        trigger=Trigger.NOTE,
        reason=f"requested by @{event.author}",
        full=full,
    )


def _reply_request(ctx: HandlerContext, delivery: Delivery, event: NoteEvent) -> Handled | None:
    """A note in a thread reviewbot started that asks it something: a reply job (or the reason
    it gets none). None: not such a note (the other commands apply)."""
    replies, merge_request = ctx.replies, event.merge_request
    if replies is None or merge_request is None or event.note_id is None:
        return None
    command = parse_reply_command(event.note, ctx.bot_username)
    if command is None or event.discussion_id is None:
        return None
    finding = replies.thread_finding(event.discussion_id, event.project_id)
    if finding is None:
        if command == "ask":
            return None  # `@bot …` outside the bot's threads: the usual commands
        return _ignored(f"/reviewbot {command} outside a thread reviewbot started")
    if merge_request.state in INACTIVE_MR_STATES:
        return _ignored(f"merge request is {merge_request.state}")
    key = reply_key(ctx.gitlab_url, event.project_id, event.project, event.note_id)
    row = {
        "reply_key": key,
        "gitlab_url": ctx.gitlab_url.rstrip("/") if ctx.gitlab_url else None,
        "project_id": event.project_id,
        "project": event.project,
        "mr_iid": merge_request.iid,
        "discussion_id": event.discussion_id,
        "trigger_note_id": event.note_id,
        "author": event.author,
        "command": command,
        "finding_id": finding.finding_id,
    }
    limited = _rate_limited(ctx, replies, event, merge_request.iid)
    if limited is not None:
        replies.start(**row, status=ReplyStatus.DROPPED.value, reason=limited)
        log.info("no answer to note %d on %s: %s", event.note_id, event.project, limited)
        return _ignored(limited)
    reply_id, created = replies.start(**row, status=ReplyStatus.QUEUED.value)
    if not created:
        return Handled(Outcome.DUPLICATE, {"status": Outcome.DUPLICATE.value, "reply_id": reply_id})
    payload = {
        "event": delivery.hook,
        "reason": f"{command} by @{event.author}",
        "project_id": event.project_id,
        "discussion_id": event.discussion_id,
        "note_id": event.note_id,
        "command": command,
        "author": event.author,
        "author_id": event.author_id,
        "reply_id": reply_id,
    }
    result = ctx.queue.enqueue(
        project=event.project,
        mr_iid=merge_request.iid,
        head_sha=merge_request.head_sha,
        trigger=Trigger.NOTE.value,
        dedupe_key=f"reply:{key}",
        payload=payload,
        project_id=event.project_id,
        kind=JobKind.REPLY.value,
    )
    replies.set_job(reply_id, result.job_id)
    outcome = Outcome.QUEUED if result.created else Outcome.DUPLICATE
    detail = {"status": outcome.value, "job_id": result.job_id, "reply_id": reply_id}
    return Handled(outcome, detail | {"reason": payload["reason"]})


def _rate_limited(
    ctx: HandlerContext, replies: ReplyStore, event: NoteEvent, iid: int
) -> str | None:
    """Why this note gets no answer (a limit reached), or None."""
    since = utc_now() - RATE_WINDOW
    limits = ctx.reply_limits
    on_mr = replies.recent_replies(project=event.project, mr_iid=iid, author=None, since=since)
    if on_mr >= limits.per_mr:
        return f"rate limited: {on_mr} answers on this merge request in the last hour"
    by_user = replies.recent_replies(
        project=event.project, mr_iid=None, author=event.author, since=since
    )
    if by_user >= limits.per_user:
        return f"rate limited: {by_user} answers to @{event.author} in the last hour"
    return None


def _answer_help(ctx: HandlerContext, delivery: Delivery, project: str, iid: int) -> Handled:
    poster = ctx.note_poster
    if poster is None:
        return _ignored("help requested, but this listener has no GitLab client to answer")
    if not ctx.answered_help.add(delivery.key):
        return Handled(Outcome.DUPLICATE, {"status": Outcome.DUPLICATE.value})
    if not ctx.store.claim_mr_action(project, iid, HELP_ACTION, HELP_ANSWER_INTERVAL_S):
        minutes = round(HELP_ANSWER_INTERVAL_S / SECONDS_PER_MINUTE)
        return _ignored(f"help was answered on this merge request less than {minutes} minutes ago")
    body = help_text(ctx.bot_username)
    return Handled(
        Outcome.HELP,
        {"status": Outcome.HELP.value},
        follow_up=lambda: _post_help(poster, project, iid, body),
    )


def _post_help(poster: NotePoster, project: str, iid: int, body: str) -> None:
    try:
        poster.post_note(project, iid, body)
    except GitLabError as error:
        log.warning("could not answer /reviewbot help on %s!%d: %s", project, iid, error)


# -- Emoji Hook ---------------------------------------------------------------------------


def on_emoji(ctx: HandlerContext, delivery: Delivery, event: EmojiEvent) -> Handled:
    if event.awardable_type != NOTE_AWARDABLE:
        return _ignored(f"reaction on a {shown(event.awardable_type)}, not on a comment")
    vote = FEEDBACK_EMOJI.get(event.name)
    if vote is None:
        return _ignored(f"reaction {shown(event.name)} is not feedback (thumbsup/thumbsdown)")
    if event.username.casefold() == ctx.bot_username.casefold():
        return _ignored("reaction by reviewbot itself")
    owner = ctx.store.note_owner(event.awardable_id)
    reply = ctx.replies.reply_for_note(event.awardable_id) if ctx.replies else None
    if owner is None and reply is not None:
        owner = NoteOwner(finding_id=reply[1], mr_iid=reply[2])
    if owner is None:
        return _ignored("reaction on a comment reviewbot did not write")
    revoked = event.action == EMOJI_REVOKE
    recorded = ctx.store.record_feedback(
        finding_id=owner.finding_id,
        reply_id=reply[0] if reply is not None else None,
        project=event.project,
        mr_iid=event.mr_iid if event.mr_iid is not None else owner.mr_iid,
        gitlab_url=ctx.gitlab_url.rstrip("/") if ctx.gitlab_url else None,
        project_id=event.project_id,
        note_id=event.awardable_id,
        kind=FeedbackKind.AWARD.value,
        value=f"{vote}:revoked" if revoked else vote,
        username=event.username,
        event_key=delivery.key,
    )
    outcome = Outcome.FEEDBACK if recorded else Outcome.DUPLICATE
    return Handled(outcome, {"status": outcome.value, "finding_id": owner.finding_id})
