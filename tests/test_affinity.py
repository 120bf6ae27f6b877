"""MR affinity: every model request of one review carries the MR's session key.

A router in front of several model servers (vllm-router's ``consistent_hash`` policy) keeps
requests with one ``X-Session-ID`` on one server, so the MR's shared prefix is prefilled once
(docs/several-boxes.md). These tests read the headers and bodies the fake vLLM received.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from sqlalchemy import MetaData, create_engine, select

from reviewbot.app import App
from reviewbot.config import ConfigError, Settings
from reviewbot.model import session_key
from reviewbot.mr import RunOptions, run_merge_request
from tests.mr_world import World, world  # noqa: F401

SMALL_CONTEXT = 2345  # with SMALL_OUTPUT and the verdict tool: a few chunks of the MR (no tool
# rounds reserve since issue 34 part 2; the compact repo tool: 275 tokens less than the typed)
SMALL_OUTPUT = 512


def expected_key(world: World) -> str:  # noqa: F811
    return f"{urlsplit(world.gitlab.url).netloc}/7/1"


def test_session_key_is_host_project_id_and_iid() -> None:
    assert session_key("https://gitlab.example.com/", 42, 7) == "gitlab.example.com/42/7"
    assert session_key("http://10.0.0.5:8080", 3, 1) == "10.0.0.5:8080/3/1"
    assert session_key("http://user:pa@ss@[::1]:8080/", 3, 1) == "[::1]:8080/3/1"
    assert session_key("https://token@gitlab.example.com", 3, 1) == "gitlab.example.com/3/1"


@pytest.mark.slow
def test_a_password_in_the_gitlab_url_never_reaches_the_model_server(
    world: World,  # noqa: F811
) -> None:
    """REVIEWBOT_GITLAB_URL=http://user:pass@host: the key is the host alone (issue 32)."""
    parts = urlsplit(world.gitlab.url)
    with_password = f"{parts.scheme}://reviewbot:s3cret-pass@{parts.netloc}"
    report = world.run(gitlab_url=with_password)
    assert report.findings and world.vllm.requests
    bodies, headers = world.vllm.requests, world.vllm.request_headers
    assert [h.get("x-session-id") for h in headers] == [expected_key(world)] * len(bodies)
    assert [b.get("user") for b in bodies] == [expected_key(world)] * len(bodies)
    assert "s3cret-pass" not in repr(bodies) + repr(headers)


def every_stored_value(store_url: str) -> str:
    """Every value of every table of the database, as one text to search."""
    engine = create_engine(store_url)
    try:
        with engine.connect() as connection:
            tables = MetaData()
            tables.reflect(connection)
            return repr([list(connection.execute(select(t))) for t in tables.sorted_tables])
    finally:
        engine.dispose()


def test_a_password_in_the_gitlab_url_never_reaches_the_database(
    world: World,  # noqa: F811
) -> None:
    """The MR's key in reviews, findings and outcomes is the instance without userinfo: a
    second run with the plain URL finds the first one's review (issue 32)."""
    parts = urlsplit(world.gitlab.url)
    with_password = f"{parts.scheme}://reviewbot:s3cret-pass@{parts.netloc}/"
    first = world.run(gitlab_url=with_password)
    assert first.findings
    stored = every_stored_value(world.database_url)
    assert world.gitlab.url in stored
    assert "s3cret-pass" not in stored and "reviewbot:s3cret" not in stored
    again = world.run()  # the same MR at the same head, the URL as most configure it
    assert again.review.carried is not None  # one MR, whichever way its instance was spelled


@pytest.mark.slow
def test_every_request_of_a_review_carries_the_mr_key(world: World) -> None:  # noqa: F811
    """All chunks, their tool rounds and the verification: one key, in the header and in
    ``user``."""
    report = world.run(
        max_model_len=SMALL_CONTEXT, max_output_tokens=SMALL_OUTPUT, tools="on", verify="on"
    )
    assert report.findings and len(report.review.plan.chunks) >= 2
    bodies, headers = world.vllm.requests, world.vllm.request_headers
    key = expected_key(world)
    assert [h.get("x-session-id") for h in headers] == [key] * len(bodies)
    assert [b.get("user") for b in bodies] == [key] * len(bodies)
    verdicts = [b for b in bodies if any("verdict" in str(t) for t in b.get("tools", []))]
    assert verdicts, "the verification calls are among the requests"


@pytest.mark.slow
def test_another_router_header_name(world: World) -> None:  # noqa: F811
    world.run(llm_session_header="X-Dynamo-Session-ID")
    headers = world.vllm.request_headers
    assert headers and all(h.get("x-dynamo-session-id") == expected_key(world) for h in headers)
    assert not any("x-session-id" in h for h in headers)


@pytest.mark.slow
def test_an_empty_header_setting_sends_no_key(world: World) -> None:  # noqa: F811
    world.run(llm_session_header="")
    assert world.vllm.requests
    assert not any("x-session-id" in h for h in world.vllm.request_headers)
    assert not any("user" in b for b in world.vllm.requests)


@pytest.mark.slow
def test_two_mrs_get_two_keys(world: World) -> None:  # noqa: F811
    world.run()
    first = {h["x-session-id"] for h in world.vllm.request_headers}
    world.gitlab.add_mr_from_git(
        "group/app", world.repo, "main", "feature", iid=2, title="Same change, other MR"
    )
    with App(world.settings()) as app:
        run_merge_request(app, "group/app", 2, RunOptions())
    every = {h["x-session-id"] for h in world.vllm.request_headers}
    assert first == {expected_key(world)}
    assert every == {expected_key(world), expected_key(world).removesuffix("/1") + "/2"}


@pytest.mark.parametrize("name", ["X Session", "X-Session-ID:", "é"])
def test_a_header_name_that_is_no_token_is_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="llm_session_header"):
        Settings(llm_session_header=name)
