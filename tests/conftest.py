"""Shared fixtures: the database (SQLite and PostgreSQL) and the end-to-end world of fakes.

The suite runs in parallel processes (pytest-xdist, ``-n auto`` in pyproject.toml). It is
isolated by construction, so any number of processes may run it at once, on one machine or
several runs side by side:

- every PostgreSQL test module creates its own throw-away database in each process that runs
  one of its tests (``tests/store_fixtures.py``), put back to a clean state before each test,
  and a SQLite store is a file under the test's temporary directory;
- what the processes of one run share, they share through a directory of that run alone
  (``tests/run_lock.py``): the migrated template every store starts from is built once per
  run under a file lock there, keyed by a digest of ``migrations/``
  (``tests/store_templates.py``: a SQLite file, and a PostgreSQL database with a random name
  that nobody may connect to, dropped when the run ends), so two runs side by side never share
  a template;
- every fake server (GitLab, vLLM, the silent server) listens on a port the kernel picks
  (port 0) and is stopped by its fixture; a test that needs a port where nothing listens holds
  a bound socket that does not listen (``tests.fakes.silent_server.closed_port``) instead of
  guessing a free one;
- nothing is written outside pytest's temporary directories, the test's ``tmp_path`` and the
  run's shared directory (settings and data folders are pointed there by the tests that need
  them; the user cache folder, where the repository cache lives by default,
  is pointed there for every test by :func:`cache_home_in_tmp`).

``pytest -n 0`` (or ``-p no:xdist``) runs it in one process, e.g. under a debugger.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from hypothesis import settings

from tests.hypothesis_profiles import PROFILE_ENV, THOROUGH, load_profile

pytest_plugins = ["tests.store_fixtures", "tests.mr_world", "tests.builders"]

# Most of the suite waits on sockets, subprocesses and sleeps, not on the CPU, so two processes
# per core keep the cores busy; more only adds contention to the tests that measure concurrency.
PROCESSES_PER_CORE = 2

load_profile()  # before any test module is imported: see tests/hypothesis_profiles.py


def pytest_report_header(config: pytest.Config) -> str:
    """Which Hypothesis profile sized the property tests of this run."""
    name = settings.get_current_profile_name()
    return f"hypothesis profile: {name} ({PROFILE_ENV}={THOROUGH} tries more examples)"


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many processes ``-n auto`` starts: two per usable core."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return PROCESSES_PER_CORE * (cores or 1)


@pytest.fixture(autouse=True)
def cache_home_in_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """The user cache folder (platformdirs reads ``XDG_CACHE_HOME``) of every test is its own,
    so the default ``repo_cache_dir`` never writes into the home of whoever runs the suite."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache-home")))


SKIP_PREFIX = "Skipped: "


def _skip_reason(report: pytest.TestReport) -> str:
    """The reason a skipped test gave (``pytest.skip``, ``skipif``), without pytest's prefix."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix(SKIP_PREFIX)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line at the end of the run: how many tests were skipped, grouped by their reason
    (e.g. the PostgreSQL tests without ``REVIEWBOT_TEST_POSTGRES_URL``), instead of a long list
    of SKIPPED lines (``-r`` in pyproject.toml leaves skips out)."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if r.skipped]
    if not skipped:
        return
    reasons = Counter(_skip_reason(report) for report in skipped)
    grouped = ", ".join(f"{count} ({reason})" for reason, count in reasons.most_common())
    terminalreporter.write_line(f"skipped {len(skipped)} tests: {grouped}")
