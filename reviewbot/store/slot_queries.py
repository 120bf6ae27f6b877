"""The SQL of the model slots: one session-level advisory lock per slot (PostgreSQL).

Owns: the two statements :class:`reviewbot.slots.PostgresSlots` runs on a connection it holds
for one model request: take slot ``(namespace, slot)`` if free, give it back. A session keeps
such a lock "until explicitly released or the session ends"
(https://www.postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS). Two-int4 keys
live in their own key space (pg_locks.objsubid = 2), apart from the bigint keys of the queue
and the migrations (objsubid = 1): https://www.postgresql.org/docs/current/view-pg-locks.html.

How long to wait for a slot, which one to try first and what to do with a session whose
unlock failed is the slots' policy (``reviewbot.slots``). Must not: decide it.
"""

from __future__ import annotations

from sqlalchemy import Connection, text

__all__ = ["release_slot", "try_slot"]

# Explicit casts select the (int4, int4) forms; a bare parameter may arrive as bigint.
_TRY_LOCK = text("SELECT pg_try_advisory_lock(CAST(:ns AS integer), CAST(:slot AS integer))")
_UNLOCK = text("SELECT pg_advisory_unlock(CAST(:ns AS integer), CAST(:slot AS integer))")


def try_slot(connection: Connection, namespace: int, slot: int) -> bool:
    """Take slot ``slot`` for this session if no session holds it; never wait."""
    return bool(connection.execute(_TRY_LOCK, {"ns": namespace, "slot": slot}).scalar_one())


def release_slot(connection: Connection, namespace: int, slot: int) -> bool:
    """Give the slot back; False when this session did not hold it."""
    return bool(connection.execute(_UNLOCK, {"ns": namespace, "slot": slot}).scalar_one())
