"""What a model directory's weights should be, and what is wrong with them, on plain data.

A model directory (a Hugging Face download: ``*.safetensors`` shards, ``config.json``, the
tokenizer) is judged against a reference, in this order: a manifest in ``sha256sum`` format
(``HASH  relative/path``), or the Hugging Face hub cache's own record when the directory is a
snapshot there (``models--org--name/snapshots/<rev>/<file>`` is a link to
``../../blobs/<id>``: a large file's id is its SHA-256, a small file's its git blob id, the SHA-1
of ``"blob <size>\\0" + data``), or nothing (the hashes are reported, nothing is compared).

Without hashing, the shards are checked for consistency: a safetensors file is an 8-byte
little-endian header length, a JSON header mapping each tensor to ``{dtype, shape,
data_offsets: [begin, end]}`` (offsets counted from the end of the header) and an optional
``__metadata__``, then the data; so a shard cut short is seen from its header and its size
alone. ``model.safetensors.index.json`` names the shard of every tensor: each named shard must
exist and hold the tensors listed for it, and no shard may be left out of it.

Owns: which files count as the model, the manifest format (parse and write), the safetensors
header check, the index's coverage, what a hub-cache blob name promises, and the verdict of a
verification. Must not: read a file or walk a directory (`reviewbot.ops.weights_files` does),
hash, print or exit.
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import PurePosixPath
from typing import Any

__all__ = [
    "GIT_SHA1",
    "HEADER_LENGTH_BYTES",
    "INDEX_FILE",
    "MAX_HEADER_BYTES",
    "NO_REFERENCE_WARNING",
    "NUL",
    "SHA256",
    "Expected",
    "FileResult",
    "FileStatus",
    "ManifestError",
    "Reference",
    "ShardHeader",
    "Verdict",
    "blob_expectation",
    "format_manifest",
    "header_length",
    "index_problems",
    "is_model_file",
    "parse_index",
    "parse_manifest",
    "parse_safetensors_header",
    "verdict",
]

SHA256 = "sha256"
GIT_SHA1 = "git-sha1"  # sha1(b"blob <size>\0" + data): git's id of a file's contents
SHA256_HEX_CHARS = 64
SHA1_HEX_CHARS = 40
HEADER_LENGTH_BYTES = 8  # safetensors: a little-endian unsigned 64-bit header length first
# The safetensors library refuses headers over 100 MB; the largest real ones are a few MB.
MAX_HEADER_BYTES = 100_000_000
INDEX_FILE = "model.safetensors.index.json"
NO_REFERENCE_WARNING = (
    "nothing was compared: give --manifest FILE (sha256sum format) or verify a "
    "snapshot in the Hugging Face cache; the hashes above are not proof of anything"
)
METADATA_KEY = "__metadata__"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")
# The files besides the weights that change what the model computes or reads.
MODEL_SIDE_FILES = frozenset(
    {
        "config.json",
        "generation_config.json",
        "preprocessor_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "tokenizer.model",
        "special_tokens_map.json",
        "added_tokens.json",
        "vocab.json",
        "vocab.txt",
        "merges.txt",
        "chat_template.jinja",
        "chat_template.json",
    }
)
NUL = "\0"  # the one character no file name holds (the system cuts a name there)
INDEX_SUFFIX = ".index.json"  # model.safetensors.index.json, pytorch_model.bin.index.json
# Bytes per element of each safetensors dtype (the library's table); sub-byte types are left out.
DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "F8_E8M0": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "C64": 8,
}
HEX = re.compile(r"[0-9a-fA-F]+")
# sha256sum's line: the hash, a space, then a space (text) or '*' (binary), then the name; a
# leading backslash means the name is escaped (\\ and \n).
MANIFEST_LINE = re.compile(r"(\\?)([0-9a-fA-F]{64}) [ *](.+)")


class ManifestError(ValueError):
    """A manifest that cannot be used (exit 2): the message names the line."""


def is_model_file(relative: str) -> bool:
    """Whether a file of the model directory is hashed: weights, indexes, config, tokenizer."""
    name = PurePosixPath(relative).name
    return name.endswith(WEIGHT_SUFFIXES) or name.endswith(INDEX_SUFFIX) or name in MODEL_SIDE_FILES


# --- the manifest ----------------------------------------------------------------------------


def _unescape(name: str, number: int) -> str:
    out: list[str] = []
    characters = iter(name)
    for character in characters:
        if character != "\\":
            out.append(character)
            continue
        escaped = next(characters, "")
        if escaped not in ("\\", "n"):
            raise ManifestError(f"line {number}: bad escape \\{escaped} in the file name")
        out.append("\\" if escaped == "\\" else "\n")
    return "".join(out)


def _escape(name: str) -> tuple[str, str]:
    if "\\" not in name and "\n" not in name:
        return "", name
    return "\\", name.replace("\\", "\\\\").replace("\n", "\\n")


def _relative(name: str, number: int) -> str:
    """``name`` as a clean relative path inside the model directory, else ManifestError."""
    if NUL in name:
        raise ManifestError(f"line {number}: {name!r} is not a file name: it holds a NUL byte")
    path = PurePosixPath(name)
    if not name or path.is_absolute() or name.startswith("/"):
        raise ManifestError(f"line {number}: {name!r} is not a path inside MODEL_DIR")
    parts = [part for part in path.parts if part != "."]
    if ".." in parts or not parts:
        raise ManifestError(f"line {number}: {name!r} is outside MODEL_DIR")
    return "/".join(parts)


def parse_manifest(text: str) -> dict[str, str]:
    """``{relative path: lower-case SHA-256}`` from ``sha256sum`` output; blank lines and ``#``
    comments are skipped. ManifestError names the first line that cannot be used: not a
    SHA-256 line, a path outside the directory, the same path twice with two hashes."""
    hashes: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.rstrip("\r")
        if not stripped.strip() or stripped.lstrip().startswith("#"):
            continue
        match = MANIFEST_LINE.fullmatch(stripped)
        if match is None:
            shown = stripped if len(stripped) <= 80 else stripped[:77] + "..."
            raise ManifestError(
                f"line {number}: expected 'SHA256  relative/path' (sha256sum format), got {shown!r}"
            )
        escaped, digest, name = match.groups()
        if escaped:
            name = _unescape(name, number)
        relative = _relative(name, number)
        digest = digest.lower()
        if hashes.get(relative, digest) != digest:
            raise ManifestError(f"line {number}: {relative} is listed twice with two hashes")
        hashes[relative] = digest
    return hashes


def format_manifest(hashes: Mapping[str, str]) -> str:
    """``sha256sum`` lines, sorted by path: ``sha256sum -c`` run in MODEL_DIR checks them too."""
    lines = []
    for relative in sorted(hashes):
        prefix, name = _escape(relative)
        lines.append(f"{prefix}{hashes[relative]}  {name}\n")
    return "".join(lines)


# --- the hub cache ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    """What one file's hash must be: ``algorithm`` SHA256 or GIT_SHA1, from ``source``."""

    digest: str
    algorithm: str = SHA256
    source: str = "manifest"


def blob_expectation(blob_name: str) -> Expected | None:
    """What a hub-cache blob's name promises about its contents: a 64-hex name is the file's
    SHA-256 (a large, LFS file), a 40-hex name its git blob id; anything else nothing."""
    if not HEX.fullmatch(blob_name):
        return None
    if len(blob_name) == SHA256_HEX_CHARS:
        return Expected(blob_name.lower(), SHA256, "hub cache")
    if len(blob_name) == SHA1_HEX_CHARS:
        return Expected(blob_name.lower(), GIT_SHA1, "hub cache")
    return None


# --- safetensors -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ShardHeader:
    """What a safetensors header says: its tensor names and where their data ends, or why it
    cannot be used (``problem``)."""

    tensors: frozenset[str] = frozenset()
    problem: str | None = None


def header_length(first_bytes: bytes) -> int | None:
    """The header length a safetensors file starts with, or None when it has fewer bytes."""
    if len(first_bytes) < HEADER_LENGTH_BYTES:
        return None
    (length,) = struct.unpack("<Q", first_bytes[:HEADER_LENGTH_BYTES])
    return int(length)


def _tensor_problem(name: str, entry: Any, data_bytes: int) -> str | None:
    if not isinstance(entry, dict):
        return f"tensor {name!r}: not an object"
    offsets, shape, dtype = entry.get("data_offsets"), entry.get("shape"), entry.get("dtype")
    if not (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(type(x) is int and x >= 0 for x in offsets)
        and offsets[0] <= offsets[1]
    ):
        return f"tensor {name!r}: bad data_offsets {offsets!r}"
    if not (isinstance(shape, list) and all(type(x) is int and x >= 0 for x in shape)):
        return f"tensor {name!r}: bad shape {shape!r}"
    begin, end = offsets
    width = DTYPE_BYTES.get(dtype) if isinstance(dtype, str) else None
    if width is not None and math.prod(shape) * width != end - begin:
        return (
            f"tensor {name!r}: {dtype} {shape} needs {math.prod(shape) * width:,} bytes, "
            f"data_offsets give {end - begin:,}"
        )
    if end > data_bytes:
        return (
            f"truncated: tensor {name!r} ends at byte {end:,} of the data, "
            f"the file holds {data_bytes:,}"
        )
    return None


def _layout_problem(tensors: Mapping[str, Any]) -> str | None:
    """Where the tensors' byte ranges fail to tile the data from its first byte: two that
    overlap (a write that corrupts the other), or bytes between them no tensor holds. The
    safetensors library refuses both; ``tensors`` passed ``_tensor_problem`` already."""
    ordered = sorted((tuple(entry["data_offsets"]), name) for name, entry in tensors.items())
    previous: tuple[str, int, int] | None = None  # the name, begin and end of the one before
    for (begin, end), name in ordered:
        previous_end = previous[2] if previous is not None else 0
        if previous is not None and begin < previous_end:
            earlier, earlier_begin, _ = previous
            return (
                f"overlapping tensors: {earlier!r} (bytes {earlier_begin:,}-{previous_end:,} of "
                f"the data) and {name!r} (bytes {begin:,}-{end:,})"
            )
        if begin > previous_end:
            where = (
                f"between {previous[0]!r} (ends at byte {previous_end:,}) and"
                if previous is not None
                else "before"
            )
            return (
                f"{begin - previous_end:,} bytes no tensor holds: {where} {name!r} "
                f"(begins at byte {begin:,})"
            )
        previous = (name, begin, end)
    return None


def _parsed_header(header: bytes) -> dict[str, Any] | str:
    try:
        parsed = json.loads(header.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        return f"the header is not JSON ({error})"
    if not isinstance(parsed, dict):
        return "the header is not a JSON object"
    return parsed


def parse_safetensors_header(length: int | None, header: bytes, file_size: int) -> ShardHeader:
    """Check a safetensors file from its header length, its header bytes and its size: the
    header fits the file, every tensor's byte range lies in the data, the ranges neither overlap
    nor leave a gap between them, the data ends where the last tensor does (a longer file has
    bytes nothing reads: a resumed download's leftovers)."""
    if length is None:
        return ShardHeader(problem=f"truncated: {file_size} bytes, not even a header length")
    if length > MAX_HEADER_BYTES:
        return ShardHeader(problem=f"header length {length:,} bytes: not a safetensors file")
    if HEADER_LENGTH_BYTES + length > file_size or len(header) < length:
        return ShardHeader(
            problem=f"truncated: the header needs {HEADER_LENGTH_BYTES + length:,} bytes, "
            f"the file holds {file_size:,}"
        )
    parsed = _parsed_header(header[:length])
    if isinstance(parsed, str):
        return ShardHeader(problem=parsed)
    data_bytes = file_size - HEADER_LENGTH_BYTES - length
    tensors = {name: entry for name, entry in parsed.items() if name != METADATA_KEY}
    for name, entry in tensors.items():
        problem = _tensor_problem(name, entry, data_bytes)
        if problem is not None:
            return ShardHeader(problem=problem)
    layout = _layout_problem(tensors)
    if layout is not None:
        return ShardHeader(problem=layout)
    data_end = max((entry["data_offsets"][1] for entry in tensors.values()), default=0)
    if data_end < data_bytes:
        return ShardHeader(
            problem=f"{data_bytes - data_end:,} bytes after the last tensor's data "
            "(a download appended to, or another file's bytes)"
        )
    return ShardHeader(tensors=frozenset(tensors))


# --- the index -------------------------------------------------------------------------------


def _shard_name_problem(name: str) -> str | None:
    """Why an index's shard name cannot name a file in the index's folder, or None."""
    if NUL in name:
        return "it holds a NUL byte"
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        return "outside its folder"
    if not [part for part in path.parts if part != "."]:
        return "not a file name"
    return None


def parse_index(text: str) -> dict[str, str] | str:
    """``{tensor: shard}`` from a ``model.safetensors.index.json``, or why it is unusable: not
    JSON, no weight_map, or a shard named by a path no file of its folder can have (a NUL byte,
    absolute, ``..``)."""
    try:
        parsed = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:
        return f"{INDEX_FILE} is not JSON ({error})"
    weight_map = parsed.get("weight_map") if isinstance(parsed, dict) else None
    if not isinstance(weight_map, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()
    ):
        return f"{INDEX_FILE} has no weight_map of tensor names to shard files"
    for tensor, shard in weight_map.items():
        problem = _shard_name_problem(shard)
        if problem is not None:
            return f"{INDEX_FILE} names {shard!r} for tensor {tensor!r}: {problem}"
    return dict(weight_map)


def index_problems(
    weight_map: Mapping[str, str],
    index_dir: str,
    shards: Mapping[str, ShardHeader],
    present: Iterable[str],
) -> dict[str, str]:
    """``{relative path: problem}``: shards the index names that are not there, tensors it
    lists that their shard does not hold, and safetensors shards next to it it never names.
    ``shards``: the parsed headers by relative path; ``present``: every file found."""
    prefix = f"{index_dir}/" if index_dir else ""
    files = set(present)
    wanted: dict[str, set[str]] = {}
    for tensor, shard in weight_map.items():
        wanted.setdefault(prefix + shard, set()).add(tensor)
    problems: dict[str, str] = {}
    for shard, tensors in sorted(wanted.items()):
        if shard not in files:
            problems[shard] = f"missing: {INDEX_FILE} names it for {len(tensors):,} tensors"
            continue
        header = shards.get(shard)
        if header is None or header.problem is not None:
            continue  # its own problem is reported already
        absent = sorted(tensors - header.tensors)
        if absent:
            shown = ", ".join(absent[:3]) + (" ..." if len(absent) > 3 else "")
            problems[shard] = f"lacks {len(absent):,} tensors {INDEX_FILE} puts in it: {shown}"
    for shard in sorted(shards):
        in_this_dir = str(PurePosixPath(shard).parent) == (index_dir or ".")
        if in_this_dir and shard not in wanted:
            problems[shard] = f"not in {INDEX_FILE} (a shard of another download?)"
    return problems


# --- the verdict -----------------------------------------------------------------------------


class FileStatus(StrEnum):
    VERIFIED = "verified"  # hashed, equal to the reference
    MISMATCH = "mismatch"  # hashed, not equal
    MISSING = "missing"  # the reference or the index names it, it is not there
    DAMAGED = "damaged"  # the consistency check failed (truncated, bad header): not hashed
    CHANGED = "changed"  # it changed while it was hashed: not trusted
    UNREADABLE = "unreadable"
    REFUSED = "refused"  # not a regular file (a FIFO, a device, a socket): never opened
    UNCOMPARED = "uncompared"  # hashed, no reference for it


FAILED_STATUSES = frozenset(
    {
        FileStatus.MISMATCH,
        FileStatus.MISSING,
        FileStatus.DAMAGED,
        FileStatus.CHANGED,
        FileStatus.UNREADABLE,
        FileStatus.REFUSED,
    }
)


class Reference(StrEnum):
    MANIFEST = "manifest"
    HUB_CACHE = "hub cache"
    NONE = "none"


@dataclass(frozen=True)
class FileResult:
    """One file's outcome: its SHA-256 when hashed (``sha256``), what was expected, why not."""

    path: str
    status: FileStatus
    size: int = 0
    sha256: str | None = None
    expected: Expected | None = None
    actual: str | None = None  # the digest compared with ``expected`` (its algorithm)
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "status": self.status.value,
            "size": self.size,
            "sha256": self.sha256,
            "expected": self.expected.digest if self.expected else None,
            "algorithm": self.expected.algorithm if self.expected else None,
            "source": self.expected.source if self.expected else None,
            "actual": self.actual,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Verdict:
    """The whole verification: exit 0 all verified (or nothing to compare with, a warning),
    1 a file failed."""

    reference: Reference
    results: Sequence[FileResult]
    warnings: Sequence[str] = field(default_factory=tuple)

    @property
    def failed(self) -> list[FileResult]:
        return [result for result in self.results if result.status in FAILED_STATUSES]

    @property
    def ok(self) -> bool:
        return not self.failed

    def summary(self) -> str:
        failed, total = len(self.failed), len(self.results)
        hashed = sum(result.size for result in self.results if result.sha256)
        if failed:
            return f"{failed} of {total} files failed"
        if self.reference is Reference.NONE:
            return f"{total} files hashed ({hashed:,} bytes), nothing compared: no reference"
        return f"{total} files verified against the {self.reference.value} ({hashed:,} bytes)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "reference": self.reference.value,
            "summary": self.summary(),
            "warnings": list(self.warnings),
            "files": [result.to_dict() for result in self.results],
        }


def verdict(
    reference: Reference, results: Iterable[FileResult], warnings: Iterable[str] = ()
) -> Verdict:
    """The results sorted by path, with the warning that nothing was compared when so."""
    ordered = sorted(results, key=lambda result: result.path)
    said = list(warnings)
    if reference is Reference.NONE:
        said.append(NO_REFERENCE_WARNING)
    return Verdict(reference, tuple(ordered), tuple(said))
