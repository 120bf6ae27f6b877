"""`reviewbot eval`: the review pipeline scored on labelled diffs (no GitLab).

Dataset format (docs/eval.md): one directory per item, in name order::

    DATASET_DIR/<item>/mr.diff            the diff to review (git or plain unified diff)
    DATASET_DIR/<item>/files/head/<path>  optional: the file after the change (context lines)
    DATASET_DIR/<item>/files/base/<path>  optional: the file before it (accepted; the pipeline
                                          shows head-side context only, so it is not read)
    DATASET_DIR/<item>/truth.json         [{"path": "app.py", "line": 12, "side": "new"}, ...]
    DATASET_DIR/<item>/analyzers/<report> optional: the analyzers' reports of the change
                                          (SARIF, GitLab SAST/secret detection, Code Quality)

A truth entry may say why the line is a bug with ``"evidence": {"path": P, "line": L}``: the line
of a head file that holds the evidence (a definition in another file, a guard far above the
hunk); it is checked (an existing head file, a line within it) but not scored.

Scoring (pure, :func:`score_item`): a finding matches a truth item when the path is equal, the
side is the same and the line is within ±K (``--tolerance``, default 3); each truth item
matches at most one finding and each finding at most one truth item, as many pairs as possible
(per path and side, truth items in line order each take the first free finding from
``line - K`` on, which is a maximum matching for windows of equal width). A file-level finding
(no line) never matches. TP = matched findings, FP = the other findings, FN = the other truth
items. precision = TP/(TP+FP), recall = TP/(TP+FN), F1 = 2PR/(P+R); an item with nothing to
find and nothing reported scores 1, 1, 1, otherwise a zero denominator gives 0. The total is
micro (over the summed counts); the mean is over the items. Per category: TP and FP of the
findings of that category and their precision (truth items carry no category). Per source
(``model``, ``analyzer``, ``both``: a model finding merged with an analyzer's): TP and FP of
the findings of that source, their precision, and their recall, the share of every truth item
that source's findings matched (the sources' recalls add up to the total recall).

An item's analyzer reports (with ``eval_analyzer_reports``, the default) are kept to the
diff's changed lines, told to the model in each chunk's digest and merged with its findings, as
a review with the pipeline's reports is (docs/analyzers.md); what that added is tallied
(:class:`AnalyzerTally`). A report that cannot be read is a DatasetError.

Owns: the dataset format and reading it, the review of one item (:func:`item_reviewer`: the
pipeline of ``reviewbot review`` on the item's diff, with the model client handed in), the
scoring, what each item cost (model calls, tokens, wall time), and the row an eval run is
stored as. Must not: build a model client or touch GitLab
(the client is handed in), write to the database (the command hands the row to the store), or
print.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reviewbot.analyzer_findings import AnalyzerRun
from reviewbot.analyzer_review import with_analyzers
from reviewbot.analyzers.changes import changed_lines
from reviewbot.analyzers.collect import within_changes
from reviewbot.analyzers.report_json import MAX_REPORT_BYTES, ReportContext
from reviewbot.analyzers.reports import read_report
from reviewbot.config import Settings
from reviewbot.diff import FileDiff, Side, parse_git_diff
from reviewbot.effort_settings import choose_effort
from reviewbot.input_files import InputFileRefused, read_input_file
from reviewbot.model import LLMClient, request_priority
from reviewbot.passes import with_effort
from reviewbot.repo.localdiff import local_context
from reviewbot.repo.view import MemoryView
from reviewbot.review import review_files, review_options
from reviewbot.states import Trigger, Workload
from reviewbot.suggestions import vet_suggestions
from reviewbot.tokens import local_counter

__all__ = [
    "DEFAULT_TOLERANCE",
    "AnalyzerTally",
    "Cost",
    "DatasetError",
    "EvalIncompleteError",
    "EvalItem",
    "EvalResult",
    "Evidence",
    "ItemReview",
    "ItemScore",
    "Predicted",
    "Scores",
    "SuggestionTally",
    "TruthItem",
    "eval_run_row",
    "evaluate",
    "item_reviewer",
    "load_dataset",
    "predicted_from",
    "score_item",
]

DEFAULT_TOLERANCE = 3
DIFF_FILE = "mr.diff"
TRUTH_FILE = "truth.json"
HEAD_DIR = Path("files") / "head"
ANALYZERS_DIR = "analyzers"
SOURCES = ("model", "analyzer", "both")  # reviewbot.analyzer_findings.FindingSource
# A truth file lists a few dozen lines; a diff is what GitLab shows at most (its patch limits
# are far below). Larger files are refused before they are read.
MAX_TRUTH_BYTES = 16 * 1024 * 1024
MAX_DIFF_BYTES = 64 * 1024 * 1024


class DatasetError(ValueError):
    """The dataset cannot be read (one line naming the item and what is wrong)."""


class EvalIncompleteError(RuntimeError):
    """Part of an item's diff could not be reviewed: its score would be meaningless."""


@dataclass(frozen=True)
class Evidence:
    """Where the evidence for a labelled bug is: a line of a head file (documentation only)."""

    path: str
    line: int


@dataclass(frozen=True)
class TruthItem:
    path: str
    line: int
    side: str
    evidence: Evidence | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Cost:
    """What reviewing items took: model requests, their tokens, and the wall time."""

    model_calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0
    # of completion_tokens, those the server said were thinking (0 where it does not say)
    reasoning_tokens: int = 0

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.model_calls + other.model_calls,
            self.prompt_tokens + other.prompt_tokens,
            self.cached_tokens + other.cached_tokens,
            self.completion_tokens + other.completion_tokens,
            self.wall_s + other.wall_s,
            self.reasoning_tokens + other.reasoning_tokens,
        )


@dataclass(frozen=True)
class SuggestionTally:
    """The findings' suggestions, applied to the head files as publishing does
    (reviewbot.suggestions): offered, kept (what would be posted) and dropped by reason."""

    offered: int = 0
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def kept(self) -> int:
        return self.offered - sum(self.dropped.values())

    def __add__(self, other: SuggestionTally) -> SuggestionTally:
        dropped = dict(self.dropped)
        for reason, count in other.dropped.items():
            dropped[reason] = dropped.get(reason, 0) + count
        return SuggestionTally(self.offered + other.offered, dropped)

    def to_json(self) -> dict[str, Any]:
        return {
            "offered": self.offered,
            "kept": self.kept,
            "dropped": dict(sorted(self.dropped.items())),
        }


@dataclass(frozen=True)
class AnalyzerTally:
    """What the items' analyzer reports added to their reviews: the findings on the changed
    lines, those merged with a model finding of the same problem (duplicates posted once), and
    the tokens of the digests the chunks' prompts carried."""

    findings: int = 0
    merged: int = 0
    digest_tokens: int = 0

    def __add__(self, other: AnalyzerTally) -> AnalyzerTally:
        return AnalyzerTally(
            self.findings + other.findings,
            self.merged + other.merged,
            self.digest_tokens + other.digest_tokens,
        )


@dataclass(frozen=True)
class VoteTally:
    """What a deep review's vote kept off (reviewbot.votes): findings voted out, and how many
    of them would have been true positives (the TP they would have added to the kept ones)."""

    voted_out: int = 0
    true_positives: int = 0

    def __add__(self, other: VoteTally) -> VoteTally:
        return VoteTally(
            self.voted_out + other.voted_out, self.true_positives + other.true_positives
        )

    def to_json(self) -> dict[str, int]:
        return {"findings": self.voted_out, "would_be_true_positives": self.true_positives}


@dataclass(frozen=True)
class Predicted:
    """A finding as scoring sees it."""

    path: str
    side: str
    line: int | None
    category: str
    source: str = "model"  # model / analyzer / both


@dataclass(frozen=True)
class EvalItem:
    name: str
    files: list[FileDiff]
    head: dict[str, str]
    truth: list[TruthItem]
    analyzers: AnalyzerRun | None = None  # the item's reports (None: it carries none)


@dataclass(frozen=True)
class Scores:
    tp: int
    fp: int
    fn: int
    precision: float
    recall: float
    f1: float

    @classmethod
    def of(cls, tp: int, fp: int, fn: int) -> Scores:
        if tp == fp == fn == 0:
            return cls(0, 0, 0, 1.0, 1.0, 1.0)
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return cls(tp, fp, fn, precision, recall, f1)


@dataclass(frozen=True)
class ItemScore:
    item: str
    scores: Scores
    by_category: dict[str, tuple[int, int]]  # category -> (tp, fp)
    cost: Cost = field(default_factory=Cost)
    suggestions: SuggestionTally = field(default_factory=SuggestionTally)
    by_source: dict[str, tuple[int, int]] = field(default_factory=dict)  # source -> (tp, fp)
    analyzers: AnalyzerTally = field(default_factory=AnalyzerTally)
    votes: VoteTally = field(default_factory=VoteTally)


@dataclass
class EvalResult:
    dataset: str
    tolerance: int
    model: str
    prompt_version: str
    items: list[ItemScore] = field(default_factory=list)

    @property
    def total(self) -> Scores:
        """Micro: precision, recall and F1 of the summed counts."""
        return Scores.of(
            sum(i.scores.tp for i in self.items),
            sum(i.scores.fp for i in self.items),
            sum(i.scores.fn for i in self.items),
        )

    @property
    def mean(self) -> dict[str, float]:
        """The mean per item of precision, recall and F1 (1.0 each for no items)."""
        count = len(self.items)
        if count == 0:
            return {"precision": 1.0, "recall": 1.0, "f1": 1.0}
        return {
            name: sum(getattr(i.scores, name) for i in self.items) / count
            for name in ("precision", "recall", "f1")
        }

    @property
    def cost(self) -> Cost:
        """The summed cost of every item."""
        total = Cost()
        for item in self.items:
            total += item.cost
        return total

    @property
    def suggestions(self) -> SuggestionTally:
        """Every item's suggestions, summed."""
        total = SuggestionTally()
        for item in self.items:
            total += item.suggestions
        return total

    @property
    def analyzers(self) -> AnalyzerTally:
        """Every item's analyzer tally, summed."""
        total = AnalyzerTally()
        for item in self.items:
            total += item.analyzers
        return total

    def sources(self) -> list[dict[str, Any]]:
        """Per source (model, analyzer, both; each listed): TP, FP, precision and recall (the
        share of every truth item its findings matched)."""
        truth = sum(i.scores.tp + i.scores.fn for i in self.items)
        rows = []
        for source in SOURCES:
            tp = sum(i.by_source.get(source, (0, 0))[0] for i in self.items)
            fp = sum(i.by_source.get(source, (0, 0))[1] for i in self.items)
            rows.append(
                {
                    "source": source,
                    "tp": tp,
                    "fp": fp,
                    "precision": tp / (tp + fp) if tp + fp else 0.0,
                    "recall": tp / truth if truth else 0.0,
                }
            )
        return rows

    @property
    def votes(self) -> VoteTally:
        """Every item's voted-out findings, summed."""
        total = VoteTally()
        for item in self.items:
            total += item.votes
        return total

    def categories(self) -> list[dict[str, Any]]:
        totals: dict[str, list[int]] = {}
        for item in self.items:
            for category, (tp, fp) in item.by_category.items():
                pair = totals.setdefault(category, [0, 0])
                pair[0] += tp
                pair[1] += fp
        return [
            {"category": c, "tp": tp, "fp": fp, "precision": tp / (tp + fp) if tp + fp else 0.0}
            for c, (tp, fp) in sorted(totals.items())
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "tolerance": self.tolerance,
            "model": self.model,
            "prompt_version": self.prompt_version,
            "items": [
                {
                    "item": i.item,
                    **asdict(i.scores),
                    "cost": asdict(i.cost),
                    "by_source": {k: list(v) for k, v in sorted(i.by_source.items())},
                }
                for i in self.items
            ],
            "total": asdict(self.total),
            "mean": self.mean,
            "categories": self.categories(),
            "sources": self.sources(),
            "analyzers": asdict(self.analyzers),
            "cost": asdict(self.cost),
            "suggestions": self.suggestions.to_json(),
            "voted_out": self.votes.to_json(),
        }


# ---------------------------------------------------------------------------------------------
# Loading


def _truth(path: Path, item: str, head: dict[str, str]) -> list[TruthItem]:
    try:
        data = json.loads(read_input_file(path, MAX_TRUTH_BYTES).decode("utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"{item}: no {TRUTH_FILE}") from None
    except InputFileRefused as refused:
        raise DatasetError(f"{item}/{TRUTH_FILE} {refused}") from None
    except RecursionError:
        # json.loads recurses once per nesting level: [[[[...]]]] 100,000 deep exhausts it.
        raise DatasetError(
            f"{item}/{TRUTH_FILE}: nested too deep (a list of {{path, line, side}} objects)"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DatasetError(f"{item}/{TRUTH_FILE}: not valid JSON ({error})") from None
    if not isinstance(data, list):
        raise DatasetError(f"{item}/{TRUTH_FILE}: must be a list of {{path, line, side}}")
    truth = []
    sides = {side.value for side in Side}
    for number, entry in enumerate(data, 1):
        where = f"{item}/{TRUTH_FILE} entry {number}"
        if not isinstance(entry, dict):
            raise DatasetError(f"{where}: must be an object with path, line and side")
        path_value, line, side = entry.get("path"), entry.get("line"), entry.get("side")
        if not isinstance(path_value, str) or not path_value:
            raise DatasetError(f"{where}: path must be a non-empty string")
        if not isinstance(line, int) or isinstance(line, bool) or line < 1:
            raise DatasetError(f"{where}: line must be a positive integer")
        if side not in sides:
            raise DatasetError(f'{where}: side must be "new" or "old", not {side!r}')
        evidence = _evidence(entry.get("evidence"), where, head)
        truth.append(TruthItem(path_value, line, side, evidence))
    return truth


def _evidence(value: Any, where: str, head: dict[str, str]) -> Evidence | None:
    """An entry's ``evidence``: a line of one of the item's head files, or None."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise DatasetError(f"{where}: evidence must be an object with path and line")
    path, line = value.get("path"), value.get("line")
    if not isinstance(path, str) or not path:
        raise DatasetError(f"{where}: evidence path must be a non-empty string")
    if path not in head:
        raise DatasetError(f"{where}: evidence path {path!r} is not a file under {HEAD_DIR}")
    if not isinstance(line, int) or isinstance(line, bool) or line < 1:
        raise DatasetError(f"{where}: evidence line must be a positive integer")
    lines = len(head[path].splitlines())
    if line > lines:
        raise DatasetError(
            f"{where}: evidence line {line} is past the end of {path} ({lines} lines)"
        )
    return Evidence(path, line)


def _item_analyzers(directory: Path, item: str) -> AnalyzerRun | None:
    """The reports in the item's ``analyzers/`` folder, read as a pipeline's are (None: no
    folder); one that cannot be read is a DatasetError naming it."""
    if not directory.is_dir():
        return None
    run = AnalyzerRun()
    for path in sorted(p for p in directory.iterdir() if p.is_file()):
        name = f"{item}/{ANALYZERS_DIR}/{path.name}"
        try:
            data = read_input_file(path, MAX_REPORT_BYTES)
        except InputFileRefused as refused:
            raise DatasetError(f"{name} {refused}") from None
        except OSError as error:
            raise DatasetError(f"{name}: cannot read it ({error.strerror})") from None
        report = read_report(name, data, ReportContext())
        if report.problems:
            raise DatasetError(report.problems[0].sentence())
        run = run.merged(report)
    return run


def _head_files(directory: Path) -> dict[str, str]:
    if not directory.is_dir():
        return {}
    return {
        path.relative_to(directory).as_posix(): path.read_text(encoding="utf-8", errors="replace")
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def load_dataset(directory: Path, limit: int | None = None) -> list[EvalItem]:
    """The items of ``directory`` in name order (the first ``limit`` when given)."""
    try:
        is_folder = directory.is_dir()
    except OSError as error:  # a name the system will not look up (too long, a loop of links)
        raise DatasetError(f"cannot use {directory}: {error.strerror}") from error
    if not is_folder:
        raise DatasetError(f"{directory}: not a directory")
    names = sorted(p.name for p in directory.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not names:
        raise DatasetError(
            f"{directory}: no item directories (each holds {DIFF_FILE} and {TRUTH_FILE})"
        )
    items = []
    for name in names[:limit] if limit is not None else names:
        folder = directory / name
        try:
            raw = read_input_file(folder / DIFF_FILE, MAX_DIFF_BYTES)
        except FileNotFoundError:
            raise DatasetError(f"{name}: no {DIFF_FILE}") from None
        except InputFileRefused as refused:
            raise DatasetError(f"{name}/{DIFF_FILE} {refused}") from None
        except OSError as error:
            raise DatasetError(f"{name}/{DIFF_FILE}: cannot read it ({error.strerror})") from None
        try:
            files = parse_git_diff(raw)
        except ValueError as error:
            raise DatasetError(f"{name}/{DIFF_FILE}: {error}") from None
        head = _head_files(folder / HEAD_DIR)
        truth = _truth(folder / TRUTH_FILE, name, head)
        items.append(
            EvalItem(name, files, head, truth, _item_analyzers(folder / ANALYZERS_DIR, name))
        )
    return items


# ---------------------------------------------------------------------------------------------
# Scoring (pure)


def score_item(
    name: str, predicted: Sequence[Predicted], truth: Sequence[TruthItem], tolerance: int
) -> ItemScore:
    """Match ``predicted`` against ``truth`` within ±``tolerance`` lines (module notes)."""
    matched: set[int] = set()  # indexes into predicted
    groups: dict[tuple[str, str], list[int]] = {}
    for index, finding in enumerate(predicted):
        if finding.line is not None:
            groups.setdefault((finding.path, finding.side), []).append(index)
    for indexes in groups.values():
        indexes.sort(key=lambda i: (predicted[i].line, i))
    tp = 0
    for item in sorted(truth, key=lambda t: (t.path, t.side, t.line)):
        for index in groups.get((item.path, item.side), []):
            line = predicted[index].line
            assert line is not None
            if index in matched or line < item.line - tolerance:
                continue
            if line <= item.line + tolerance:
                matched.add(index)
                tp += 1
            break
    by_category: dict[str, tuple[int, int]] = {}
    by_source: dict[str, tuple[int, int]] = {}
    for index, finding in enumerate(predicted):
        for tally, key in ((by_category, finding.category), (by_source, finding.source)):
            hit, miss = tally.get(key, (0, 0))
            tally[key] = (hit + 1, miss) if index in matched else (hit, miss + 1)
    scores = Scores.of(tp, len(predicted) - tp, len(truth) - tp)
    return ItemScore(name, scores, by_category, by_source=by_source)


# ---------------------------------------------------------------------------------------------
# Running


@dataclass(frozen=True)
class ItemReview:
    """What the pipeline reported for one item."""

    findings: list[Predicted]
    model: str
    prompt_version: str
    cost: Cost = field(default_factory=Cost)
    suggestions: SuggestionTally = field(default_factory=SuggestionTally)
    analyzers: AnalyzerTally = field(default_factory=AnalyzerTally)
    voted_out: list[Predicted] = field(default_factory=list)  # a deep review's vote kept off


def item_repository(item: EvalItem) -> MemoryView:
    """The tree the model's repository tools see for ``item``: its head files (a dataset has no
    commit, so the SHA is a name made from the item's)."""
    return MemoryView(f"eval:{item.name}", item.head)


def item_reviewer(llm: LLMClient, settings: Settings) -> Callable[[EvalItem], ItemReview]:
    """Reviews one item with ``llm`` as `reviewbot review` reviews a local diff; an item part of
    whose diff was not reviewed is EvalIncompleteError (its score would be meaningless)."""
    effort = choose_effort(None, settings, settings, Trigger.LOCAL)
    options = with_effort(review_options(settings), effort, settings)
    counter = local_counter(settings.llm_model)

    def review(item: EvalItem) -> ItemReview:
        started = time.monotonic()
        context = local_context(item.name, item.files, options.plan_options.exclusions)
        analyzed = _analyzed(item, settings)
        result = review_files(
            item.files,
            context=context,
            llm=llm,
            counter=counter,
            options=options,
            contents=item.head,
            repository=item_repository(item),
            priority=request_priority(Workload.EVAL),
            analyzer_findings=analyzed.findings if analyzed is not None else (),
        )
        if result.chunk_errors:
            first = next(iter(result.chunk_errors.values()))
            raise EvalIncompleteError(f"{item.name}: part of the diff was not reviewed: {first}")
        result = with_analyzers(result, analyzed, item.files, options.findings_options)[0]
        filtered = set(map(id, result.findings.selection.filtered))
        kept = [f for f in result.findings.findings if id(f) not in filtered]
        cost = Cost(  # the verification pass costs too: its calls are the result's
            model_calls=len(result.model_calls),
            prompt_tokens=result.prompt_tokens,
            cached_tokens=result.cached_tokens,
            completion_tokens=result.completion_tokens,
            wall_s=time.monotonic() - started,
            reasoning_tokens=result.reasoning_tokens,
        )
        vetted = vet_suggestions(kept, {f.path: f for f in item.files}, item.head)
        suggestions = SuggestionTally(
            vetted.offered, {str(reason): count for reason, count in vetted.dropped.items()}
        )
        tally = AnalyzerTally(
            len(analyzed.findings) if analyzed is not None else 0,
            sum(1 for finding in kept if finding.source == "both"),
            result.digests.total_tokens,
        )
        voted_out = predicted_from(result.voting.voted_out if result.voting else [])
        return ItemReview(
            predicted_from(kept),
            result.model,
            result.prompt_version,
            cost,
            suggestions,
            analyzers=tally,
            voted_out=voted_out,
        )

    return review


def _analyzed(item: EvalItem, settings: Settings) -> AnalyzerRun | None:
    """The item's analyzer findings on its changed lines (None: none, or the setting
    ``eval_analyzer_reports`` is off)."""
    if item.analyzers is None or not settings.eval_analyzer_reports:
        return None
    return within_changes(item.analyzers, changed_lines(item.files))


def evaluate(
    dataset: str,
    items: Sequence[EvalItem],
    review: Callable[[EvalItem], ItemReview],
    *,
    tolerance: int = DEFAULT_TOLERANCE,
    on_item: Callable[[ItemScore], None] | None = None,
) -> EvalResult:
    """Review every item with ``review`` and score it; model and prompt version are those the
    reviews report (the last item's)."""
    result = EvalResult(dataset=dataset, tolerance=tolerance, model="", prompt_version="")
    for item in items:
        reviewed = review(item)
        result.model, result.prompt_version = reviewed.model, reviewed.prompt_version
        scored = score_item(item.name, reviewed.findings, item.truth, tolerance)
        together = score_item(
            item.name, reviewed.findings + reviewed.voted_out, item.truth, tolerance
        )
        votes = VoteTally(len(reviewed.voted_out), together.scores.tp - scored.scores.tp)
        scored = dataclasses.replace(
            scored,
            cost=reviewed.cost,
            suggestions=reviewed.suggestions,
            analyzers=reviewed.analyzers,
            votes=votes,
        )
        result.items.append(scored)
        if on_item is not None:
            on_item(scored)
    return result


def eval_run_row(result: EvalResult, started_at: Any, finished_at: Any) -> dict[str, Any]:
    """The ``eval_runs`` row of a result (Store.record_eval_run fields), its cost included."""
    total, mean, cost = result.total, result.mean, result.cost
    document = result.to_json()
    return {
        "dataset": result.dataset,
        "model": result.model,
        "prompt_version": result.prompt_version,
        "tolerance": result.tolerance,
        "items": len(result.items),
        "tp": total.tp,
        "fp": total.fp,
        "fn": total.fn,
        "precision": total.precision,
        "recall": total.recall,
        "f1": total.f1,
        "mean_precision": mean["precision"],
        "mean_recall": mean["recall"],
        "mean_f1": mean["f1"],
        "results": {
            "items": document["items"],
            "categories": document["categories"],
            "sources": document["sources"],
            "analyzers": document["analyzers"],
        },
        "started_at": started_at,
        "finished_at": finished_at,
        **asdict(cost),
    }


def predicted_from(findings: Sequence[Any]) -> list[Predicted]:
    """Scoring's view of pipeline findings (reviewbot.findings.Finding)."""
    return [
        Predicted(f.path, f.side.value, f.line, f.category.value, getattr(f, "source", "model"))
        for f in findings
    ]
