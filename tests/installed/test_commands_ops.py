"""The installed ``reviewbot`` for team leads and for whoever runs the GPU box: ``feedback sync``,
``report`` (opened in headless Chromium), ``eval``, ``capacity``, ``doctor``, ``loadtest`` and
``weights manifest``/``verify``, each typed as a user types it (``tests/installed/commands.py``).

The commands run from the venv the wheel was installed into without extras, from a directory
outside the checkout, against the fake GitLab and the fake vLLM over real HTTP on 127.0.0.1 and
a SQLite file. The report's charts are drawn by matplotlib and the report's HTML by its
templates, both from the wheel: the page is looked at in Chromium as
``tests/test_report_browser.py`` does (skipped without Chromium, failed when
``REVIEWBOT_REQUIRE_BROWSER`` is set).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reviewbot.store import Store
from tests.builders import diff_notes
from tests.fakes.vllm_server import FakeVLLM
from tests.installed.artifacts import Installed
from tests.installed.commands import reviewbot, succeeded, user_env, world_env
from tests.installed.tier import INSTALLED
from tests.mr_world import PROJECT, World
from tests.test_capacity_cli import T10X4
from tests.test_doctor import (
    ALL_CHECKS,
    BOT_TOKEN,
    WEBHOOK_SECRET,
    Services,
    gitlab,  # noqa: F401  (fixture of services)
    services,  # noqa: F401  (fixture)
)
from tests.test_eval import DATASET, check_stored_run
from tests.test_loadtest import FAST, JSON_KEYS, SMALL_DIFF_TOKENS
from tests.test_report_browser import _assert_charts_drawn, _browser, _dom, _title
from tests.test_weights import SHARD_1, flip_byte, model_dir  # noqa: F401  (fixture)

pytestmark = INSTALLED

LOADTEST_REQUESTS = 2
# Targets any answer meets on a loaded machine: the test is about the replay, not the speed.
LENIENT_SLO = ("--slo-ttft-p95-ms", "600000", "--slo-decode-tps", "0.001")
MANIFEST_FILES = 5  # model_files() less README.md, which is not a model file


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """The world's database: a SQLite file, what a user gets without setting one."""
    return f"sqlite:///{tmp_path / 'reviewbot.db'}"


def test_feedback_sync_records_a_vote_and_the_report_shows_it_in_chromium(
    installed: Installed, outside: Path, world: World, tmp_path: Path
) -> None:
    env = world_env(world, outside)
    succeeded(reviewbot(installed, outside, env, "run", "1", "--project", PROJECT))
    voted = diff_notes(world)[0]
    world.gitlab.add_award_emoji(PROJECT, 1, voted["id"], "thumbsup", "alice")

    synced = succeeded(reviewbot(installed, outside, env, "feedback", "sync", "--since", "1d"))
    assert f"{PROJECT}!1: " in synced and "1 merge requests reviewed since" in synced
    assert "1 new outcomes recorded" in synced
    store = Store.from_url(world.database_url)
    try:
        [vote] = store.feedback(project=PROJECT, mr_iid=1)
    finally:
        store.close()
    assert (vote["kind"], vote["value"], vote["username"]) == ("award", "thumbsup", "alice")
    assert vote["note_id"] == voted["id"]
    again = succeeded(reviewbot(installed, outside, env, "feedback", "sync", "--since", "1d"))
    assert "0 new outcomes recorded" in again

    now, output = datetime.now(UTC), outside / "report"
    window = ("--since", (now - timedelta(hours=1)).isoformat())
    window += ("--until", (now + timedelta(hours=1)).isoformat())
    succeeded(reviewbot(installed, outside, env, "report", *window, "--output", output))
    assert sorted(p.name for p in output.iterdir()) == ["report.html", "report.json", "report.md"]
    report = json.loads((output / "report.json").read_text())
    assert (report["totals"]["reviews"], report["totals"]["findings_posted"]) == (1, 3)
    assert report["feedback"]["thumbs_up"] == 1 and report["rates"]["acceptance"] == 1.0
    browser = _browser(tmp_path)  # skips here without Chromium, fails with REQUIRE_BROWSER set
    page = output / "report.html"
    dom = _dom(browser, page)
    assert _title(dom) == f"reviewbot report {report['window']['iso_week']}"
    assert f'href="{world.gitlab.url}/{PROJECT}/-/merge_requests/1"' in dom
    _assert_charts_drawn(browser, page, dom)


def test_eval_scores_the_labelled_dataset_and_stores_the_run(
    installed: Installed, outside: Path, store_url: str
) -> None:
    """tests/fixtures/eval/team, whose exact scores tests/test_eval.py explains."""
    with FakeVLLM() as vllm:
        env = user_env(
            outside, REVIEWBOT_LLM_BASE_URL=vllm.base_url, REVIEWBOT_DATABASE_URL=store_url
        )
        document = json.loads(
            succeeded(reviewbot(installed, outside, env, "eval", DATASET, "--json"))
        )
    items = {i["item"]: (i["tp"], i["fp"], i["fn"]) for i in document["items"]}
    assert items == {
        "01-eval-calls": (1, 1, 0),
        "02-sql-and-off-by-one": (1, 1, 1),
        "03-clean-rename": (0, 0, 0),
        "04-removed-guard": (0, 1, 1),
    }
    total = document["total"]
    assert (total["tp"], total["fp"], total["fn"], total["precision"]) == (2, 3, 2, 0.4)
    check_stored_run(store_url)


def test_capacity_plans_a_box_of_four_t10(installed: Installed, outside: Path) -> None:
    env = user_env(outside)
    plan = json.loads(succeeded(reviewbot(installed, outside, env, *T10X4, "--json")))
    assert plan["kv_bytes_per_token_per_gpu"] == 10240  # 10 full-attention layers of 64K
    assert (plan["quantization"], plan["tensor_parallel_size"]) == ("gptq-int4", 4)
    assert plan["recommended"]["dtype"] == "float16"  # Turing has no bf16
    table = succeeded(reviewbot(installed, outside, env, *T10X4, "--max-num-seqs", "8"))
    start = table[table.index("start with:") :].replace("\n", " ")
    for flag in ("--tensor-parallel-size 4", "--dtype float16", "--tool-call-parser qwen3_coder"):
        assert flag in start


def test_doctor_checks_every_dependency_against_the_fakes(
    installed: Installed,
    outside: Path,
    services: Services,  # noqa: F811
) -> None:
    """GitLab, the token, the project role, the model server (tool calls, tokenize, prefix
    caching), the database, the webhook secret and the repository (cache and fetch)."""
    env = user_env(outside, **services.env())
    done = reviewbot(installed, outside, env, "doctor", "--json", "--project", PROJECT)
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert list(checks) == ALL_CHECKS
    # no vLLM process on this host: the generation config and the scheduling policy cannot be
    # read from its command line
    not_ok = {name: c for name, c in checks.items() if c["status"] != "ok"}
    assert set(not_ok) <= {"generation config", "priority scheduling"}, not_ok
    assert all(c["status"] == "warn" for c in not_ok.values()), not_ok
    assert done.returncode == 0, done.stderr
    assert "@reviewbot" in checks["gitlab token"]["detail"]
    assert "Developer" in checks["project role"]["detail"]
    for secret in (BOT_TOKEN, WEBHOOK_SECRET):
        assert secret not in done.stdout + done.stderr


def test_loadtest_replays_the_bots_prompts_and_judges_the_slo(
    installed: Installed, outside: Path
) -> None:
    with FakeVLLM(latency=FAST) as server:
        env = user_env(
            outside, REVIEWBOT_LLM_BASE_URL=server.base_url, REVIEWBOT_ENABLE_THINKING="false"
        )
        load = ("--synthetic", str(SMALL_DIFF_TOKENS), "--concurrency", "1")
        load += ("--requests", str(LOADTEST_REQUESTS))
        report = json.loads(
            succeeded(reviewbot(installed, outside, env, "loadtest", "--json", *load, *LENIENT_SLO))
        )
        bodies = list(server.requests)
    assert set(report) >= JSON_KEYS
    assert (report["requests"], report["errors"]) == (LOADTEST_REQUESTS, 0)
    assert {item["name"]: item["pass"] for item in report["slo"]} == {
        "ttft_p95_ms": True,
        "decode_tokens_per_s_p50": True,
        "error_rate": True,
    }
    assert report["load"]["input"] == f"synthetic diff of {SMALL_DIFF_TOKENS} tokens"
    assert report["load"]["model"] == server.model
    # the bot's real prompts: its tool, a diff in its chunk format, streamed
    assert len(bodies) == LOADTEST_REQUESTS and all(b["stream"] for b in bodies)
    assert all(b["tools"][0]["function"]["name"] == "report_finding" for b in bodies)
    assert "Diff to review: part 1 of 1" in bodies[0]["messages"][-1]["content"]


def test_weights_manifest_then_verify_and_a_flipped_byte_fails(
    installed: Installed,
    outside: Path,
    model_dir: Path,  # noqa: F811
) -> None:
    env = user_env(outside)
    manifest = outside / "weights.sha256"
    manifest.write_text(
        succeeded(reviewbot(installed, outside, env, "weights", "manifest", model_dir))
    )
    listed = dict(line.split("  ", 1)[::-1] for line in manifest.read_text().splitlines())
    assert len(listed) == MANIFEST_FILES and "README.md" not in listed
    for name, digest in listed.items():
        assert hashlib.sha256((model_dir / name).read_bytes()).hexdigest() == digest
    verify = ("weights", "verify", model_dir, "--manifest", manifest)
    verified = succeeded(reviewbot(installed, outside, env, *verify))
    assert f"ok: {MANIFEST_FILES} files verified against the manifest" in verified
    flip_byte(model_dir / SHARD_1, -5)  # in the data: the header still parses
    damaged = reviewbot(installed, outside, env, *verify)
    assert damaged.returncode == 1, damaged.stderr
    assert f"MISMATCH: {SHARD_1}" in damaged.stdout
    assert f"FAILED: 1 of {MANIFEST_FILES} files failed" in damaged.stdout
