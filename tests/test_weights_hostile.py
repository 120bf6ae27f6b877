"""`reviewbot weights` and its doctor check given hostile inputs (issue 32): each one ends in
one clear line or a named file and the documented exit code, never a traceback, a hang or
silence. The model directories are built in ``tmp_path`` as in tests/test_weights.py."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from reviewbot.commands import main
from tests.test_weights import model_files


def run(*args: str | Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """The command's exit code, stdout and stderr; an exception that escaped it (a traceback
    for the operator) fails the test."""
    result = CliRunner().invoke(main, [str(a) for a in args], env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"a traceback: {result.exception!r}") from result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    for name, content in model_files().items():
        (folder / name).write_bytes(content)
    return folder


def shard_with_header(tensors: dict[str, dict[str, object]], data_bytes: int) -> bytes:
    """A safetensors file with exactly this header and ``data_bytes`` of data."""
    encoded = json.dumps(tensors).encode()
    return struct.pack("<Q", len(encoded)) + encoded + b"\0" * data_bytes


def f32(begin: int, end: int) -> dict[str, object]:
    return {"dtype": "F32", "shape": [(end - begin) // 4], "data_offsets": [begin, end]}


# --- 6. tensors' byte ranges: overlaps and gaps ------------------------------------------------


@pytest.mark.parametrize(
    ("tensors", "data_bytes", "says"),
    [
        (
            {"a": f32(0, 16), "b": f32(8, 24)},
            24,
            "overlapping tensors: 'a' (bytes 0-16 of the data) and 'b' (bytes 8-24)",
        ),
        (
            {"a": f32(0, 16), "same": f32(0, 16)},
            16,
            "overlapping tensors: 'a' (bytes 0-16 of the data) and 'same' (bytes 0-16)",
        ),
        (
            {"a": f32(0, 8), "b": f32(16, 24)},
            24,
            "8 bytes no tensor holds: between 'a' (ends at byte 8) and 'b' (begins at byte 16)",
        ),
        ({"late": f32(8, 16)}, 16, "8 bytes no tensor holds: before 'late' (begins at byte 8)"),
        ({"a": f32(0, 16), "out": f32(16, 32)}, 16, "truncated: tensor 'out' ends at byte 32"),
    ],
)
def test_tensors_whose_bytes_overlap_or_leave_gaps_are_a_damaged_shard(
    tmp_path: Path, tensors: dict[str, dict[str, object]], data_bytes: int, says: str
) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(shard_with_header(tensors, data_bytes))
    code, out, _ = run("weights", "verify", folder)
    assert code == 1
    assert f"DAMAGED: model.safetensors: {says}" in out
