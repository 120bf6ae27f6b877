"""The GitLab adapter's waits after a 429 or a 5xx: one ``responses`` fixture, ``GET /user``.

Endpoint: https://docs.gitlab.com/api/users/#get-the-current-user. GitLab's rate limits answer
429 ``Retry later`` with ``Retry-After`` (https://docs.gitlab.com/security/rate_limits/,
doc/administration/settings/user_and_ip_rate_limits.md); the header is RFC 9110 section
10.2.3, read by reviewbot.retry. The client's ``sleep`` is injected: nothing here sleeps.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
import responses

from reviewbot.gitlab import (
    RETRY_AFTER_CAP_S,
    RETRY_BACKOFF_BASE_S,
    GitLabClient,
    GitLabSettings,
    GitLabUnavailableError,
)

GITLAB_URL = "https://gitlab.example.com"
USER_URL = f"{GITLAB_URL}/api/v4/user"
USER = {"id": 1, "username": "reviewbot", "bot": True}
RATE_LIMITED = "Retry later"
MAX_RETRIES = 2


@pytest.fixture
def user_endpoint() -> Iterator[responses.RequestsMock]:
    """``GET /api/v4/user``: the answers registered by each test, in order."""
    with responses.RequestsMock(assert_all_requests_are_fired=True) as mock:
        yield mock


def _client(waits: list[float]) -> GitLabClient:
    settings = GitLabSettings(url=GITLAB_URL, token="t", max_retries=MAX_RETRIES)
    return GitLabClient(settings, sleep=waits.append)


def _limited(mock: responses.RequestsMock, retry_after: str | None, status: int = 429) -> None:
    headers = {} if retry_after is None else {"Retry-After": retry_after}
    mock.add(responses.GET, USER_URL, body=RATE_LIMITED, status=status, headers=headers)


def _answered(mock: responses.RequestsMock) -> None:
    mock.add(responses.GET, USER_URL, json=USER, status=200)


def test_a_429_with_delay_seconds_waits_that_long(user_endpoint: responses.RequestsMock) -> None:
    _limited(user_endpoint, "2")
    _answered(user_endpoint)
    waits: list[float] = []
    assert _client(waits).bot_username() == "reviewbot"
    assert waits == [2.0]
    assert len(user_endpoint.calls) == 2


def test_an_http_date_far_ahead_waits_the_cap(user_endpoint: responses.RequestsMock) -> None:
    _limited(user_endpoint, format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True))
    _answered(user_endpoint)
    waits: list[float] = []
    assert _client(waits).bot_username() == "reviewbot"
    assert waits == [RETRY_AFTER_CAP_S]


def test_an_http_date_past_waits_the_backoff(user_endpoint: responses.RequestsMock) -> None:
    _limited(user_endpoint, "Thu, 01 Jan 2015 00:00:00 GMT")
    _answered(user_endpoint)
    waits: list[float] = []
    _client(waits).bot_username()
    assert waits == [RETRY_BACKOFF_BASE_S]


def test_a_decimal_delay_is_read_as_the_model_runner_reads_it(
    user_endpoint: responses.RequestsMock,
) -> None:
    # Not RFC delay-seconds; read leniently by reviewbot.retry, for GitLab and the model alike.
    _limited(user_endpoint, "1.5")
    _answered(user_endpoint)
    waits: list[float] = []
    _client(waits).bot_username()
    assert waits == [1.5]


@pytest.mark.parametrize("unreadable", ["²", "soon", "-3", "nan"])
def test_an_unreadable_retry_after_falls_back_to_the_backoff(
    user_endpoint: responses.RequestsMock, unreadable: str
) -> None:
    # "²" passed str.isdigit() and crashed float(): a ValueError out of the client.
    _limited(user_endpoint, unreadable)
    _answered(user_endpoint)
    waits: list[float] = []
    assert _client(waits).bot_username() == "reviewbot"
    assert waits == [RETRY_BACKOFF_BASE_S]


def test_5xx_without_retry_after_backs_off_then_gives_up(
    user_endpoint: responses.RequestsMock,
) -> None:
    for _ in range(MAX_RETRIES + 1):
        _limited(user_endpoint, None, status=503)
    waits: list[float] = []
    with pytest.raises(GitLabUnavailableError, match="answered 503"):
        _client(waits).bot_username()
    assert waits == [RETRY_BACKOFF_BASE_S, 2 * RETRY_BACKOFF_BASE_S]
