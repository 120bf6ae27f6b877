"""Time and memory of `reviewbot report` on a year of data, on SQLite and PostgreSQL.

Run: ``.venv/bin/python -m tests.bench.bench_report [--backend sqlite|postgresql]
[--scale 1.0] [--seed 7]``. PostgreSQL needs ``REVIEWBOT_TEST_POSTGRES_URL`` (a throw-away
database is created and dropped).

The generator bulk-loads (sqlite3 ``executemany``; PostgreSQL ``COPY``) what a busy team
records in a year: 50,000 reviews of 16,667 MRs in 20 projects, 500,000 findings (60% posted,
the rest duplicates, summary-only or refused), 1,000,000 model calls and 100,000 feedback
events (votes, addressed, resolutions, replies, ignored), and the synced state of every MR.
The database is then analysed (as autovacuum would), and each report runs in a fresh
``reviewbot report`` process (imports, matplotlib, all three formats): the last complete ISO
week, 90 days (a tick per day, labels thinned), and the whole year (a tick per ISO week),
each with its trend of the last 8 ISO weeks (issue 25; the ticks and weeks it drew are
printed). Wall time, CPU time (user + system: what the report costs even on a busy machine)
and the process's peak RSS are printed (targets: < 10 s and < 300 MB; the database server's
own time and memory are not counted).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from reviewbot.store import normalize_database_url, upgrade
from reviewbot.window import previous_iso_week

REVIEWS = 50_000
FINDINGS_PER_REVIEW = 10
CALLS_PER_REVIEW = 20
FEEDBACK = 100_000
REVIEWS_PER_MR = 3
PROJECTS = 20
DAYS = 365
TARGET_SECONDS = 10.0
TARGET_MEGABYTES = 300
KILOBYTES_PER_MEGABYTE = 1024  # ru_maxrss is in kilobytes on Linux
BATCH = 20_000
GITLAB = "https://gitlab.example.com"
MODELS = ("Qwen/Qwen3.5-35B-A3B-GPTQ-Int4", "Qwen/Qwen3.5-9B-FP8")
PROMPT_VERSIONS = ("v1+1a2b3c4d", "v1+5e6f7a8b", "v1+9c0d1e2f")
CATEGORIES = (
    "bug",
    "security",
    "concurrency",
    "error-handling",
    "performance",
    "data-loss",
    "resource-leak",
    "api-misuse",
    "maintainability",
    "style",
)
SEVERITIES = ("blocker", "critical", "major", "minor", "info")
STATES = (("posted", 0.60), ("duplicate", 0.25), ("summary", 0.10), ("failed", 0.05))
FEEDBACK_KINDS = (
    ("award:thumbsup", 0.40),
    ("award:thumbsdown", 0.15),
    ("addressed", 0.20),
    ("resolution", 0.10),
    ("reply", 0.10),
    ("ignored", 0.05),
)
TTFT_MEDIAN_MS, TTFT_SIGMA = 300.0, 0.5
REVIEW_MEDIAN_S, REVIEW_SIGMA = 40.0, 0.8
SQLITE_TIME = "%Y-%m-%d %H:%M:%S.%f"  # how SQLAlchemy stores DateTime on SQLite


def _weighted(rng: random.Random, choices: tuple[tuple[str, float], ...]) -> str:
    return rng.choices([c for c, _ in choices], weights=[w for _, w in choices])[0]


class Generator:
    """Rows of every table, deterministic for a seed, produced lazily (batches)."""

    def __init__(self, scale: float, seed: int, end: datetime) -> None:
        self.rng = random.Random(seed)
        self.scale = scale
        self.reviews = int(REVIEWS * scale)
        self.start = end - timedelta(days=DAYS)
        self.step = timedelta(days=DAYS) / max(self.reviews, 1)
        self.posted: list[int] = []  # finding ids with a thread (feedback targets)

    def review_rows(self) -> Iterator[tuple[Any, ...]]:
        rng = self.rng
        for review_id in range(1, self.reviews + 1):
            mr = (review_id - 1) // REVIEWS_PER_MR + 1
            project = mr % PROJECTS + 1
            started = self.start + self.step * (review_id - 1)
            seconds = rng.lognormvariate(0, REVIEW_SIGMA) * REVIEW_MEDIAN_S
            era = min(
                len(PROMPT_VERSIONS) - 1, (review_id - 1) * len(PROMPT_VERSIONS) // self.reviews
            )
            yield (
                review_id,
                f"group/project-{project}",
                mr,
                GITLAB,
                project,
                f"{review_id:040x}",
                "ci",
                "succeeded",
                MODELS[review_id % len(MODELS)],
                PROMPT_VERSIONS[era],
                started,
                started + timedelta(seconds=seconds),
                1,
                0,
                0,
                0,
            )

    def call_rows(self) -> Iterator[tuple[Any, ...]]:
        rng = self.rng
        call_id = 0
        for review_id in range(1, self.reviews + 1):
            started = self.start + self.step * (review_id - 1)
            for chunk in range(CALLS_PER_REVIEW):
                call_id += 1
                ttft = rng.lognormvariate(0, TTFT_SIGMA) * TTFT_MEDIAN_MS
                yield (
                    call_id,
                    review_id,
                    chunk,
                    "tool_calls",
                    "ok",
                    9000,
                    400,
                    6000,
                    ttft,
                    ttft * 8,
                    0,
                    0,
                    0,
                    started,
                )

    def finding_rows(self) -> Iterator[tuple[Any, ...]]:
        rng = self.rng
        finding_id = 0
        for review_id in range(1, self.reviews + 1):
            mr = (review_id - 1) // REVIEWS_PER_MR + 1
            project = mr % PROJECTS + 1
            created = self.start + self.step * (review_id - 1)
            for n in range(FINDINGS_PER_REVIEW):
                finding_id += 1
                state = _weighted(rng, STATES)
                note_id = finding_id if state == "posted" else None
                if note_id is not None:
                    self.posted.append(finding_id)
                yield (
                    finding_id,
                    review_id,
                    f"group/project-{project}",
                    mr,
                    GITLAB,
                    project,
                    f"{finding_id:016x}",
                    f"src/file_{n}.py",
                    "new",
                    rng.randint(1, 400),
                    None,
                    rng.choice(SEVERITIES),
                    rng.choice(CATEGORIES),
                    "title",
                    "body",
                    "exact",
                    state,
                    None,
                    note_id,
                    created,
                    None,
                )

    def feedback_rows(self) -> Iterator[tuple[Any, ...]]:
        rng = self.rng
        for feedback_id in range(1, int(FEEDBACK * self.scale) + 1):
            finding_id = rng.choice(self.posted)
            kind = _weighted(rng, FEEDBACK_KINDS)
            kind, _, value = kind.partition(":")
            review_id = (finding_id - 1) // FINDINGS_PER_REVIEW + 1
            mr = (review_id - 1) // REVIEWS_PER_MR + 1
            project = mr % PROJECTS + 1
            created = self.start + self.step * (review_id - 1) + timedelta(hours=2)
            yield (
                feedback_id,
                finding_id,
                f"group/project-{project}",
                mr,
                GITLAB,
                project,
                finding_id,
                kind,
                value or kind,
                f"user{rng.randint(1, 200)}",
                f"bench:{feedback_id}",
                created,
            )

    def merge_request_rows(self, synced: datetime) -> Iterator[tuple[Any, ...]]:
        rng = self.rng
        for mr in range(1, (self.reviews - 1) // REVIEWS_PER_MR + 2):
            project = mr % PROJECTS + 1
            merged = rng.random() < 0.7
            last_review = min(mr * REVIEWS_PER_MR, self.reviews)
            yield (
                GITLAB,
                project,
                mr,
                f"group/project-{project}",
                "merged" if merged else "opened",
                None,
                synced if merged else None,
                f"{last_review + 1:040x}",
                synced,
            )


TABLES = {
    "reviews": (
        "id",
        "project",
        "mr_iid",
        "gitlab_url",
        "project_id",
        "head_sha",
        "trigger",
        "status",
        "model",
        "prompt_version",
        "started_at",
        "finished_at",
        "chunks",
        "prompt_tokens",
        "completion_tokens",
        "cached_tokens",
    ),
    "llm_calls": (
        "id",
        "review_id",
        "chunk_index",
        "mode",
        "outcome",
        "prompt_tokens",
        "completion_tokens",
        "cached_tokens",
        "ttft_ms",
        "latency_ms",
        "retries",
        "invalid_tool_calls",
        "slot_wait_ms",
        "started_at",
    ),
    "findings": (
        "id",
        "review_id",
        "project",
        "mr_iid",
        "gitlab_url",
        "project_id",
        "fingerprint",
        "path",
        "side",
        "line",
        "end_line",
        "severity",
        "category",
        "title",
        "body",
        "anchor",
        "state",
        "discussion_id",
        "note_id",
        "created_at",
        "resolved_at",
    ),
    "feedback": (
        "id",
        "finding_id",
        "project",
        "mr_iid",
        "gitlab_url",
        "project_id",
        "note_id",
        "kind",
        "value",
        "username",
        "event_key",
        "created_at",
    ),
    "merge_requests": (
        "gitlab_url",
        "project_id",
        "mr_iid",
        "project",
        "state",
        "web_url",
        "merged_at",
        "latest_head_sha",
        "synced_at",
    ),
}


def _batches(rows: Iterator[tuple[Any, ...]]) -> Iterator[list[tuple[Any, ...]]]:
    batch: list[tuple[Any, ...]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _sqlite_value(value: Any) -> Any:
    return value.astimezone(UTC).strftime(SQLITE_TIME) if isinstance(value, datetime) else value


def load(url: str, generator: Generator, now: datetime) -> dict[str, int]:
    """Bulk-load every table; row counts."""
    engine = create_engine(normalize_database_url(url), poolclass=NullPool)
    sources = {
        "reviews": generator.review_rows,
        "llm_calls": generator.call_rows,
        "findings": generator.finding_rows,
        "feedback": generator.feedback_rows,
        "merge_requests": lambda: generator.merge_request_rows(now),
    }
    counts = {}
    try:
        with engine.begin() as connection:
            raw = connection.connection.driver_connection
            for table, columns in TABLES.items():
                counts[table] = 0
                for batch in _batches(sources[table]()):
                    counts[table] += len(batch)
                    _write(raw, engine.dialect.name, table, columns, batch)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(
                text("ANALYZE" if engine.dialect.name == "sqlite" else "VACUUM ANALYZE")
            )
    finally:
        engine.dispose()
    return counts


def _write(raw: Any, dialect: str, table: str, columns: tuple[str, ...], rows: list[Any]) -> None:
    names = ", ".join(columns)
    if dialect == "sqlite":
        marks = ", ".join("?" for _ in columns)
        raw.executemany(
            f"INSERT INTO {table} ({names}) VALUES ({marks})",
            [tuple(_sqlite_value(v) for v in row) for row in rows],
        )
        return
    with raw.cursor() as cursor, cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def run_report(url: str, args: list[str], output: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MB) of one `reviewbot report`
    process (its own rusage; CPU time says what the report costs on a busy machine, where
    the wall time also counts the waits for a core)."""
    env = {**os.environ, "REVIEWBOT_DATABASE_URL": url}
    command = [sys.executable, "-m", "reviewbot.commands", "report", *args, "--output", str(output)]
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"reviewbot report {' '.join(args)} exited {process.returncode}")
    cpu = usage.ru_utime + usage.ru_stime
    return seconds, cpu, usage.ru_maxrss / KILOBYTES_PER_MEGABYTE


def _drawn(output: Path) -> str:
    """What the report just written drew: its days and the weeks of its trend."""
    report = json.loads((output / "report.json").read_text(encoding="utf-8"))
    weeks = [week["week"] for week in report["trend"]["weeks"]]
    span = f"{weeks[0]}..{weeks[-1]}" if weeks else "none"
    daily = report["daily"]
    drawn = f"{len(daily['buckets'])} {daily['unit']} ticks"
    return f"{len(daily['days'])} days ({drawn}), trend {len(weeks)} weeks ({span})"


def _postgres_database() -> tuple[str, str]:
    server = os.environ.get("REVIEWBOT_TEST_POSTGRES_URL")
    if not server:
        raise SystemExit("set REVIEWBOT_TEST_POSTGRES_URL for --backend postgresql")
    name = f"reviewbot_bench_{secrets.token_hex(4)}"
    admin = create_engine(
        normalize_database_url(server), isolation_level="AUTOCOMMIT", poolclass=NullPool
    )
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    url = normalize_database_url(server).set(database=name).render_as_string(hide_password=False)
    return server, url


def _drop_postgres(server: str, url: str) -> None:
    name = normalize_database_url(url).database
    admin = create_engine(
        normalize_database_url(server), isolation_level="AUTOCOMMIT", poolclass=NullPool
    )
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of a year's data")
    parser.add_argument("--seed", type=int, default=7)
    options = parser.parse_args(argv)
    now = datetime.now(UTC)
    with tempfile.TemporaryDirectory(prefix="bench-report-") as scratch:
        server = None
        if options.backend == "sqlite":
            url = f"sqlite:///{Path(scratch) / 'reviewbot.db'}"
        else:
            server, url = _postgres_database()
        try:
            upgrade(url)
            started = time.perf_counter()
            counts = load(url, Generator(options.scale, options.seed, now), now)
            print(f"{options.backend}: loaded {counts} in {time.perf_counter() - started:.1f} s")
            week = previous_iso_week(now)
            windows = {
                f"weekly ({week.iso_week})": ["--weekly"],
                "90 days": [
                    "--since",
                    (now - timedelta(days=90)).isoformat(),
                    "--until",
                    now.isoformat(),
                ],
                "whole year": [
                    "--since",
                    (now - timedelta(days=DAYS + 1)).isoformat(),
                    "--until",
                    now.isoformat(),
                ],
            }
            for label, args in windows.items():
                seconds, cpu, megabytes = run_report(url, args, Path(scratch) / "out")
                verdict = (
                    "ok"
                    if seconds < TARGET_SECONDS and megabytes < TARGET_MEGABYTES
                    else ("MISSED")
                )
                print(
                    f"{options.backend} report {label}: {seconds:.2f} s (CPU {cpu:.2f} s), "
                    f"peak RSS {megabytes:.0f} MB (targets < {TARGET_SECONDS:.0f} s, "
                    f"< {TARGET_MEGABYTES} MB): {verdict}; {_drawn(Path(scratch) / 'out')}"
                )
        finally:
            if server is not None:
                _drop_postgres(server, url)


if __name__ == "__main__":
    main()
