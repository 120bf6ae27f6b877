"""The vLLM unit's weights check (deploy/vllm/verify-weights.sh, its ExecStartPre): skipped
when the profile sets no REVIEWBOT_WEIGHTS_MANIFEST, else `reviewbot weights verify` on the
model directory (given, PROFILE_MODEL itself, or PROFILE_MODEL's snapshot in the unit's hub
cache), failing the start when a file fails and recording the result for doctor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy_files import ROOT, read_unit
from tests.test_deploy_vllm import VLLM_UNIT
from tests.test_weights import SHARD_2, model_files

SCRIPT = ROOT / "deploy" / "vllm" / "verify-weights.sh"
REVIEWBOT = Path(sys.executable).parent / "reviewbot"


def run_script(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ["PATH"], "HOME": "/nonexistent", "REVIEWBOT_BIN": str(REVIEWBOT)}
    return subprocess.run(
        ["sh", str(SCRIPT)], env={**base, **env}, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def model(tmp_path: Path) -> tuple[Path, Path]:
    """A model directory and its manifest (written by `reviewbot weights manifest`)."""
    folder = tmp_path / "model"
    folder.mkdir()
    for name, content in model_files().items():
        (folder / name).write_bytes(content)
    manifest = tmp_path / "model.sha256"
    written = subprocess.run(
        [str(REVIEWBOT), "weights", "manifest", str(folder)], capture_output=True, text=True
    )
    assert written.returncode == 0, written.stderr
    manifest.write_text(written.stdout)
    return folder, manifest


def test_the_unit_checks_the_weights_before_vllm_starts() -> None:
    service = read_unit(VLLM_UNIT)["Service"]
    assert service["ExecStartPre"] == ["/opt/reviewbot/deploy/vllm/verify-weights.sh"]
    assert service["StateDirectory"] == ["reviewbot-vllm"]
    assert os.access(SCRIPT, os.X_OK)


def test_without_a_manifest_the_check_is_skipped_and_says_so(tmp_path: Path) -> None:
    result = run_script({"PROFILE_MODEL": "Qwen/Absent", "REVIEWBOT_BIN": "/nonexistent"})
    assert result.returncode == 0
    assert "REVIEWBOT_WEIGHTS_MANIFEST is not set" in result.stdout


@pytest.mark.slow
def test_a_verified_model_starts_and_the_result_is_recorded(
    model: tuple[Path, Path], tmp_path: Path
) -> None:
    folder, manifest = model
    env = {
        "PROFILE_MODEL": str(folder),
        "REVIEWBOT_WEIGHTS_MANIFEST": str(manifest),
        "STATE_DIRECTORY": str(tmp_path),
    }
    result = run_script(env)
    assert result.returncode == 0, result.stdout + result.stderr
    state = json.loads((tmp_path / "weights-verify.json").read_text())
    assert state["ok"] is True and state["model_dir"] == str(folder)


@pytest.mark.slow
def test_a_truncated_shard_fails_the_start(model: tuple[Path, Path], tmp_path: Path) -> None:
    folder, manifest = model
    shard = folder / SHARD_2
    shard.write_bytes(shard.read_bytes()[:-4])
    state = tmp_path / "state.json"
    env = {
        "PROFILE_MODEL": "Qwen/Tiny",
        "REVIEWBOT_WEIGHTS_DIR": str(folder),
        "REVIEWBOT_WEIGHTS_MANIFEST": str(manifest),
        "REVIEWBOT_WEIGHTS_STATE_FILE": str(state),
    }
    result = run_script(env)
    assert result.returncode == 1
    assert f"DAMAGED: {SHARD_2}: truncated" in result.stdout
    assert json.loads(state.read_text())["failed"] == [f"{SHARD_2}: damaged"]


@pytest.mark.slow
def test_the_model_is_found_in_the_units_hub_cache(
    model: tuple[Path, Path], tmp_path: Path
) -> None:
    folder, manifest = model
    repository = tmp_path / "hf" / "hub" / "models--Qwen--Tiny"
    (repository / "refs").mkdir(parents=True)
    (repository / "refs" / "main").write_text("b" * 40)
    (repository / "snapshots").mkdir()
    folder.rename(repository / "snapshots" / ("b" * 40))
    env = {
        "PROFILE_MODEL": "Qwen/Tiny",
        "HF_HOME": str(tmp_path / "hf"),
        "REVIEWBOT_WEIGHTS_MANIFEST": str(manifest),
        "STATE_DIRECTORY": str(tmp_path),
    }
    result = run_script(env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verified against the manifest" in result.stdout


def test_a_model_not_downloaded_yet_says_how(tmp_path: Path) -> None:
    env = {
        "PROFILE_MODEL": "Qwen/Tiny",
        "HF_HOME": str(tmp_path),
        "REVIEWBOT_WEIGHTS_MANIFEST": str(tmp_path / "m.sha256"),
    }
    result = run_script(env)
    assert result.returncode == 1
    assert "download it first (huggingface-cli download Qwen/Tiny)" in result.stderr
