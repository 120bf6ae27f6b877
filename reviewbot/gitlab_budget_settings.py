"""The settings of the GitLab request budget every worker shares (reviewbot.gitlab_budget).

:class:`GitLabBudgetSettings` is a base of :class:`reviewbot.config.Settings`: its fields are
settings like any other (file, ``REVIEWBOT_*``, the generated reference), declared here to keep
``config.py`` to one screenful per concern.

Owns: the budget's settings, their defaults, bounds and help. Must not: read anything, or be
read as a global.
"""

from __future__ import annotations

from dataclasses import dataclass

from reviewbot.gitlab_budget import (
    DEFAULT_API_REQUESTS_PER_MINUTE,
    DEFAULT_MAX_WAIT_S,
    DEFAULT_NOTES_CREATED_PER_MINUTE,
    MIN_PER_PERIOD,
    BucketLimit,
    RequestKind,
)
from reviewbot.setting_fields import Bounds, setting

__all__ = ["GitLabBudgetSettings"]

MAX_REQUESTS_PER_MINUTE = 1_000_000
MAX_BUDGET_WAIT_S = 3_600.0  # an hour


@dataclass(frozen=True)
class GitLabBudgetSettings:
    """The shared GitLab request budget's settings: a base of ``Settings``."""

    gitlab_budget_notes_per_minute: int = setting(
        DEFAULT_NOTES_CREATED_PER_MINUTE,
        bounds=Bounds(0, MAX_REQUESTS_PER_MINUTE),
        help="Notes (comments, threads, replies) every worker together creates per minute on "
        "one GitLab, in any 60 seconds: GitLab's per-user notes limit (Admin > Settings > "
        "Network > Notes rate limit; 300 by default). Shared through the database by the "
        "workers of one deployment; 0: no shared limit, 1 is taken as 2 "
        "([capacity](capacity.md#gitlabs-own-limits-under-the-peak)).",
    )
    gitlab_budget_requests_per_minute: int = setting(
        DEFAULT_API_REQUESTS_PER_MINUTE,
        bounds=Bounds(0, MAX_REQUESTS_PER_MINUTE),
        help="API requests (every page and retry counted) every worker together sends per "
        "minute to one GitLab, in any 60 seconds: GitLab.com allows 2,000 per user; a "
        "self-managed GitLab's limit is in Admin > Settings > Network. 0: no shared limit.",
    )
    gitlab_budget_max_wait_s: float = setting(
        DEFAULT_MAX_WAIT_S,
        bounds=Bounds(0, MAX_BUDGET_WAIT_S, unit="seconds"),
        help="Seconds a GitLab request waits for the shared budget (logged with why); after "
        "that it is sent anyway, and a 429 is backed off with its Retry-After.",
    )

    def gitlab_budget_limits(self) -> dict[RequestKind, BucketLimit]:
        """The budgets set (a 0 is none; a 1 is taken as 2, the least a bucket paces)."""
        limits = {}
        if notes := self.gitlab_budget_notes_per_minute:
            limits[RequestKind.NOTE] = BucketLimit(max(notes, MIN_PER_PERIOD))
        if requests := self.gitlab_budget_requests_per_minute:
            limits[RequestKind.API] = BucketLimit(max(requests, MIN_PER_PERIOD))
        return limits
