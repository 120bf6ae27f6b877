"""The process's adapters, built once: one `App` per `reviewbot` process.

Every entry point (``reviewbot run``, ``reviewbot ci``, ``reviewbot serve``, ``reviewbot
worker``, the ``jobs``/``reviews``/``db`` commands) builds its App the same way
(:meth:`App.from_config`) and closes it on exit. The App holds:

- the :class:`~reviewbot.config.Settings`;
- exactly one :class:`~reviewbot.store.Store` (one Engine, one connection pool), whose schema
  is checked (and migrated when behind) once, on first use;
- one GitLab client per GitLab URL, so the notes-per-minute pacing is per process; with
  ``shared_model_slots`` (workers) every GitLab request also takes from the instance's budget
  shared through the database (:mod:`reviewbot.gitlab_budget`);
- one model client, so its connection pool and the output mode it learnt are shared by every
  review the process runs; with ``shared_model_slots`` (workers) every model request holds one
  of ``llm_total_concurrency`` slots shared through the database (:mod:`reviewbot.slots`).

Nothing here does I/O until it is asked for: building an App is free, and ``reviewbot plan``
never builds one. Errors are classified by :mod:`reviewbot.errors`, the same table for all.

Owns: building each adapter once from the ``Settings``, on first use, sharing it, and closing it.
Must not: do a step of a review, build SQL, parse options, or read the environment itself
(``App.from_config`` hands that to ``config.load_settings``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reviewbot.config import ConfigError, Settings, load_settings

if TYPE_CHECKING:  # the adapters are imported when first used, not with this module
    from sqlalchemy import Engine

    from reviewbot.gitlab import GitLabClient, GitLabSettings
    from reviewbot.gitlab_budget import GitLabBudget
    from reviewbot.group_settings import GroupSettings, GroupSettingsCache
    from reviewbot.llm.runner import ChunkRunner
    from reviewbot.slots import ModelSlots
    from reviewbot.store import Store
    from reviewbot.store.learning_queries import LearningBook
    from reviewbot.store.reply_queries import ReplyStore

__all__ = ["App", "GitLabFactory", "require_gitlab_settings"]

GitLabFactory = Callable[["GitLabSettings"], "GitLabClient"]


def require_gitlab_settings(settings: Settings) -> tuple[str, str]:
    """GitLab URL and token, or ConfigError naming the missing ones."""
    missing = [
        name
        for name, value in (
            ("REVIEWBOT_GITLAB_URL", settings.gitlab_url),
            ("REVIEWBOT_GITLAB_TOKEN", settings.gitlab_token),
        )
        if not value
    ]
    if missing:
        raise ConfigError(f"set {' and '.join(missing)} (a project access token with api scope)")
    assert settings.gitlab_url and settings.gitlab_token
    return settings.gitlab_url, settings.gitlab_token


class App:
    """Settings and the adapters built from them, once per process (see the module notes)."""

    def __init__(
        self,
        settings: Settings,
        *,
        shared_model_slots: bool = False,
        gitlab_factory: GitLabFactory | None = None,
    ) -> None:
        self.settings = settings
        self._shared_model_slots = shared_model_slots
        self._gitlab_factory = gitlab_factory
        self._lock = threading.Lock()
        self._group_cache: GroupSettingsCache | None = None
        self._store: Store | None = None
        self._gitlab: dict[str, GitLabClient] = {}
        self._model: ChunkRunner | None = None
        self._slots: ModelSlots | None = None
        self._slots_engine: Engine | None = None
        self._stop_model_waits = threading.Event()
        self.schema_checks = 0  # how often the schema was checked: once per process

    @classmethod
    def from_config(
        cls,
        config_file: str | Path | None = None,
        overrides: Mapping[str, Any] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        **options: Any,
    ) -> App:
        """Settings from defaults < TOML file < ``REVIEWBOT_*`` < ``overrides`` (flags)."""
        settings = load_settings(env=env, config_file=config_file, overrides=overrides)
        return cls(settings, **options)

    # ---- the database

    @property
    def store(self) -> Store:
        """The one Store; the first use checks the schema (and migrates a blank database)."""
        with self._lock:
            if self._store is None:
                from sqlalchemy.exc import DBAPIError

                from reviewbot.errors import first_line
                from reviewbot.store import (
                    DatabaseUnavailableError,
                    Store,
                    ensure_schema,
                    make_engine,
                    redact_url,
                )

                engine = make_engine(self.settings.database_url)
                try:
                    ensure_schema(engine)
                except DBAPIError as error:
                    engine.dispose()
                    where = redact_url(self.settings.database_url)
                    raise DatabaseUnavailableError(
                        f"cannot open {where}: {first_line(error)}"
                    ) from error
                except BaseException:
                    engine.dispose()
                    raise
                self.schema_checks += 1
                self._store = Store(engine)
            return self._store

    def learnings(self) -> LearningBook:
        """The team's learnings in the App's database (reviewbot.store.books)."""
        from reviewbot.store.books import learning_book

        return learning_book(self.store)

    def replies(self) -> ReplyStore:
        """The answers in the bot's threads in the App's database (reviewbot.store.books)."""
        from reviewbot.store.books import reply_book

        return reply_book(self.store)

    # ---- GitLab

    def gitlab(self, url: str | None = None) -> GitLabClient:
        """The client for ``url`` (default: the configured GitLab), one per URL per process."""
        from reviewbot.gitlab import GitLabClient, GitLabSettings

        default_url, token = require_gitlab_settings(self.settings)
        key = (url or default_url).rstrip("/")
        budget = None
        new = key not in self._gitlab
        if new and self._shared_model_slots and self.settings.gitlab_budget_limits():
            budget = self._gitlab_budget(key)
        with self._lock:
            client = self._gitlab.get(key)
            if client is None:
                gitlab_settings = GitLabSettings(
                    url=key,
                    token=token,
                    notes_per_minute=self.settings.gitlab_notes_per_minute,
                    timeout_s=self.settings.gitlab_timeout_s,
                )
                factory = self._gitlab_factory or GitLabClient
                client = self._gitlab[key] = factory(gitlab_settings)
                client.use_budget(budget)
            return client

    def _gitlab_budget(self, url: str) -> GitLabBudget:
        """``url``'s request budget in the store, shared by every worker on the database
        (keyed by the instance's URL without a password, as an MR is)."""
        from reviewbot.redaction import instance_url
        from reviewbot.store.gitlab_budget_queries import stored_budget

        return stored_budget(
            self.store.engine,
            instance_url(url),
            self.settings.gitlab_budget_limits(),
            max_wait_s=self.settings.gitlab_budget_max_wait_s,
        )

    def group_settings(self, gitlab: GitLabClient, project_path: str) -> GroupSettings:
        """The settings layers of ``project_path``'s groups (reviewbot.group_settings), read
        through ``gitlab`` and kept ``group_settings_ttl_s`` by this process's one cache."""
        from reviewbot.group_settings import GroupSettingsCache, read_group_settings

        with self._lock:
            if self._group_cache is None:
                self._group_cache = GroupSettingsCache(self.settings.group_settings_ttl_s)
            cache = self._group_cache
        return read_group_settings(
            gitlab, project_path, self.settings.group_settings_project, cache, gitlab.url
        )

    # ---- the model

    def model(self) -> ChunkRunner:
        """The one model client (``Settings.llm_backend``); with ``shared_model_slots`` every
        request holds a slot. Safe to share by every review the process runs."""
        from reviewbot.llm.factory import model_from_settings

        with self._lock:
            if self._model is None:
                self._model = model_from_settings(self.settings, slots=self._model_slots())
            return self._model

    def _model_slots(self) -> ModelSlots | None:
        """Slots on their own pool: a slot's connection is held for a whole model request,
        which must not starve the store's pool (claims, heartbeats)."""
        if not self._shared_model_slots:
            return None
        if self._slots is None:
            from reviewbot.slots import slots_for
            from reviewbot.store import make_engine

            self._slots_engine = make_engine(self.settings.database_url)
            self._slots = slots_for(self.settings, self._slots_engine, stop=self._stop_model_waits)
        return self._slots

    def stop_model_waits(self) -> None:
        """End every wait for a model slot (a stopping worker has handed its jobs back)."""
        self._stop_model_waits.set()

    # ---- lifecycle

    def close(self) -> None:
        """Close the model client, the GitLab clients, and every pool (store, slots); safe to
        call twice."""
        with self._lock:
            model, self._model = self._model, None
            store, self._store = self._store, None
            slots_engine, self._slots_engine = self._slots_engine, None
            gitlab_clients = list(self._gitlab.values())
            self._gitlab.clear()
        if model is not None:
            model.close()
        for client in gitlab_clients:
            client.close()
        if store is not None:
            store.close()
        if slots_engine is not None:
            slots_engine.dispose()

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"App(settings={self.settings!r})"
