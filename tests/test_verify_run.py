"""The verification pass end to end (issue 21): `reviewbot run` against the fake GitLab and
the fake vLLM's verifier brain, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from reviewbot.app import App
from reviewbot.commands import main
from reviewbot.queue import JobQueue
from reviewbot.store import Store
from reviewbot.store.report_queries import ReportScope
from reviewbot.store.verify_queries import verification_cost, verification_outcomes
from reviewbot.webhook import create_app
from reviewbot.worker import Worker
from tests.fakes.vllm_server import (
    BLOCK_SIZE,
    CANDIDATE_LIST_START,
    PLANTED_TITLE,
    VERDICT_TOOL_NAME,
)
from tests.mr_world import FEATURE_APP, PROJECT, World
from tests.test_end_to_end import SECRET, deliver, open_event

pytestmark = pytest.mark.slow  # measured: see docs/development.md

TRUE_LINES = {"eval(", "== None", "except:"}


def _verify_requests(world: World) -> list[dict]:
    return [
        body
        for body in world.vllm.requests
        if any(tool["function"]["name"] == VERDICT_TOOL_NAME for tool in body.get("tools") or [])
        and str(body["messages"][-1].get("content")).startswith(CANDIDATE_LIST_START)
    ]


def _posted_lines(world: World) -> set[int]:
    return {
        d["notes"][0]["position"]["new_line"]
        for d in world.gitlab.discussions(PROJECT, 1)
        if d["notes"][0]["type"] == "DiffNote"
    }


def test_verification_drops_a_planted_finding_and_keeps_the_real_ones(world: World) -> None:
    world.vllm.add_faults("planted_finding")
    report = world.run(verify="on")
    assert _posted_lines(world) == {world.line_of(FEATURE_APP, text) for text in TRUE_LINES}
    [request] = _verify_requests(world)
    review_request = world.vllm.requests[0]
    assert request["messages"][: len(review_request["messages"])] == review_request["messages"]
    # the same tools, the verdict tool included, so the chunk's cache serves all but the list
    assert request["tools"] == review_request["tools"]
    assert "verdict" in [tool["function"]["name"] for tool in request["tools"]]
    [review_call, check_call] = Store.from_url(world.database_url).llm_calls(report.review_id)
    assert check_call["cached_tokens"] >= review_call["prompt_tokens"] - BLOCK_SIZE
    store = Store.from_url(world.database_url)
    findings = store.findings(report.review_id)
    [dropped] = [f for f in findings if f["state"] == "dropped"]
    assert dropped["title"] == PLANTED_TITLE and dropped["verdict"] == "drop"
    assert dropped["verdict_confidence"] >= 0.7 and dropped["verdict_reason"]
    posted = [f for f in findings if f["state"] == "posted"]
    assert len(posted) == 3 and {f["verdict"] for f in posted} == {"keep"}
    calls = store.llm_calls(report.review_id)
    assert [c["purpose"] for c in calls].count("verify") == 1
    env = {"REVIEWBOT_DATABASE_URL": world.database_url}
    shown = CliRunner().invoke(main, ["reviews", "show", str(report.review_id)], env=env)
    assert shown.exit_code == 0 and "dropped by verification (1):" in shown.stdout
    assert f"{PLANTED_TITLE}: drop (confidence 0.90): nothing of the kind" in shown.stdout
    window = (datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))
    with store.engine.connect() as connection:
        cost = verification_cost(connection, ReportScope(*window))
        outcomes = verification_outcomes(connection, ReportScope(*window))
        other = ReportScope(*window, project="other/project")
        assert verification_cost(connection, other)["calls"] == 0
        assert verification_outcomes(connection, other) == []
        assert verification_cost(connection, ReportScope(*window, project=PROJECT))["calls"] == 1
    assert (cost["calls"], cost["reviews"]) == (1, 1) and cost["tokens_per_review"] > 0
    by_category = {row["category"]: row for row in outcomes}
    assert by_category["bug"]["dropped"] == 1 and by_category["security"]["dropped"] == 0
    assert sum(row["kept_posted"] for row in outcomes) == 3
    [summary] = [n for n in world.gitlab.notes(PROJECT, 1) if "reviewbot:summary" in n["body"]]
    assert "3 finding(s), 3 posted inline" in summary["body"]
    assert (
        "| Verification | 4 verified, 1 dropped, 0 failed verification(s), 1 call(s) |"
        in (summary["body"])
    )


def test_the_review_totals_count_the_verification_tokens(world: World) -> None:
    report = world.run(verify="on")
    store = Store.from_url(world.database_url)
    calls = store.llm_calls(report.review_id)
    [check] = [c for c in calls if c["purpose"] == "verify"]
    assert check["prompt_tokens"] > 0
    row = store.review(report.review_id)
    assert row["prompt_tokens"] == sum(c["prompt_tokens"] for c in calls)
    assert row["completion_tokens"] == sum(c["completion_tokens"] for c in calls)


def test_the_report_shows_what_verification_dropped_and_cost(world: World, tmp_path) -> None:
    world.vllm.add_faults("planted_finding")
    world.run(verify="on")
    env = {"REVIEWBOT_DATABASE_URL": world.database_url}
    today = datetime.now(UTC).date()
    since = ["--since", str(today - timedelta(days=1)), "--until", str(today + timedelta(days=2))]
    output = ["--output", str(tmp_path), "--format", "md,json,html"]
    written = CliRunner().invoke(main, ["report", *since, *output], env=env)
    assert written.exit_code == 0, written.output
    markdown = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "## Verification" in markdown
    assert "1 verification call(s) on 1 review(s)" in markdown
    [bug_row] = [line for line in markdown.splitlines() if line.startswith("| bug |")]
    # judged: the planted finding and the real `== None` one; dropped: the planted one
    assert [cell.strip() for cell in bug_row.strip("|").split("|")][2:4] == ["2", "1"]
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "<h2>Verification</h2>" in page
    figures = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))["verification"]
    assert figures["cost"]["calls"] == 1
    assert sum(row["dropped"] for row in figures["outcomes"]) == 1


def test_an_unreadable_verifier_keeps_every_finding_and_is_counted(world: World) -> None:
    world.vllm.add_faults("planted_finding", "verdicts_unreadable")
    report = world.run(verify="on")
    assert report.review.complete
    assert len(_posted_lines(world)) == 4  # nothing dropped on an unreadable answer
    verification = report.review.verification
    assert verification.failed == 1 and verification.verified == 0
    findings = Store.from_url(world.database_url).findings(report.review_id)
    assert {f["verdict"] for f in findings} == {"unverified"}


def test_missing_verdicts_and_unknown_ids_never_drop(world: World) -> None:
    world.vllm.add_faults("planted_finding", "verdicts_missing")
    report = world.run(verify="on")
    assert len(_posted_lines(world)) == 4 and report.review.verification.failed == 1


def test_a_verdict_for_an_unknown_id_is_ignored_and_counted(world: World) -> None:
    world.vllm.add_faults("planted_finding", "verdicts_unknown_id")
    report = world.run(verify="on")
    assert report.review.verification.unknown_ids == 1
    assert len(_posted_lines(world)) == 3  # the planted one still dropped


def test_verify_off_makes_no_verification_call(world: World) -> None:
    world.vllm.add_faults("planted_finding")
    report = world.run(verify="off")
    assert not _verify_requests(world) and len(_posted_lines(world)) == 4
    calls = Store.from_url(world.database_url).llm_calls(report.review_id)
    assert {c["purpose"] for c in calls} == {"review"}


def test_the_webhook_worker_verifies_too(world: World) -> None:
    """Webhook -> queue -> worker with verify=on: the planted finding is dropped there too."""
    world.vllm.add_faults("planted_finding")
    with App(world.settings(verify="on"), shared_model_slots=True) as worker_app:
        queue = JobQueue(worker_app.store, backoff_base_s=0.05, backoff_max_s=0.1)
        app = create_app(
            worker_app.settings, worker_app.store, queue, secret=SECRET, bot_username="reviewbot"
        )
        with TestClient(app) as client:
            delivery = "6f3a0c1e-0000-4000-8000-0000000000v1"
            assert deliver(client, open_event(world), delivery) == 202
            Worker(worker_app, queue, poll_s=0.05).run(burst=True, handle_signals=False)
        [job] = queue.list()
        assert job.status == "succeeded", job
        [review] = worker_app.store.reviews()
        findings = worker_app.store.findings(review["id"])
    assert _posted_lines(world) == {world.line_of(FEATURE_APP, text) for text in TRUE_LINES}
    assert [f["title"] for f in findings if f["state"] == "dropped"] == [PLANTED_TITLE]
    assert len(_verify_requests(world)) == 1
