"""`reviewbot eval --compare`: the same labelled items reviewed under several configurations,
and whether the differences between them are beyond noise.

A **configuration** is a TOML file of settings, in the format of the config file (a
``[reviewbot]`` table or the top level; reviewbot.config reads it), applied on top of the
settings the command runs with. Its name is its ``name`` key when it has one, else the file's
stem (``scope.toml`` is "scope"); names must differ. A configuration may not move the run to
another model server or database (``REFUSED_KEYS``): every configuration is reviewed by the
same server and stored in the same place. Every file is read and checked before any model call.

**Pairs**: every configuration after the first is compared with the first (the baseline); when
there are at most ``ALL_PAIRS_UP_TO`` configurations, every later one is also compared with
every earlier one. For a pair "B vs A" the per-item differences of F1 (B's minus A's) are
summarised by their mean and a **paired bootstrap** interval (:func:`paired_bootstrap`):
``BOOTSTRAP_RESAMPLES`` resamples of the items with replacement, seeded, the percentile
interval of the resampled means at ``CONFIDENCE``. The verdict says "better (worse) beyond
noise" only when the interval excludes 0; otherwise there is no difference beyond noise.

A configuration one of whose items was not reviewed completely (EvalIncompleteError) is
**incomplete**: it is not scored (a chunk not reviewed is never "0 findings"), its other items
are not reviewed, and its pairs say why they were not compared.

Owns: reading and checking the configurations, running the items under each (the review is
handed in), the bootstrap, the pairs and their verdicts, the comparison's JSON document and the
rows it is stored as. Must not: build a model client, print, or write to the database (the
command does).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reviewbot.config import (
    MAX_CONFIG_FILE_BYTES,
    ConfigError,
    Settings,
    settings_values,
    with_values,
)
from reviewbot.errors import BadInputError
from reviewbot.eval import (
    DEFAULT_TOLERANCE,
    EvalIncompleteError,
    EvalItem,
    EvalResult,
    ItemReview,
    ItemScore,
    eval_run_row,
    evaluate,
)
from reviewbot.input_files import InputFileRefused, read_input_file

__all__ = [
    "ALL_PAIRS_UP_TO",
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "CONFIDENCE",
    "REFUSED_KEYS",
    "Configuration",
    "ConfigurationResult",
    "Interval",
    "PairResult",
    "compare",
    "comparison_json",
    "comparison_rows",
    "pair_results",
    "paired_bootstrap",
    "pairs_of",
    "read_configuration",
    "read_configurations",
]

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 20  # fixed: the same results give the same interval on every run
CONFIDENCE = 0.95
ALL_PAIRS_UP_TO = 4  # configurations; beyond it, each is compared with the first only
MIN_CONFIGURATIONS = 2
NAME_KEY = "name"
MAX_NAME_CHARS = 255  # eval_runs.configuration
REFUSED_KEYS = {
    "llm_base_url": "every configuration is reviewed by the same model server (--base-url)",
    "llm_api_key": "every configuration is reviewed by the same model server (--base-url)",
    "database_url": "the comparison is stored in one database (--database-url)",
}


@dataclass(frozen=True)
class Configuration:
    """One configuration: its name, its file, the settings it sets and the settings it gives."""

    name: str
    path: str
    overrides: dict[str, Any]
    settings: Settings


def _read_text(path: Path) -> str:
    source = f"configuration {path}"
    try:
        return read_input_file(path, MAX_CONFIG_FILE_BYTES).decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{source}: no such file") from None
    except InputFileRefused as refused:
        raise ConfigError(f"{source} {refused}: not a settings file") from None
    except IsADirectoryError:
        raise ConfigError(f"{source} is not a regular file (a directory)") from None
    except OSError as error:
        raise ConfigError(f"cannot read {source}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{source} is not UTF-8 text (byte {error.start})") from None


def _name(extras: Mapping[str, Any], path: Path, source: str) -> str:
    name = extras.get(NAME_KEY, path.stem)
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{source}: name must be a non-empty string, got {name!r}")
    if len(name) > MAX_NAME_CHARS or not name.isprintable():
        raise ConfigError(
            f"{source}: name must be printable and at most {MAX_NAME_CHARS} characters"
        )
    return name.strip()


def _json_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def read_configuration(path: Path, base: Settings) -> Configuration:
    """The configuration in ``path`` applied to ``base``; ConfigError naming the file."""
    source = f"configuration {path}"
    values, extras = settings_values(_read_text(path), source, extra_keys=frozenset({NAME_KEY}))
    refused = sorted(set(values) & set(REFUSED_KEYS))
    if refused:
        raise ConfigError(f"{source}: {refused[0]} cannot be set here: {REFUSED_KEYS[refused[0]]}")
    settings = with_values(base, values, source)
    overrides = {key: _json_value(value) for key, value in sorted(values.items())}
    return Configuration(_name(extras, path, source), str(path), overrides, settings)


def read_configurations(paths: Sequence[Path], base: Settings) -> list[Configuration]:
    """Every configuration of ``paths``, checked (at least two, names that differ)."""
    if len(paths) < MIN_CONFIGURATIONS:
        raise BadInputError(
            f"--compare needs at least {MIN_CONFIGURATIONS} configuration files, got {len(paths)}"
        )
    configurations = [read_configuration(path, base) for path in paths]
    seen: dict[str, str] = {}
    for configuration in configurations:
        if configuration.name in seen:
            raise BadInputError(
                f"configurations {seen[configuration.name]} and {configuration.path} are both "
                f"named {configuration.name!r}: give one a name key or another file name"
            )
        seen[configuration.name] = configuration.path
    return configurations


# ---------------------------------------------------------------------------------------------
# Running


@dataclass
class ConfigurationResult:
    """A configuration's eval result, or why it has none (``incomplete``)."""

    configuration: Configuration
    result: EvalResult | None
    incomplete: str | None = None
    run_id: int | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


def compare(
    dataset: str,
    items: Sequence[EvalItem],
    configurations: Sequence[Configuration],
    review: Callable[[Configuration], Callable[[EvalItem], ItemReview]],
    *,
    tolerance: int = DEFAULT_TOLERANCE,
    on_item: Callable[[Configuration, ItemScore], None] | None = None,
) -> list[ConfigurationResult]:
    """Review and score ``items`` under each configuration, in order (``review`` gives the item
    reviewer of one configuration); an incomplete item makes its configuration incomplete."""
    results = []
    for configuration in configurations:

        def scored(score: ItemScore, configuration: Configuration = configuration) -> None:
            if on_item is not None:
                on_item(configuration, score)

        started = datetime.now(UTC)
        try:
            result = evaluate(
                dataset, items, review(configuration), tolerance=tolerance, on_item=scored
            )
        except EvalIncompleteError as error:
            results.append(ConfigurationResult(configuration, None, str(error)))
            continue
        finished = datetime.now(UTC)
        results.append(ConfigurationResult(configuration, result, None, None, started, finished))
    return results


# ---------------------------------------------------------------------------------------------
# Pairs (pure)


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def paired_bootstrap(
    differences: Sequence[float],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = CONFIDENCE,
) -> Interval:
    """The percentile bootstrap interval of the mean of ``differences`` (one per item, paired):
    ``resamples`` means of as many differences drawn with replacement, the ``confidence``
    central part of them. Seeded: the same differences give the same interval."""
    if not differences:
        raise ValueError("a bootstrap needs at least one difference")
    if resamples < 1 or not 0 < confidence < 1:
        raise ValueError("resamples must be positive and confidence between 0 and 1")
    rng = random.Random(seed)
    count = len(differences)
    means = sorted(math.fsum(rng.choices(differences, k=count)) / count for _ in range(resamples))
    tail = (1 - confidence) / 2
    low = means[min(resamples - 1, math.floor(tail * resamples))]
    high = means[max(0, math.ceil((1 - tail) * resamples) - 1)]
    return Interval(low, high)


@dataclass(frozen=True)
class PairResult:
    """B compared with A: per-item F1 differences (B - A), their mean and interval."""

    a: str
    b: str
    differences: tuple[tuple[str, float, float], ...]  # (item, A's F1, B's F1)
    interval: Interval | None  # None: not compared (``reason``)
    reason: str | None = None

    @property
    def mean_difference(self) -> float | None:
        if not self.differences:
            return None
        return math.fsum(b - a for _, a, b in self.differences) / len(self.differences)

    @property
    def improved(self) -> int:
        return sum(1 for _, a, b in self.differences if b > a)

    @property
    def worsened(self) -> int:
        return sum(1 for _, a, b in self.differences if b < a)

    @property
    def better(self) -> str | None:
        """The configuration that is better beyond noise, or None."""
        if self.interval is None or not self.interval.excludes_zero():
            return None
        return self.b if self.interval.low > 0 else self.a

    @property
    def verdict(self) -> str:
        if self.interval is None:
            return f"{self.b} vs {self.a}: not compared ({self.reason})"
        if self.better == self.b:
            return f"{self.b} is better than {self.a} beyond noise"
        if self.better == self.a:
            return f"{self.b} is worse than {self.a} beyond noise"
        return f"no difference beyond noise between {self.b} and {self.a} (the interval holds 0)"

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "items": len(self.differences),
            "mean_f1_difference": self.mean_difference,
            "interval": None if self.interval is None else [self.interval.low, self.interval.high],
            "confidence": CONFIDENCE,
            "resamples": BOOTSTRAP_RESAMPLES,
            "seed": BOOTSTRAP_SEED,
            "improved": self.improved,
            "worsened": self.worsened,
            "unchanged": len(self.differences) - self.improved - self.worsened,
            "better": self.better,
            "verdict": self.verdict,
            "reason": self.reason,
            "differences": [
                {"item": item, "a_f1": a, "b_f1": b, "difference": b - a}
                for item, a, b in self.differences
            ],
        }


def pairs_of(count: int) -> list[tuple[int, int]]:
    """Which configurations are compared, as (A, B) indexes (see the module notes)."""
    if count <= ALL_PAIRS_UP_TO:
        return [(a, b) for b in range(1, count) for a in range(b)]
    return [(0, b) for b in range(1, count)]


def _pair(a: ConfigurationResult, b: ConfigurationResult) -> PairResult:
    names = (a.configuration.name, b.configuration.name)
    for side in (a, b):
        if side.result is None:
            reason = f"{side.configuration.name} is incomplete"
            return PairResult(*names, (), None, reason)
    assert a.result is not None and b.result is not None
    f1_of_b = {item.item: item.scores.f1 for item in b.result.items}
    differences = tuple(
        (item.item, item.scores.f1, f1_of_b[item.item])
        for item in a.result.items
        if item.item in f1_of_b
    )
    if not differences:
        return PairResult(*names, (), None, "no item in common")
    return PairResult(*names, differences, paired_bootstrap([y - x for _, x, y in differences]))


def pair_results(results: Sequence[ConfigurationResult]) -> list[PairResult]:
    """Every pair :func:`pairs_of` names, compared."""
    return [_pair(results[a], results[b]) for a, b in pairs_of(len(results))]


# ---------------------------------------------------------------------------------------------
# The document and the rows


def _per_item(result: EvalResult) -> dict[str, float]:
    count = max(1, len(result.items))
    return {name: value / count for name, value in asdict(result.cost).items()}


def _configuration_json(entry: ConfigurationResult) -> dict[str, Any]:
    configuration, result = entry.configuration, entry.result
    document: dict[str, Any] = {
        "name": configuration.name,
        "path": configuration.path,
        "overrides": configuration.overrides,
        "run_id": entry.run_id,
        "complete": result is not None,
        "incomplete": entry.incomplete,
    }
    if result is None:
        return document
    scored = result.to_json()
    return {
        **document,
        "model": result.model,
        "prompt_version": result.prompt_version,
        "total": scored["total"],
        "mean": scored["mean"],
        "cost": scored["cost"],
        "cost_per_item": _per_item(result),
        "sources": scored["sources"],
        "analyzers": scored["analyzers"],
        "voted_out": scored["voted_out"],
        "items": scored["items"],
    }


def comparison_json(
    dataset: str,
    tolerance: int,
    results: Sequence[ConfigurationResult],
    pairs: Sequence[PairResult],
    comparison_id: int | None = None,
) -> dict[str, Any]:
    """The comparison as ``--json`` prints it (docs/eval.md)."""
    return {
        "comparison_id": comparison_id,
        "dataset": dataset,
        "tolerance": tolerance,
        "configurations": [_configuration_json(entry) for entry in results],
        "pairs": [pair.to_json() for pair in pairs],
        "complete": all(entry.result is not None for entry in results),
    }


def comparison_rows(
    dataset: str,
    results: Sequence[ConfigurationResult],
    pairs: Sequence[PairResult],
    started_at: Any,
    finished_at: Any,
) -> tuple[dict[str, Any], list[tuple[int, dict[str, Any]]]]:
    """The ``eval_comparisons`` row and the ``eval_runs`` rows of the complete configurations
    (as (index into ``results``, row); ``comparison_id`` is the store's to fill in)."""
    comparison = {
        "dataset": dataset,
        "configurations": [
            {
                "name": entry.configuration.name,
                "path": entry.configuration.path,
                "overrides": entry.configuration.overrides,
                "incomplete": entry.incomplete,
            }
            for entry in results
        ],
        "pairs": [pair.to_json() for pair in pairs],
        "started_at": started_at,
        "finished_at": finished_at,
    }
    runs = [
        (
            index,
            {
                **eval_run_row(
                    entry.result,
                    entry.started_at or started_at,
                    entry.finished_at or finished_at,
                ),
                "configuration": entry.configuration.name,
            },
        )
        for index, entry in enumerate(results)
        if entry.result is not None
    ]
    return comparison, runs
