"""``reviewbot doctor`` against the fake GitLab, the fake vLLM and real databases.

GitLab's answers follow https://docs.gitlab.com/api/personal_access_tokens/ (``GET
/personal_access_tokens/self``: scopes, expires_at) and https://docs.gitlab.com/api/members/
(``GET /projects/:id/members/all/:user_id``: access_level, 30 = Developer); vLLM's follow
``vllm/entrypoints/openai`` and ``vllm/v1/metrics/loggers.py`` (``vllm:cache_config_info``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, text

from reviewbot.commands import main
from reviewbot.config import Settings
from reviewbot.model import ModelAnswer, ToolCallText
from reviewbot.ops.doctor import (
    MODEL_API_KEY_FIX,
    TOOL_PARSER_FIX,
    Status,
    generation_config_check,
    prefix_caching_check,
    priority_check,
    repository_source_check,
    token_scopes_check,
    tool_call_check,
    vllm_argv_for,
)
from reviewbot.ops.doctor_probes import DoctorOptions, DoctorTimeouts, run_doctor
from reviewbot.ops.model_probes import MODEL_CHECKS as SHOWN_MODEL_CHECKS
from reviewbot.ops.thinking import thinking_check
from reviewbot.prompts import tool_schemas
from reviewbot.store import normalize_database_url
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.silent_server import SilentServer
from tests.fakes.vllm_server import PRIORITY_REFUSED_ERROR, FakeVLLM, qwen_xml_call
from tests.mr_world import make_repo
from tests.stderr_lines import progress_lines
from tests.store_fixtures import migrated_sqlite_url, store_url  # noqa: F401

ROOT = Path(__file__).parent.parent
BOT_TOKEN = "glpat-doctor-bot-0123456789"
HUMAN_TOKEN = "glpat-doctor-alice-0123456789"
READ_ONLY_TOKEN = "glpat-doctor-reader-0123456789"
WEBHOOK_SECRET = "webhook-secret-0123456789"
PROBE_DEADLINE_S = 180  # health-check.sh's HEALTH_PROBE_TIMEOUT_S in the probe test
MODEL_API_KEY = "vllm-api-key-0123456789"
PROJECT = "group/app"
DEVELOPER, REPORTER = 30, 20
# Short enough that a check of a silent server fails fast; the probe's deadline covers a
# fake answer many times over.
FAST_TIMEOUTS = DoctorTimeouts(
    gitlab_s=0.5, model_s=0.5, tool_probe_s=1.0, model_total_s=3.0, database_s=0.5
)
# the model group's checks as the doctor shows them, then vLLM's generation config and priority
MODEL_CHECKS = [*SHOWN_MODEL_CHECKS, "generation config", "priority scheduling"]
ALL_CHECKS = [
    "settings",
    "gitlab",
    "gitlab token",
    "token scopes",
    "project role",
    *MODEL_CHECKS,
    "database",
    "webhook secret",
    "repository source",
    "repository cache",
    "repository fetch",
]


@dataclass
class Services:
    gitlab: FakeGitLab
    vllm: FakeVLLM
    database_url: str

    def env(self, **overrides: str) -> dict[str, str]:
        values = {
            "REVIEWBOT_CONFIG": "",
            "REVIEWBOT_GITLAB_URL": self.gitlab.url,
            "REVIEWBOT_GITLAB_TOKEN": BOT_TOKEN,
            "REVIEWBOT_LLM_BASE_URL": self.vllm.base_url,
            "REVIEWBOT_DATABASE_URL": self.database_url,
            "REVIEWBOT_WEBHOOK_SECRET": WEBHOOK_SECRET,
            "REVIEWBOT_ENABLE_THINKING": "false",
        }
        values.update({f"REVIEWBOT_{key.upper()}": value for key, value in overrides.items()})
        return values


def doctor(env: dict[str, str], *args: str) -> tuple[int, dict[str, dict[str, str]], str]:
    """Exit code, the checks by name (from --json), and everything printed."""
    result = CliRunner().invoke(main, ["doctor", "--json", *args], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    checks = json.loads(result.stdout)["checks"]
    return result.exit_code, {c["name"]: c for c in checks}, result.output


@pytest.fixture
def gitlab(tmp_path: Path) -> Iterator[FakeGitLab]:
    repo = make_repo(tmp_path / "project-repo")
    with FakeGitLab() as fake:
        fake.add_user("reviewbot", token=BOT_TOKEN, bot=True)
        fake.add_user("alice", token=HUMAN_TOKEN)
        fake.add_user("reader", token=READ_ONLY_TOKEN, bot=True, scopes=("read_api",))
        fake.add_project(PROJECT, project_id=7)
        fake.add_member(PROJECT, "reviewbot", DEVELOPER)
        fake.add_member(PROJECT, "alice", REPORTER)
        fake.set_repository(PROJECT, repo, "main")
        yield fake


@pytest.fixture
def services(
    gitlab: FakeGitLab, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Services]:
    """Both fakes and a migrated SQLite database."""
    database_url = migrated_sqlite_url(tmp_path_factory, tmp_path / "reviewbot.db")
    with FakeVLLM() as vllm:
        yield Services(gitlab, vllm, database_url)


@pytest.fixture
def db_services(gitlab: FakeGitLab, store_url: str) -> Iterator[Services]:  # noqa: F811
    """Both fakes and a migrated database of each backend (SQLite, PostgreSQL)."""
    with FakeVLLM() as vllm:
        yield Services(gitlab, vllm, store_url)


@pytest.fixture
def local_vllm_process(db_services: Services) -> Iterator[subprocess.Popen[bytes]]:
    """A process of this host whose command line is a vLLM server for the fake's port."""
    port = db_services.vllm.base_url.split(":")[-1].split("/")[0]
    argv = [
        sys.executable,
        "-c",
        "import time; time.sleep(120)",
        "vllm",
        "serve",
        db_services.vllm.model,
        "--port",
        port,
        "--generation-config",
        "vllm",
        "--scheduling-policy",
        "priority",
    ]
    process = subprocess.Popen(argv)
    yield process
    process.terminate()
    process.wait()


# --- the whole run ---------------------------------------------------------------------------


@pytest.mark.slow
def test_all_ok(db_services: Services, local_vllm_process: subprocess.Popen[bytes]) -> None:
    code, checks, output = doctor(db_services.env(), "--project", PROJECT)
    assert list(checks) == ALL_CHECKS
    assert {name: c["status"] for name, c in checks.items()} == dict.fromkeys(ALL_CHECKS, "ok")
    assert code == 0
    assert all(set(c) == {"name", "status", "detail", "fix"} for c in checks.values())
    assert all(c["fix"] == "" for c in checks.values())
    assert "@reviewbot" in checks["gitlab token"]["detail"]
    assert "Developer" in checks["project role"]["detail"]
    assert "--generation-config vllm" in checks["generation config"]["detail"]
    assert "--scheduling-policy priority" in checks["priority scheduling"]["detail"]
    for secret in (BOT_TOKEN, WEBHOOK_SECRET):
        assert secret not in output


@pytest.mark.slow
def test_the_table_for_people_says_how_many_failed(services: Services) -> None:
    result = CliRunner().invoke(main, ["doctor"], env=services.env())
    assert result.exit_code == 0
    assert "tool calls" in result.stdout and "0 failed" in result.stdout
    assert BOT_TOKEN not in result.output


@pytest.mark.slow
def test_on_a_pipe_each_group_says_its_verdicts_as_it_ends(services: Services) -> None:
    """Issue 32 item 15: on a pipe or in a CI log the doctor printed nothing until its table;
    now a plain line per group of checks as it ends (none with --json)."""
    result = CliRunner().invoke(main, ["doctor"], env=services.env())
    lines = progress_lines(result.stderr)
    assert [line.split(":")[0] for line in lines] == [
        "gitlab",
        "model server",
        "database",
        "repository",
        "checking the model's weights",
    ]
    assert all(re.fullmatch(r"[a-z ]+: \d+ ok, \d+ warnings, \d+ failed", x) for x in lines[:4])
    quiet = CliRunner().invoke(main, ["doctor", "--json"], env=services.env())
    assert progress_lines(quiet.stderr) == []


def test_bad_settings_are_one_failed_check(services: Services) -> None:
    code, checks, _ = doctor(services.env(concurrency="lots"))
    assert code == 1
    assert list(checks) == ["settings"]
    assert "REVIEWBOT_CONCURRENCY" in checks["settings"]["detail"]


def test_project_with_model_only_is_bad_input(services: Services) -> None:
    result = CliRunner().invoke(main, ["doctor", "--model-only", "--project", PROJECT])
    assert result.exit_code == 2 and "--model-only" in result.stderr


@pytest.mark.slow
def test_an_unset_webhook_secret_warns_with_the_fix(services: Services) -> None:
    code, checks, output = doctor(services.env(webhook_secret=""))
    assert code == 0  # CLI and CI reviews work without it
    secret = checks["webhook secret"]
    assert secret["status"] == "warn"
    assert "reviewbot serve" in secret["detail"]
    assert "REVIEWBOT_WEBHOOK_SECRET" in secret["fix"] and "GitLab" in secret["fix"]
    assert WEBHOOK_SECRET not in output


# --- GitLab ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_wrong_token_fails(services: Services) -> None:
    code, checks, output = doctor(services.env(gitlab_token="glpat-wrong"))
    assert code == 1
    assert checks["gitlab"]["status"] == "ok"  # GitLab answers, the token is the problem
    assert checks["gitlab token"]["status"] == "fail"
    assert "api scope" in checks["gitlab token"]["fix"]
    assert "token scopes" not in checks and "glpat-wrong" not in output


@pytest.mark.slow
def test_a_token_without_the_api_scope_fails(services: Services) -> None:
    code, checks, _ = doctor(services.env(gitlab_token=READ_ONLY_TOKEN))
    assert code == 1
    assert checks["token scopes"]["status"] == "fail"
    assert "read_api" in checks["token scopes"]["detail"]


@pytest.mark.slow
def test_a_reporter_fails_and_a_person_warns(services: Services) -> None:
    code, checks, _ = doctor(services.env(gitlab_token=HUMAN_TOKEN), "--project", PROJECT)
    assert code == 1
    assert checks["project role"]["status"] == "fail"
    assert "Reporter" in checks["project role"]["detail"]
    assert checks["gitlab token"]["status"] == "warn"
    assert "access token" in checks["gitlab token"]["fix"]


@pytest.mark.slow
def test_a_non_member_and_an_unknown_project_fail(services: Services) -> None:
    services.gitlab.add_project("group/other", project_id=8)
    _, checks, _ = doctor(services.env(), "--project", "group/other")
    assert checks["project role"]["status"] == "fail"
    assert "not a member" in checks["project role"]["detail"]
    _, checks, _ = doctor(services.env(), "--project", "group/missing")
    assert checks["project role"]["status"] == "fail"
    assert "not found" in checks["project role"]["detail"]


@pytest.mark.slow
def test_gitlab_unset_fails_with_what_to_set(services: Services) -> None:
    code, checks, _ = doctor(services.env(gitlab_url=""))
    assert code == 1
    assert checks["gitlab"]["status"] == "fail"
    assert "REVIEWBOT_GITLAB_URL" in checks["gitlab"]["detail"]


@pytest.mark.slow
def test_token_expiry_is_read_from_gitlab(gitlab: FakeGitLab) -> None:
    gitlab.add_user("expiring", token="glpat-expiring", bot=True, expires_at="2030-01-10")
    settings = Settings(gitlab_url=gitlab.url, gitlab_token="glpat-expiring")
    with FakeVLLM() as vllm:
        checks = run_doctor(
            Settings(**{**settings.__dict__, "llm_base_url": vllm.base_url}),
            DoctorOptions(timeouts=FAST_TIMEOUTS),
            today=date(2030, 1, 1),
        )
    (scopes,) = [c for c in checks if c.name == "token scopes"]
    assert scopes.status is Status.WARN and "2030-01-10 (in 9 days)" in scopes.detail


def test_token_scopes_far_from_expiry_are_ok() -> None:
    check = token_scopes_check({"scopes": ["api"], "expires_at": "2030-06-01"}, date(2030, 1, 1))
    assert check.status is Status.OK and "2030-06-01" in check.detail


# --- the model server ------------------------------------------------------------------------


@pytest.mark.slow
def test_a_server_without_a_tool_parser_fails_with_the_fix(services: Services) -> None:
    with FakeVLLM(tool_parser=False) as vllm:
        code, checks, _ = doctor(services.env(llm_base_url=vllm.base_url), "--model-only")
    assert code == 1
    assert checks["tool calls"]["status"] == "fail"
    assert checks["tool calls"]["fix"] == TOOL_PARSER_FIX
    assert "--enable-auto-tool-choice --tool-call-parser qwen3_coder" in TOOL_PARSER_FIX
    assert "auto" in checks["tool calls"]["detail"]  # vLLM's own words


@pytest.mark.slow
def test_tool_calls_written_as_text_fail(services: Services) -> None:
    services.vllm.add_faults("hermes_content")  # a server whose parser left the call in text
    _, checks, _ = doctor(services.env(), "--model-only")
    assert checks["tool calls"]["status"] == "fail"
    assert "as text" in checks["tool calls"]["detail"]


DEEP_JSON = "[" * 100_000  # a lying server: json.loads gives up with RecursionError


def test_a_model_list_nested_too_deep_is_a_failed_check(services: Services) -> None:
    services.vllm.answer_with("GET /v1/models", DEEP_JSON)
    code, checks, output = doctor(services.env(), "--model-only")
    assert code == 1 and "Traceback" not in output
    detail = checks["model server"]["detail"]
    assert checks["model server"]["status"] == "fail" and "not readable JSON: '[[[[" in detail
    assert "\n" not in detail


@pytest.mark.slow
def test_a_version_nested_too_deep_is_left_out(services: Services) -> None:
    services.vllm.answer_with("GET /version", DEEP_JSON)
    code, checks, output = doctor(services.env(), "--model-only")
    assert code == 0 and "Traceback" not in output
    assert checks["model server"]["status"] == "ok"
    assert "(vLLM" not in checks["model server"]["detail"]


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("deep_json_body", "the probe failed: the server at"),
        ("deep_arguments", "could not be decoded: arguments are JSON nested deeper than 32"),
    ],
)
def test_a_probe_answer_nested_too_deep_is_a_failed_check(
    services: Services, fault: str, said: str
) -> None:
    services.vllm.add_faults(fault)
    code, checks, output = doctor(services.env(), "--model-only")
    assert code == 1 and "Traceback" not in output
    assert checks["tool calls"]["status"] == "fail" and said in checks["tool calls"]["detail"]


@pytest.mark.slow
def test_model_only_checks_the_model_server_alone(services: Services) -> None:
    env = services.env(gitlab_url="", database_url="postgresql://u:pw@127.0.0.1:1/none")
    code, checks, _ = doctor(env, "--model-only")
    assert code == 0
    assert list(checks) == ["settings", *MODEL_CHECKS]


def test_an_unreachable_model_server_fails_alone(services: Services) -> None:
    with FakeVLLM() as vllm:
        gone = vllm.base_url
    code, checks, _ = doctor(services.env(llm_base_url=gone), "--model-only")
    assert code == 1
    assert list(checks) == ["settings", "model server"]
    assert "cannot reach" in checks["model server"]["detail"]
    assert "systemctl" in checks["model server"]["fix"]


@pytest.mark.slow
def test_a_server_with_an_api_key_is_checked_with_reviewbots(services: Services) -> None:
    """vLLM started with VLLM_API_KEY: every model check passes with REVIEWBOT_LLM_API_KEY set
    to it; without it (or with another key) /v1 answers 401 and the fix names the setting."""
    with FakeVLLM(api_key=MODEL_API_KEY) as vllm:
        env = services.env(llm_base_url=vllm.base_url, llm_api_key=MODEL_API_KEY)
        code, checks, output = doctor(env, "--model-only")
        assert code == 0
        local = ("generation config", "priority scheduling")  # read from a local vLLM: none
        passed = [name for name in MODEL_CHECKS if name not in local]
        assert {name: checks[name]["status"] for name in passed} == dict.fromkeys(passed, "ok")
        assert MODEL_API_KEY not in output
        for wrong in ("", "another-key"):
            code, checks, output = doctor(
                services.env(llm_base_url=vllm.base_url, llm_api_key=wrong), "--model-only"
            )
            assert code == 1
            assert list(checks) == ["settings", "model server"]
            assert "401" in checks["model server"]["detail"]
            assert checks["model server"]["fix"] == MODEL_API_KEY_FIX
            assert "REVIEWBOT_LLM_API_KEY" in MODEL_API_KEY_FIX
            assert MODEL_API_KEY not in output


@pytest.mark.slow
def test_a_model_that_is_not_served_fails(services: Services) -> None:
    _, checks, _ = doctor(services.env(llm_model="Qwen/Other"), "--model-only")
    assert checks["model server"]["status"] == "fail"
    assert "REVIEWBOT_LLM_MODEL" in checks["model server"]["fix"]


@pytest.mark.slow
def test_a_context_longer_than_served_fails(services: Services) -> None:
    _, checks, _ = doctor(services.env(max_model_len="131072"), "--model-only")
    assert checks["context length"]["status"] == "fail"
    assert "65536" in checks["context length"]["detail"]


@pytest.mark.slow
def test_missing_prompt_tokens_details_and_prefix_caching_warn(services: Services) -> None:
    with FakeVLLM(report_cached_tokens=False, prefix_caching=False) as vllm:
        code, checks, _ = doctor(services.env(llm_base_url=vllm.base_url), "--model-only")
    assert code == 0  # warnings only
    assert checks["cached tokens"]["status"] == "warn"
    assert "--enable-prompt-tokens-details" in checks["cached tokens"]["fix"]
    assert checks["prefix caching"]["status"] == "warn"
    assert "enable_prefix_caching=False" in checks["prefix caching"]["detail"]


@pytest.mark.slow
def test_thinking_is_reported_and_leaked_thinking_warns(services: Services) -> None:
    _, checks, _ = doctor(services.env(enable_thinking=""), "--model-only")
    assert checks["thinking"]["status"] == "ok"
    assert checks["thinking"]["detail"].startswith("on, ")
    assert "the probe's call survived the parsers" in checks["thinking"]["detail"]
    services.vllm.add_faults("reasoning")  # <think>...</think> left in the answer's text
    _, checks, _ = doctor(services.env(), "--model-only")
    assert checks["thinking"]["status"] == "warn"
    assert "--reasoning-parser qwen3" in checks["thinking"]["fix"]


def test_a_vllm_backend_without_tokenize_warns(services: Services) -> None:
    with FakeVLLM(tokenize_endpoint=False) as vllm:
        code, checks, _ = doctor(services.env(llm_base_url=vllm.base_url), "--model-only")
    assert code == 0  # budgets fall back to the local count: a warning, not a failure
    assert checks["tokenize"]["status"] == "warn"
    assert "no /tokenize" in checks["tokenize"]["detail"]
    assert "vLLM" in checks["tokenize"]["fix"]
    assert checks["tool calls"]["status"] == "ok"


@pytest.mark.slow
def test_a_tokenize_count_unlike_the_requests_warns(services: Services) -> None:
    """A /tokenize that ignores chat_template_kwargs counts the thinking-on prompt, while the
    probe (REVIEWBOT_ENABLE_THINKING=false) is sent with the empty think block."""
    with FakeVLLM(tokenize_template_kwargs=False) as vllm:
        code, checks, _ = doctor(services.env(llm_base_url=vllm.base_url), "--model-only")
    assert code == 0
    tokenize = checks["tokenize"]
    assert tokenize["status"] == "warn"
    counted, used = (int(n) for n in re.findall(r"\b(\d+)\b", tokenize["detail"])[:2])
    assert counted < used, tokenize["detail"]
    assert "REVIEWBOT_LLM_MODEL" in tokenize["fix"] and "chat template" in tokenize["fix"]


def test_the_openai_compatible_backend_needs_no_tokenize() -> None:
    fake = FakeVLLM(tokenize_endpoint=False, advertise_max_model_len=False)
    with fake:
        env = {
            "REVIEWBOT_CONFIG": "",
            "REVIEWBOT_LLM_BASE_URL": fake.base_url,
            "REVIEWBOT_LLM_BACKEND": "openai-compatible",
        }
        code, checks, _ = doctor(env, "--model-only")
    assert code == 0
    assert checks["tool calls"]["status"] == "ok"
    assert checks["tokenize"]["status"] == "ok" and "locally" in checks["tokenize"]["detail"]
    assert checks["context length"]["status"] == "warn"
    assert "generation config" not in checks  # a vLLM setting


@pytest.mark.slow
def test_the_health_probe_fails_on_a_server_without_a_tool_parser(tmp_path: Path) -> None:
    """deploy/vllm/health-check.sh running the real `reviewbot doctor --model-only`."""
    reviewbot = Path(sys.executable).parent / "reviewbot"
    systemctl = tmp_path / "systemctl"
    systemctl.write_text("#!/bin/sh\nexit 0\n")  # the vLLM unit is active; restarts are no-ops
    systemctl.chmod(0o755)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "STATE_DIRECTORY": str(tmp_path),
        "HEALTH_SYSTEMCTL": str(systemctl),
        "HEALTH_VLLM_UNIT": "reviewbot-vllm@t.service",
        "REVIEWBOT_CONFIG": "",
        # the exit status is under test, not the deadline: a loaded CI machine took over the
        # unit's 22 s to start `reviewbot doctor` and the healthy server's probe failed too
        "HEALTH_PROBE_TIMEOUT_S": str(PROBE_DEADLINE_S),
    }
    probe = [
        str(ROOT / "deploy" / "vllm" / "health-check.sh"),
        "probe",
        str(reviewbot),
        "doctor",
        "--model-only",
    ]
    statuses = []
    for tool_parser in (True, False):
        with FakeVLLM(tool_parser=tool_parser) as vllm:
            run = subprocess.run(
                probe, env={**env, "REVIEWBOT_LLM_BASE_URL": vllm.base_url}, capture_output=True
            )
        statuses.append(run.returncode)
    assert statuses == [0, 1]
    assert (tmp_path / "consecutive-failures").read_text().strip() == "1"


# --- generation config: the local vLLM's command line ----------------------------------------


@pytest.mark.parametrize(
    ("argv", "status"),
    [
        (["vllm", "serve", "M", "--generation-config", "vllm"], Status.OK),
        (["/opt/venv/bin/vllm", "serve", "M", "--generation-config=vllm"], Status.OK),
        (["vllm", "serve", "M"], Status.WARN),
        (["vllm", "serve", "M", "--generation-config", "auto"], Status.WARN),
        (["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "M"], Status.WARN),
        # seen on the H200 (issue 23): doctor could not tell, with the flag on the command line
        (
            [
                "python3",
                "-m",
                "vllm.entrypoints.cli.main",
                "serve",
                "M",
                "--generation-config",
                "vllm",
            ],
            Status.OK,
        ),
    ],
)
def test_generation_config_from_the_command_line(argv: list[str], status: Status) -> None:
    url = "http://127.0.0.1:8000/v1"
    found = vllm_argv_for([["bash"], argv], url)
    assert found == argv
    assert generation_config_check(found, url).status is status


def test_a_vllm_process_on_another_port_or_a_remote_url_is_not_the_server() -> None:
    argv = ["vllm", "serve", "M", "--port", "8001", "--generation-config", "vllm"]
    assert vllm_argv_for([argv], "http://127.0.0.1:8000/v1") is None
    assert vllm_argv_for([argv], "http://localhost:8001/v1") == argv
    assert vllm_argv_for([argv], "http://gpu-box:8001/v1") is None
    check = generation_config_check(None, "http://gpu-box:8001/v1")
    assert check.status is Status.WARN and check.detail.startswith("cannot tell")


def test_prefix_caching_from_counters_when_the_config_is_not_exported() -> None:
    on = 'vllm:prefix_cache_queries_total{engine="0"} 120.0\nvllm:prefix_cache_hits_total 16\n'
    assert prefix_caching_check(on).status is Status.OK
    off = 'vllm:prefix_cache_queries_total{engine="0"} 0.0\n'
    assert prefix_caching_check(off).status is Status.WARN
    assert prefix_caching_check(None).detail.startswith("cannot tell")


# --- the database ----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_database_behind_warns(db_services: Services) -> None:
    _set_revision(db_services.database_url, _first_revision())
    code, checks, _ = doctor(db_services.env())
    assert code == 0
    assert checks["database"]["status"] == "warn"
    assert "behind" in checks["database"]["detail"]
    assert "reviewbot db upgrade" in checks["database"]["fix"]


@pytest.mark.slow
def test_a_database_ahead_of_this_reviewbot_fails(db_services: Services) -> None:
    _set_revision(db_services.database_url, "ffffffffffff")
    code, checks, _ = doctor(db_services.env())
    assert code == 1
    assert checks["database"]["status"] == "fail"
    assert "newer reviewbot" in checks["database"]["detail"]


@pytest.mark.slow
def test_an_unreachable_database_fails_without_its_password(services: Services) -> None:
    code, checks, output = doctor(services.env(database_url="postgresql://u:hunter2@127.0.0.1:1/x"))
    assert code == 1
    assert checks["database"]["status"] == "fail"
    assert "hunter2" not in output


@pytest.mark.slow
def test_a_missing_sqlite_file_is_not_created(services: Services, tmp_path: Path) -> None:
    path = tmp_path / "none" / "reviewbot.db"
    _, checks, _ = doctor(services.env(database_url=f"sqlite:///{path}"))
    assert (
        checks["database"]["status"] == "warn" and "no database yet" in checks["database"]["detail"]
    )
    assert not path.exists() and not path.parent.exists()


def _first_revision() -> str:
    from alembic.script import ScriptDirectory

    from reviewbot.store.migrate import alembic_config

    return ScriptDirectory.from_config(alembic_config()).get_base()  # type: ignore[return-value]


def _set_revision(database_url: str, revision: str) -> None:
    engine = create_engine(normalize_database_url(database_url))
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})
    engine.dispose()


# --- timeouts --------------------------------------------------------------------------------


@pytest.mark.slow
def test_services_that_never_answer_fail_within_their_timeouts(tmp_path: Path) -> None:
    with SilentServer() as silent:
        settings = Settings(
            gitlab_url=silent.url,
            gitlab_token=BOT_TOKEN,
            llm_base_url=f"{silent.url}/v1",
            database_url=f"postgresql://u@127.0.0.1:{silent.url.rsplit(':', 1)[1]}/x",
        )
        checks = run_doctor(settings, DoctorOptions(timeouts=FAST_TIMEOUTS))
    by_name = {c.name: c for c in checks}
    assert [by_name[n].status for n in ("gitlab", "model server", "database")] == [Status.FAIL] * 3
    assert (
        "timed out" in by_name["model server"].detail or "within" in by_name["model server"].detail
    )
    assert BOT_TOKEN not in repr(checks)


# A request of the model group alone would outlast the test's own time limit; the group's
# time (model_total_s) leaves a loaded machine ample room to answer /v1/models.
HANGING_REQUEST_S = 120.0
MODEL_GROUP_S = 5.0
WITHIN_THE_GROUP_TEST_S = 60


@pytest.mark.slow
@pytest.mark.timeout(WITHIN_THE_GROUP_TEST_S)
def test_a_server_that_lists_its_model_then_hangs_is_failed_checks_not_a_traceback() -> None:
    """Every request of the model group, /version and /metrics included, keeps within the
    group's time: one such request alone (120 s) would outlast this test's limit (60 s)."""
    models = {"object": "list", "data": [{"id": "m", "object": "model", "max_model_len": 65536}]}
    timeouts = DoctorTimeouts(
        gitlab_s=0.1,
        model_s=HANGING_REQUEST_S,
        tool_probe_s=HANGING_REQUEST_S,
        model_total_s=MODEL_GROUP_S,
        database_s=0.1,
    )
    with SilentServer(answers={"/v1/models": json.dumps(models)}) as wedged:
        settings = Settings(llm_base_url=f"{wedged.url}/v1", enable_thinking=False)
        checks = run_doctor(settings, DoctorOptions(model_only=True, timeouts=timeouts))
    by_name: dict[str, Any] = {c.name: c for c in checks}
    assert by_name["model server"].status is Status.OK
    assert by_name["tool calls"].status is Status.FAIL
    assert by_name["prefix caching"].detail.startswith("cannot tell")


# The model group's time when one of its checks never ends: it is waited for, whole.
STUCK_GROUP_TIMEOUTS = DoctorTimeouts(model_s=3.0, tool_probe_s=6.0, model_total_s=8.0)


@pytest.mark.slow
@pytest.mark.timeout(WITHIN_THE_GROUP_TEST_S)
def test_a_check_that_never_ends_fails_alone_and_the_others_keep_their_verdicts(
    services: Services,
) -> None:
    """Issue 32 item 12: the model checks shared one grace; one step past it (a stalled probe
    on a loaded host, here the process list of the generation-config and priority checks,
    which never returns) turned every model check into one failure, 'the checks did not end
    within ...'. Now each check has its own deadline and verdict: the stuck ones fail by name,
    every other check says what it says when nothing is stuck."""
    release = threading.Event()

    def stuck_process_list() -> list[list[str]]:
        release.wait()
        return []

    settings = Settings(llm_base_url=services.vllm.base_url, enable_thinking=False)
    options = DoctorOptions(model_only=True, timeouts=STUCK_GROUP_TIMEOUTS)
    try:
        stuck = run_doctor(settings, options, command_lines=stuck_process_list)
    finally:
        release.set()
    free = run_doctor(settings, options, command_lines=list)
    assert [c.name for c in stuck] == [c.name for c in free] == ["settings", *MODEL_CHECKS]
    unfinished = stuck[-2:]
    assert [c.name for c in unfinished] == ["generation config", "priority scheduling"]
    assert all(c.status is Status.FAIL for c in unfinished)
    assert all(c.detail == "no verdict within the model checks' 8 s" for c in unfinished)
    assert [(c.name, c.status) for c in stuck[:-2]] == [(c.name, c.status) for c in free[:-2]]
    assert not any("no verdict" in c.detail for c in stuck[:-2])
    assert all(c.status is not Status.FAIL for c in free[-2:])


@pytest.mark.slow
def test_a_probe_that_never_ends_fails_within_its_timeout(services: Services) -> None:
    services.vllm.add_faults("hang")
    settings = Settings(llm_base_url=services.vllm.base_url, enable_thinking=False)
    checks = run_doctor(settings, DoctorOptions(model_only=True, timeouts=FAST_TIMEOUTS))
    by_name: dict[str, Any] = {c.name: c for c in checks}
    assert by_name["tool calls"].status is Status.FAIL
    assert by_name["cached tokens"].detail.endswith("the probe got no answer")


def test_a_probe_cut_while_thinking_is_not_confirmed() -> None:
    answer = ModelAnswer("", [], "length", 900, 1024, 0, 0.1, reasoning="Let me think. " * 200)
    check = tool_call_check(answer, tool_schemas(), "tool_calls")
    assert check.status is Status.WARN and "cut at 1024 tokens" in check.detail
    assert "REVIEWBOT_ENABLE_THINKING=false" in check.fix


# --- where the repository comes from ---------------------------------------------------------


@pytest.mark.slow
def test_the_repository_checks_say_git_the_cache_and_a_timed_fetch(services: Services) -> None:
    _, checks, output = doctor(services.env(), "--project", PROJECT)
    assert checks["repository source"]["status"] == "ok"
    assert checks["repository source"]["detail"].startswith("git version ")
    assert checks["repository cache"]["status"] == "ok"
    fetch = checks["repository fetch"]
    assert fetch["status"] == "ok" and fetch["detail"].startswith(f"fetched main of {PROJECT} in ")
    assert services.gitlab.git_fetches() == 1 and BOT_TOKEN not in output


def test_without_a_project_there_is_no_fetch(services: Services) -> None:
    _, checks, _ = doctor(services.env())
    assert "repository cache" in checks and "repository fetch" not in checks
    assert services.gitlab.git_requests == []


@pytest.mark.slow
def test_git_not_on_path_warns_that_the_api_serves(
    services: Services, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    _, checks, _ = doctor(services.env(), "--project", PROJECT)
    source = checks["repository source"]
    assert source["status"] == "warn" and "git is not on PATH" in source["detail"]
    assert "install git" in source["fix"]
    assert "repository cache" not in checks and "repository fetch" not in checks


@pytest.mark.slow
def test_the_cache_off_warns_with_how_to_turn_it_on(services: Services) -> None:
    _, checks, _ = doctor(services.env(repo_cache_max_bytes="0"), "--project", PROJECT)
    assert checks["repository source"]["status"] == "warn"
    assert "REVIEWBOT_REPO_CACHE_MAX_BYTES" in checks["repository source"]["fix"]
    assert "repository fetch" not in checks


@pytest.mark.slow
def test_a_cache_folder_that_cannot_be_written_fails(services: Services, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    code, checks, _ = doctor(services.env(repo_cache_dir=str(blocker / "repos")))
    assert code == 1
    cache = checks["repository cache"]
    assert cache["status"] == "fail" and str(blocker) in cache["detail"]
    assert "REVIEWBOT_REPO_CACHE_DIR" in cache["fix"]


def test_a_cache_over_its_cap_warns(services: Services, tmp_path: Path) -> None:
    cache_dir = tmp_path / "repos"
    objects = cache_dir / "gitlab.example.com" / "3.git" / "objects"
    objects.mkdir(parents=True)
    (objects / "pack").write_bytes(b"x" * 4096)
    _, checks, _ = doctor(services.env(repo_cache_dir=str(cache_dir), repo_cache_max_bytes="1024"))
    cache = checks["repository cache"]
    assert cache["status"] == "warn" and cache["detail"].startswith("over the cap: ")


@pytest.mark.slow
def test_a_fetch_that_hangs_fails_within_the_fetch_timeout(services: Services) -> None:
    services.gitlab.stall_git()
    code, checks, _ = doctor(services.env(repo_fetch_timeout_s="0.5"), "--project", PROJECT)
    fetch = checks["repository fetch"]
    assert code == 1 and fetch["status"] == "fail"
    assert "took longer than 0.5 s" in fetch["detail"]
    assert "REVIEWBOT_REPO_FETCH_TIMEOUT_S" in fetch["fix"]


@pytest.mark.slow
def test_a_token_git_refuses_fails_without_showing_it(services: Services) -> None:
    env = services.env(gitlab_token=READ_ONLY_TOKEN)
    _, checks, output = doctor(env, "--project", PROJECT)
    fetch = checks["repository fetch"]
    assert fetch["status"] == "fail" and "refused the token" in fetch["detail"]
    assert READ_ONLY_TOKEN not in output


@pytest.mark.parametrize(
    ("version", "status"),
    [("git version 2.25.1", Status.WARN), ("git version 2.29.0", Status.OK), ("git 3", Status.OK)],
)
def test_a_git_too_old_for_the_cache_warns(version: str, status: Status) -> None:
    check = repository_source_check(version, True, "/cache")
    assert check.status is status
    assert ("older than git 2.29" in check.detail) is (status is Status.WARN)


# --- thinking: does the call survive the parsers, what does thinking cost ----------------------


def thinking_probe(reasoning: str, calls: bool = True, tokens: int | None = 40) -> ModelAnswer:
    call = ToolCallText("report_finding", json.dumps(PROBE_CALL), "c1")
    return ModelAnswer(
        "",
        [call] if calls else [],
        "tool_calls" if calls else "stop",
        900,
        120,
        0,
        0.1,
        reasoning=reasoning,
        reasoning_tokens=tokens,
    )


PROBE_CALL = {
    "path": "src/app.py",
    "line": 3,
    "severity": "major",
    "category": "bug",
    "title": "t",
    "body": "b",
}


def test_thinking_that_costs_little_is_recommended_on() -> None:
    check = thinking_check(None, thinking_probe("I check line 3."), 40, 4096)
    assert check.status is Status.OK
    assert check.detail.startswith("on, 40 tokens of thinking (1% of max_output_tokens=4096)")
    assert "recommended: thinking on" in check.detail


def test_thinking_that_spends_most_of_the_budget_recommends_it_off() -> None:
    check = thinking_probe("Let me think. " * 300, tokens=3000)
    judged = thinking_check(True, check, 3000, 4096)
    assert judged.status is Status.WARN and "73% of max_output_tokens=4096" in judged.detail
    assert judged.fix and judged.fix.startswith("recommended: REVIEWBOT_ENABLE_THINKING=false")


def test_a_call_kept_in_the_thinking_warns_in_both_checks() -> None:
    kept = thinking_probe(f"I report it.\n{qwen_xml_call('report_finding', PROBE_CALL)}\n", False)
    judged = thinking_check(None, kept, 60, 4096)
    assert judged.status is Status.WARN and "vllm#39056" in judged.detail
    assert judged.fix and "REVIEWBOT_ENABLE_THINKING=false" in judged.fix
    tools = tool_call_check(kept, tool_schemas(), "tool_calls")
    assert tools.status is Status.WARN and "inside the model's thinking" in tools.detail


def test_thinking_off_says_how_to_measure_it() -> None:
    check = thinking_check(False, thinking_probe("", tokens=None), None, 4096)
    assert check.status is Status.OK and check.detail.startswith("off:")
    assert "REVIEWBOT_ENABLE_THINKING=true reviewbot doctor --model-only" in check.detail


# --- priority scheduling (issue 34 part 3) ---------------------------------------------------

SERVE = ["vllm", "serve", "M"]


@pytest.mark.parametrize(
    ("argv", "status"),
    [
        ([*SERVE, "--scheduling-policy", "priority"], Status.OK),
        ([*SERVE, "--scheduling-policy=priority"], Status.OK),
        ([*SERVE, "--scheduling-policy", "fcfs"], Status.WARN),
        (SERVE, Status.WARN),
        (None, Status.WARN),
    ],
)
def test_priority_scheduling_from_the_command_line(argv: list[str] | None, status: Status) -> None:
    check = priority_check(True, None, argv, "http://127.0.0.1:8000/v1")
    assert check.status is status
    assert (check.fix == "") is (status is Status.OK)
    if status is Status.WARN:
        assert "--scheduling-policy priority" in check.fix


def test_priority_scheduling_off_is_fine_whatever_the_server() -> None:
    check = priority_check(False, None, SERVE, "http://127.0.0.1:8000/v1")
    assert check.status is Status.OK and "off" in check.detail


def test_a_server_that_refuses_priorities_warns_with_its_words() -> None:
    """An older vLLM (the V0 engine) answers a non-zero priority 400 without the policy: a
    review still runs (reviewbot drops the field), so a warning, with the flag to add."""
    with FakeVLLM(refuse_priority=True) as vllm:
        settings = Settings(llm_base_url=vllm.base_url, enable_thinking=False)
        checks = run_doctor(settings, DoctorOptions(model_only=True), command_lines=list)
    check = next(c for c in checks if c.name == "priority scheduling")
    assert check.status is Status.WARN
    assert PRIORITY_REFUSED_ERROR.format(priority=40) in check.detail
    assert "--scheduling-policy priority" in check.fix
    assert any(body.get("priority") == 40 for body in vllm.requests)


def test_a_server_that_takes_priorities_is_judged_by_its_command_line() -> None:
    with FakeVLLM() as vllm:
        port = vllm.base_url.split(":")[-1].split("/")[0]
        argv = [*SERVE, "--port", port, "--scheduling-policy", "priority"]
        for lines, status in (([], Status.WARN), ([argv], Status.OK)):
            settings = Settings(llm_base_url=vllm.base_url, enable_thinking=False)
            checks = run_doctor(
                settings, DoctorOptions(model_only=True), command_lines=lambda lines=lines: lines
            )
            check = next(c for c in checks if c.name == "priority scheduling")
            assert check.status is status, check


def test_the_doctor_sends_no_priority_when_the_setting_is_off(services: Services) -> None:
    _, checks, _ = doctor(services.env(priority_scheduling="false"), "--model-only")
    assert checks["priority scheduling"]["status"] == "ok"
    assert not any("priority" in body for body in services.vllm.requests)
