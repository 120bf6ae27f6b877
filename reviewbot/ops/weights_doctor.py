"""`reviewbot doctor`'s weights check: when the vLLM unit's last weights verification ran and
what it found (its state file), or, with ``--verify-weights``, that verification run again.

Owns: turning the state file or a fresh verification into doctor checks, with their fixes.
Must not: hash or read the model directory itself (`reviewbot.ops.weights_files`), or take
part in ``doctor --model-only`` unless asked: the health timer runs that every 30 s, and a
failed verification must stop a start, not restart a serving model.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reviewbot.config import Settings
from reviewbot.errors import BadInputError
from reviewbot.ops.doctor import Check, Status
from reviewbot.ops.weights import Reference
from reviewbot.ops.weights_files import read_manifest, read_state, verify_model, write_state

__all__ = ["WEIGHTS_CHECK", "recorded_check", "weights_checks"]

WEIGHTS_CHECK = "weights"
SHOWN_FAILURES = 5
REDOWNLOAD_FIX = (
    "download the files named again (huggingface-cli download MODEL, or copy them anew), "
    "then `reviewbot doctor --verify-weights` or restart the vLLM unit (docs/weights.md)"
)
NO_REFERENCE_FIX = (
    "write a manifest once from a trusted download (reviewbot weights manifest DIR) and set "
    "REVIEWBOT_WEIGHTS_MANIFEST in the profile's env file (docs/weights.md)"
)
NOT_RECORDED_FIX = (
    "restart the vLLM unit (its ExecStartPre records it) or run "
    "`reviewbot doctor --verify-weights` (docs/weights.md)"
)
NOTHING_TO_VERIFY_FIX = (
    "record a first run: restart the vLLM unit with REVIEWBOT_WEIGHTS_MANIFEST in its profile, "
    "or reviewbot weights verify DIR --manifest FILE --state-file PATH (docs/weights.md)"
)


def _age(finished_at: str, now: datetime) -> str:
    try:
        finished = datetime.fromisoformat(finished_at)
    except (TypeError, ValueError):
        return f"at {finished_at!r}"
    if finished.tzinfo is None:  # `weights verify` writes UTC with its offset: a hand-made one
        return f"at {finished_at!r} (no time zone)"
    hours = (now - finished).total_seconds() / 3600
    return f"{finished_at} ({hours:.1f} h ago)"


def recorded_check(state: dict[str, Any], now: datetime) -> Check:
    """The check a recorded verification gives: its time, its verdict and the files it named."""
    when = _age(str(state.get("finished_at")), now)
    where = state.get("model_dir", "?")
    summary = state.get("summary", "")
    if not state["ok"]:
        failed = [str(f) for f in state.get("failed") or []][:SHOWN_FAILURES]
        detail = f"last verified {when} of {where}: {summary}: {'; '.join(failed)}"
        return Check(WEIGHTS_CHECK, Status.FAIL, detail, REDOWNLOAD_FIX)
    if state.get("reference") == Reference.NONE.value:
        detail = f"last run {when} of {where}: {summary}"
        return Check(WEIGHTS_CHECK, Status.WARN, detail, NO_REFERENCE_FIX)
    return Check(WEIGHTS_CHECK, Status.OK, f"last verified {when} of {where}: {summary}")


def _verify_now(settings: Settings, state: dict[str, Any] | None, now: datetime) -> Check:
    model_dir, manifest = (state or {}).get("model_dir"), (state or {}).get("manifest")
    if not model_dir:
        detail = f"--verify-weights: no verification recorded in {settings.weights_state_file}"
        return Check(WEIGHTS_CHECK, Status.FAIL, detail, NOTHING_TO_VERIFY_FIX)
    manifest_path = Path(manifest) if manifest else None
    try:
        hashes = read_manifest(manifest_path) if manifest_path is not None else None
        result = verify_model(Path(model_dir), hashes)
    except BadInputError as error:
        return Check(WEIGHTS_CHECK, Status.FAIL, str(error), NOTHING_TO_VERIFY_FIX)
    unrecorded = ""
    try:
        write_state(Path(settings.weights_state_file), Path(model_dir), manifest_path, result)
    except OSError as error:
        unrecorded = f" (not recorded in {settings.weights_state_file}: {error.strerror})"
    recorded = {
        "ok": result.ok,
        "finished_at": now.isoformat(timespec="seconds"),
        "model_dir": model_dir,
        "reference": result.reference.value,
        "summary": result.summary() + unrecorded,
        "failed": [f"{r.path}: {r.status.value} {r.detail}".strip() for r in result.failed],
    }
    return recorded_check(recorded, now)


def weights_checks(settings: Settings, verify: bool, now: datetime | None = None) -> list[Check]:
    """The weights check: the recorded verification (nothing when none was ever recorded), or
    with ``verify`` that verification run again now (same directory and manifest), recorded.
    A record that cannot be used warns, and fails with ``verify`` (nothing to run again)."""
    moment = now or datetime.now(UTC)
    path = Path(settings.weights_state_file)
    try:
        state = read_state(path)
    except ValueError as error:
        if verify:  # nothing it can be run again from: a failure, as with no record at all
            detail = f"--verify-weights: {error}"
            return [Check(WEIGHTS_CHECK, Status.FAIL, detail, NOTHING_TO_VERIFY_FIX)]
        return [Check(WEIGHTS_CHECK, Status.WARN, str(error), NOT_RECORDED_FIX)]
    if verify:
        return [_verify_now(settings, state, moment)]
    if state is None:
        return []  # never recorded: no weights check on this host (the unit writes one)
    return [recorded_check(state, moment)]
