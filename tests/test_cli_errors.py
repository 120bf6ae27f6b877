"""Bad settings and unreachable services give one line on stderr and an exit code, never a trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from reviewbot.commands import main


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "env", "code", "message"),
    [
        (["reviews", "list", "--database-url", "notaurl"], {}, 2, "'notaurl' is not supported"),
        (
            ["reviews", "list", "--database-url", "postgresql://u:hunter2@127.0.0.1:1/x"],
            {},
            1,
            "cannot open postgresql://u:***@127.0.0.1:1/x: connection failed",
        ),
        (["plan", "--diff", "-"], {"REVIEWBOT_CONCURRENCY": "lots"}, 2, "REVIEWBOT_CONCURRENCY"),
        (["run", "1", "--project", "g/a"], {"REVIEWBOT_GITLAB_URL": ""}, 2, "REVIEWBOT_GITLAB_"),
        (["db", "upgrade", "--database-url", "mysql+nodriver://x/y"], {}, 2, "not supported"),
        # the hostile test's bad input (issue 10 item 11): one line, exit 2, no secret shown
        (["run", "1", "--project", "g/a"], {"REVIEWBOT_GITLAB_URL": "ftp://x"}, 2, "gitlab_url"),
        (["run", "1", "--project", "g/a"], {"REVIEWBOT_GITLAB_URL": "notaurl"}, 2, "http"),
        (
            ["run", "1", "--project", "g/a"],
            {"REVIEWBOT_GITLAB_URL": "ftp://bot:hunter2@gitlab.example.com"},
            2,
            "ftp://bot:***@gitlab.example.com",
        ),
        (["reviews", "list", "--database-url", "mysql://u:hunter2@db/x"], {}, 2, "sqlite:///"),
        (["plan", "--diff", "-"], {"REVIEWBOT_REQUEST_TIMEOUT_S": "-1"}, 2, "request_timeout_s"),
        (["plan", "--diff", "-"], {"REVIEWBOT_REQUEST_TIMEOUT_S": "nan"}, 2, "request_timeout_s"),
        (["serve", "--port", "70000"], {}, 2, "--port"),
        # issue 17 item 3: bad numbers and URLs from the environment are refused where parsed
        (
            ["run", "1", "--project", "g/a"],
            {"REVIEWBOT_GITLAB_URL": "http://[::1"},
            2,
            "gitlab_url",
        ),
        (["plan", "--diff", "-"], {"REVIEWBOT_MAX_MODEL_LEN": "1e400"}, 2, "MAX_MODEL_LEN"),
        (["plan", "--diff", "-"], {"REVIEWBOT_CONCURRENCY": str(2**70)}, 2, "concurrency"),
        (["plan", "--diff", "-"], {"REVIEWBOT_MR_LOCK_SECONDS": "inf"}, 2, "mr_lock_seconds"),
        (["plan", "--diff", "-", "--config", "/dev/zero"], {}, 2, "not a regular file"),
        (["reviews", "list", "--limit", "-1"], {}, 2, "--limit"),
        (
            ["reviews", "list", "--database-url", "sqlite:////proc/reviewbot/x.db"],
            {},
            2,
            "cannot create the folder",
        ),
    ],
)
def test_one_line_errors(args: list[str], env: dict[str, str], code: int, message: str) -> None:
    result = CliRunner().invoke(main, args, env={"REVIEWBOT_CONFIG": "", **env}, input="")
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output and "hunter2" not in result.stderr


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("max_model_len = 1e400", "max_model_len"),
        ("max_model_len = nan", "max_model_len"),
        ("request_timeout_s = inf", "request_timeout_s"),
        (f"concurrency = {2**70}", "concurrency"),
        ("gitlab_url = 'http://[::1'", "gitlab_url"),
    ],
)
def test_a_bad_value_in_the_config_file_is_one_line(tmp_path: Path, line: str, named: str) -> None:
    config = tmp_path / "reviewbot.toml"
    config.write_text(f"[reviewbot]\n{line}\n")
    result = CliRunner().invoke(main, ["plan", "--diff", "-", "--config", str(config)], input="")
    assert result.exit_code == 2, result.output
    assert named in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_doctor_fails_its_settings_check_on_a_device_as_config_file() -> None:
    """`--config /dev/zero` is refused by the option (exit 2, tests/test_cli_fuzz.py); the
    same file named by REVIEWBOT_CONFIG is doctor's failed settings check, never read."""
    result = CliRunner().invoke(main, ["doctor", "--json"], env={"REVIEWBOT_CONFIG": "/dev/zero"})
    assert result.exit_code == 1, result.output
    (settings_check,) = json.loads(result.stdout)["checks"]
    assert settings_check["name"] == "settings" and settings_check["status"] == "fail"
    assert "is not a regular file (a device)" in settings_check["detail"]


def test_a_config_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "reviewbot.toml"
    config.write_bytes(b'language = "Fran\xe7ais"\n')  # Latin-1
    result = CliRunner().invoke(main, ["plan", "--diff", "-", "--config", str(config)], input="")
    assert result.exit_code == 2
    assert "not UTF-8" in result.stderr and len(result.stderr.strip().splitlines()) == 1


PASSWORD = "hunter2"
SMALL_DIFF = "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-x = 1\n+x = eval(text)\n"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "env", "shown"),
    [
        (
            ["run", "1", "--project", "g/a"],
            {"REVIEWBOT_GITLAB_URL": f"http://bot:{PASSWORD}@127.0.0.1:1"},
            "GitLab at http://bot:***@127.0.0.1:1 is unreachable",
        ),
        (
            ["review", "--diff", "-", "--base-url", f"http://bot:{PASSWORD}@127.0.0.1:1/v1"],
            {},
            "cannot reach the model server at http://bot:***@127.0.0.1:1/v1",
        ),
    ],
)
def test_a_password_in_a_service_url_is_never_printed(
    args: list[str], env: dict[str, str], shown: str
) -> None:
    base = {"REVIEWBOT_CONFIG": "", "REVIEWBOT_GITLAB_TOKEN": "t"}
    result = CliRunner().invoke(main, args, env={**base, **env}, input=SMALL_DIFF)
    assert result.exit_code == 1, result.output
    assert shown in result.stderr
    assert PASSWORD not in result.output and PASSWORD not in result.stderr


# Issue 17 item 3: each of these was a traceback, an endless read, a flood or a huge allocation;
# each is now refused where the option is parsed, before anything is built or contacted.
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["loadtest", "--synthetic", "99999999999"], "--synthetic must be between 1 and"),
        (["loadtest", "--rate", "nan"], "--rate must be a finite number, got 'nan'"),
        (["loadtest", "--rate", "1e-300"], "--rate must be between 0.001 and 10000"),
        (["loadtest", "--rate", "0.5", "--duration", "1"], "does not fit in --duration 1 s"),
        (["worker", "--lease-seconds", "inf"], "--lease-seconds must be a finite number"),
        (["worker", "--lease-seconds", "nan"], "--lease-seconds must be a finite number"),
        (["report", "--slo-ttft-ms", "nan"], "--slo-ttft-ms must be a finite number"),
        (["capacity", "--model", "Qwen/Qwen3.5-9B", "--gpu", "L4", "--gpus", "100000"], "--gpus"),
        (["report", "--output", "{tmp}/missing/report"], "does not exist"),
        (["feedback", "sync", "--since", "99999999d"], "reaches back more than 3653 days"),
        (["feedback", "sync", "--since", "9" * 40 + "w"], "reaches back more than 3653 days"),
        (["jobs", "retry", "999999999999999999999"], "JOB_ID must be between 1 and 2,147,483,647"),
        (["doctor", "--config", "/dev/zero"], "/dev/zero is not a regular file"),
        (["plan", "--diff", "/dev/zero"], "/dev/zero is not a regular file"),
        (["run", "1", "--project", "g/a", "--gitlab-url", "http://[::1"], "Invalid IPv6 URL"),
        (["reviews", "list", "--mr", str(2**70)], "--mr must be between 1 and"),
    ],
)
def test_hostile_values_are_refused_where_they_are_parsed(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a report that is written anyway lands here
    database = tmp_path / "db.sqlite"
    env = {"REVIEWBOT_CONFIG": "", "REVIEWBOT_DATABASE_URL": f"sqlite:///{database}"}
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in args]
    result = CliRunner().invoke(main, args, env=env, input="")
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not database.exists() and not (tmp_path / "missing").exists()


@pytest.mark.slow
def test_a_diff_on_stdin_larger_than_the_cap_is_refused_unread(tmp_path: Path) -> None:
    from reviewbot.repo.localdiff import MAX_DIFF_BYTES

    huge = SMALL_DIFF + "+x\n" * (MAX_DIFF_BYTES // 3)
    result = CliRunner().invoke(main, ["plan", "--diff", "-"], input=huge)
    assert result.exit_code == 2
    assert "stdin: the diff is larger than" in result.stderr


# --- the one catch -> print -> exit path (reviewbot.errors' table) ---------------------------


def _library_errors() -> list[tuple[Exception, int]]:
    from reviewbot.ci import ArtifactWriteError
    from reviewbot.ops.capacity import CapacityError
    from reviewbot.ops.gpus import UnknownGpuError
    from reviewbot.ops.model_shape import ModelConfigError
    from reviewbot.queue import JobStateError
    from reviewbot.store import RecordNotFound

    return [
        (RecordNotFound("job 7 not found"), 2),
        (JobStateError("job 7 is queued: only a finished job can be retried"), 1),
        (CapacityError("tensor parallel size 2 is larger than the 1 GPU(s)"), 2),
        (ModelConfigError("config.json: hidden_size must be a positive integer"), 2),
        (UnknownGpuError("unknown GPU 'V100'"), 2),
        (ArtifactWriteError("cannot write report.json: Input/output error"), 1),
    ]


LIBRARY_ERRORS = _library_errors()


@pytest.mark.parametrize(
    ("error", "code"), LIBRARY_ERRORS, ids=[type(error).__name__ for error, _ in LIBRARY_ERRORS]
)
def test_each_library_error_is_one_line_and_its_exit_code(error: Exception, code: int) -> None:
    """Every command reports a library error through `one_line_errors` and the table in
    reviewbot.errors (no command catches one to print it)."""
    import click

    from reviewbot.commands.common import one_line_errors
    from reviewbot.errors import disposition

    def fails() -> None:
        raise error

    known = disposition(error)
    assert known is not None and (known.exit_code, known.retry) == (code, False)
    result = CliRunner().invoke(click.command("x")(one_line_errors(fails)), [])
    assert result.exit_code == code
    assert result.stderr == f"reviewbot: error: {error}\n"


@pytest.mark.slow
def test_jobs_of_no_such_id_and_in_the_wrong_state_are_one_line(tmp_path: Path) -> None:
    from reviewbot.queue import JobQueue
    from reviewbot.store import Store, upgrade

    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    upgrade(url)
    store = Store.from_url(url)
    job = JobQueue(store).enqueue(project="g/a", mr_iid=1, head_sha=None, trigger="cli")
    store.close()
    env = {"REVIEWBOT_CONFIG": "", "REVIEWBOT_DATABASE_URL": url}
    missing = CliRunner().invoke(main, ["jobs", "show", "999"], env=env)
    assert (missing.exit_code, missing.stderr) == (2, "reviewbot: error: job 999 not found\n")
    queued = CliRunner().invoke(main, ["jobs", "retry", str(job.job_id)], env=env)
    assert queued.exit_code == 1
    assert queued.stderr == (
        f"reviewbot: error: job {job.job_id} is queued: only a finished job can be retried\n"
    )


def test_a_ci_artifact_that_cannot_be_written_is_one_line_exit_1() -> None:
    """Outside a merge request pipeline `ci --summary` still writes its explanation; a file
    the kernel refuses to write (even to root) is ArtifactWriteError: one line, exit 1."""
    unwritable = "/proc/version"  # a regular file; writing it is EIO
    result = CliRunner().invoke(main, ["ci", "--summary", unwritable], env={"CI": ""})
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[-1] == (
        f"reviewbot: error: cannot write {unwritable}: Input/output error"
    )
    assert "Traceback" not in result.output
