"""What a load test sends (`reviewbot loadtest`): its inputs and their review plans.

Owns: reading the inputs (every diff file of a folder, a range of a local repository, or a
synthetic diff of a given size), the chunk budget each gets on the model server
(`reviewbot.review.budget_for`, as a review would), and the planned reviews the driver
replays. Bad input is a `BadInputError` (one line, exit 2).

Must not: send the load (`reviewbot.ops.loadtest_driver`), judge it (`reviewbot.ops.loadtest`)
or print.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reviewbot.chunking import Budget, Plan
from reviewbot.diff import parse_git_diff
from reviewbot.errors import BadInputError
from reviewbot.model import LLMClient
from reviewbot.ops.loadtest import ReviewInput, planned_reviews, synthetic_input
from reviewbot.repo.localdiff import load_diff
from reviewbot.review import ReviewOptions, budget_for
from reviewbot.tokens import TokenCounter

__all__ = ["DEFAULT_SYNTHETIC_TOKENS", "LoadInputs", "PlannedLoad", "plan_load", "read_inputs"]

DEFAULT_SYNTHETIC_TOKENS = 4096
DIFF_SUFFIXES = (".diff", ".patch")


@dataclass(frozen=True)
class LoadInputs:
    """Where the load's diffs come from: at most one of the three (none: a synthetic diff of
    DEFAULT_SYNTHETIC_TOKENS)."""

    diffs_dir: Path | None = None
    git_range: str | None = None
    repo: str | Path = "."
    synthetic_tokens: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        given = [
            x for x in (self.diffs_dir, self.git_range, self.synthetic_tokens) if x is not None
        ]
        if len(given) > 1:
            raise BadInputError("give at most one of --diffs DIR, --git BASE..HEAD, --synthetic N")


@dataclass(frozen=True)
class PlannedLoad:
    """The reviews to replay, each input with its plan."""

    planned: list[tuple[ReviewInput, Plan]]
    label: str  # the input's name, or "N diffs"

    @property
    def chunks_per_review(self) -> float:
        return sum(len(p.chunks) for _, p in self.planned) / len(self.planned)


def read_inputs(
    inputs: LoadInputs, counter: TokenCounter, with_contents: bool
) -> list[ReviewInput]:
    """The diffs to replay; ``with_contents`` reads the head files of ``--git`` too."""
    if inputs.diffs_dir is not None:
        return _diff_files(Path(inputs.diffs_dir))
    if inputs.git_range is not None:
        loaded = load_diff(None, inputs.git_range, inputs.repo, with_contents)
        return [ReviewInput(loaded.label, loaded.files, loaded.contents)]
    tokens = (
        DEFAULT_SYNTHETIC_TOKENS if inputs.synthetic_tokens is None else inputs.synthetic_tokens
    )
    if tokens < 1:
        raise BadInputError(f"--synthetic must be at least 1 token, got {tokens}")
    return [synthetic_input(tokens, counter, inputs.seed)]


def _diff_files(directory: Path) -> list[ReviewInput]:
    if not directory.is_dir():
        raise BadInputError(f"--diffs {directory}: not a directory")
    paths = sorted(p for p in directory.iterdir() if p.suffix in DIFF_SUFFIXES and p.is_file())
    if not paths:
        raise BadInputError(f"--diffs {directory}: no *.diff or *.patch file in it")
    inputs = []
    for path in paths:
        try:
            files = parse_git_diff(path.read_bytes())
        except (OSError, ValueError) as error:
            raise BadInputError(f"{path}: {error}") from None
        inputs.append(ReviewInput(path.name, files))
    return inputs


def plan_load(
    inputs: LoadInputs,
    model: LLMClient,
    counter: TokenCounter,
    options: ReviewOptions,
    max_model_len: int,
) -> PlannedLoad:
    """Read the inputs and cut each into the chunks a review on this server would send.

    A synthetic diff larger than the context could hold is refused before it is built (its
    size is only known to fit once it is built and its prompt is counted, which is checked
    then)."""
    if inputs.synthetic_tokens is not None:
        _check_synthetic(
            inputs.synthetic_tokens,
            _room_without_prompt(options, counter, max_model_len),
            max_model_len,
        )
    read = read_inputs(inputs, counter, options.plan_options.context_lines > 0)
    budgets = _budgets(read, model, counter, options, max_model_len)
    if inputs.synthetic_tokens is not None:
        _check_synthetic(inputs.synthetic_tokens, budgets[0].available, max_model_len)
    planned = planned_reviews(read, budgets, counter, options.plan_options)
    if not planned:
        raise BadInputError("nothing to review in the input (every file is skipped)")
    label = read[0].label if len(read) == 1 else f"{len(read)} diffs"
    return PlannedLoad(planned, label)


def _room_without_prompt(options: ReviewOptions, counter: TokenCounter, max_model_len: int) -> int:
    """What a chunk's diff could use if the prompt cost nothing: more never fits."""
    empty = Budget(
        max_model_len=max_model_len,
        output_reserve=options.max_output_tokens,
        overhead=0,
        headroom=counter.headroom,
    )
    return empty.available


def _check_synthetic(tokens: int, available: int, max_model_len: int) -> None:
    if tokens > available:
        raise BadInputError(
            f"--synthetic {tokens} is more than the {available} tokens a chunk's diff may use "
            f"on this server (context {max_model_len})"
        )


def _budgets(
    inputs: Sequence[ReviewInput],
    model: LLMClient,
    counter: TokenCounter,
    options: ReviewOptions,
    max_model_len: int,
) -> list[Budget]:
    return [
        budget_for(model, counter, item.context(0, options.plan_options), options, max_model_len)
        for item in inputs
    ]
