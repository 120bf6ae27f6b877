"""The states and kinds every layer names: a review's trigger and life cycle, a model call's
mode and purpose, what a model request is for (its workload), a job's kind and life cycle,
feedback kinds, verification verdicts, thread commands and answers, a merge request's state on
GitLab.

The ground floor of the vocabulary: the pipeline, the services and the adapters name a status
from here, without loading the ORM. The store declares its columns' allowed values from these
(reviewbot.store.models), so what is stored is what the pipeline produces.

Owns: these enums and their values. Must not: import anything of reviewbot (the core's own enums
of a finding, Side, AnchorKind and FindingState, stay with the findings).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "CallMode",
    "CallPurpose",
    "FeedbackKind",
    "JobKind",
    "JobStatus",
    "MergeRequestState",
    "ReplyCommand",
    "ReplyStatus",
    "ReviewStatus",
    "Trigger",
    "Verdict",
    "Workload",
]


class Trigger(StrEnum):
    """What started a review."""

    CLI = "cli"
    CI = "ci"
    WEBHOOK = "webhook"
    NOTE = "note"
    LOCAL = "local"
    IDLE = "idle"  # a background second look at a recent open MR while the pool is idle


class ReviewStatus(StrEnum):
    """Life cycle of a review."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SUPERSEDED = "superseded"


class CallMode(StrEnum):
    """How structured output was obtained from the model for one call."""

    TOOL_CALLS = "tool_calls"
    JSON_SCHEMA = "json_schema"
    CONTENT = "content"


class JobStatus(StrEnum):
    """Life cycle of a queued review job (reviewbot.queue)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SUPERSEDED = "superseded"
    CANCELLED = "cancelled"


class FeedbackKind(StrEnum):
    """What became of a posted finding: a human's reaction, or what the code did."""

    AWARD = "award"  # value: thumbsup / thumbsdown (":revoked" when taken back)
    RESOLUTION = "resolution"  # a human resolved the thread
    REPLY = "reply"  # a human replied in the thread
    ADDRESSED = "addressed"  # a later version changed the finding's line
    DELETED = "deleted"  # the bot's comment is gone from the MR
    SUGGESTION_APPLIED = "suggestion_applied"
    IGNORED = "ignored"  # merged with the thread open and the line unchanged


class JobKind(StrEnum):
    """What a queued job does: review an MR head, or answer a human in one of the bot's threads."""

    REVIEW = "review"
    REPLY = "reply"


class CallPurpose(StrEnum):
    """Why a model request of a review was made."""

    REVIEW = "review"  # a chunk's review (first request, repair turns, tool rounds)
    VERIFY = "verify"  # the verification pass over a chunk's candidate findings
    CHECK = "check"  # a model-judged named check of the MR (reviewbot.rules.check_questions)
    WALKTHROUGH = "walkthrough"  # the MR's walkthrough, one call after the chunks
    REQUIREMENTS = "requirements"  # the requirements check against the linked issues


class Workload(StrEnum):
    """What a model request is for, which decides how soon the server runs it
    (reviewbot.model.request_priority): interactive work first."""

    THREAD_ANSWER = "thread_answer"  # a human waits in a bot thread
    FIRST_REVIEW = "first_review"  # the first review of an MR (or a forced full one)
    INCREMENTAL_REVIEW = "incremental_review"  # a push to an MR reviewed before
    EVAL = "eval"  # reviewbot eval on labelled diffs
    LOAD_TEST = "load_test"  # reviewbot loadtest
    BACKGROUND = "background"  # anything no one waits for


class Verdict(StrEnum):
    """What the verification pass said of one finding."""

    KEEP = "keep"
    DROP = "drop"
    UNVERIFIED = "unverified"  # the verifier's answer was unreadable or missing: kept


class ReplyCommand(StrEnum):
    """What a human asked for in one of the bot's threads."""

    ASK = "ask"  # the bot mentioned, no command: answer the question
    EXPLAIN = "explain"
    FIX = "fix"
    IGNORE = "ignore"
    LEARN = "learn"  # `/reviewbot learn <text>`: a learning made from the thread


class ReplyStatus(StrEnum):
    """Life cycle of an answer in a thread."""

    QUEUED = "queued"
    POSTED = "posted"
    DROPPED = "dropped"  # not posted: too late (REPLY_TIMEOUT_S), rate limited, not answerable
    FAILED = "failed"
    REFUSED = "refused"  # answered with the reason the change asked for was not made


class MergeRequestState(StrEnum):
    """A merge request's state on GitLab (the ``state`` field of the MR API)."""

    OPENED = "opened"
    CLOSED = "closed"
    MERGED = "merged"
    LOCKED = "locked"
