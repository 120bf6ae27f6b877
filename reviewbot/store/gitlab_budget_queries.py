"""The SQL of the shared GitLab request budgets (table ``gitlab_budgets``, issue 38).

One row per GitLab instance and kind of request holds a token bucket (reviewbot.gitlab_budget
says why a bucket keeps every window under the limit). A token is taken by one conditional
``UPDATE``: the refill is computed in SQL from the row as it is when the row is locked, and
the ``WHERE`` keeps the row unchanged unless a whole token is there. On PostgreSQL a second
``UPDATE`` of the same row waits for the first to commit, then re-evaluates its ``WHERE`` and
``SET`` on the new row ("EvalPlanQual", read committed:
https://www.postgresql.org/docs/current/transaction-iso.html#XACT-READ-COMMITTED); SQLite
writes one transaction at a time. So every worker of every host takes from one bucket and no
two take the same token.

Owns: the statements (create the row, take a token, read the row). Must not: decide how long
to wait (reviewbot.gitlab_budget does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, case, insert, literal, select, update
from sqlalchemy.exc import IntegrityError

from reviewbot.gitlab_budget import (
    DEFAULT_MAX_WAIT_S,
    BucketLimit,
    GitLabBudget,
    RequestKind,
    refilled,
    wait_for_token_s,
    waiting_budget,
)
from reviewbot.store.models import GitLabBudget as BudgetRow

__all__ = ["StoredTaker", "stored_budget"]

TOKEN = 1.0


class StoredTaker:
    """Takes one token from ``gitlab_url``'s bucket of a kind in the database."""

    def __init__(self, engine: Engine, gitlab_url: str) -> None:
        self._engine = engine
        self._url = gitlab_url

    def __call__(self, kind: RequestKind, limit: BucketLimit, now: float) -> float | None:
        """None when a token was taken, else the seconds until one should be back."""
        taken, at_or_wait = self.take_at(kind, limit, now)
        return None if taken else at_or_wait

    def take_at(self, kind: RequestKind, limit: BucketLimit, now: float) -> tuple[bool, float]:
        """(True, the time the token was taken at) or (False, the seconds until one should be
        back). A taker whose clock is behind the row's takes at the row's time (never earlier
        than the last take), so the takes' times rise in the order they were made and the
        bucket's bound holds over them exactly."""
        row = (BudgetRow.gitlab_url == self._url) & (BudgetRow.kind == kind.value)
        now_value = literal(now)
        at = case((now_value > BudgetRow.updated_at_s, now_value), else_=BudgetRow.updated_at_s)
        grown = BudgetRow.tokens + (at - BudgetRow.updated_at_s) * literal(limit.rate)
        capped = case((grown > literal(limit.capacity), literal(limit.capacity)), else_=grown)
        take = (
            update(BudgetRow)
            .where(row, capped >= literal(TOKEN))
            .values(tokens=capped - literal(TOKEN), updated_at_s=at)
            .returning(BudgetRow.updated_at_s)
        )
        with self._engine.begin() as connection:
            taken_at = connection.execute(take).scalar_one_or_none()
            if taken_at is not None:
                return True, float(taken_at)
            found = connection.execute(
                select(BudgetRow.tokens, BudgetRow.updated_at_s).where(row)
            ).first()
        if found is None:
            self._create(kind, limit, now)
            return self.take_at(kind, limit, now)
        tokens = refilled(found.tokens, max(now - found.updated_at_s, 0.0), limit)
        return False, wait_for_token_s(tokens, limit)

    def _create(self, kind: RequestKind, limit: BucketLimit, now: float) -> None:
        """A full bucket; another worker creating it first is as good."""
        values: dict[str, Any] = {
            "gitlab_url": self._url,
            "kind": kind.value,
            "tokens": limit.capacity,
            "updated_at_s": now,
        }
        try:
            with self._engine.begin() as connection:
                connection.execute(insert(BudgetRow).values(**values))
        except IntegrityError:
            return  # created by another worker between our UPDATE and INSERT


def stored_budget(
    engine: Engine,
    gitlab_url: str,
    limits: dict[RequestKind, BucketLimit],
    *,
    max_wait_s: float = DEFAULT_MAX_WAIT_S,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] | None = None,
) -> GitLabBudget:
    """``gitlab_url``'s budgets in ``engine``'s database, shared by every process using it."""
    options: dict[str, Any] = {}
    if clock is not None:
        options["clock"] = clock
    if sleep is not None:
        options["sleep"] = sleep
    return waiting_budget(
        limits,
        StoredTaker(engine, gitlab_url),
        name=gitlab_url,
        max_wait_s=max_wait_s,
        **options,
    )
