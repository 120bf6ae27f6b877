"""The installed ``reviewbot`` as a service: ``db upgrade``, then ``serve`` and ``worker`` taking
one signed webhook delivery to a posted review on PostgreSQL, and ``jobs`` showing the job.

``serve`` and ``worker`` are the console script of the venv the wheel was installed into without
extras, started as subprocesses from a directory outside the checkout (as the systemd units of
``deploy/`` start them), talking to the fake GitLab and the fake vLLM over real HTTP on
127.0.0.1 and to a throw-away PostgreSQL database of ``tests/store_fixtures.py`` (skipped, with
the reason, when ``REVIEWBOT_TEST_POSTGRES_URL`` is unset). The delivery is GitLab's merge
request event of ``tests/test_end_to_end.py``, posted over HTTP to the listener's port; the test
waits, with a deadline, for the comments on the fake GitLab, then stops both with SIGTERM and
checks that they exit cleanly. ``db upgrade`` runs on both backends.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.pool import NullPool

from reviewbot.store import normalize_database_url
from reviewbot.store.migrate import head_revision
from reviewbot.webhook.openapi import HEALTH_PATH, WEBHOOK_PATH
from tests.builders import diff_notes, summary_notes
from tests.installed.artifacts import Installed
from tests.installed.commands import (
    SERVICE_START_S,
    Service,
    free_port,
    reviewbot,
    succeeded,
    user_env,
    wait_for,
    world_env,
)
from tests.installed.tier import INSTALLED
from tests.mr_world import World
from tests.store_fixtures import POSTGRES_URL_ENV
from tests.test_ci import expected_lines
from tests.test_end_to_end import deliver, open_event

pytestmark = INSTALLED

ON_POSTGRES = pytest.mark.parametrize(
    "store_url",
    [
        pytest.param(
            "postgresql",
            marks=pytest.mark.skipif(
                not os.environ.get(POSTGRES_URL_ENV),
                reason=f"set {POSTGRES_URL_ENV} to test the service on PostgreSQL",
            ),
        )
    ],
    indirect=True,
)
FINDINGS = len(expected_lines())
REVIEW_DEADLINE_S = 120.0
PORT_TRIES = 3  # another process may take the port between the probe and the listener
DELIVERY = "6f3a0c1e-0000-4000-8000-00000000031a"
HTTP_ACCEPTED, HTTP_UNAUTHORIZED = 202, 401
SCHEMA = {"alembic_version", "reviews", "findings", "llm_calls", "jobs", "feedback", "learnings"}


def answers_health(url: str) -> bool:
    """Whether a listener at ``url`` answers its health check (database reachable)."""
    try:
        return httpx.get(url + HEALTH_PATH, timeout=2.0).status_code == httpx.codes.OK
    except httpx.TransportError:
        return False


def start_serve(installed: Installed, cwd: Path, env: dict[str, str]) -> tuple[Service, str]:
    """``reviewbot serve`` on a free port, once it answers: the service and its URL."""
    outputs = []
    for _ in range(PORT_TRIES):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        serve = Service.start(installed, cwd, env, "serve", "--port", str(port))
        wait_for(
            lambda: not serve.running() or answers_health(url),  # noqa: B023 - called here
            SERVICE_START_S,
            "reviewbot serve to answer",
        )
        if serve.running():
            return serve, url
        outputs.append(serve.text())
        if "address already in use" not in outputs[-1].lower():
            break
    raise AssertionError("reviewbot serve exited:\n" + "\n---\n".join(outputs)[-4000:])


def rows(database_url: str, query: str) -> list[tuple]:
    engine = create_engine(normalize_database_url(database_url), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(text(query))]
    finally:
        engine.dispose()


def test_db_upgrade_migrates_a_blank_database_to_the_head_of_the_wheel(
    installed: Installed, outside: Path, blank_store_url: str
) -> None:
    """The migrations (Alembic's env and revisions) are the wheel's; twice is safe."""
    env = user_env(outside)
    for _ in range(2):
        said = succeeded(
            reviewbot(installed, outside, env, "db", "upgrade", "--database-url", blank_store_url)
        )
        assert said.strip().endswith(f"is at revision {head_revision()}"), said
    engine = create_engine(normalize_database_url(blank_store_url), poolclass=NullPool)
    try:
        assert set(inspect(engine).get_table_names()) >= SCHEMA
    finally:
        engine.dispose()
    assert rows(blank_store_url, "select version_num from alembic_version") == [(head_revision(),)]


@ON_POSTGRES
def test_serve_and_worker_take_a_signed_webhook_to_a_posted_review(
    installed: Installed, outside: Path, world: World, store_url: str
) -> None:
    env = world_env(world, outside)
    serve, url = start_serve(installed, outside, env)
    with serve, Service.start(installed, outside, env, "worker", "--poll-seconds", "0.1") as worker:
        payload = open_event(world)
        with httpx.Client(base_url=url, timeout=30.0) as client:
            unsigned = client.post(WEBHOOK_PATH, json=payload, headers={"X-Gitlab-Token": "no"})
            assert unsigned.status_code == HTTP_UNAUTHORIZED
            assert deliver(client, payload, DELIVERY) == HTTP_ACCEPTED
        wait_for(
            lambda: (
                len(diff_notes(world)) == FINDINGS
                and summary_notes(world)
                and rows(store_url, "select status from jobs") == [("succeeded",)]
            ),
            REVIEW_DEADLINE_S,
            lambda: f"a settled job and {FINDINGS} comments on MR !1; worker:\n{worker.text()}",
        )
        stopped = {"serve": serve.stop(), "worker": worker.stop()}
    said = {"serve": serve.text(), "worker": worker.text()}
    # a clean stop is exit 0 for both (uvicorn raises SIGTERM again after its shutdown; serve
    # answers it by closing its App and exiting 0)
    assert stopped == {"serve": 0, "worker": 0}, (stopped, said)
    assert "Application shutdown complete" in said["serve"]
    assert "SIGTERM received, stopping" in said["worker"]
    assert "claimed 1, succeeded 1, retried 0" in said["worker"]
    assert not [name for name, output in said.items() if "Traceback" in output], said
    notes = diff_notes(world)
    assert {(n["position"]["new_path"], n["position"]["new_line"]) for n in notes} == (
        expected_lines()
    )
    assert rows(store_url, "select status, trigger from reviews") == [("succeeded", "webhook")]
    assert rows(store_url, "select count(*) from findings where state = 'posted'") == [(FINDINGS,)]

    listed = succeeded(reviewbot(installed, outside, env, "jobs", "list"))
    assert "succeeded 1" in listed and "group/app" in listed
    [(job_id,)] = rows(store_url, "select id from jobs")
    shown = succeeded(reviewbot(installed, outside, env, "jobs", "show", str(job_id)))
    assert "succeeded" in shown and "webhook" in shown
