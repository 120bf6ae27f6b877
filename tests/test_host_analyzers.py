"""The built-in analyzers on the host's repository cache (reviewbot.analyzers.host), for the
webhook worker and ``reviewbot run``: through the fake GitLab (its git over HTTP fills the
cache from a real git repository) and the fake vLLM. Their findings on the MR's changed lines
are merged like the pipeline's, the model is told them, and a run whose head is not in the
cache says the built-ins did not run and why (never a silent 0)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from reviewbot.analyzer_digest import DIGEST_HEADING
from reviewbot.analyzers.host import BUILT_INS, HostAnalyzers
from reviewbot.app import App
from reviewbot.commands import main
from reviewbot.queue import JobQueue
from reviewbot.store import Store
from reviewbot.worker import Worker, run_job
from tests.mr_world import FEATURE_APP, PROJECT, World, commit_on_feature, git, world  # noqa: F401
from tests.store_fixtures import store_url  # noqa: F401

pytestmark = pytest.mark.slow  # a world (fake GitLab, fake vLLM, git) per test

PLANTED = "glpat-Zq8vW3xK9mN2pL7rT4yB"  # a GitLab token's shape, high entropy
SECRETS_FILE = f'API_URL = "https://example.com"\nGITLAB_TOKEN = "{PLANTED}"\n'
BUILT_INS_ON = ("ruff", "secrets")


def work(world: World, **settings: object) -> str:  # noqa: F811
    """Run the worker on the MR's head; the MR's notes, all of them, as one text."""
    head = git(world.repo, "rev-parse", "feature")
    with App(world.settings(**settings)) as app:
        queue = JobQueue(app.store)
        queue.enqueue(project=PROJECT, mr_iid=1, head_sha=head, trigger="webhook")
        Worker(app, queue, handler=lambda job: run_job(app, job), poll_s=0.02).run(
            burst=True, handle_signals=False
        )
    return "\n".join(note["body"] for note in world.gitlab.notes(PROJECT, 1))


def stored_sources(world: World) -> dict[str, set[tuple[str, str | None]]]:  # noqa: F811
    store = Store.from_url(world.database_url)
    [review] = store.reviews(project=PROJECT, mr_iid=1)
    by_source: dict[str, set[tuple[str, str | None]]] = {}
    for row in store.findings(review["id"]):
        by_source.setdefault(row["source"], set()).add((row["path"], row["analyzer_rule"]))
    return by_source


def test_the_worker_runs_the_built_ins_on_the_cached_head_and_merges_them(
    world: World,  # noqa: F811
) -> None:
    commit_on_feature(world.repo, {"settings.py": SECRETS_FILE}, "add settings")
    world.gitlab.push(PROJECT, 1, git(world.repo, "rev-parse", "feature"))

    notes = work(world, analyzers=BUILT_INS_ON)

    assert "`ruff E722`" in notes  # a bare except, named with its tool and rule
    assert "Secret committed" in notes and PLANTED not in notes
    assert "did not run" not in notes
    sources = stored_sources(world)
    assert ("app.py", "E722") in sources.get("analyzer", set()) | sources.get("both", set())
    assert any(path == "settings.py" for path, _ in sources.get("analyzer", set()))
    # the model was told what the analyzers found, in the chunk's prompt
    prompts = [request["messages"][1]["content"] for request in world.vllm.requests]
    told = [
        p.split("<analyzers>")[1].split("</analyzers>")[0] for p in prompts if DIGEST_HEADING in p
    ]
    assert told and all(PLANTED not in digest for digest in told)  # (the diff shows it)
    assert any("ruff E722 app.py:" in digest for digest in told)
    assert any("settings.py:2: a committed secret" in digest for digest in told)


def test_without_the_cache_the_run_says_the_built_ins_did_not_run(
    world: World,  # noqa: F811
) -> None:
    notes = work(world, analyzers=BUILT_INS_ON, repo_cache_max_bytes=0)

    assert (
        f"{BUILT_INS}: did not run: the host's repository cache is off (repo_cache_max_bytes is 0)"
    ) in notes
    assert "ruff E722" not in notes
    assert not any(DIGEST_HEADING in r["messages"][1]["content"] for r in world.vllm.requests)


def test_with_no_built_in_named_nothing_runs_and_nothing_is_said(
    world: World,  # noqa: F811
) -> None:
    notes = work(world, analyzers=())

    assert "**Analyzers**" not in notes and BUILT_INS not in notes


def test_reviewbot_run_runs_the_built_ins_on_the_cache(world: World) -> None:  # noqa: F811
    env = {**world.command_env(webhook_secret="not-used"), "REVIEWBOT_ANALYZERS": "ruff"}
    result = CliRunner().invoke(main, ["run", "1", "--project", PROJECT], env=env)

    assert result.exit_code == 0, result.output
    notes = "\n".join(note["body"] for note in world.gitlab.notes(PROJECT, 1))
    assert "ruff E722" in notes
    assert [world.line_of(FEATURE_APP, "except:")] == [
        d["notes"][0]["position"]["new_line"]
        for d in world.gitlab.discussions(PROJECT, 1)
        if "ruff E722" in d["notes"][0]["body"]
    ]


def test_a_head_the_source_serves_only_through_the_api_is_named(tmp_path: Path) -> None:
    """The collector itself, given a run's repository whose head came from GitLab's API."""
    from reviewbot.config import Settings
    from reviewbot.diff import parse_git_diff
    from reviewbot.repo.source import SourceKind
    from reviewbot.repo.view import MemoryView

    class ApiOnly:
        def __init__(self) -> None:
            self.kinds = {"a" * 40: SourceKind.API}

        def at(self, sha: str) -> MemoryView:
            return MemoryView(sha, {"app.py": "x = 1\n"})

    diff = parse_git_diff(
        "diff --git a/app.py b/app.py\nnew file mode 100644\n--- /dev/null\n+++ b/app.py\n"
        "@@ -0,0 +1 @@\n+x = 1\n"
    )
    settings = Settings(
        analyzers=BUILT_INS_ON,
        gitlab_url="https://gitlab.example.com",
        repo_cache_dir=str(tmp_path),
    )
    run = HostAnalyzers(settings)("a" * 40, diff, ApiOnly())
    [problem] = run.problems
    assert problem.name == BUILT_INS
    assert "could not serve the MR's head aaaaaaaa" in problem.reason
    assert run.findings == ()
