"""reviewbot.app and reviewbot.errors: one set of adapters per process, one table of failures."""

from __future__ import annotations

import importlib
import logging
import threading

import pytest
from sqlalchemy import Engine, event

from reviewbot.app import App
from reviewbot.config import ConfigError, Settings
from reviewbot.errors import ERROR_TABLE, EXIT_BAD_INPUT, EXIT_FAILURE, disposition
from reviewbot.gitlab import GitLabNotFoundError, GitLabUnavailableError
from reviewbot.queue import JobQueue
from reviewbot.store import upgrade
from reviewbot.worker import Worker
from tests.mr_world import PROJECT, World, world  # noqa: F401
from tests.store_fixtures import store_url  # noqa: F401

JOBS = 20
ALEMBIC_CONTEXT_LOG = "Context impl"


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
