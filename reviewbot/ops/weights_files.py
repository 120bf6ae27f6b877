"""Reading a model directory for `reviewbot weights`: its files, their safetensors headers,
their hashes (in parallel, bounded), the hub cache's links, and the verification's state file.

A file is hashed from one open descriptor; it is trusted only when its size, modification time
and inode are the same after the last byte as before the first, both on the descriptor and by
its name (a download still writing, a file replaced under the same name), and when as many
bytes were read as it had. A file that is not a regular file (a FIFO, a device, a socket) is
found by ``stat`` and never opened, and every open is non-blocking and checked on its
descriptor: a FIFO never holds a reader. ``after_read`` runs between the last read and that
second look (the tests change a file there).

Owns: every read of the model directory and the state file's reading and writing. Must not:
decide what a file should hash to or what a header means (`reviewbot.ops.weights`), print or
exit.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from reviewbot.errors import BadInputError
from reviewbot.input_files import InputFileRefused, file_kind, read_input_file
from reviewbot.ops.weights import (
    GIT_SHA1,
    HEADER_LENGTH_BYTES,
    INDEX_FILE,
    MAX_HEADER_BYTES,
    NUL,
    Expected,
    FileResult,
    FileStatus,
    ManifestError,
    Reference,
    ShardHeader,
    Verdict,
    blob_expectation,
    header_length,
    index_problems,
    is_model_file,
    parse_index,
    parse_manifest,
    parse_safetensors_header,
    verdict,
)

__all__ = [
    "DEFAULT_HASH_WORKERS",
    "MAX_HASH_WORKERS",
    "MAX_MANIFEST_BYTES",
    "HashOutcome",
    "ModelFile",
    "hash_file",
    "hash_model",
    "links_out_warning",
    "list_model_files",
    "read_manifest",
    "read_state",
    "state_file_problem",
    "verify_model",
    "write_state",
]

# Four readers keep an NVMe disk busy (hashlib lets go of the GIL while it hashes) and do not
# thrash a spinning one much; --jobs says otherwise (tests/bench/bench_weights.py measures).
DEFAULT_HASH_WORKERS = 4
MAX_HASH_WORKERS = 64
READ_CHUNK_BYTES = 8 * 1024 * 1024  # per worker in memory at once
MAX_MANIFEST_BYTES = 16 * 1024 * 1024  # a line per file: far more than any model has
MAX_INDEX_BYTES = 64 * 1024 * 1024  # the largest real indexes are a few MB
MAX_STATE_BYTES = 1024 * 1024
RECORDED_PATHS = ("model_dir", "manifest")  # what `doctor --verify-weights` opens again
SAFETENSORS_SUFFIX = ".safetensors"
HUB_SNAPSHOTS = "snapshots"
HUB_BLOBS = "blobs"
SHOWN_LINKS = 5  # links out of the model folder named in the warning

Progress = Callable[[int], None]
AfterRead = Callable[[Path], None]


@dataclass(frozen=True)
class ModelFile:
    """A file of the model directory: its path relative to it, its size, and what its
    hub-cache blob promises (``expected``), ``dangling`` when its link leads nowhere;
    ``not_opened`` (REFUSED, UNREADABLE) when it is never to be opened, ``reason`` why."""

    relative: str
    path: Path
    size: int
    expected: Expected | None = None
    dangling: bool = False
    not_opened: FileStatus | None = None
    reason: str = ""

    @property
    def readable(self) -> bool:
        """Whether it is a regular file that is there: one that may be opened."""
        return not self.dangling and self.not_opened is None


@dataclass(frozen=True)
class HashOutcome:
    """A file's SHA-256 (and its git blob id when asked), or why it cannot be trusted."""

    sha256: str | None
    git_sha1: str | None = None
    changed: str | None = None  # what changed while it was read
    error: str | None = None


# --- the directory ---------------------------------------------------------------------------


def _hub_blobs(model_dir: Path) -> Path | None:
    """The blobs folder when ``model_dir`` is ``models--org--name/snapshots/<rev>``."""
    absolute = model_dir.absolute()
    repository = absolute.parent.parent
    if absolute.parent.name == HUB_SNAPSHOTS and (repository / HUB_BLOBS).is_dir():
        return (repository / HUB_BLOBS).resolve()
    return None


def _blob_expected(path: Path, blobs: Path | None) -> Expected | None:
    """What a snapshot's link promises when it leads into the hub cache's blobs folder."""
    if blobs is None or not path.is_symlink():
        return None
    target = Path(os.path.realpath(path))  # never raises, not even for a loop of links
    return blob_expectation(target.name) if target.parent == blobs else None


def _found(path: Path, relative: str, blobs: Path | None) -> ModelFile:
    """What ``path`` is, from ``stat`` alone (never opened here): a regular file, a link to
    nothing, or a file never to be opened (a FIFO blocks its reader, a device never ends)."""
    expected = _blob_expected(path, blobs)
    try:
        found = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return ModelFile(relative, path, 0, expected, dangling=True)
    except OSError as error:  # a loop of links, a folder without permission
        reason = f"cannot look at it: {error.strerror}"
        return ModelFile(
            relative, path, 0, expected, not_opened=FileStatus.UNREADABLE, reason=reason
        )
    if not stat.S_ISREG(found.st_mode):
        reason = f"not a regular file ({file_kind(found.st_mode)}): never opened"
        return ModelFile(relative, path, 0, expected, not_opened=FileStatus.REFUSED, reason=reason)
    return ModelFile(relative, path, found.st_size, expected)


def _link_homes(model_dir: Path) -> tuple[list[Path], str]:
    """Where the model's files may lead without a word, and how the warning names it: a hub
    snapshot's ``models--org--name`` folder and its blobs (its files are links to
    ``../../blobs/<id>``), else MODEL_DIR itself."""
    blobs = _hub_blobs(model_dir)
    if blobs is None:
        return [Path(os.path.realpath(model_dir))], "MODEL_DIR"
    repository = Path(os.path.realpath(model_dir.absolute().parent.parent))
    return [repository, blobs], f"the hub cache's {repository.name} folder"


def links_out_warning(model_dir: Path, files: Mapping[str, ModelFile]) -> str | None:
    """The warning that names each model file whose link (or linked folder) leads out of
    MODEL_DIR, or of the hub cache's repository folder for a snapshot, with where it leads;
    None when none does. Its bytes are checked where they lead, so it is not a failure."""
    homes, home = _link_homes(model_dir)
    leaving = []
    for relative, found in sorted(files.items()):
        target = Path(os.path.realpath(found.path))
        if found.readable and not any(target.is_relative_to(h) for h in homes):
            leaving.append(f"{relative} -> {target}")
    if not leaving:
        return None
    more = f" and {len(leaving) - SHOWN_LINKS} more" if len(leaving) > SHOWN_LINKS else ""
    return (
        f"links that lead out of {home} (checked where they lead; {home} does not hold them, "
        f"so another copy there can change them): {', '.join(leaving[:SHOWN_LINKS])}{more}"
    )


def _unlistable(error: OSError) -> None:
    raise BadInputError(f"{error.filename}: cannot list: {error.strerror}")


def list_model_files(model_dir: Path) -> tuple[dict[str, ModelFile], bool]:
    """Every model file under ``model_dir`` by relative path (hidden folders such as
    ``.cache`` skipped, linked folders not followed), and whether it is a hub-cache snapshot."""
    blobs = _hub_blobs(model_dir)
    files: dict[str, ModelFile] = {}
    for folder, dirs, names in os.walk(model_dir, onerror=_unlistable):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            path = Path(folder) / name
            relative = path.relative_to(model_dir).as_posix()
            if not is_model_file(relative):
                continue
            files[relative] = _found(path, relative, blobs)
    return files, blobs is not None


def read_manifest(path: Path) -> dict[str, str]:
    """The manifest's hashes; BadInputError (exit 2) names the file and the line."""
    try:
        text = read_input_file(path, MAX_MANIFEST_BYTES).decode("utf-8")
    except (OSError, InputFileRefused) as error:
        reason = error.strerror if isinstance(error, OSError) else str(error)
        raise BadInputError(f"--manifest {path}: {reason}") from None
    except UnicodeDecodeError:
        raise BadInputError(f"--manifest {path}: not UTF-8 text") from None
    try:
        return parse_manifest(text)
    except ManifestError as error:
        raise BadInputError(f"--manifest {path}: {error}") from None


# --- consistency, without hashing --------------------------------------------------------------


class _NotRegularFile(OSError):
    """Opened, and found not to be a regular file: it was replaced since it was listed."""


def _open_regular(path: Path, buffering: int = -1) -> IO[bytes]:
    """``path`` opened for reading when it is a regular file, else _NotRegularFile. The open
    never blocks (a FIFO put in the file's place since it was listed would wait for a writer
    for ever) and what is checked is the open descriptor, so what is checked is what is read."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    handle = os.fdopen(descriptor, "rb", buffering=buffering)
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        handle.close()
        raise _NotRegularFile(errno.EINVAL, f"not a regular file ({file_kind(mode)})")
    return handle


def read_shard_header(path: Path) -> ShardHeader:
    """Check a safetensors file from its first bytes and its size (never the data)."""
    try:
        with _open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            length = header_length(handle.read(HEADER_LENGTH_BYTES))
            wanted = min(length or 0, MAX_HEADER_BYTES, size)
            header = handle.read(wanted) if length is not None else b""
    except OSError as error:
        return ShardHeader(problem=f"cannot read: {error.strerror}")
    return parse_safetensors_header(length, header, size)


def _index_problems(files: Mapping[str, ModelFile], shards: dict[str, ShardHeader]) -> dict:
    problems: dict[str, str] = {}
    for relative, found in files.items():
        if Path(relative).name != INDEX_FILE or not found.readable:
            continue
        try:
            weight_map = parse_index(read_input_file(found.path, MAX_INDEX_BYTES).decode())
        except (OSError, InputFileRefused, UnicodeDecodeError) as error:
            weight_map = f"{INDEX_FILE}: cannot read ({error})"
        if isinstance(weight_map, str):
            problems[relative] = weight_map
            continue
        folder = str(Path(relative).parent)
        in_folder = {k: v for k, v in shards.items() if str(Path(k).parent) == folder}
        present = [k for k, v in files.items() if not v.dangling]
        problems.update(
            index_problems(weight_map, "" if folder == "." else folder, in_folder, present)
        )
    return problems


def consistency_problems(files: Mapping[str, ModelFile]) -> dict[str, str]:
    """``{relative path: problem}`` from the headers and the indexes alone: truncated or bad
    shards, shards an index names that are missing, tensors not where the index says."""
    shards = {
        relative: read_shard_header(found.path)
        for relative, found in files.items()
        if relative.endswith(SAFETENSORS_SUFFIX) and found.readable
    }
    problems = {k: v.problem for k, v in shards.items() if v.problem is not None}
    for relative, problem in _index_problems(files, shards).items():
        problems.setdefault(relative, problem)
    return problems


# --- hashing ---------------------------------------------------------------------------------


def _identity(found: os.stat_result) -> tuple[int, int, int, int]:
    return (found.st_size, found.st_mtime_ns, found.st_ino, found.st_dev)


def hash_file(
    path: Path,
    *,
    git_blob: bool = False,
    on_bytes: Progress | None = None,
    after_read: AfterRead | None = None,
) -> HashOutcome:
    """SHA-256 of ``path`` (and its git blob id with ``git_blob``), read once; a file that
    changed while it was read is reported (``changed``), never given a hash."""
    try:
        with _open_regular(path, buffering=0) as handle:
            before = os.fstat(handle.fileno())
            sha256 = hashlib.sha256()
            sha1 = hashlib.sha1(f"blob {before.st_size}\0".encode()) if git_blob else None
            read = 0
            while chunk := handle.read(READ_CHUNK_BYTES):
                sha256.update(chunk)
                if sha1 is not None:
                    sha1.update(chunk)
                read += len(chunk)
                if on_bytes is not None:
                    on_bytes(len(chunk))
            if after_read is not None:
                after_read(path)
            after_open, after_name = os.fstat(handle.fileno()), path.stat()
    except OSError as error:
        return HashOutcome(None, error=f"cannot read: {error.strerror}")
    if read != before.st_size or _identity(after_open) != _identity(before):
        return HashOutcome(None, changed="it changed while it was hashed")
    if _identity(after_name) != _identity(before):
        return HashOutcome(None, changed="it was replaced while it was hashed")
    return HashOutcome(sha256.hexdigest(), sha1.hexdigest() if sha1 is not None else None)


def _result(found: ModelFile, expected: Expected | None, outcome: HashOutcome) -> FileResult:
    if outcome.error is not None:
        return FileResult(found.relative, FileStatus.UNREADABLE, found.size, detail=outcome.error)
    if outcome.changed is not None:
        detail = f"{outcome.changed}: not trusted (is a download still writing it?)"
        return FileResult(found.relative, FileStatus.CHANGED, found.size, detail=detail)
    if expected is None:
        return FileResult(found.relative, FileStatus.UNCOMPARED, found.size, outcome.sha256)
    actual = outcome.git_sha1 if expected.algorithm == GIT_SHA1 else outcome.sha256
    status = FileStatus.VERIFIED if actual == expected.digest else FileStatus.MISMATCH
    detail = "" if status is FileStatus.VERIFIED else f"{expected.algorithm} differs"
    return FileResult(found.relative, status, found.size, outcome.sha256, expected, actual, detail)


def hash_model(
    jobs: Mapping[str, tuple[ModelFile, Expected | None]],
    workers: int = DEFAULT_HASH_WORKERS,
    on_bytes: Progress | None = None,
    after_read: AfterRead | None = None,
) -> list[FileResult]:
    """Hash each file (at most ``workers`` at once, largest first so the last one to finish
    is a small one) and compare it with what is expected of it."""

    def one(item: tuple[ModelFile, Expected | None]) -> FileResult:
        found, expected = item
        git_blob = expected is not None and expected.algorithm == GIT_SHA1
        outcome = hash_file(found.path, git_blob=git_blob, on_bytes=on_bytes, after_read=after_read)
        return _result(found, expected, outcome)

    ordered = sorted(jobs.values(), key=lambda item: -item[0].size)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="weights-hash") as pool:
        return list(pool.map(one, ordered))


# --- the verification ------------------------------------------------------------------------


def _expectations(
    files: Mapping[str, ModelFile], manifest: Mapping[str, str] | None, in_hub: bool
) -> tuple[Reference, dict[str, Expected | None], list[str]]:
    warnings: list[str] = []
    if manifest is not None:
        wanted: dict[str, Expected | None] = {k: Expected(v) for k, v in manifest.items()}
        extra = sorted(set(files) - set(manifest))
        if extra:
            warnings.append(
                f"{len(extra)} model files are not in the manifest (hashed, not compared): "
                + ", ".join(extra[:5])
                + (" ..." if len(extra) > 5 else "")
            )
        return Reference.MANIFEST, {**dict.fromkeys(files), **wanted}, warnings
    if in_hub:
        unrecorded = sorted(k for k, v in files.items() if v.expected is None)
        if unrecorded:
            warnings.append(
                f"{len(unrecorded)} files are not links to the cache's blobs (not compared): "
                + ", ".join(unrecorded[:5])
            )
        return Reference.HUB_CACHE, {k: v.expected for k, v in files.items()}, warnings
    return Reference.NONE, dict.fromkeys(files), warnings


def verify_model(
    model_dir: Path,
    manifest: Mapping[str, str] | None = None,
    *,
    workers: int = DEFAULT_HASH_WORKERS,
    on_total: Callable[[int], None] | None = None,
    on_bytes: Progress | None = None,
    after_read: AfterRead | None = None,
) -> Verdict:
    """Check ``model_dir`` for consistency, then hash what passed and compare it with the
    manifest, else the hub cache's record, else nothing. ``on_total``: the bytes to hash,
    once known (for a progress bar)."""
    if not model_dir.is_dir():
        raise BadInputError(f"{model_dir}: not a directory")
    files, in_hub = list_model_files(model_dir)
    for relative in sorted(set(manifest or ()) - set(files)):  # listed, not a model file name
        found = _found(model_dir / relative, relative, None)
        if not found.dangling:
            files[relative] = found
    if not files and manifest is None:
        raise BadInputError(f"{model_dir}: no model files (*.safetensors, config.json, ...)")
    reference, wanted, warnings = _expectations(files, manifest, in_hub)
    links_out = links_out_warning(model_dir, files)
    if links_out is not None:
        warnings.append(links_out)
    problems = consistency_problems(files)
    results: list[FileResult] = []
    jobs: dict[str, tuple[ModelFile, Expected | None]] = {}
    for relative in sorted({*wanted, *problems}):
        found, expected = files.get(relative), wanted.get(relative)
        if found is None or found.dangling:
            detail = problems.get(relative) or (
                "missing: a link to a file that is not there"
                if found is not None
                else f"missing: the {reference.value} lists it"
            )
            results.append(
                FileResult(relative, FileStatus.MISSING, 0, None, expected, None, detail)
            )
        elif found.not_opened is not None:
            results.append(
                FileResult(relative, found.not_opened, 0, None, expected, None, found.reason)
            )
        elif relative in problems:
            detail = problems[relative]
            results.append(
                FileResult(relative, FileStatus.DAMAGED, found.size, None, expected, None, detail)
            )
        else:
            jobs[relative] = (found, expected)
    if on_total is not None:
        on_total(sum(found.size for found, _ in jobs.values()))
    results.extend(hash_model(jobs, workers, on_bytes, after_read))
    return verdict(reference, results, warnings)


def manifest_hashes(
    model_dir: Path,
    *,
    workers: int = DEFAULT_HASH_WORKERS,
    on_total: Callable[[int], None] | None = None,
    on_bytes: Progress | None = None,
) -> Verdict:
    """What `reviewbot weights manifest` writes: every model file's SHA-256, after the same
    consistency check (a manifest is never written of a damaged download)."""
    return verify_model(model_dir, None, workers=workers, on_total=on_total, on_bytes=on_bytes)


# --- the state file --------------------------------------------------------------------------


def state_file_problem(path: Path) -> str | None:
    """Why the verification could not be recorded in ``path``, else None: a file is made and
    removed in its folder, as write_state makes its own, so a folder that takes no new file
    (/proc, /sys, a read-only disk, no permission) is found before minutes of hashing."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        os.close(descriptor)
        Path(temporary).unlink()
    except OSError as error:
        return f"cannot be written (a new file in {path.parent}: {error.strerror or error})"
    return None


def write_state(path: Path, model_dir: Path, manifest: Path | None, result: Verdict) -> None:
    """Record the verification for `reviewbot doctor`: written whole or not at all."""
    state = {
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "model_dir": str(model_dir.absolute()),
        "manifest": str(manifest.absolute()) if manifest is not None else None,
        "ok": result.ok,
        "reference": result.reference.value,
        "summary": result.summary(),
        "failed": [f"{r.path}: {r.status.value}" for r in result.failed][:20],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(state, handle, indent=2)
            handle.write("\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_state(path: Path) -> dict[str, Any] | None:
    """The last verification's record; None when there is none; ValueError when unusable,
    its message naming the file and why."""
    shown = f"weights state file {path}"
    try:
        text = read_input_file(path, MAX_STATE_BYTES).decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, InputFileRefused, UnicodeDecodeError) as error:
        raise ValueError(f"{shown}: cannot read ({error})") from None
    try:
        state = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{shown}: not JSON ({error})") from None
    except RecursionError:  # json.loads recurses once per level of [ or {
        raise ValueError(f"{shown}: unreadable: JSON nested too deep") from None
    if not isinstance(state, dict) or not isinstance(state.get("ok"), bool):
        raise ValueError(f"{shown}: not a verification record")
    if not isinstance(state.get("failed", []), list):
        raise ValueError(f"{shown}: not a verification record: failed is not a list")
    for key in RECORDED_PATHS:
        problem = _recorded_path_problem(state.get(key))
        if problem is not None:
            raise ValueError(f"{shown}: not a verification record: {key} {problem}")
    return state


def _recorded_path_problem(value: Any) -> str | None:
    """Why a path the record holds cannot name a file (None when absent or fine)."""
    if value is None:
        return None
    if not isinstance(value, str):
        return "is not text"
    if NUL in value:
        return "holds a NUL byte"
    return None
