"""The model's repository tools end to end in `run`, `ci` and the worker: fake GitLab (with its
git and tree API), fake vLLM with the needs-evidence rule, the database.

The merge request calls ``find_user`` from ``service.py``; ``find_user`` is defined in ``db.py``,
which the MR does not change, with the hazard marker there. Only a model that reads the
repository at the head (find_definition) reports the call; each round is a row of llm_calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from reviewbot.app import App
from reviewbot.commands.ci import ci_command
from reviewbot.queue import JobQueue
from reviewbot.store import Store
from reviewbot.worker import Worker
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.vllm_server import FakeVLLM
from tests.mr_world import BOT_TOKEN, FAST_NOTES_PER_MINUTE, PROJECT, World, git, init_repo
from tests.store_fixtures import store_url  # noqa: F401
from tests.test_ci import isolated_env, mr_pipeline_env  # noqa: F401  (isolated_env: fixture)

pytestmark = pytest.mark.slow  # measured: see docs/development.md

DB = """import sqlite3


def find_user(name):  # hazard(find_user): may return None when no user has that name
    return None
"""
SERVICE_BASE = """from db import find_user


def greet(name):
    return "hi " + name
"""
SERVICE_HEAD = """from db import find_user


def greet(name):
    user = find_user(name)
    return "hi " + user.name
"""
CALL_LINE = 5
EVIDENCE_TITLE = "find_user: may return None when no user has that name"
PROJECT_ID = 7


def evidence_repo(path: Path) -> Path:
    init_repo(path)
    (path / "db.py").write_text(DB)
    (path / "service.py").write_text(SERVICE_BASE)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "base")
    git(path, "checkout", "-qb", "feature")
    (path / "service.py").write_text(SERVICE_HEAD)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "greet users by name")
    return path


@pytest.fixture
def evidence_world(tmp_path: Path, store_url: str) -> Iterator[World]:  # noqa: F811
    repo = evidence_repo(tmp_path / "repo")
    with FakeGitLab() as gitlab, FakeVLLM(needs_evidence=True) as vllm:
        gitlab.add_user("reviewbot", token=BOT_TOKEN, bot=True)
        gitlab.add_project(PROJECT, project_id=PROJECT_ID)
        gitlab.add_mr_from_git(PROJECT, repo, "main", "feature", iid=1, title="Greet by name")
        yield World(repo, gitlab, vllm, store_url, tmp_path / "repo-cache")


def inline_titles(world: World) -> set[tuple[str, int, str]]:
    notes = [d["notes"][0] for d in world.gitlab.discussions(PROJECT, 1)]
    return {
        (n["position"]["new_path"], n["position"]["new_line"], n["body"].split("\n")[0])
        for n in notes
        if n["type"] == "DiffNote"
    }


def has_evidence_finding(world: World) -> bool:
    return any(
        path == "service.py" and line == CALL_LINE and EVIDENCE_TITLE in title
        for path, line, title in inline_titles(world)
    )


def round_rows(store: Store, review_id: int) -> list[tuple[int, int, bool]]:
    return [
        (row["tool_round"], row["repo_tool_calls"], row["tool_answer_tokens"] > 0)
        for row in store.llm_calls(review_id)
    ]


def test_run_with_tools_finds_the_cross_file_bug_and_records_each_round(
    evidence_world: World,
) -> None:
    report = evidence_world.run()
    assert report.review.complete and has_evidence_finding(evidence_world)
    with App(evidence_world.settings()) as app:
        assert round_rows(app.store, report.review_id) == [(0, 1, True), (1, 0, False)]
    [summary] = [
        n for n in evidence_world.gitlab.notes(PROJECT, 1) if "reviewbot:summary" in n["body"]
    ]
    assert "| Repository tools | 1 tool round(s), 1 repository call(s)," in summary["body"]


def test_run_with_tools_off_misses_it_in_one_call(evidence_world: World) -> None:
    report = evidence_world.run(tools="off")
    assert report.review.complete and not has_evidence_finding(evidence_world)
    assert len(report.review.calls) == 1 and report.review.tools == "off"


def test_the_worker_reviews_with_a_tool_round(evidence_world: World) -> None:
    with App(evidence_world.settings(), shared_model_slots=True) as app:
        queue = JobQueue(app.store, backoff_base_s=0.05, backoff_max_s=0.1)
        head = git(evidence_world.repo, "rev-parse", "feature")
        queue.enqueue(project=PROJECT, mr_iid=1, head_sha=head, trigger="webhook")
        stats = Worker(app, queue, poll_s=0.05).run(burst=True, handle_signals=False)
        assert stats.succeeded == 1
    assert has_evidence_finding(evidence_world)
    requests = evidence_world.vllm.requests
    assert [m["role"] for m in requests[-1]["messages"]][-2:] == ["assistant", "tool"]


def test_ci_with_tools_reads_the_checkout_and_finds_the_cross_file_bug(
    evidence_world: World,
    isolated_env: None,  # noqa: F811
    tmp_path: Path,
) -> None:
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", f"file://{evidence_world.repo}", str(checkout))
    head = git(evidence_world.repo, "rev-parse", "feature")
    git(checkout, "checkout", "-q", head)
    env = mr_pipeline_env(
        CI_API_V4_URL=f"{evidence_world.gitlab.url}/api/v4",
        CI_PROJECT_DIR=str(checkout),
        CI_COMMIT_SHA=head,
        REVIEWBOT_GITLAB_TOKEN=BOT_TOKEN,
        REVIEWBOT_LLM_BASE_URL=evidence_world.vllm.base_url,
        REVIEWBOT_MIN_SEVERITY="info",
        REVIEWBOT_GITLAB_NOTES_PER_MINUTE=str(FAST_NOTES_PER_MINUTE),
        REVIEWBOT_REPO_CACHE_DIR=str(tmp_path / "cache"),
    )
    result = CliRunner().invoke(ci_command, [], env=env)
    assert result.exit_code == 0, result.output
    assert has_evidence_finding(evidence_world)
    tree_requests = [p for _, p in evidence_world.gitlab.requests if "/repository/" in p]
    assert tree_requests == []  # the tools read the checkout, not GitLab's API
