"""A review with analyzer findings, end to end through the fake GitLab and the fake vLLM (real
HTTP): an analyzer's finding on an added line is posted once (also after a lost answer), the
model's and an analyzer's same problem is one comment naming both, a secret's value never
reaches GitLab or the store, and the summary names every problem and counts per tool."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from reviewbot.analyzer_findings import AnalyzerFinding, AnalyzerProblem, AnalyzerRun
from reviewbot.app import App
from reviewbot.comments import parse_marker
from reviewbot.findings import Category, Severity
from reviewbot.mr import RunOptions
from reviewbot.queue import Job, JobQueue
from reviewbot.store import Store
from reviewbot.worker import Worker, run_job
from tests.mr_world import FEATURE_APP, PROJECT, World, git, world  # noqa: F401
from tests.store_fixtures import store_url  # noqa: F401

pytestmark = pytest.mark.slow

DISCUSSIONS = r"/merge_requests/1/discussions$"
PLANTED = "glpat-zyxwvutsrqponmlkjihg"


def analyzer_run(world: World) -> AnalyzerRun:  # noqa: F811
    eval_line = world.line_of(FEATURE_APP, "eval(")
    added_line = world.line_of(FEATURE_APP, "import subprocess")
    return AnalyzerRun(
        findings=(
            AnalyzerFinding(
                "semgrep",
                "python.eval",
                "app.py",
                eval_line,
                None,
                Severity.MAJOR,
                Category.SECURITY,
                "eval of untrusted input",
                "return eval(text)",
            ),
            AnalyzerFinding(
                "gitleaks",
                "gitlab-pat",
                "app.py",
                added_line,
                None,
                Severity.CRITICAL,
                Category.SECURITY,
                f"token {PLANTED}",
                f"x = '{PLANTED}'",
                secret=True,
            ),
            AnalyzerFinding(
                "ruff",
                "F401",
                "elsewhere.py",
                3,
                None,
                Severity.MINOR,
                Category.MAINTAINABILITY,
                "unused import",
                "import os",
            ),
        ),
        used=("semgrep", "gitleaks", "ruff"),
        problems=(AnalyzerProblem("analyzer shellcheck", "did not run: not installed"),),
    )


def fingerprints_on_mr(world: World) -> Counter[str]:  # noqa: F811
    markers = [parse_marker(d["notes"][0]["body"]) for d in world.gitlab.discussions(PROJECT, 1)]
    return Counter(m.fingerprint for m in markers if m is not None and m.fingerprint)


def test_analyzer_findings_are_merged_posted_once_and_recorded(world: World) -> None:  # noqa: F811
    run = analyzer_run(world)
    world.gitlab.add_fault_for("POST", DISCUSSIONS, "stored:502", times=4)
    report = world.run(RunOptions(analyzer_run=run))
    again = world.run(RunOptions(analyzer_run=run))

    on_mr = fingerprints_on_mr(world)
    assert set(on_mr.values()) == {1} and len(on_mr) == 4  # the model's 3 + the secret
    assert again.posted == []
    bodies = [
        d["notes"][0]["body"]
        for d in world.gitlab.discussions(PROJECT, 1)
        if "reviewbot:finding" in d["notes"][0]["body"]
    ]
    [merged] = [b for b in bodies if "semgrep" in b]
    assert "_Reported by the model and by `semgrep python.eval`._" in merged
    [secret] = [b for b in bodies if "gitleaks" in b]
    assert "gitlab-pat" in secret
    everything = "".join(n["body"] for n in world.gitlab.notes(PROJECT, 1))
    assert PLANTED not in everything
    [summary] = [
        n["body"] for n in world.gitlab.notes(PROJECT, 1) if "reviewbot:summary" in n["body"]
    ]
    assert "analyzer shellcheck: did not run: not installed" in summary
    assert "`semgrep`: 0 inline, 1 merged with the model's, 0 in the summary only" in summary
    assert "`gitleaks`: 1 inline, 0 merged with the model's, 0 in the summary only" in summary
    assert "`ruff`: 0 inline, 0 merged with the model's, 1 in the summary only" in summary
    stored = Store.from_url(world.database_url).findings(report.review_id)
    assert PLANTED not in repr(stored)
    assert {f["state"] for f in stored} == {"posted"}
    sources = {(f["source"], f["analyzer_tool"], f["analyzer_rule"]) for f in stored}
    assert sources == {
        ("model", None, None),
        ("both", "semgrep", "python.eval"),
        ("analyzer", "gitleaks", "gitlab-pat"),
    }
    carried = Store.from_url(world.database_url).findings(again.review_id)
    assert {(f["source"], f["analyzer_tool"]) for f in carried} == {
        (source, tool) for source, tool, _ in sources
    }


def test_without_analyzers_the_summary_has_no_analyzer_section(world: World) -> None:  # noqa: F811
    world.run()
    summary = "".join(n["body"] for n in world.gitlab.notes(PROJECT, 1))
    assert "**Analyzers**" not in summary


def test_the_worker_merges_what_its_collector_gives(world: World) -> None:  # noqa: F811
    run = analyzer_run(world)
    asked: list[int] = []

    def collect(_app: App, job: Job) -> AnalyzerRun:
        asked.append(job.mr_iid)
        return run

    with App(world.settings()) as app:
        queue = JobQueue(app.store)
        queue.enqueue(
            project=PROJECT,
            mr_iid=1,
            head_sha=git(world.repo, "rev-parse", "feature"),
            trigger="webhook",
        )

        def handler(job: Job) -> None:
            run_job(app, job, collect_analyzers=collect)

        Worker(app, queue, handler=handler, poll_s=0.02).run(burst=True, handle_signals=False)
    assert asked == [1]
    on_mr = fingerprints_on_mr(world)
    assert len(on_mr) == 4 and set(on_mr.values()) == {1}
    summary = "".join(n["body"] for n in world.gitlab.notes(PROJECT, 1))
    assert "analyzer shellcheck: did not run: not installed" in summary
    assert PLANTED not in summary


def sarif_on(path: str, line: int, rule: str) -> bytes:
    """A Semgrep-shaped SARIF 2.1.0 report with one result at ``path:line``."""
    result = {
        "ruleId": rule,
        "level": "error",
        "message": {"text": "eval of untrusted input"},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": path},
                    "region": {"startLine": line, "snippet": {"text": "eval(text)"}},
                }
            }
        ],
    }
    run = {
        "tool": {"driver": {"name": "Semgrep OSS", "rules": [{"id": rule}]}},
        "results": [result],
    }
    return json.dumps({"version": "2.1.0", "runs": [run]}).encode()


def test_the_worker_reads_the_reports_of_the_heads_pipeline(world: World) -> None:  # noqa: F811
    """Issue 35 part 1, the webhook service: with ``analyzer_report_jobs`` the worker reads
    the named report from the latest pipeline of the MR's head through the job-artifacts API,
    and its finding on a changed line is posted with its tool and rule named."""
    head = git(world.repo, "rev-parse", "feature")
    line = world.line_of(FEATURE_APP, "eval(")
    rule = "python.lang.security.audit.eval-detected"
    world.gitlab.add_pipeline(
        PROJECT, head, {"semgrep-sast": {"gl-sast.sarif": sarif_on("app.py", line, rule)}}
    )
    with App(world.settings(analyzer_report_jobs=("semgrep-sast:gl-sast.sarif",))) as app:
        queue = JobQueue(app.store)
        queue.enqueue(project=PROJECT, mr_iid=1, head_sha=head, trigger="webhook")
        Worker(app, queue, handler=lambda job: run_job(app, job), poll_s=0.02).run(
            burst=True, handle_signals=False
        )
    notes = "".join(n["body"] for n in world.gitlab.notes(PROJECT, 1))
    assert rule in notes


def test_without_the_pipelines_report_the_worker_names_it_in_the_summary(
    world: World,  # noqa: F811
) -> None:
    head = git(world.repo, "rev-parse", "feature")
    with App(world.settings(analyzer_report_jobs=("semgrep-sast:gl-sast.sarif",))) as app:
        queue = JobQueue(app.store)
        queue.enqueue(project=PROJECT, mr_iid=1, head_sha=head, trigger="webhook")
        Worker(app, queue, handler=lambda job: run_job(app, job), poll_s=0.02).run(
            burst=True, handle_signals=False
        )
    summary = "".join(n["body"] for n in world.gitlab.notes(PROJECT, 1))
    assert f"no pipeline for the MR's head {head[:8]}" in summary
