"""`reviewbot weights verify` and `reviewbot weights manifest`: a model directory's weights
checked against a manifest or the Hugging Face cache's record before vLLM loads them.

Owns: their options, their output (a line per failed file naming the expected and the actual
hash, the hashes when nothing could be compared, a bytes/s progress bar on a terminal) and their
exit codes: 0 all verified (or nothing to compare with: a warning), 1 a file failed (or the
result could not be recorded), 2 bad input.

Must not: hash, parse a manifest or a header itself (`reviewbot.ops.weights_files`,
`reviewbot.ops.weights`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from reviewbot.commands.common import (
    InputDir,
    InputFile,
    Integer,
    OutputPath,
    emit_json,
    json_option,
    one_line_errors,
)
from reviewbot.commands.terminal import console, terminal_text
from reviewbot.errors import EXIT_FAILURE, EXIT_OK, BadInputError
from reviewbot.ops.weights import (
    NO_REFERENCE_WARNING,
    FileStatus,
    Reference,
    Verdict,
    format_manifest,
)
from reviewbot.ops.weights_files import (
    DEFAULT_HASH_WORKERS,
    MAX_HASH_WORKERS,
    MAX_MANIFEST_BYTES,
    manifest_hashes,
    read_manifest,
    state_file_problem,
    verify_model,
    write_state,
)

__all__ = ["weights_group"]

# What a failed file without a hash shows as its actual hash: why there is none.
NOT_HASHED = {
    FileStatus.MISSING: "(no file)",
    FileStatus.DAMAGED: "(not hashed: the consistency check failed)",
    FileStatus.CHANGED: "(not trusted: it changed while hashed)",
    FileStatus.UNREADABLE: "(not readable)",
    FileStatus.REFUSED: "(never opened: not a regular file)",
}

MODEL_DIR = click.argument("model_dir", type=InputDir(), metavar="MODEL_DIR")
JOBS = click.option(
    "--jobs",
    type=Integer(1, MAX_HASH_WORKERS),
    default=DEFAULT_HASH_WORKERS,
    show_default=True,
    metavar="N",
    help="Files hashed at once (more helps a fast NVMe disk, fewer a spinning one).",
)


def _progress(quiet: bool) -> Progress:
    """Bytes hashed, bytes/s and the time left, on stderr and only on a terminal."""
    err = console(stderr=True)
    return Progress(
        TextColumn("hashing"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=quiet or not err.is_terminal,
        transient=True,
    )


def _hashed(quiet: bool, work: Callable[..., Verdict], *args: Any, **kwargs: Any) -> Verdict:
    with _progress(quiet) as progress:
        task = progress.add_task("hashing", total=None)
        return work(
            *args,
            on_total=lambda total: progress.update(task, total=total),
            on_bytes=lambda n: progress.advance(task, n),
            **kwargs,
        )


def _say(message: str) -> None:
    click.echo(f"reviewbot: {terminal_text(message)}", err=True)


def print_verdict(result: Verdict) -> None:
    """Each failed file with what was expected and found; the hashes when nothing was compared."""
    for failed in result.failed:
        line = f"{failed.status.value.upper()}: {failed.path}"
        if failed.detail:
            line += f": {failed.detail}"
        click.echo(terminal_text(line))
        if failed.expected is not None:
            algorithm, source = failed.expected.algorithm, failed.expected.source
            click.echo(f"  expected {failed.expected.digest} ({algorithm}, {source})")
            click.echo(f"  actual   {failed.actual or NOT_HASHED.get(failed.status, '-')}")
    if result.reference is Reference.NONE:
        hashed = {r.path: r.sha256 for r in result.results if r.sha256 is not None}
        click.echo(terminal_text(format_manifest(hashed)), nl=False)
    for warning in result.warnings:
        _say(f"warning: {warning}")
    click.echo(terminal_text(("ok: " if result.ok else "FAILED: ") + result.summary()))


@click.group("weights")
def weights_group() -> None:
    """Check a model's weight files before vLLM loads them (docs/weights.md)."""


@weights_group.command("verify")
@MODEL_DIR
@click.option(
    "--manifest",
    "manifest_path",
    type=InputFile(MAX_MANIFEST_BYTES),
    metavar="FILE",
    help="sha256sum-format hashes (HASH  relative/path) to compare with (default: the "
    "Hugging Face cache's record when MODEL_DIR is a snapshot in it).",
)
@JOBS
@click.option(
    "--state-file",
    type=OutputPath(),
    metavar="PATH",
    help="Also record when this ran and its result here, for `reviewbot doctor`.",
)
@json_option("Print every file's result as JSON.")
@one_line_errors
def verify_command(
    model_dir: Path,
    manifest_path: str | None,
    jobs: int,
    state_file: Path | None,
    as_json: bool,
) -> None:
    """Check every weight, config and tokenizer file of MODEL_DIR: shard headers and the index
    first (a truncated shard is found without hashing), then SHA-256 against the manifest or
    the hub cache. Exit 0 all verified (or no reference: a warning), 1 a file failed (or the
    result could not be recorded in --state-file), 2 bad input (a --state-file that cannot be
    written is found before anything is hashed)."""
    manifest = read_manifest(Path(manifest_path)) if manifest_path is not None else None
    if state_file is not None and (problem := state_file_problem(state_file)) is not None:
        raise BadInputError(f"--state-file {state_file}: {problem}")
    result = _hashed(as_json, verify_model, model_dir, manifest, workers=jobs)
    shown = Path(manifest_path) if manifest_path is not None else None
    unrecorded = _recorded(state_file, model_dir, shown, result)
    if as_json:
        emit_json(result.to_dict())
    else:
        print_verdict(result)
    if unrecorded is not None:
        _say(f"error: --state-file {state_file}: the result was not recorded: {unrecorded}")
        sys.exit(EXIT_FAILURE)
    sys.exit(EXIT_OK if result.ok else EXIT_FAILURE)


def _recorded(
    state_file: Path | None, model_dir: Path, manifest: Path | None, result: Verdict
) -> str | None:
    """Why the result could not be recorded in the state file (checked before the hashing, it
    can still fail: a disk that filled up meanwhile), else None."""
    if state_file is None:
        return None
    try:
        write_state(state_file, model_dir, manifest, result)
    except OSError as error:
        return error.strerror or str(error)
    return None


@weights_group.command("manifest")
@MODEL_DIR
@JOBS
@one_line_errors
def manifest_command(model_dir: Path, jobs: int) -> None:
    """Print a sha256sum-format manifest of MODEL_DIR's model files, after a download you
    trust: `reviewbot weights manifest DIR > weights.sha256`. Exit 1 (and nothing printed)
    when the consistency check fails."""
    result = _hashed(False, manifest_hashes, model_dir, workers=jobs)
    if not result.ok:
        for failed in result.failed:
            _say(f"{failed.status.value}: {failed.path}: {failed.detail}")
        _say(f"error: no manifest written: {result.summary()}")
        sys.exit(EXIT_FAILURE)
    for warning in result.warnings:
        if warning != NO_REFERENCE_WARNING:  # a manifest is written to be the reference
            _say(f"warning: {warning}")
    hashed = {r.path: r.sha256 for r in result.results if r.sha256 is not None}
    click.echo(format_manifest(hashed), nl=False)
