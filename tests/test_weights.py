"""`reviewbot weights verify` and `weights manifest` on small model directories built here:
safetensors shards written byte by byte (8-byte little-endian header length, JSON header,
data), an index, a config, and a fake Hugging Face hub cache (``blobs/<sha256 or git blob
id>``, ``snapshots/<rev>/<file>`` links to ``../../blobs/...``)."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewbot.commands import main
from reviewbot.ops.weights import (
    ManifestError,
    format_manifest,
    parse_manifest,
    parse_safetensors_header,
)
from reviewbot.ops.weights_files import read_state, verify_model
from tests.hypothesis_profiles import examples

SHARD_1 = "model-00001-of-00002.safetensors"
SHARD_2 = "model-00002-of-00002.safetensors"
INDEX = "model.safetensors.index.json"
CONFIG = "config.json"


def safetensors_bytes(tensors: dict[str, int], metadata: dict[str, str] | None = None) -> bytes:
    """A safetensors file of F32 tensors of ``n`` elements each, data a counting pattern."""
    header: dict[str, object] = {"__metadata__": metadata or {"format": "pt"}}
    data = b""
    for name, count in tensors.items():
        block = bytes((len(data) + i) % 251 for i in range(4 * count))
        offsets = [len(data), len(data) + len(block)]
        header[name] = {"dtype": "F32", "shape": [count], "data_offsets": offsets}
        data += block
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)  # the library pads the header to 8 bytes
    return struct.pack("<Q", len(encoded)) + encoded + data


def model_files() -> dict[str, bytes]:
    weight_map = {"embed": SHARD_1, "layer.0": SHARD_1, "head": SHARD_2}
    return {
        SHARD_1: safetensors_bytes({"embed": 64, "layer.0": 32}),
        SHARD_2: safetensors_bytes({"head": 48}),
        INDEX: json.dumps({"metadata": {}, "weight_map": weight_map}).encode(),
        CONFIG: b'{"model_type": "qwen3"}',
        "tokenizer.json": b'{"version": "1.0"}',
        "README.md": b"not a model file",
    }


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    for name, content in model_files().items():
        (folder / name).write_bytes(content)
    return folder


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@pytest.fixture
def hub_snapshot(tmp_path: Path) -> Path:
    return make_hub_snapshot(tmp_path)


def make_hub_snapshot(tmp_path: Path) -> Path:
    """models--org--name/{blobs,snapshots/<rev>}: weights by SHA-256, small files by git id."""
    repository = tmp_path / "hub" / "models--Qwen--Tiny"
    blobs, snapshot = repository / "blobs", repository / "snapshots" / ("a" * 40)
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    (repository / "refs").mkdir()
    (repository / "refs" / "main").write_text("a" * 40)
    for name, content in model_files().items():
        large = name.endswith(".safetensors")
        blob = hashlib.sha256(content).hexdigest() if large else git_blob_id(content)
        (blobs / blob).write_bytes(content)
        (snapshot / name).symlink_to(f"../../blobs/{blob}")
    return snapshot


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def manifest_of(folder: Path, tmp_path: Path) -> Path:
    code, out, err = run("weights", "manifest", folder)
    assert code == 0, err
    path = tmp_path / "weights.sha256"
    path.write_text(out)
    return path


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


# --- verify against a manifest ---------------------------------------------------------------


def test_a_clean_directory_verifies_against_its_manifest(model_dir: Path, tmp_path: Path) -> None:
    manifest = manifest_of(model_dir, tmp_path)
    code, out, err = run("weights", "verify", model_dir, "--manifest", manifest)
    assert code == 0, out + err
    assert "ok: 5 files verified against the manifest" in out
    assert "README.md" not in manifest.read_text()


def test_the_manifest_is_what_sha256sum_writes(model_dir: Path, tmp_path: Path) -> None:
    text = manifest_of(model_dir, tmp_path).read_text()
    expected = {
        name: hashlib.sha256(content).hexdigest()
        for name, content in model_files().items()
        if name != "README.md"
    }
    assert text == "".join(f"{expected[name]}  {name}\n" for name in sorted(expected))


def test_a_flipped_byte_names_the_file_and_both_hashes(model_dir: Path, tmp_path: Path) -> None:
    manifest = manifest_of(model_dir, tmp_path)
    expected = hashlib.sha256((model_dir / SHARD_1).read_bytes()).hexdigest()
    flip_byte(model_dir / SHARD_1, -5)  # in the data: the header still parses
    actual = hashlib.sha256((model_dir / SHARD_1).read_bytes()).hexdigest()
    code, out, _ = run("weights", "verify", model_dir, "--manifest", manifest)
    assert code == 1
    assert f"MISMATCH: {SHARD_1}" in out
    assert f"expected {expected} (sha256, manifest)" in out
    assert f"actual   {actual}" in out
    assert "FAILED: 1 of 5 files failed" in out


def test_a_truncated_shard_is_caught_by_its_header_without_hashing(
    model_dir: Path, tmp_path: Path
) -> None:
    manifest = manifest_of(model_dir, tmp_path)
    shard = model_dir / SHARD_2
    shard.write_bytes(shard.read_bytes()[:-10])
    code, out, _ = run("weights", "verify", model_dir, "--manifest", manifest, "--json")
    assert code == 1
    files = {f["path"]: f for f in json.loads(out)["files"]}
    assert files[SHARD_2]["status"] == "damaged"
    assert files[SHARD_2]["detail"].startswith("truncated: tensor 'head' ends at byte 192")
    assert files[SHARD_2]["sha256"] is None  # never hashed
    assert files[SHARD_1]["status"] == "verified"


def test_the_consistency_check_reads_the_header_only(tmp_path: Path) -> None:
    """A 1 GB shard (sparse) whose header promises 2 GB: damaged, and no byte was hashed."""
    folder = tmp_path / "big"
    folder.mkdir()
    header = json.dumps({"w": {"dtype": "U8", "shape": [2 << 30], "data_offsets": [0, 2 << 30]}})
    shard = folder / "model.safetensors"
    with shard.open("wb") as handle:
        handle.write(struct.pack("<Q", len(header)) + header.encode())
        handle.truncate(1 << 30)
    hashed: list[int] = []
    result = verify_model(folder, on_bytes=hashed.append)
    assert [r.status.value for r in result.results] == ["damaged"]
    assert "truncated" in result.results[0].detail
    assert hashed == []


def test_a_shard_cut_inside_its_header_is_truncated() -> None:
    data = safetensors_bytes({"w": 4})
    length = struct.unpack("<Q", data[:8])[0]
    cut = parse_safetensors_header(length, data[8:20], 20)
    assert cut.problem is not None and cut.problem.startswith("truncated: the header needs")
    assert parse_safetensors_header(None, b"", 3).problem == (
        "truncated: 3 bytes, not even a header length"
    )


def test_bytes_after_the_last_tensor_are_a_problem() -> None:
    data = safetensors_bytes({"w": 4}) + b"\0" * 16
    length = struct.unpack("<Q", data[:8])[0]
    header = parse_safetensors_header(length, data[8 : 8 + length], len(data))
    assert header.problem == (
        "16 bytes after the last tensor's data (a download appended to, or another file's bytes)"
    )


def test_a_missing_shard_named_by_the_index_fails(model_dir: Path, tmp_path: Path) -> None:
    manifest = manifest_of(model_dir, tmp_path)
    (model_dir / SHARD_2).unlink()
    code, out, _ = run("weights", "verify", model_dir, "--manifest", manifest)
    assert code == 1
    assert f"MISSING: {SHARD_2}: missing: {INDEX} names it for 1 tensors" in out


def test_a_shard_the_index_does_not_name_fails(model_dir: Path) -> None:
    (model_dir / "model-00003-of-00003.safetensors").write_bytes(safetensors_bytes({"x": 2}))
    code, out, _ = run("weights", "verify", model_dir)
    assert code == 1
    assert f"DAMAGED: model-00003-of-00003.safetensors: not in {INDEX}" in out


def test_a_tensor_the_index_puts_in_a_shard_that_lacks_it_fails(model_dir: Path) -> None:
    (model_dir / SHARD_2).write_bytes(safetensors_bytes({"other": 48}))
    code, out, _ = run("weights", "verify", model_dir)
    assert code == 1
    assert f"DAMAGED: {SHARD_2}: lacks 1 tensors {INDEX} puts in it: head" in out


def test_a_file_the_manifest_lists_that_is_gone_fails(model_dir: Path, tmp_path: Path) -> None:
    manifest = manifest_of(model_dir, tmp_path)
    (model_dir / "tokenizer.json").unlink()
    code, out, _ = run("weights", "verify", model_dir, "--manifest", manifest)
    assert code == 1
    assert "MISSING: tokenizer.json: missing: the manifest lists it" in out
    listed = hashlib.sha256(model_files()["tokenizer.json"]).hexdigest()
    assert f"  expected {listed} (sha256, manifest)\n  actual   (no file)\n" in out


def test_files_not_in_the_manifest_are_a_warning(model_dir: Path, tmp_path: Path) -> None:
    manifest = manifest_of(model_dir, tmp_path)
    (model_dir / "generation_config.json").write_text("{}")
    code, out, err = run("weights", "verify", model_dir, "--manifest", manifest)
    assert code == 0, out
    assert "1 model files are not in the manifest (hashed, not compared)" in err


def test_a_manifest_of_every_file_checks_the_other_files_too(
    model_dir: Path, tmp_path: Path
) -> None:
    """`sha256sum *` lists README.md too: it is compared, not reported missing."""
    readme = hashlib.sha256((model_dir / "README.md").read_bytes()).hexdigest()
    manifest = manifest_of(model_dir, tmp_path)
    manifest.write_text(manifest.read_text() + f"{readme}  README.md\n")
    code, out, _ = run("weights", "verify", model_dir, "--manifest", manifest)
    assert code == 0 and "ok: 6 files verified" in out
    flip_byte(model_dir / "README.md", 0)
    code, out, _ = run("weights", "verify", model_dir, "--manifest", manifest)
    assert code == 1 and "MISMATCH: README.md" in out


def test_a_dangling_link_is_missing(model_dir: Path) -> None:
    (model_dir / "tokenizer_config.json").symlink_to("gone.json")
    code, out, _ = run("weights", "verify", model_dir)
    assert code == 1
    assert "MISSING: tokenizer_config.json: missing: a link to a file that is not there" in out


# --- bad input: exit 2, one line -------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (f"{'a' * 64}  ../outside.safetensors", "line 1: '../outside.safetensors' is outside"),
        (f"{'a' * 64}  /etc/passwd", "line 1: '/etc/passwd' is not a path inside MODEL_DIR"),
        (f"{'a' * 64}  sub/../../x", "is outside MODEL_DIR"),
        ("not a hash line", "line 1: expected 'SHA256  relative/path' (sha256sum format)"),
        (f"{'a' * 63}  config.json", "expected 'SHA256  relative/path'"),
    ],
)
def test_a_bad_manifest_line_is_bad_input(
    model_dir: Path, tmp_path: Path, line: str, says: str
) -> None:
    manifest = tmp_path / "bad.sha256"
    manifest.write_text(f"# comment\n\n{line}\n".replace("line 1", "line 3"))
    code, out, err = run("weights", "verify", model_dir, "--manifest", manifest)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and says.replace("line 1", "line 3") in err


def test_not_a_directory_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    for target in (tmp_path / "file", tmp_path / "absent"):
        code, _, err = run("weights", "verify", target)
        assert code == 2
        assert "not a directory" in err and err.count("\n") == 1


def test_no_reference_reports_the_hashes_and_warns(model_dir: Path) -> None:
    code, out, err = run("weights", "verify", model_dir)
    assert code == 0
    config = hashlib.sha256((model_dir / CONFIG).read_bytes()).hexdigest()
    assert f"{config}  {CONFIG}" in out
    assert "nothing compared: no reference" in out
    assert "warning: nothing was compared" in err


# --- the hub cache ---------------------------------------------------------------------------


def test_a_hub_snapshot_verifies_against_its_blob_names(hub_snapshot: Path) -> None:
    code, out, err = run("weights", "verify", hub_snapshot, "--json")
    assert code == 0, out + err
    report = json.loads(out)
    assert report["reference"] == "hub cache"
    algorithms = {f["path"]: f["algorithm"] for f in report["files"]}
    assert algorithms[SHARD_1] == "sha256" and algorithms[CONFIG] == "git-sha1"
    assert {f["status"] for f in report["files"]} == {"verified"}


def test_a_damaged_blob_is_a_mismatch_against_its_name(hub_snapshot: Path) -> None:
    flip_byte((hub_snapshot / CONFIG).resolve(), 3)
    code, out, _ = run("weights", "verify", hub_snapshot)
    assert code == 1
    blob = (hub_snapshot / CONFIG).resolve().name
    assert f"MISMATCH: {CONFIG}" in out and f"expected {blob} (git-sha1, hub cache)" in out


def test_a_snapshot_link_to_a_missing_blob_is_missing(hub_snapshot: Path) -> None:
    (hub_snapshot / SHARD_1).resolve().unlink()
    code, out, _ = run("weights", "verify", hub_snapshot)
    assert code == 1
    assert f"MISSING: {SHARD_1}" in out


def test_a_manifest_comes_before_the_hub_cache(hub_snapshot: Path, tmp_path: Path) -> None:
    manifest = manifest_of(hub_snapshot, tmp_path)
    code, out, _ = run("weights", "verify", hub_snapshot, "--manifest", manifest)
    assert code == 0
    assert "verified against the manifest" in out


# --- a file changing while it is hashed ------------------------------------------------------


def test_a_file_changed_while_hashed_is_not_trusted(model_dir: Path) -> None:
    def grow(path: Path) -> None:  # between the last read and the second look
        if path.name == CONFIG:
            with path.open("ab") as handle:
                handle.write(b" ")

    result = verify_model(model_dir, {}, after_read=grow)
    changed = [r for r in result.results if r.status.value == "changed"]
    assert [r.path for r in changed] == [CONFIG]
    assert changed[0].sha256 is None and "not trusted" in changed[0].detail
    assert not result.ok


def test_a_file_replaced_while_hashed_is_not_trusted(model_dir: Path) -> None:
    def replace(path: Path) -> None:
        if path.name == CONFIG:
            fresh = path.with_name("fresh")
            fresh.write_bytes(path.read_bytes())
            os.replace(fresh, path)

    result = verify_model(model_dir, {}, after_read=replace)
    changed = {r.path: r.detail for r in result.results if r.status.value == "changed"}
    replaced = "it was replaced while it was hashed: not trusted (is a download still writing it?)"
    assert changed == {CONFIG: replaced}


# --- the state file --------------------------------------------------------------------------


def test_verify_records_its_result_for_doctor(model_dir: Path, tmp_path: Path) -> None:
    manifest = manifest_of(model_dir, tmp_path)
    state = tmp_path / "state" / "weights.json"
    (tmp_path / "state").mkdir()
    code, *_ = run("weights", "verify", model_dir, "--manifest", manifest, "--state-file", state)
    assert code == 0
    record = read_state(state)
    assert record is not None and record["ok"] is True
    assert record["manifest"] == str(manifest) and record["failed"] == []
    flip_byte(model_dir / CONFIG, 0)
    run("weights", "verify", model_dir, "--manifest", manifest, "--state-file", state)
    record = read_state(state)
    assert record is not None and record["ok"] is False
    assert record["failed"] == [f"{CONFIG}: mismatch"]


def test_jobs_is_bounded(model_dir: Path) -> None:
    for bad in ("0", "65", "x"):
        code, _, err = run("weights", "verify", model_dir, "--jobs", bad)
        assert code == 2 and "--jobs" in err


def test_manifest_refuses_a_damaged_download(model_dir: Path) -> None:
    shard = model_dir / SHARD_1
    shard.write_bytes(shard.read_bytes()[:-1])
    code, out, err = run("weights", "manifest", model_dir)
    assert code == 1 and out == ""
    assert "no manifest written" in err


# --- the manifest format, hostile --------------------------------------------------------------

# str.splitlines ends a line at each of these; sha256sum escapes only a backslash and "\n".
LINE_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
NAMES = st.lists(
    st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00" + LINE_BREAKS),
        min_size=1,
        max_size=20,
    ).filter(lambda n: n not in (".", "..") and n.strip() == n and not n.startswith("#")),
    min_size=1,
    max_size=5,
    unique=True,
)


@pytest.mark.slow
@settings(max_examples=examples(200), deadline=None)
@given(NAMES, st.data())
def test_a_written_manifest_reads_back(names: list[str], data: st.DataObject) -> None:
    digest = st.text("0123456789abcdef", min_size=64, max_size=64)
    hashes = {name: data.draw(digest) for name in names}
    assert parse_manifest(format_manifest(hashes)) == hashes


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=300))
def test_any_manifest_text_parses_or_is_refused_with_a_line_number(text: str) -> None:
    try:
        hashes = parse_manifest(text)
    except ManifestError as error:
        assert str(error).startswith("line ")
        return
    for path in hashes:
        assert not path.startswith("/") and ".." not in path.split("/")
