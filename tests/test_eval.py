"""`reviewbot eval`: scoring rules on plain data, dataset errors, and the team's small dataset
(tests/fixtures/eval/team) reviewed by the fake vLLM, whose fixed patterns give exact numbers:

- 01-eval-calls: eval() on lines 5 and 9, one labelled line (6): with ±3 one match, one FP;
  with ±0 no match (2 FP, 1 FN).
- 02-sql-and-off-by-one: SQL from an f-string on 5 (labelled), ``== None`` on 7 (not
  labelled: FP), an off-by-one on 13 the fake cannot see (FN).
- 03-clean-rename: nothing to find, nothing reported: 1, 1, 1.
- 04-removed-guard: the labelled line is a removed line (old side): FN; ``time.sleep`` on
  the new side: FP.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reviewbot.commands import main
from reviewbot.eval import (
    DatasetError,
    Evidence,
    Predicted,
    Scores,
    TruthItem,
    load_dataset,
    score_item,
)
from reviewbot.store import Store
from tests.fakes.vllm_server import FakeVLLM
from tests.store_fixtures import store_url  # noqa: F401

DATASET = Path(__file__).parent / "fixtures" / "eval" / "team"


def _found(line: int | None, path: str = "a.py", side: str = "new", category: str = "bug"):
    return Predicted(path, side, line, category)


def _truth(line: int, path: str = "a.py", side: str = "new") -> TruthItem:
    return TruthItem(path, line, side)


def test_a_finding_matches_within_tolerance_on_the_same_path_and_side() -> None:
    truth = [_truth(10)]
    assert score_item("x", [_found(13)], truth, 3).scores.tp == 1
    assert score_item("x", [_found(14)], truth, 3).scores.tp == 0
    assert score_item("x", [_found(10, path="b.py")], truth, 3).scores.tp == 0
    assert score_item("x", [_found(10, side="old")], truth, 3).scores.tp == 0
    assert score_item("x", [_found(None)], truth, 3).scores == Scores.of(0, 1, 1)


def test_each_truth_item_matches_one_finding_and_as_many_pairs_as_possible() -> None:
    # two findings near one labelled line: one TP, one FP
    assert score_item("x", [_found(9), _found(11)], [_truth(10)], 3).scores == Scores.of(1, 1, 0)
    # a truth-by-truth nearest choice could give 12 to 13 and leave 10 unmatched
    best = score_item("x", [_found(14), _found(12)], [_truth(13), _truth(10)], 2)
    assert best.scores == Scores.of(2, 0, 0)


def test_scores_convention_and_per_category_counts() -> None:
    assert Scores.of(0, 0, 0) == Scores(0, 0, 0, 1.0, 1.0, 1.0)
    assert Scores.of(0, 2, 0) == Scores(0, 2, 0, 0.0, 0.0, 0.0)
    assert Scores.of(1, 1, 2).f1 == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))
    scored = score_item(
        "x", [_found(1, category="bug"), _found(50, category="security")], [_truth(2)], 3
    )
    assert scored.by_category == {"bug": (1, 0), "security": (0, 1)}


def test_dataset_errors_name_the_item(tmp_path: Path) -> None:
    item = tmp_path / "one"
    item.mkdir()
    with pytest.raises(DatasetError, match=r"one: no mr\.diff"):
        load_dataset(tmp_path)
    (item / "mr.diff").write_text((DATASET / "01-eval-calls" / "mr.diff").read_text())
    with pytest.raises(DatasetError, match=r"one: no truth\.json"):
        load_dataset(tmp_path)
    (item / "truth.json").write_text('[{"path": "a.py", "line": 3, "side": "left"}]')
    with pytest.raises(DatasetError, match=r'one/truth\.json entry 1: side must be "new" or "old"'):
        load_dataset(tmp_path)
    (item / "truth.json").write_text('{"path": "a.py"}')
    with pytest.raises(DatasetError, match="must be a list"):
        load_dataset(tmp_path)
    with pytest.raises(DatasetError, match="not a directory"):
        load_dataset(tmp_path / "missing")


@pytest.mark.parametrize(
    ("evidence", "message"),
    [
        ('"db.py:3"', "evidence must be an object with path and line"),
        ('{"line": 3}', "evidence path must be a non-empty string"),
        ('{"path": "other.py", "line": 3}', "evidence path 'other.py' is not a file under"),
        ('{"path": "db.py", "line": 0}', "evidence line must be a positive integer"),
        ('{"path": "db.py", "line": true}', "evidence line must be a positive integer"),
        ('{"path": "db.py", "line": 99}', "evidence line 99 is past the end of db.py (13 lines)"),
    ],
)
def test_evidence_must_be_a_line_of_a_head_file(
    tmp_path: Path, evidence: str, message: str
) -> None:
    source = DATASET / "02-sql-and-off-by-one"
    item = tmp_path / "one"
    (item / "files" / "head").mkdir(parents=True)
    (item / "mr.diff").write_text((source / "mr.diff").read_text())
    (item / "files" / "head" / "db.py").write_text((source / "files/head/db.py").read_text())
    entry = f'{{"path": "db.py", "line": 5, "side": "new", "evidence": {evidence}}}'
    (item / "truth.json").write_text(f"[{entry}]")
    with pytest.raises(DatasetError) as raised:
        load_dataset(tmp_path)
    assert str(raised.value).startswith("one/truth.json entry 1: ") and message in str(raised.value)
    (item / "truth.json").write_text(
        '[{"path": "db.py", "line": 5, "side": "new", "evidence": {"path": "db.py", "line": 13}}]'
    )
    (loaded,) = load_dataset(tmp_path)
    assert loaded.truth == [TruthItem("db.py", 5, "new")]
    assert loaded.truth[0].evidence == Evidence("db.py", 13)


def test_the_team_dataset_loads_with_head_files_and_extra_keys() -> None:
    items = load_dataset(DATASET)
    assert [i.name for i in items] == [
        "01-eval-calls",
        "02-sql-and-off-by-one",
        "03-clean-rename",
        "04-removed-guard",
    ]
    assert items[1].head["db.py"].startswith("import sqlite3")
    assert items[0].truth == [TruthItem("calc.py", 6, "new")]  # "note" ignored
    assert [i.name for i in load_dataset(DATASET, limit=2)] == [i.name for i in items[:2]]


# tests/fixtures/eval/team's run as stored: tp, fp, fn, items, tolerance
STORED_RUN = (2, 3, 2, 4, 3)


def check_stored_run(database_url: str) -> dict[str, Any]:
    """The eval run of DATASET is stored with its scores (the first run of the database)."""
    store = Store.from_url(database_url)
    try:
        run = store.eval_run(1)
    finally:
        store.close()
    assert (run["tp"], run["fp"], run["fn"], run["items"], run["tolerance"]) == STORED_RUN
    assert run["dataset"] == str(DATASET.resolve())
    return run


def _eval(vllm: Any, database_url: str, *args: str) -> Any:
    env = {"REVIEWBOT_LLM_BASE_URL": vllm.base_url, "REVIEWBOT_DATABASE_URL": database_url}
    result = CliRunner().invoke(main, ["eval", str(DATASET), *args], env=env)
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.slow
def test_eval_of_the_team_dataset_gives_the_exact_scores(vllm: Any, store_url: str) -> None:  # noqa: F811
    document = json.loads(_eval(vllm, store_url, "--json").output)
    items = {i["item"]: (i["tp"], i["fp"], i["fn"]) for i in document["items"]}
    assert items == {
        "01-eval-calls": (1, 1, 0),
        "02-sql-and-off-by-one": (1, 1, 1),
        "03-clean-rename": (0, 0, 0),
        "04-removed-guard": (0, 1, 1),
    }
    assert document["total"] == {
        "tp": 2,
        "fp": 3,
        "fn": 2,
        "precision": 0.4,
        "recall": 0.5,
        "f1": pytest.approx(4 / 9),
    }
    assert document["mean"] == {
        "precision": 0.5,
        "recall": 0.625,
        "f1": pytest.approx((2 / 3 + 0.5 + 1.0 + 0.0) / 4),
    }
    assert document["categories"] == [
        {"category": "bug", "tp": 0, "fp": 1, "precision": 0.0},
        {"category": "performance", "tp": 0, "fp": 1, "precision": 0.0},
        {"category": "security", "tp": 2, "fp": 1, "precision": pytest.approx(2 / 3)},
    ]
    assert document["prompt_version"].startswith("v1+") and document["model"]

    strict = json.loads(_eval(vllm, store_url, "--json", "--tolerance", "0").output)
    assert (strict["total"]["tp"], strict["total"]["fp"], strict["total"]["fn"]) == (1, 4, 3)
    assert len(json.loads(_eval(vllm, store_url, "--json", "--limit", "1").output)["items"]) == 1


@pytest.mark.slow
def test_eval_runs_are_stored_and_shown_by_the_report(
    vllm: Any,
    store_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    table = _eval(vllm, store_url).output
    assert "total (micro)" in table and "mean per item" in table and "security" in table
    run = check_stored_run(store_url)
    now = datetime.now(UTC)
    result = CliRunner().invoke(
        main,
        [
            "report",
            "--since",
            (now - timedelta(hours=1)).isoformat(),
            "--until",
            (now + timedelta(hours=1)).isoformat(),
            "--output",
            str(tmp_path),
            "--format",
            "json,md",
        ],
        env={"REVIEWBOT_DATABASE_URL": store_url},
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "report.json").read_text())
    (shown,) = report["eval_runs"]
    assert (shown["prompt_version"], shown["precision"], shown["recall"]) == (
        run["prompt_version"],
        0.4,
        0.5,
    )
    assert "## Eval runs (labelled datasets)" in (tmp_path / "report.md").read_text()


def test_a_bad_dataset_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["eval", str(tmp_path / "nope")],
        env={"REVIEWBOT_DATABASE_URL": "sqlite:///unused.db"},
    )
    assert result.exit_code == 2
    assert result.output.strip() == f"reviewbot: error: {tmp_path / 'nope'}: not a directory"


def _item_with_truth(tmp_path: Path, truth: bytes) -> Path:
    item = tmp_path / "one"
    item.mkdir()
    (item / "mr.diff").write_text((DATASET / "01-eval-calls" / "mr.diff").read_text())
    (item / "truth.json").write_bytes(truth)
    return item


@pytest.mark.parametrize(
    ("truth", "message"),
    [
        # json.loads raised RecursionError: exit 1 and a traceback (issue 17 item 3)
        (b"[" * 100_000 + b"]" * 100_000, "one/truth.json: nested too deep"),
        (
            b'[{"path": "a.py", "line": 3, "side": "new"}' + b" " * (16 * 1024 * 1024),
            "one/truth.json is larger than 16,777,216 bytes",
        ),
    ],
)
def test_a_hostile_truth_file_is_one_line_and_exit_2(
    tmp_path: Path, truth: bytes, message: str
) -> None:
    _item_with_truth(tmp_path, truth)
    result = CliRunner().invoke(
        main, ["eval", str(tmp_path)], env={"REVIEWBOT_DATABASE_URL": "sqlite:///unused.db"}
    )
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.stderr.startswith(f"reviewbot: error: {message}")
    assert len(result.stderr.strip().splitlines()) == 1


def test_dataset_files_that_are_not_regular_files_are_refused_before_reading(
    tmp_path: Path,
) -> None:
    item = _item_with_truth(tmp_path, b"[]")
    (item / "truth.json").unlink()
    os.mkfifo(item / "truth.json")  # reading it would wait for a writer forever
    with pytest.raises(DatasetError, match=r"one/truth\.json is not a regular file \(a FIFO\)"):
        load_dataset(tmp_path)
    (item / "truth.json").unlink()
    (item / "truth.json").write_text("[]")
    (item / "mr.diff").unlink()
    (item / "mr.diff").symlink_to("/dev/zero")  # reading it would never end
    with pytest.raises(DatasetError, match=r"one/mr\.diff is not a regular file \(a device\)"):
        load_dataset(tmp_path)


@pytest.mark.slow
def test_an_item_is_reviewed_as_reviewbot_review_reviews_a_local_diff() -> None:
    """eval.item_reviewer: the item's findings above the threshold, as scoring sees them."""
    from reviewbot.config import Settings
    from reviewbot.eval import item_reviewer
    from reviewbot.llm.factory import runner_for
    from reviewbot.model import LLMSettings

    item = load_dataset(DATASET, limit=2)[1]  # one with head files
    folder = DATASET / item.name
    with FakeVLLM() as server, runner_for(LLMSettings(base_url=server.base_url)) as llm:
        reviewed = item_reviewer(llm, Settings())(item)
        args = [
            "review",
            "--diff",
            str(folder / "mr.diff"),
            "--head-dir",
            str(folder / "files" / "head"),
        ]
        shown = CliRunner().invoke(
            main, [*args, "--base-url", server.base_url, "--json"], env={"REVIEWBOT_CONFIG": ""}
        )
    assert shown.exit_code == 0, shown.output
    document = json.loads(shown.stdout)
    assert reviewed.findings and [(p.path, p.line, p.category) for p in reviewed.findings] == [
        (f["path"], f["line"], f["category"]) for f in document["findings"]
    ]
    assert (reviewed.model, reviewed.prompt_version) == (
        document["model"],
        document["prompt_version"],
    )


@pytest.mark.slow
def test_an_item_whose_answers_cannot_be_read_is_not_scored() -> None:
    from reviewbot.config import Settings
    from reviewbot.eval import EvalIncompleteError, item_reviewer
    from reviewbot.llm.factory import runner_for
    from reviewbot.model import LLMSettings
    from tests.fakes.vllm_server import MalformedCalls

    first = load_dataset(DATASET, limit=1)[0]
    unreadable = MalformedCalls(kinds=("missing_line",), repair="same")
    with (
        FakeVLLM(malformed=unreadable) as server,
        runner_for(LLMSettings(base_url=server.base_url)) as llm,
        pytest.raises(EvalIncompleteError, match="01-eval-calls: part of the diff was not"),
    ):
        item_reviewer(llm, Settings())(first)
