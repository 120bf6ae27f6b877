"""Persistence for reviewbot: reviews, LLM calls, findings, feedback, MR leases, figures.

SQLite by default (one file in the user data directory), PostgreSQL for teams.
Open a `Store` with `Store.from_url(url)` after `ensure_schema(url)`.

Owns: the package's public names and the default database URL. Must not: hold a query (the ``Store``
and the query modules do) or a global Engine.
"""

from __future__ import annotations

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from reviewbot.redaction import hide_url_password
from reviewbot.store.engine import make_engine, normalize_database_url
from reviewbot.store.figures import (
    DEFAULT_METRIC_BUCKETS,
    HistogramCounts,
    MetricBuckets,
    MetricsSnapshot,
    TokenTotals,
)
from reviewbot.store.learning_queries import LearningBook
from reviewbot.store.migrate import current_revision, ensure_schema, head_revision, upgrade
from reviewbot.store.store import (
    DatabaseUnavailableError,
    MergeRequestKey,
    NoteOwner,
    RecordNotFound,
    Store,
    scrub_secrets,
)

__all__ = [
    "DEFAULT_METRIC_BUCKETS",
    "DatabaseUnavailableError",
    "HistogramCounts",
    "LearningBook",
    "MergeRequestKey",
    "MetricBuckets",
    "MetricsSnapshot",
    "NoteOwner",
    "RecordNotFound",
    "Store",
    "TokenTotals",
    "current_revision",
    "ensure_schema",
    "head_revision",
    "make_engine",
    "normalize_database_url",
    "redact_url",
    "scrub_secrets",
    "upgrade",
]


def redact_url(url: str) -> str:
    """`url` with its password hidden, fit for log lines and error messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return hide_url_password(url)
