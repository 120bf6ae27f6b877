"""The GitLab request budget every worker shares (reviewbot.gitlab_budget, issue 38).

GitLab limits note creation per user (``notes_create_limit``, 300 a minute by default:
https://docs.gitlab.com/administration/settings/rate_limit_on_notes_creation/) and, on
GitLab.com, authenticated API requests per user (2,000 a minute:
https://docs.gitlab.com/user/gitlab_com/#rate-limits-on-gitlabcom). The adapter's 429 answer
is ``GET /user`` (https://docs.gitlab.com/api/users/#get-the-current-user) through one
``responses`` fixture; the stored budget runs on SQLite and on PostgreSQL (``store_url``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import responses
from sqlalchemy import select

from reviewbot.app import App
from reviewbot.config import Settings
from reviewbot.gitlab import GitLabClient, GitLabSettings
from reviewbot.gitlab_budget import BucketLimit, LocalBudget, RequestKind, kinds_of
from reviewbot.store import Store
from reviewbot.store.gitlab_budget_queries import StoredTaker, stored_budget
from reviewbot.store.models import GitLabBudget as BudgetRow
from tests.store_fixtures import store_url  # noqa: F401

GITLAB_URL = "https://gitlab.example.com"
USER_URL = f"{GITLAB_URL}/api/v4/user"
USER = {"id": 1, "username": "reviewbot", "bot": True}
# A short period so the test sees many windows in a few seconds: 20 a second.
LIMIT = BucketLimit(20, period_s=1.0)
TAKES_PER_WORKER = 30
WORKERS = 2
# A take's time is a float sum: a window is held to its limit up to this rounding.
ROUNDING_S = 1e-6


class FakeClock:
    """A clock that moves only when something sleeps on it."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def most_in_any_window(times: list[float], period_s: float) -> int:
    """The most takes inside any closed window of ``period_s`` seconds."""
    ordered = sorted(times)
    most = 0
    for first, start in enumerate(ordered):
        inside = [t for t in ordered[first:] if t - start <= period_s - ROUNDING_S]
        most = max(most, len(inside))
    return most


@pytest.mark.parametrize(
    ("method", "path", "kinds"),
    [
        ("GET", "/api/v4/projects/7/merge_requests/1/notes", (RequestKind.API,)),
        ("POST", "/api/v4/projects/7/merge_requests/1/notes", (RequestKind.API, RequestKind.NOTE)),
        ("POST", "/api/v4/projects/7/merge_requests/1/discussions", ("api", "note")),
        ("post", "/api/v4/projects/7/merge_requests/1/discussions/ab12/notes", ("api", "note")),
        ("POST", "/api/v4/projects/7/merge_requests/1/draft_notes/bulk_publish", ("api", "note")),
        ("PUT", "/api/v4/projects/7/merge_requests/1/notes/5", (RequestKind.API,)),
        ("POST", "/api/v4/projects/7/statuses/abc", (RequestKind.API,)),
    ],
)
def test_every_request_takes_from_the_api_budget_and_a_new_note_from_the_notes_one(
    method: str, path: str, kinds: tuple[str, ...]
) -> None:
    assert kinds_of(method, path) == kinds


def test_a_minute_s_limit_is_a_burst_plus_an_even_pace_that_add_up_to_it() -> None:
    limit = BucketLimit(300)
    assert limit.capacity == 30
    assert limit.capacity + limit.rate * limit.period_s == pytest.approx(300)
    assert BucketLimit(3, period_s=1.0).capacity == 1  # at least one token
    with pytest.raises(ValueError, match="at least 2"):
        BucketLimit(1)  # a burst of one and no pace: nothing would ever come back


def test_a_local_budget_holds_any_window_to_the_limit_and_waits_for_the_rest() -> None:
    clock = FakeClock()
    budget = LocalBudget({RequestKind.API: LIMIT}, clock=clock, sleep=clock.sleep)
    times = []
    for _ in range(100):
        budget.take([RequestKind.API, RequestKind.NOTE])  # no notes budget: only api counts
        times.append(clock.now)
    assert most_in_any_window(times, LIMIT.period_s) <= LIMIT.per_period
    assert clock.now - 1_000.0 == pytest.approx((100 - LIMIT.capacity) / LIMIT.rate, rel=0.01)


def test_two_workers_sharing_the_stored_budget_never_exceed_it_in_any_window(
    store_url: str,  # noqa: F811
) -> None:
    """Two workers (threads, each with its own connection pool, as two processes would be)
    take from one bucket on the real clock: every window of the period holds at most the
    limit, and every take was made (none dropped)."""
    times: list[float] = []
    lock = threading.Lock()

    def worker() -> None:
        store = Store.from_url(store_url)
        taker = StoredTaker(store.engine, GITLAB_URL)
        try:
            taken = 0
            while taken < TAKES_PER_WORKER:
                ok, at_or_wait = taker.take_at(RequestKind.NOTE, LIMIT, time.time())
                if ok:
                    taken += 1
                    with lock:
                        times.append(at_or_wait)
                else:
                    time.sleep(min(at_or_wait, LIMIT.period_s))
        finally:
            store.close()

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        for done in [pool.submit(worker) for _ in range(WORKERS)]:
            done.result()  # a worker's error fails the test
    assert len(times) == WORKERS * TAKES_PER_WORKER
    assert most_in_any_window(times, LIMIT.period_s) <= LIMIT.per_period


def test_a_spent_stored_budget_waits_says_why_and_never_drops_the_request(
    migrated_store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    limits = {RequestKind.NOTE: BucketLimit(4, period_s=1.0)}
    budget = stored_budget(
        migrated_store.engine, GITLAB_URL, limits, clock=clock, sleep=clock.sleep
    )
    with caplog.at_level(logging.INFO, logger="reviewbot.gitlab_budget"):
        waited = [budget.take([RequestKind.NOTE]) for _ in range(4)]
    assert waited[0] == 0.0  # the burst: one token
    assert all(wait > 0 for wait in waited[1:])
    assert "note budget of https://gitlab.example.com spent" in caplog.text
    with migrated_store.engine.connect() as connection:
        row = connection.execute(select(BudgetRow)).one()
    assert (row.gitlab_url, row.kind) == (GITLAB_URL, "note")


def test_past_its_bound_a_request_goes_anyway_and_says_so(
    migrated_store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    limits = {RequestKind.API: BucketLimit(2, period_s=60.0)}
    budget = stored_budget(
        migrated_store.engine, GITLAB_URL, limits, max_wait_s=5.0, clock=clock, sleep=clock.sleep
    )
    budget.take([RequestKind.API])
    with caplog.at_level(logging.WARNING, logger="reviewbot.gitlab_budget"):
        assert budget.take([RequestKind.API]) == pytest.approx(5.0)
    assert "sending anyway" in caplog.text


@pytest.fixture
def user_endpoint() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=True) as mock:
        yield mock


def test_a_429_with_retry_after_is_still_backed_off_and_each_try_takes_from_the_budget(
    user_endpoint: responses.RequestsMock,
) -> None:
    user_endpoint.add(
        responses.GET, USER_URL, body="Retry later", status=429, headers={"Retry-After": "2"}
    )
    user_endpoint.add(responses.GET, USER_URL, json=USER, status=200)
    waits: list[float] = []
    clock = FakeClock()
    budget = LocalBudget({RequestKind.API: BucketLimit(2, period_s=60.0)}, clock=clock,
                         sleep=clock.sleep)  # fmt: skip
    client = GitLabClient(GitLabSettings(url=GITLAB_URL, token="t"), sleep=waits.append)
    client.use_budget(budget)
    assert client.bot_username() == "reviewbot"
    assert waits == [2.0]  # the Retry-After, as without a budget
    assert clock.slept and sum(clock.slept) == pytest.approx(60.0)  # the second try waited


def test_a_worker_s_gitlab_client_takes_from_the_budget_in_the_database(
    store_url: str,  # noqa: F811
    user_endpoint: responses.RequestsMock,
) -> None:
    user_endpoint.add(responses.GET, USER_URL, json=USER, status=200)
    settings = Settings(gitlab_url=GITLAB_URL, gitlab_token="t", database_url=store_url)
    with App(settings, shared_model_slots=True) as app:
        assert app.gitlab().bot_username() == "reviewbot"
        with app.store.engine.connect() as connection:
            rows = connection.execute(select(BudgetRow.kind, BudgetRow.tokens)).all()
    api = BucketLimit(settings.gitlab_budget_requests_per_minute)
    assert [(kind, round(tokens)) for kind, tokens in rows] == [("api", api.capacity - 1)]


def test_the_command_line_s_client_has_no_shared_budget(
    store_url: str,  # noqa: F811
    user_endpoint: responses.RequestsMock,
) -> None:
    user_endpoint.add(responses.GET, USER_URL, json=USER, status=200)
    settings = Settings(gitlab_url=GITLAB_URL, gitlab_token="t", database_url=store_url)
    with App(settings) as app:
        assert app.gitlab().bot_username() == "reviewbot"
        with app.store.engine.connect() as connection:
            assert connection.execute(select(BudgetRow)).all() == []
