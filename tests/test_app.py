"""reviewbot.app and reviewbot.errors: one set of adapters per process, one table of failures."""

from __future__ import annotations

import dataclasses
import importlib
import logging
import threading
import time

import pytest
from sqlalchemy import Engine, event

from reviewbot.app import App
from reviewbot.config import ConfigError, Settings
from reviewbot.errors import ERROR_TABLE, EXIT_BAD_INPUT, EXIT_FAILURE, disposition
from reviewbot.gitlab import (
    GitLabClient,
    GitLabNotFoundError,
    GitLabSettings,
    GitLabUnavailableError,
)
from reviewbot.mr import RunOptions, run_merge_request
from reviewbot.queue import JobQueue
from reviewbot.store import upgrade
from reviewbot.worker import Worker
from tests.mr_world import PROJECT, World, world  # noqa: F401
from tests.store_fixtures import store_url  # noqa: F401

JOBS = 20
ALEMBIC_CONTEXT_LOG = "Context impl"
# Note pacing slow enough to see: one note at once, then one a second.
PACED_NOTES_PER_MINUTE = 60
PACED_NOTE_BURST = 1
CLOSE_WAIT_S = 10.0
POLL_S = 0.02


def test_every_error_table_entry_names_a_real_exception() -> None:
    for module, name, _ in ERROR_TABLE:
        try:
            loaded = importlib.import_module(module)
        except ImportError:
            assert module == "httpx2", f"{module} cannot be imported"
            continue
        kind = getattr(loaded, name)
        assert isinstance(kind, type) and issubclass(kind, BaseException), (module, name)


@pytest.mark.parametrize(
    ("error", "exit_code", "retry"),
    [
        (ConfigError("bad"), EXIT_BAD_INPUT, False),
        (GitLabNotFoundError("gone"), EXIT_FAILURE, False),
        (GitLabUnavailableError("502"), EXIT_FAILURE, True),
        (TimeoutError("slow"), EXIT_FAILURE, True),
    ],
)
def test_one_table_gives_exit_code_and_retry(error: Exception, exit_code: int, retry: bool) -> None:
    known = disposition(error)
    assert known is not None
    assert (known.exit_code, known.retry) == (exit_code, retry)


def test_an_unknown_error_is_a_bug_not_a_disposition() -> None:
    assert disposition(KeyError("bug")) is None


def test_building_an_app_opens_nothing(tmp_path: object) -> None:
    app = App(Settings(database_url="postgresql://nobody@127.0.0.1:1/none"))
    assert app.schema_checks == 0  # no connection was tried
    with pytest.raises(ConfigError, match="REVIEWBOT_GITLAB_URL"):
        app.gitlab()
    app.close()
    app.close()  # twice is fine


def test_one_gitlab_client_per_url(world: World) -> None:  # noqa: F811
    with App(world.settings()) as app:
        assert app.gitlab() is app.gitlab() is app.gitlab(world.gitlab.url + "/")
        assert app.gitlab("https://other.example.com") is not app.gitlab()


@pytest.mark.slow
def test_a_worker_running_many_jobs_opens_one_store_engine_and_checks_the_schema_once(
    world: World,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    upgrade(world.database_url)  # deployed: `reviewbot db upgrade` ran before the worker
    for iid in range(2, JOBS + 1):
        world.gitlab.add_mr_from_git(
            PROJECT, world.repo, "main", "feature", iid=iid, title=f"Change {iid}"
        )
    engines: set[int] = set()
    lock = threading.Lock()

    def connected(connection: object) -> None:
        with lock:
            engines.add(id(connection.engine))  # type: ignore[attr-defined]

    event.listen(Engine, "engine_connect", connected)
    caplog.set_level(logging.INFO, logger="alembic")
    try:
        with App(world.settings(), shared_model_slots=True) as app:
            queue = JobQueue(app.store)
            for iid in range(1, JOBS + 1):
                queue.enqueue(project=PROJECT, mr_iid=iid, head_sha=None, trigger="webhook")
            stats = Worker(app, queue, concurrency=2, poll_s=0.05).run(
                burst=True, handle_signals=False
            )
            store_engine = id(app.store.engine)
            slots_engines = 1 if app.store.engine.dialect.name == "postgresql" else 0
    finally:
        event.remove(Engine, "engine_connect", connected)
    assert stats.succeeded == JOBS
    assert app.schema_checks == 1
    assert sum(ALEMBIC_CONTEXT_LOG in r.getMessage() for r in caplog.records) == 1
    # the store's one Engine, plus the model slots' own pool on PostgreSQL
    assert store_engine in engines and len(engines) == 1 + slots_engines


@pytest.mark.slow
def test_one_model_client_serves_every_review_of_the_process(world: World) -> None:  # noqa: F811
    world.gitlab.add_mr_from_git(PROJECT, world.repo, "main", "feature", iid=2, title="Again")
    with App(world.settings()) as app:
        assert app.model() is app.model()
        for iid in (1, 2):
            run_merge_request(app, PROJECT, iid, RunOptions())
    # the served model was asked for once: the second review used the same client
    assert world.vllm.paths.count("GET /v1/models") == 1


def _open_model_connections(world: World) -> int:  # noqa: F811
    return len(world.vllm._connections)


@pytest.mark.slow
def test_close_closes_what_the_app_opened(world: World) -> None:  # noqa: F811
    app = App(world.settings())
    run_merge_request(app, PROJECT, 1, RunOptions())
    # held here, as a review still running would: closing must not depend on them being freed
    engine, gitlab, model = app.store.engine, app.gitlab(), app.model()
    # python-gitlab's HTTP session: its connection pools are what closing releases
    gitlab_pools = gitlab._api.session.get_adapter(world.gitlab.url).poolmanager.pools
    assert engine.pool.checkedin() >= 1 and len(gitlab_pools) >= 1
    assert _open_model_connections(world) >= 1  # HTTP/1.1 keep-alive to the model server
    app.close()
    assert engine.pool.checkedin() == 0  # the Store's engine was disposed
    assert len(gitlab_pools) == 0
    deadline = time.monotonic() + CLOSE_WAIT_S
    while _open_model_connections(world) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    assert _open_model_connections(world) == 0  # the model server saw its client hang up
    app.close()  # twice is fine
    assert model is not app.model()  # closed clients are not handed out again
    app.close()


@pytest.mark.slow
def test_reviews_of_one_app_share_one_note_pacing_bucket(world: World) -> None:  # noqa: F811
    """Notes per minute are a process's budget: a second review's notes wait behind the
    first's instead of starting with a fresh burst."""
    world.gitlab.add_mr_from_git(PROJECT, world.repo, "main", "feature", iid=2, title="Again")
    waits: list[float] = []

    def paced_client(settings: GitLabSettings) -> GitLabClient:
        paced = dataclasses.replace(settings, note_burst=PACED_NOTE_BURST)
        return GitLabClient(paced, sleep=waits.append, clock=lambda: 0.0)  # time stands still

    settings = world.settings(gitlab_notes_per_minute=PACED_NOTES_PER_MINUTE)
    with App(settings, gitlab_factory=paced_client) as app:
        first = run_merge_request(app, PROJECT, 1, RunOptions())
        waits_of_first = list(waits)
        second = run_merge_request(app, PROJECT, 2, RunOptions())
        assert app.gitlab() is app.gitlab(world.gitlab.url)
    assert len(first.posted) == len(second.posted) == 3
    # one bucket: every note after the first waits a second longer than the one before it
    assert waits_of_first and len(waits) > len(waits_of_first)
    assert waits == [float(n) for n in range(1, len(waits) + 1)]
