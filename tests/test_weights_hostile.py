"""`reviewbot weights` and its doctor check given hostile inputs (issue 32): each one ends in
one clear line or a named file and the documented exit code, never a traceback, a hang or
silence. The model directories are built in ``tmp_path`` as in tests/test_weights.py."""

from __future__ import annotations

import errno
import json
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from reviewbot.commands import main
from reviewbot.ops.weights_files import hash_file
from tests.fakes.vllm_server import FakeVLLM
from tests.test_weights import CONFIG, INDEX, SHARD_2, make_hub_snapshot, model_files


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


# --- 5. a FIFO, a device: refused, never opened ------------------------------------------------

# Opening a FIFO for reading blocks until a writer comes: a test that hangs here has opened it.
NEVER_BLOCKS = pytest.mark.timeout(60)


def make_fifo(path: Path) -> str:
    os.mkfifo(path)
    return "a FIFO"


def link_to_dev_zero(path: Path) -> str:
    path.symlink_to("/dev/zero")
    return "a device"


@NEVER_BLOCKS
@pytest.mark.parametrize("make", [make_fifo, link_to_dev_zero])
def test_a_shard_that_is_not_a_regular_file_is_refused_by_name(
    model_dir: Path, make: Callable[[Path], str]
) -> None:
    kind = make(model_dir / "extra.safetensors")
    code, out, _ = run("weights", "verify", model_dir)
    assert code == 1
    assert f"REFUSED: extra.safetensors: not a regular file ({kind}): never opened" in out


@NEVER_BLOCKS
def test_a_fifo_in_place_of_an_indexed_shard_is_refused_not_missing(model_dir: Path) -> None:
    shard = model_dir / SHARD_2
    shard.unlink()
    os.mkfifo(shard)
    code, out, _ = run("weights", "verify", model_dir, "--json")
    assert code == 1
    files = {f["path"]: f for f in json.loads(out)["files"]}
    assert files[SHARD_2]["status"] == "refused"
    assert files[SHARD_2]["detail"] == "not a regular file (a FIFO): never opened"


@NEVER_BLOCKS
def test_a_fifo_the_manifest_lists_is_refused_and_no_manifest_is_written_of_one(
    model_dir: Path, tmp_path: Path
) -> None:
    os.mkfifo(model_dir / "data.raw")
    manifest = tmp_path / "weights.sha256"
    manifest.write_text(f"{'0' * 64}  data.raw\n")
    code, out, _ = run("weights", "verify", model_dir, "--manifest", manifest)
    assert code == 1 and "REFUSED: data.raw: not a regular file (a FIFO)" in out
    os.mkfifo(model_dir / "extra.safetensors")
    code, out, err = run("weights", "manifest", model_dir)
    assert code == 1 and out == ""
    assert "refused: extra.safetensors: not a regular file (a FIFO)" in err


@NEVER_BLOCKS
def test_a_file_replaced_by_a_fifo_after_it_was_listed_is_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "model.safetensors"
    os.mkfifo(fifo)
    assert hash_file(fifo).error == "cannot read: not a regular file (a FIFO)"


def test_a_link_to_itself_is_unreadable_by_name(model_dir: Path) -> None:
    (model_dir / "loop.safetensors").symlink_to("loop.safetensors")
    code, out, _ = run("weights", "verify", model_dir)
    assert code == 1
    assert "UNREADABLE: loop.safetensors: cannot look at it: Too many levels of symbolic" in out


def test_a_manifest_path_below_a_file_is_missing(model_dir: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "weights.sha256"
    manifest.write_text(f"{'0' * 64}  config.json/model.safetensors\n")
    code, out, _ = run("weights", "verify", model_dir, "--manifest", manifest)
    assert code == 1
    assert "MISSING: config.json/model.safetensors: missing: the manifest lists it" in out


# --- 4. links that lead out of the model folder ------------------------------------------------


def move_out_and_link(folder: Path, name: str, elsewhere: Path) -> Path:
    elsewhere.mkdir(exist_ok=True)
    target = elsewhere / name
    target.write_bytes((folder / name).read_bytes())
    (folder / name).unlink()
    (folder / name).symlink_to(target)
    return target.resolve()


def test_a_shard_linked_from_outside_the_model_folder_is_named(
    model_dir: Path, tmp_path: Path
) -> None:
    target = move_out_and_link(model_dir, SHARD_2, tmp_path / "elsewhere")
    code, out, err = run("weights", "verify", model_dir)
    assert code == 0  # its bytes are checked where they are: a warning, not a failure
    assert (
        "warning: links that lead out of MODEL_DIR (checked where they lead; "
        f"MODEL_DIR does not hold them, so another copy there can change them): {SHARD_2} -> "
        f"{target}"
    ) in err
    code, out, err = run("weights", "manifest", model_dir)
    assert code == 0 and SHARD_2 in out
    assert "warning: links that lead out of MODEL_DIR" in err
    assert "nothing was compared" not in err


def test_hub_cache_links_into_its_blobs_are_not_named_but_others_are(tmp_path: Path) -> None:
    snapshot = make_hub_snapshot(tmp_path)
    code, _, err = run("weights", "verify", snapshot)
    assert code == 0 and "lead out of" not in err
    target = move_out_and_link(snapshot, CONFIG, tmp_path / "elsewhere")
    code, _, err = run("weights", "verify", snapshot)
    assert "links that lead out of the hub cache's models--Qwen--Tiny folder" in err
    assert f"{CONFIG} -> {target}" in err


# --- 1. a NUL byte in a path a manifest names --------------------------------------------------


def test_a_nul_byte_in_a_manifest_path_is_bad_input(model_dir: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "weights.sha256"
    manifest.write_bytes(b"0" * 64 + b"  model\0.safetensors\n")
    code, out, err = run("weights", "verify", model_dir, "--manifest", manifest)
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert "line 1: 'model\\x00.safetensors' is not a file name: it holds a NUL byte" in err


@pytest.mark.parametrize(
    ("shard", "says"),
    [
        ("x\0y.safetensors", "'x\\x00y.safetensors' for tensor 'head': it holds a NUL byte"),
        (
            "../outside.safetensors",
            "'../outside.safetensors' for tensor 'head': outside its folder",
        ),
        ("/etc/passwd", "'/etc/passwd' for tensor 'head': outside its folder"),
        ("", "'' for tensor 'head': not a file name"),
    ],
)
def test_an_index_naming_a_shard_by_an_impossible_name_is_damaged(
    model_dir: Path, shard: str, says: str
) -> None:
    index = json.loads((model_dir / INDEX).read_text())
    index["weight_map"]["head"] = shard
    (model_dir / INDEX).write_text(json.dumps(index))
    code, out, _ = run("weights", "verify", model_dir)
    assert code == 1
    assert f"DAMAGED: {INDEX}: {INDEX} names {says}" in out
    assert "MISSING" not in out


def doctor_env(vllm: FakeVLLM, state: Path) -> dict[str, str]:
    return {
        "REVIEWBOT_CONFIG": "",
        "REVIEWBOT_LLM_BASE_URL": vllm.base_url,
        "REVIEWBOT_ENABLE_THINKING": "false",
        "REVIEWBOT_WEIGHTS_STATE_FILE": str(state),
    }


@pytest.fixture(scope="module")
def vllm() -> Iterator[FakeVLLM]:
    with FakeVLLM() as fake:
        yield fake


@pytest.mark.slow
@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("manifest", "/tmp/a\0b", "manifest holds a NUL byte"),
        ("model_dir", "/tmp/a\0b", "model_dir holds a NUL byte"),
        ("model_dir", 5, "model_dir is not text"),
    ],
)
def test_a_recorded_path_no_file_can_have_is_a_failed_weights_check(
    model_dir: Path, tmp_path: Path, vllm: FakeVLLM, field: str, value: object, says: str
) -> None:
    state = tmp_path / "weights-verify.json"
    record = {"ok": True, "model_dir": str(model_dir), "manifest": None}
    state.write_text(json.dumps({**record, field: value}))
    env = doctor_env(vllm, state)
    code, out, _ = run("doctor", "--json", "--model-only", "--verify-weights", env=env)
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert code == 1 and checks["weights"]["status"] == "fail"
    assert f"not a verification record: {says}" in checks["weights"]["detail"]
    assert checks["model server"]["status"] == "ok"  # the other checks ran


# --- 2. a state file that cannot be written ----------------------------------------------------

ON_LINUX = pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")


@ON_LINUX
@pytest.mark.parametrize("state", ["/proc/x.json", "/proc/self/status", "/sys/x.json"])
def test_a_state_file_that_cannot_be_written_is_bad_input_before_anything_is_hashed(
    model_dir: Path, state: str
) -> None:
    code, out, err = run("weights", "verify", model_dir, "--state-file", state)
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"reviewbot: error: --state-file {state}: cannot be written (")


def test_a_directory_as_the_state_file_is_bad_input(model_dir: Path, tmp_path: Path) -> None:
    code, out, err = run("weights", "verify", model_dir, "--state-file", tmp_path)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"--state-file {tmp_path} is not a regular file" in err


def test_a_state_file_that_fails_after_the_run_is_one_line_and_exit_1(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills between the check before hashing and the record after it."""
    state = tmp_path / "weights-verify.json"
    replace = os.replace

    def disk_full(source: str | Path, target: str | Path) -> None:
        if Path(target) == state:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        replace(source, target)

    monkeypatch.setattr(os, "replace", disk_full)
    code, out, err = run("weights", "verify", model_dir, "--state-file", state)
    assert code == 1
    assert "ok: 5 files hashed" in out  # the verdict is shown all the same
    assert err.splitlines()[-1] == (
        f"reviewbot: error: --state-file {state}: the result was not recorded: "
        "No space left on device"
    )
    assert not state.exists() and list(tmp_path.glob(".weights-verify.json.*")) == []


# --- 3. a state file nested deeper than JSON can be read ---------------------------------------

NESTED_TOO_DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.slow
def test_doctor_names_a_state_file_nested_too_deep_and_runs_the_other_checks(
    tmp_path: Path, vllm: FakeVLLM
) -> None:
    state = tmp_path / "weights-verify.json"
    state.write_text(NESTED_TOO_DEEP)
    env = {
        **doctor_env(vllm, state),
        "REVIEWBOT_GITLAB_URL": "",
        "REVIEWBOT_DATABASE_URL": f"sqlite:///{tmp_path / 'reviewbot.db'}",
    }
    code, out, _ = run("doctor", "--json", env=env)
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert code == 1  # GitLab is not configured here
    assert checks["weights"]["status"] == "warn"
    assert checks["weights"]["detail"] == (
        f"weights state file {state}: unreadable: JSON nested too deep"
    )
    assert checks["model server"]["status"] == "ok" and "database" in checks  # the others ran
    code, out, _ = run("doctor", "--json", "--model-only", "--verify-weights", env=env)
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert checks["weights"]["status"] == "fail"
    assert "unreadable: JSON nested too deep" in checks["weights"]["detail"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("record", "status", "says"),
    [
        ({"ok": False, "failed": 5}, "warn", "not a verification record: failed is not a list"),
        ({"ok": True, "finished_at": "2026-01-01T00:00:00"}, "ok", "(no time zone)"),
        ({"ok": True, "finished_at": 5, "summary": [1]}, "ok", "last verified at '5'"),
    ],
)
def test_doctor_reads_a_hand_made_state_file_without_a_traceback(
    tmp_path: Path, vllm: FakeVLLM, record: dict[str, object], status: str, says: str
) -> None:
    state = tmp_path / "weights-verify.json"
    state.write_text(json.dumps(record))
    env = {
        **doctor_env(vllm, state),
        "REVIEWBOT_GITLAB_URL": "",
        "REVIEWBOT_DATABASE_URL": f"sqlite:///{tmp_path / 'reviewbot.db'}",
    }
    _, out, _ = run("doctor", "--json", env=env)
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert checks["weights"]["status"] == status and says in checks["weights"]["detail"]
