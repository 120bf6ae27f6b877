"""`reviewbot doctor` and the weights: the last recorded verification (when it ran, what it
found), `doctor --verify-weights` running one now, and `doctor --model-only` (the health
timer's probe) leaving them alone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from reviewbot.commands import main
from reviewbot.config import Settings
from reviewbot.ops.doctor import Status
from reviewbot.ops.weights_doctor import weights_checks
from tests.fakes.vllm_server import FakeVLLM
from tests.test_weights import CONFIG, SHARD_1, model_files

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def vllm() -> Iterator[FakeVLLM]:
    with FakeVLLM() as fake:
        yield fake


@pytest.fixture
def model(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "model"
    folder.mkdir()
    for name, content in model_files().items():
        (folder / name).write_bytes(content)
    manifest = tmp_path / "model.sha256"
    result = CliRunner().invoke(main, ["weights", "manifest", str(folder)])
    manifest.write_text(result.stdout)
    return folder, manifest


def settings(state: Path) -> Settings:
    return Settings(weights_state_file=str(state))


def record(state: Path, folder: Path, manifest: Path) -> int:
    args = ["weights", "verify", str(folder), "--manifest", str(manifest)]
    return CliRunner().invoke(main, [*args, "--state-file", str(state)]).exit_code


def test_nothing_recorded_nor_configured_says_nothing(tmp_path: Path) -> None:
    assert weights_checks(settings(tmp_path / "none.json"), verify=False) == []


def test_the_last_verification_is_reported_with_its_time(
    model: tuple[Path, Path], tmp_path: Path
) -> None:
    state = tmp_path / "weights-verify.json"
    assert record(state, *model) == 0
    finished = json.loads(state.read_text())["finished_at"]
    (check,) = weights_checks(settings(state), verify=False)
    assert check.status is Status.OK
    assert check.detail.startswith(f"last verified {finished} (")
    assert "5 files verified against the manifest" in check.detail


def test_a_failed_verification_fails_the_check_naming_the_file(
    model: tuple[Path, Path], tmp_path: Path
) -> None:
    folder, manifest = model
    (folder / CONFIG).write_text("{}")
    state = tmp_path / "weights-verify.json"
    assert record(state, folder, manifest) == 1
    (check,) = weights_checks(settings(state), verify=False, now=NOW)
    assert check.status is Status.FAIL
    assert f"{CONFIG}: mismatch" in check.detail and "download the files named again" in check.fix


def test_an_unreadable_record_warns(tmp_path: Path) -> None:
    state = tmp_path / "weights-verify.json"
    state.write_text("not json")
    (check,) = weights_checks(settings(state), verify=False)
    assert check.status is Status.WARN and "not JSON" in check.detail


@pytest.mark.slow
def test_verify_weights_runs_it_now_and_records_it(
    model: tuple[Path, Path], tmp_path: Path, vllm: FakeVLLM
) -> None:
    folder, manifest = model
    state = tmp_path / "weights-verify.json"
    env = {
        "REVIEWBOT_CONFIG": "",
        "REVIEWBOT_LLM_BASE_URL": vllm.base_url,
        "REVIEWBOT_ENABLE_THINKING": "false",
        "REVIEWBOT_WEIGHTS_STATE_FILE": str(state),
    }
    assert record(state, folder, manifest) == 0
    args = ["doctor", "--json", "--model-only"]
    without = CliRunner().invoke(main, args, env=env)
    assert "weights" not in {c["name"] for c in json.loads(without.stdout)["checks"]}
    shard = folder / SHARD_1
    shard.write_bytes(shard.read_bytes()[:-8])
    result = CliRunner().invoke(main, [*args, "--verify-weights"], env=env)
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert result.exit_code == 1
    assert checks["weights"]["status"] == "fail"
    assert f"{SHARD_1}: damaged truncated" in checks["weights"]["detail"]
    assert json.loads(state.read_text())["ok"] is False


def test_verify_weights_with_nothing_to_verify_fails(tmp_path: Path) -> None:
    (check,) = weights_checks(settings(tmp_path / "none.json"), verify=True)
    assert check.status is Status.FAIL and "no verification recorded" in check.detail
    assert "--state-file" in check.fix
