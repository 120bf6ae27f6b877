"""Model request slots: one limit on requests in flight to the model, shared by every worker.

Each worker process limits its own requests (``settings.concurrency``); with several workers
on one PostgreSQL database, the model server would still see their sum. A slot is held for the
duration of one HTTP request to the model (:meth:`ModelSlots.hold`):

- :class:`LocalSlots`: a semaphore, for one process (SQLite allows one worker process).
- :class:`PostgresSlots`: slot ``i`` is the session-level advisory lock ``(namespace, i)``,
  taken with ``pg_try_advisory_lock`` on a connection checked out for the request. A session
  keeps such a lock until it is released or the session ends, so a worker killed mid-request
  frees its slots when PostgreSQL closes its connections.

Background work (a deep review's later passes, an idle second look: the lowest priority) never
takes the ``reserved`` slots: they are kept for fresh reviews and thread answers, so a deep pass
cannot make a new MR wait for a slot (vLLM's priority only orders requests that wait in the
server; one that runs keeps its place, docs/effort.md). In PostgreSQL the reserved slots are the
first ``reserved`` lock keys, which a background holder never tries.

:func:`slots_for` picks the right one for a database.

Owns: the policy (how long to wait, which slot to try first, what to do with a session whose
unlock failed). Must not: write a query of its own (the SQL is ``reviewbot.store.slot_queries``).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

from reviewbot.config import ConfigError, Settings
from reviewbot.store.slot_queries import release_slot, try_slot

__all__ = [
    "SLOTS_LOCK_NAMESPACE",
    "LocalSlots",
    "ModelSlots",
    "PostgresSlots",
    "SlotWaitCancelledError",
    "background_reserve",
    "slots_for",
    "total_concurrency",
]

log = logging.getLogger(__name__)

# First key of every slot's two-int4 advisory lock ("RBSL" in ASCII), in the key space of
# two-int4 keys (reviewbot.store.slot_queries).
SLOTS_LOCK_NAMESPACE = 0x5242534C
DEFAULT_POLL_S = 0.02
# A waiter checks the local stop event at least this often.
LOCAL_POLL_S = 0.05


class SlotWaitCancelledError(RuntimeError):
    """The wait for a model slot was given up because the worker is shutting down."""


class ModelSlots(Protocol):
    """A limit on requests in flight to the model."""

    def hold(self, *, background: bool = False) -> AbstractContextManager[float]:
        """Hold one slot for the body of the ``with`` (``background``: never a reserved one);
        yields the seconds waited for it."""
        ...


def _check_count(count: int, reserved: int = 0) -> None:
    if count < 1:
        raise ValueError(f"the slot count must be at least 1, got {count}")
    if not 0 <= reserved < count:
        raise ValueError(f"the reserved slots must be 0 to {count - 1}, got {reserved}")


class LocalSlots:
    """``count`` slots shared by the threads of one process, ``reserved`` of them never taken by
    background work."""

    def __init__(
        self, count: int, *, reserved: int = 0, stop: threading.Event | None = None
    ) -> None:
        _check_count(count, reserved)
        self.count = count
        self.reserved = reserved
        self._semaphore = threading.BoundedSemaphore(count)
        self._background = threading.BoundedSemaphore(count - reserved)
        self._stop = stop or threading.Event()

    @contextmanager
    def hold(self, *, background: bool = False) -> Iterator[float]:
        started = time.monotonic()
        gates = (self._background, self._semaphore) if background else (self._semaphore,)
        taken: list[threading.BoundedSemaphore] = []
        try:
            for gate in gates:
                self._acquire(gate)
                taken.append(gate)
            yield time.monotonic() - started
        finally:
            for gate in reversed(taken):
                gate.release()

    def _acquire(self, gate: threading.BoundedSemaphore) -> None:
        while not gate.acquire(timeout=LOCAL_POLL_S):
            if self._stop.is_set():
                raise SlotWaitCancelledError("stopped while waiting for a model slot")


class PostgresSlots:
    """``count`` slots shared by every process using the database behind ``engine``.

    A holder keeps one pooled connection checked out while it waits and while it holds its
    slot; waiters poll every ``poll_s`` plus up to ``poll_s`` of jitter until a slot frees, or
    raise :class:`SlotWaitCancelledError` soon after ``stop`` is set.
    """

    def __init__(
        self,
        engine: Engine,
        count: int,
        *,
        reserved: int = 0,
        namespace: int = SLOTS_LOCK_NAMESPACE,
        poll_s: float = DEFAULT_POLL_S,
        stop: threading.Event | None = None,
    ) -> None:
        _check_count(count, reserved)
        if poll_s <= 0:
            raise ValueError(f"poll_s must be positive, got {poll_s}")
        self.engine = engine
        self.count = count
        self.reserved = reserved
        self.namespace = namespace
        self.poll_s = poll_s
        self._stop = stop or threading.Event()

    @contextmanager
    def hold(self, *, background: bool = False) -> Iterator[float]:
        started = time.monotonic()
        first = self.reserved if background else 0
        # AUTOCOMMIT: the lock belongs to the session, so no transaction is left open (and
        # none is cut by idle_in_transaction_session_timeout) while the request runs.
        connection = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            slot = self._wait_for_slot(connection, first)
        except BaseException:
            connection.close()
            raise
        try:
            yield time.monotonic() - started
        finally:
            self._release(connection, slot)

    def _wait_for_slot(self, connection: Connection, first: int) -> int:
        while True:
            slot = self._try_any(connection, first)
            if slot is not None:
                return slot
            if self._stop.wait(self.poll_s + random.uniform(0.0, self.poll_s)):
                raise SlotWaitCancelledError("stopped while waiting for a model slot")

    def _try_any(self, connection: Connection, first: int) -> int | None:
        """Take a free slot of ``first`` .. ``count - 1``, starting at a random one to spread
        contention."""
        tried = self.count - first
        start = random.randrange(tried)
        for offset in range(tried):
            slot = first + (start + offset) % tried
            if try_slot(connection, self.namespace, slot):
                return slot
        return None

    def _release(self, connection: Connection, slot: int) -> None:
        try:
            released = release_slot(connection, self.namespace, slot)
        except DBAPIError as error:
            # The session may still hold the lock: never give it back to the pool (a later
            # pg_try_advisory_lock on that session would succeed again). Closing the session
            # frees the lock on the server.
            connection.invalidate()
            connection.close()
            log.warning("model slot %d: unlock failed, connection closed instead: %s", slot, error)
            return
        except BaseException:
            connection.invalidate()
            connection.close()
            raise
        connection.close()
        if not released:
            log.warning("model slot %d was no longer held by its session", slot)


def total_concurrency(settings: Settings) -> int:
    """Requests in flight to the model across all workers: the setting, else ``concurrency``."""
    total = settings.llm_total_concurrency
    if total is None:
        return settings.concurrency
    if total < 1:
        raise ConfigError(f"llm_total_concurrency must be at least 1, got {total}")
    return total


def slots_for(
    settings: Settings, engine: Engine, *, stop: threading.Event | None = None
) -> ModelSlots:
    """Slots shared through PostgreSQL, or within this process on SQLite (one worker)."""
    count = total_concurrency(settings)
    reserved = background_reserve(count, settings.background_reserved_slots)
    if engine.dialect.name == "postgresql":
        return PostgresSlots(engine, count, reserved=reserved, stop=stop)
    return LocalSlots(count, reserved=reserved, stop=stop)


def background_reserve(count: int, configured: int | None) -> int:
    """The slots of ``count`` kept from background work: ``configured`` (None: half, rounded
    down), always leaving background work at least one (it must finish)."""
    wanted = count // 2 if configured is None else configured
    if wanted < 0:
        raise ConfigError(f"background_reserved_slots must be 0 or more, got {wanted}")
    return min(wanted, count - 1)
