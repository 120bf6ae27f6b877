"""How fast `reviewbot weights verify` hashes, next to ``sha256sum`` on the same files.

Run: ``.venv/bin/python -m tests.bench.bench_weights [--size-mb 1024] [--shards 8]
[--jobs 1,2,4,8] [--dir DIR]``

It writes a generated model (random bytes, so nothing is sparse or compressible) of
``--size-mb`` MB twice in DIR (default: a temporary folder): as one safetensors file and as
``--shards`` shards with their index. Then, in the same run, on the same files: the single file
by `hash_file` and by ``sha256sum``; the shards by `verify_model` at each ``--jobs`` and by
``sha256sum`` over all of them (one process, one file after another, as a person runs it). Each
figure is the best of ``--runs`` after one warm-up read, so the files come from the page
cache: the figures are the hashing's pace, the ceiling of what a disk can feed. The consistency
check alone (headers and index, no hashing) is timed too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from reviewbot.ops.weights_files import (
    consistency_problems,
    hash_file,
    list_model_files,
    verify_model,
)

MB = 1_000_000
WRITE_CHUNK = 16 * 1024 * 1024


def write_shard(path: Path, size: int, name: str) -> None:
    """A safetensors file of one U8 tensor filling ``size`` bytes of random data."""

    def header(data_bytes: int) -> bytes:
        tensor = {"dtype": "U8", "shape": [data_bytes], "data_offsets": [0, data_bytes]}
        return json.dumps({name: tensor}).encode()

    data_bytes = size - 8 - len(header(size))
    encoded = header(data_bytes)
    encoded += b" " * (size - 8 - data_bytes - len(encoded))  # the file is exactly ``size``
    with path.open("wb") as handle:
        handle.write(struct.pack("<Q", len(encoded)) + encoded)
        left = data_bytes
        while left:
            chunk = min(left, WRITE_CHUNK)
            handle.write(os.urandom(chunk))
            left -= chunk


def make_model(folder: Path, size: int, shards: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    weight_map = {}
    for number in range(1, shards + 1):
        name = f"model-{number:05d}-of-{shards:05d}.safetensors"
        write_shard(folder / name, size // shards, f"layer.{number}")
        weight_map[f"layer.{number}"] = name
    if shards > 1:
        index = {"metadata": {}, "weight_map": weight_map}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))


def best_s(runs: int, action: Callable[[], object]) -> float:
    action()  # warm-up: the page cache holds the files after this
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def sha256sum(files: list[Path]) -> None:
    subprocess.run(["sha256sum", *map(str, files)], check=True, capture_output=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--jobs", default="1,2,4,8")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args(argv)
    if shutil.which("sha256sum") is None:
        parser.error("sha256sum is not installed")
    size = args.size_mb * MB
    root = Path(tempfile.mkdtemp(prefix="bench-weights-", dir=args.dir))
    try:
        one, many = root / "one", root / "shards"
        make_model(one, size, 1)
        make_model(many, size, args.shards)
        single = next(one.iterdir())
        print(f"{os.cpu_count()} CPUs; {args.size_mb} MB generated in {root}; best of {args.runs}")
        ours = best_s(args.runs, lambda: hash_file(single))
        theirs = best_s(args.runs, lambda: sha256sum([single]))
        print(
            f"one file:  hash_file {size / MB / ours:7.0f} MB/s   sha256sum "
            f"{size / MB / theirs:7.0f} MB/s   ratio {theirs / ours:.2f}"
        )
        files, _ = list_model_files(many)
        assert verify_model(many).ok, "the generated model does not pass its own check"
        check = best_s(args.runs, lambda: consistency_problems(files))
        print(f"{args.shards} shards: consistency check alone {check * 1000:.1f} ms")
        shard_files = sorted(p for p in many.iterdir() if p.suffix == ".safetensors")
        theirs = best_s(args.runs, lambda: sha256sum(shard_files))
        print(f"{args.shards} shards: sha256sum (one after another) {size / MB / theirs:7.0f} MB/s")
        for jobs in (int(j) for j in args.jobs.split(",")):
            ours = best_s(args.runs, lambda jobs=jobs: verify_model(many, workers=jobs))
            print(
                f"{args.shards} shards: verify --jobs {jobs:<2} {size / MB / ours:7.0f} MB/s   "
                f"ratio to sha256sum {theirs / ours:.2f}"
            )
    finally:
        shutil.rmtree(root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
