"""The typed records the pipeline hands the store, and the one mapping of each to its row.

Owns: :class:`ReviewEnding` (how a review ended: its status, figures and what it saw), the
columns of a :class:`~reviewbot.model.CallRecord`, a
:class:`~reviewbot.findings.StoredFinding` and a ``ReviewEnding``, a findings row read back as
a ``StoredFinding``, and the writable columns of a table. The columns themselves are declared
once, in `reviewbot.store.models`. Must not: open connections or run queries
(`reviewbot.store.store` does), or check values (the store does, against the table).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, get_type_hints

from reviewbot.model import CallRecord
from reviewbot.states import ReviewStatus
from reviewbot.store.models import Base
from reviewbot.stored_findings import StoredFinding

__all__ = [
    "ReviewEnding",
    "call_columns",
    "ending_columns",
    "finding_columns",
    "stored_finding",
    "writable_columns",
]


@dataclass(frozen=True)
class ReviewEnding:
    """How a review ended: its final status and figures (``Store.finish_review``'s fields).

    ``model``/``prompt_version``, when given, replace what the start recorded (the served
    model is known only once the server has answered); ``diff_digest`` is what the review saw
    (reviewbot.interdiff), for the next one to compare with.
    """

    status: ReviewStatus
    coverage: Mapping[str, Any] | None = None
    chunks: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    summary_note_id: int | None = None
    error: str | None = None
    model: str | None = None
    prompt_version: str | None = None
    diff_digest: Mapping[str, Any] | None = None
    # the review effort (reviewbot.effort), why it was chosen, and the passes per chunk
    effort: str | None = None
    effort_reason: str | None = None
    passes: int | None = None

    @classmethod
    def failure(cls, error: BaseException) -> ReviewEnding:
        """A review that stopped on ``error`` (recorded as its type and message)."""
        return cls(ReviewStatus.FAILED, error=f"{type(error).__name__}: {error}")


def writable_columns(table: type[Base], *, leaving_out: Iterable[str] = ("id",)) -> frozenset[str]:
    """The columns of ``table`` a caller may give (the generated ones left out)."""
    return frozenset(column.key for column in table.__table__.columns) - set(leaving_out)


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, StrEnum) else value


def _columns(record: Any) -> dict[str, Any]:
    return {f.name: _plain(getattr(record, f.name)) for f in dataclasses.fields(record)}


def call_columns(call: CallRecord) -> dict[str, Any]:
    """An ``llm_calls`` row's columns (the review id aside); no cache figure counts as 0."""
    return {**_columns(call), "cached_tokens": call.cached_tokens or 0}


def finding_columns(finding: StoredFinding) -> dict[str, Any]:
    """A ``findings`` row's columns (the review and its MR aside)."""
    return _columns(finding)


def ending_columns(ending: ReviewEnding) -> dict[str, Any]:
    """``Store.finish_review``'s keyword arguments."""
    columns = _columns(ending)
    for name in ("coverage", "diff_digest"):
        if columns[name] is not None:
            columns[name] = dict(columns[name])
    return columns


def _enum_fields(record_type: type) -> dict[str, type[StrEnum]]:
    hints = get_type_hints(record_type)
    return {
        name: hint
        for name, hint in hints.items()
        if isinstance(hint, type) and issubclass(hint, StrEnum)
    }


_STORED_FINDING_ENUMS = _enum_fields(StoredFinding)


def stored_finding(row: Mapping[str, Any]) -> StoredFinding:
    """A ``findings`` row (``Store.findings``) as the record it was written from."""
    values = {
        f.name: _STORED_FINDING_ENUMS[f.name](row[f.name])
        if f.name in _STORED_FINDING_ENUMS
        else row[f.name]
        for f in dataclasses.fields(StoredFinding)
    }
    return StoredFinding(**values)
