"""A small world for end-to-end tests: a real git repository, the fake GitLab and the fake vLLM.

Usage::

    from tests.mr_world import World, world  # noqa: F401  (pytest fixture)

``world`` builds a repository with a base branch and a feature branch whose diff contains
patterns the fake reviewer reports (``eval(``, bare ``except:``, ``== None``), loads it as MR !1
of ``group/app`` on the fake GitLab, and gives Settings pointing at both fakes and at the test
database (SQLite and, when configured, PostgreSQL through ``store_url``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reviewbot.app import App
from reviewbot.config import Settings
from reviewbot.mr import RunOptions, RunReport, run_merge_request
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.vllm_server import FakeVLLM
from tests.store_fixtures import store_url  # noqa: F401

BOT_TOKEN = "glpat-bot-token-0123456789"
PROJECT = "group/app"
FAST_NOTES_PER_MINUTE = 60_000  # no note pacing sleeps in tests

BASE_APP = """import json


def load(path):
    with open(path) as handle:
        return json.load(handle)


def total(items):
    return sum(items)
"""

FEATURE_APP = """import json
import subprocess


def load(path):
    with open(path) as handle:
        return json.load(handle)


def parse(text):
    return eval(text)


def total(items):
    if items == None:
        return 0
    return sum(items)


def run(cmd):
    try:
        subprocess.run(cmd, check=True)
    except:
        pass
"""

UTIL = """def clamp(value, low, high):
    return max(low, min(high, value))
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def init_repo(path: Path) -> Path:
    """An empty repository on branch main with a committer identity."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "dev@example.com")
    git(path, "config", "user.name", "Dev")
    return path


def make_repo(path: Path) -> Path:
    init_repo(path)
    (path / "app.py").write_text(BASE_APP)
    (path / "README.md").write_text("# app\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "base")
    git(path, "checkout", "-qb", "feature")
    (path / "app.py").write_text(FEATURE_APP)
    (path / "util.py").write_text(UTIL)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "feature")
    return path


def commit_on_feature(repo: Path, files: dict[str, str], message: str) -> str:
    git(repo, "checkout", "-q", "feature")
    for name, text in files.items():
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


@dataclass
class World:
    repo: Path
    gitlab: FakeGitLab
    vllm: FakeVLLM
    database_url: str
    cache_dir: Path  # the repository cache (repo_cache_dir) of every run of this world

    def settings(self, **overrides: object) -> Settings:
        values: dict[str, object] = {
            "gitlab_url": self.gitlab.url,
            "gitlab_token": BOT_TOKEN,
            "llm_base_url": self.vllm.base_url,
            "database_url": self.database_url,
            "min_severity": "info",
            "gitlab_notes_per_minute": FAST_NOTES_PER_MINUTE,
            "repo_cache_dir": str(self.cache_dir),
            # the built-ins would post their own findings on the world's MR: a test that wants
            # them names them (tests/test_host_analyzers.py)
            "analyzers": (),
        }
        values.update(overrides)
        return Settings(**values)  # type: ignore[arg-type]

    def command_env(self, webhook_secret: str) -> dict[str, str]:
        """The environment of a `reviewbot` command (CliRunner) pointed at this world's fakes,
        with no settings file."""
        return {
            "REVIEWBOT_CONFIG": "",
            "REVIEWBOT_GITLAB_URL": self.gitlab.url,
            "REVIEWBOT_GITLAB_TOKEN": BOT_TOKEN,
            "REVIEWBOT_LLM_BASE_URL": self.vllm.base_url,
            "REVIEWBOT_DATABASE_URL": self.database_url,
            "REVIEWBOT_WEBHOOK_SECRET": webhook_secret,
            "REVIEWBOT_ENABLE_THINKING": "false",
            "REVIEWBOT_REPO_CACHE_DIR": str(self.cache_dir),
            "REVIEWBOT_ANALYZERS": ",",  # none (a comma-separated list), as World.settings
        }

    def run(self, options: RunOptions | None = None, **overrides: object) -> RunReport:
        """`reviewbot run` of MR !1 in a fresh App (one process's adapters), closed after."""
        with App(self.settings(**overrides)) as app:
            return run_merge_request(app, PROJECT, 1, options or RunOptions())

    def line_of(self, text: str, needle: str) -> int:
        return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.fixture
def world(tmp_path: Path, store_url: str) -> Iterator[World]:  # noqa: F811
    repo = make_repo(tmp_path / "repo")
    with FakeGitLab() as gitlab, FakeVLLM() as vllm:
        gitlab.add_user("reviewbot", token=BOT_TOKEN, bot=True)
        gitlab.add_user("alice", token="glpat-alice")
        gitlab.add_project(PROJECT, project_id=7)
        gitlab.add_mr_from_git(
            PROJECT,
            repo,
            "main",
            "feature",
            iid=1,
            title="Add parsing",
            description="Adds a parser.\n\n/approve please",
        )
        yield World(repo, gitlab, vllm, store_url, tmp_path / "repo-cache")
