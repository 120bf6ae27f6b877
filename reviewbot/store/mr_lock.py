"""The per-MR lock: one review run per merge request at a time, across processes and hosts.

It keeps a manual ``reviewbot run``, a CI job and a worker from posting on one MR at once
(the job queue already runs one job per MR at a time among workers). One of the project's
three locking mechanisms, with the job lease and the model slots (docs/locking.md).

- PostgreSQL: a session-level advisory lock, taken with ``pg_try_advisory_lock`` on a
  connection held for the whole run. A session keeps it "until explicitly released or the
  session ends" (https://www.postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS):
  a process that dies (kill -9, SIGTERM, power loss) frees it at once, with its connection.
- SQLite (one host): a lease row in ``mr_locks``, renewed every third of its TTL while the run
  lives. A holder on this host whose process is gone is replaced at once; otherwise a lease
  whose holder vanished expires after ``mr_lock_seconds``.

Owns: taking, renewing and giving back the MR's lock on both backends, and telling a dead holder on
this host. Must not: decide what a run does while it holds the lock (`reviewbot.mr` does) or wait
for a busy MR (the caller is told it is busy).
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.exc import DBAPIError

from reviewbot.store.store import Store

__all__ = ["ADVISORY_KEY_PREFIX", "hold_mr_lock", "new_holder"]

# Advisory keys are signed 64-bit integers, derived from the MR key; the prefix keeps them
# apart from the queue's per-MR transaction locks ("reviewbot-job:").
ADVISORY_KEY_PREFIX = "reviewbot-mr:"
ADVISORY_KEY_BYTES = 8
HOLDER_SEPARATOR = ":"
HOLDER_SUFFIX_CHARS = 8
LEASE_RENEWALS_PER_TTL = 3


def new_holder() -> str:
    """``host:pid:random``: unique, and tells a later run on this host whether it is alive."""
    suffix = uuid.uuid4().hex[:HOLDER_SUFFIX_CHARS]
    return f"{socket.gethostname()}{HOLDER_SEPARATOR}{os.getpid()}{HOLDER_SEPARATOR}{suffix}"


@contextmanager
def hold_mr_lock(store: Store, mr_key: str, ttl_s: float) -> Iterator[bool]:
    """Hold the MR's lock for the ``with`` block; yields False (holding nothing) when another
    run has it. ``ttl_s`` is the lease's length on SQLite (ignored on PostgreSQL)."""
    if store.engine.dialect.name == "postgresql":
        with _advisory_lock(store.engine, mr_key) as held:
            yield held
    else:
        with _lease(store, mr_key, ttl_s) as held:
            yield held


# ---------------------------------------------------------------------------------------------
# PostgreSQL


def advisory_key(mr_key: str) -> int:
    digest = hashlib.blake2b(
        (ADVISORY_KEY_PREFIX + mr_key).encode(), digest_size=ADVISORY_KEY_BYTES
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


@contextmanager
def _advisory_lock(engine: Engine, mr_key: str) -> Iterator[bool]:
    key = advisory_key(mr_key)
    connection = engine.connect()
    try:
        held = bool(connection.scalar(select(func.pg_try_advisory_lock(key))))
        connection.commit()  # the lock is the session's; no transaction stays open
    except BaseException:
        connection.invalidate()
        connection.close()
        raise
    try:
        yield held
    finally:
        _unlock(connection, key, held)


def _unlock(connection: Connection, key: int, held: bool) -> None:
    try:
        if held:
            connection.scalar(select(func.pg_advisory_unlock(key)))
            connection.commit()
    except DBAPIError:
        # The server or the connection is gone: so is the lock. Never reuse this session.
        connection.invalidate()
    finally:
        connection.close()


# ---------------------------------------------------------------------------------------------
# SQLite: a lease row


@contextmanager
def _lease(store: Store, mr_key: str, ttl_s: float) -> Iterator[bool]:
    holder = new_holder()
    held = store.acquire_mr_lock(mr_key, holder, ttl_s)
    if not held:
        current = store.mr_lock_holder(mr_key)
        if current is not None and _holder_is_gone(current):
            held = store.take_over_mr_lock(mr_key, current, holder, ttl_s)
    if not held:
        yield False
        return
    stop = threading.Event()
    keeper = threading.Thread(
        target=_renew_until,
        args=(store, mr_key, holder, ttl_s, stop),
        name="mr-lease",
        daemon=True,
    )
    keeper.start()
    try:
        yield True
    finally:
        stop.set()
        keeper.join()
        store.release_mr_lock(mr_key, holder)


def _renew_until(
    store: Store, mr_key: str, holder: str, ttl_s: float, stop: threading.Event
) -> None:
    while not stop.wait(ttl_s / LEASE_RENEWALS_PER_TTL):
        store.renew_mr_lock(mr_key, holder, ttl_s)


def _holder_is_gone(holder: str) -> bool:
    """True when ``holder`` ran on this host in a process that no longer exists."""
    host, _, rest = holder.partition(HOLDER_SEPARATOR)
    pid_text = rest.partition(HOLDER_SEPARATOR)[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # it exists, under another user
    return False
