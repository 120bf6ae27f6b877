"""GitLab's own rate limits as a budget every worker takes from before a request (issue 38).

GitLab limits note creation per user (``notes_create_limit``, 300 a minute by default on
self-managed GitLab) and, on GitLab.com, API requests per user per minute (2,000 for
authenticated API traffic). Every worker of one deployment uses the same bot user, so the
limit is shared: one budget per GitLab instance (its URL) and per kind of request, kept in the
database by :class:`reviewbot.store.gitlab_budget_queries.StoredBudget`, or in memory by
:class:`LocalBudget` for one process (the CLI without a store).

The budget is a token bucket of ``capacity`` tokens refilled at ``rate`` tokens a second, with
``capacity + rate x period`` = the limit: over *any* window of ``period`` seconds, at most the
limit is taken (the bucket holds at most ``capacity`` when the window opens, and the window
refills ``rate x period``), whatever the GitLab's windows are aligned to.

A request whose budget is spent waits until a token comes back (bounded by ``max_wait_s``,
logged with why); past the bound it is sent anyway, and GitLab's 429 with ``Retry-After`` is
backed off as before (reviewbot.gitlab.connection). A request is never dropped.

Owns: the kinds of request, which kinds a request takes, the bucket's arithmetic, the waiting
policy. Must not: send a request, or hold SQL (the stored budget's is in
``reviewbot.store.gitlab_budget_queries``).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

__all__ = [
    "BURST_SHARE",
    "DEFAULT_API_REQUESTS_PER_MINUTE",
    "DEFAULT_NOTES_CREATED_PER_MINUTE",
    "MIN_PER_PERIOD",
    "BucketLimit",
    "BudgetTaker",
    "GitLabBudget",
    "LocalBudget",
    "RequestKind",
    "kinds_of",
    "refilled",
    "wait_for_token_s",
    "waiting_budget",
]

log = logging.getLogger(__name__)

SECONDS_PER_MINUTE = 60.0
# A bucket needs a whole token of burst and some pace: a limit of 1 would have no pace.
MIN_PER_PERIOD = 2
# GitLab's notes_create_limit default (Admin > Settings > Network > Notes rate limit).
DEFAULT_NOTES_CREATED_PER_MINUTE = 300
# GitLab.com: "Authenticated API traffic (for a given user)", 2,000 requests a minute.
DEFAULT_API_REQUESTS_PER_MINUTE = 2_000
# The share of a minute's limit that may go out at once; the rest is paced evenly.
BURST_SHARE = 0.1
# A request waits at most this long for its budget, then goes anyway (429 is backed off).
DEFAULT_MAX_WAIT_S = 120.0
# Never sleep longer than this between two looks at the budget (others may give it back
# sooner: a new window's refill is computed, not announced).
MAX_NAP_S = 1.0
MIN_NAP_S = 0.001

# A note is created by POST .../notes, .../discussions, .../discussions/:id/notes, and by
# publishing drafts (each becomes a note).
_NOTE_PATH = re.compile(r"/(notes|discussions|draft_notes/bulk_publish)/?$")


class RequestKind(StrEnum):
    """A budget: every request takes ``API``; one that creates a note takes ``NOTE`` too."""

    API = "api"
    NOTE = "note"


def kinds_of(method: str, path: str) -> tuple[RequestKind, ...]:
    """The budgets ``method path`` takes from (``path``: the URL's path, no query)."""
    if method.upper() == "POST" and _NOTE_PATH.search(path):
        return (RequestKind.API, RequestKind.NOTE)
    return (RequestKind.API,)


@dataclass(frozen=True)
class BucketLimit:
    """At most ``per_period`` requests in any window of ``period_s`` seconds."""

    per_period: int
    period_s: float = SECONDS_PER_MINUTE

    def __post_init__(self) -> None:
        if self.per_period < MIN_PER_PERIOD or self.period_s <= 0:
            raise ValueError(f"a budget needs at least 2 requests a period, got {self}")

    @property
    def capacity(self) -> float:
        """Tokens the bucket holds at most (the burst): at least one."""
        return max(1.0, float(int(self.per_period * BURST_SHARE)))

    @property
    def rate(self) -> float:
        """Tokens a second, so that capacity + rate x period = per_period."""
        return (self.per_period - self.capacity) / self.period_s


def refilled(tokens: float, since_s: float, limit: BucketLimit) -> float:
    """The bucket's tokens ``since_s`` (0 or more) seconds after it held ``tokens``, never
    above its capacity."""
    return min(limit.capacity, tokens + since_s * limit.rate)


def wait_for_token_s(tokens: float, limit: BucketLimit) -> float:
    """Seconds until a bucket holding ``tokens`` (after refilling) holds one whole token."""
    if tokens >= 1.0:
        return 0.0
    if limit.rate <= 0:
        return limit.period_s
    return (1.0 - tokens) / limit.rate


class BudgetTaker(Protocol):
    """One attempt to take a token: None when taken, else the seconds until one comes back."""

    def __call__(self, kind: RequestKind, limit: BucketLimit, now: float) -> float | None: ...


class GitLabBudget(Protocol):
    """What the GitLab adapter asks before each request (reviewbot.gitlab.connection)."""

    def take(self, kinds: Sequence[RequestKind]) -> float:
        """Take one token of each kind, waiting as long as needed (bounded); the seconds
        waited."""
        ...


class _WaitingBudget:
    """The waiting policy around one ``take_once``: try, sleep until a token should be back,
    try again; past ``max_wait_s`` go anyway (logged)."""

    def __init__(
        self,
        limits: dict[RequestKind, BucketLimit],
        take_once: BudgetTaker,
        *,
        name: str,
        max_wait_s: float = DEFAULT_MAX_WAIT_S,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.limits = limits
        self._take_once = take_once
        self._name = name
        self._max_wait_s = max_wait_s
        self._clock = clock
        self._sleep = sleep

    def take(self, kinds: Sequence[RequestKind]) -> float:
        started = self._clock()
        for kind in kinds:
            limit = self.limits.get(kind)
            if limit is None:
                continue
            logged = False
            while (wait := self._take_once(kind, limit, self._clock())) is not None:
                waited = self._clock() - started
                if waited >= self._max_wait_s:
                    log.warning(
                        "GitLab %s budget of %s: waited %.1f s for %d/%.0f s, sending anyway "
                        "(a 429 is backed off)",
                        kind.value, self._name, waited, limit.per_period, limit.period_s,
                    )  # fmt: skip
                    break
                if not logged:
                    log.info(
                        "GitLab %s budget of %s spent (%d requests per %.0f s, shared by every "
                        "worker): waiting %.2f s",
                        kind.value, self._name, limit.per_period, limit.period_s, wait,
                    )  # fmt: skip
                    logged = True
                self._sleep(min(max(wait, MIN_NAP_S), MAX_NAP_S, self._max_wait_s - waited))
        return self._clock() - started


class LocalBudget(_WaitingBudget):
    """The budget of one process: the buckets in memory, shared by its threads."""

    def __init__(
        self,
        limits: dict[RequestKind, BucketLimit],
        *,
        name: str = "this process",
        max_wait_s: float = DEFAULT_MAX_WAIT_S,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._lock = threading.Lock()
        self._buckets: dict[RequestKind, tuple[float, float]] = {}
        super().__init__(
            limits, self._take_here, name=name, max_wait_s=max_wait_s, clock=clock, sleep=sleep
        )

    def _take_here(self, kind: RequestKind, limit: BucketLimit, now: float) -> float | None:
        with self._lock:
            tokens, at = self._buckets.get(kind, (limit.capacity, now))
            later = max(now, at)  # a clock that went back takes at the last take's time
            tokens = refilled(tokens, later - at, limit)
            if tokens >= 1.0:
                self._buckets[kind] = (tokens - 1.0, later)
                return None
            self._buckets[kind] = (tokens, later)
            return wait_for_token_s(tokens, limit)


def waiting_budget(
    limits: dict[RequestKind, BucketLimit],
    take_once: BudgetTaker,
    *,
    name: str,
    max_wait_s: float = DEFAULT_MAX_WAIT_S,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> GitLabBudget:
    """A budget that takes through ``take_once`` (the database's statement) and waits as
    :class:`LocalBudget` does."""
    return _WaitingBudget(
        limits, take_once, name=name, max_wait_s=max_wait_s, clock=clock, sleep=sleep
    )
