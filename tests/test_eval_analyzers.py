"""`reviewbot eval` with analyzer reports (tests/fixtures/eval/analyzers: each item carries an
``analyzers/`` folder with a SARIF or Code Quality report of planted lint and secret problems,
labelled in its truth): precision and recall split by source (model, analyzer, both), and
`eval --compare` of analyzers off against on with the fake vLLM, which prints the findings by
source, the duplicates merged and the digest tokens added."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reviewbot.commands import main
from reviewbot.eval import DatasetError, Predicted, TruthItem, load_dataset, score_item
from tests.fakes.vllm_server import FakeVLLM

FIXTURES = Path(__file__).parent / "fixtures" / "eval"
ANALYZED = FIXTURES / "analyzers"
CONFIGS = FIXTURES / "configs"
PLANTED = "glpat-Zq8vW3xK9mN2pL7rT4yB"


def _invoke(server: Any, database_url: str, *args: str) -> Any:
    env = {
        "REVIEWBOT_LLM_BASE_URL": server.base_url,
        "REVIEWBOT_DATABASE_URL": database_url,
        "REVIEWBOT_CONFIG": "",
    }
    return CliRunner().invoke(main, ["eval", *args], env=env)


def test_scoring_splits_true_and_false_positives_by_source() -> None:
    truth = [TruthItem("a.py", 3, "new"), TruthItem("a.py", 9, "new"), TruthItem("a.py", 20, "new")]
    predicted = [
        Predicted("a.py", "new", 3, "bug", "both"),
        Predicted("a.py", "new", 9, "style", "analyzer"),
        Predicted("a.py", "new", 14, "style", "analyzer"),
        Predicted("a.py", "new", 30, "bug", "model"),
    ]

    scored = score_item("x", predicted, truth, tolerance=1)

    assert scored.by_source == {"both": (1, 0), "analyzer": (1, 1), "model": (0, 1)}
    assert (scored.scores.tp, scored.scores.fp, scored.scores.fn) == (2, 2, 1)


def test_an_items_reports_are_read_and_a_bad_one_names_itself(tmp_path: Path) -> None:
    items = {item.name: item for item in load_dataset(ANALYZED)}
    lint = items["lint-01-none-and-unused-import"].analyzers
    assert lint is not None and {(f.tool, f.rule, f.line) for f in lint.findings} == {
        ("ruff", "F401", 1),
        ("ruff", "E711", 5),
    }
    secret = items["secret-01-deploy-key"].analyzers
    assert secret is not None and [f.secret for f in secret.findings] == [True]
    bad = tmp_path / "item"
    (bad / "analyzers").mkdir(parents=True)
    (bad / "mr.diff").write_bytes((ANALYZED / "secret-01-deploy-key" / "mr.diff").read_bytes())
    (bad / "truth.json").write_text("[]")
    (bad / "analyzers" / "lint.json").write_text('{"not": "a report"}')
    with pytest.raises(DatasetError, match=r"item/analyzers/lint.json: not read"):
        load_dataset(tmp_path)


def test_eval_splits_precision_and_recall_by_source(vllm: Any, tmp_path: Path) -> None:
    result = _invoke(vllm, f"sqlite:///{tmp_path / 'db.sqlite'}", str(ANALYZED), "--json")

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    sources = {row["source"]: row for row in document["sources"]}
    assert {s: (r["tp"], r["fp"]) for s, r in sources.items()} == {
        "model": (1, 0),  # eval()
        "analyzer": (3, 1),  # F401, the token, F821; the style warning nobody labelled
        "both": (1, 0),  # == None: the model's and ruff E711's, one finding
    }
    assert sources["analyzer"]["recall"] == pytest.approx(3 / 5)
    assert sum(row["recall"] for row in sources.values()) == pytest.approx(
        document["total"]["recall"]
    )
    assert document["analyzers"]["findings"] == 5  # the one off the diff left out
    assert document["analyzers"]["merged"] == 1 and document["analyzers"]["digest_tokens"] > 0
    assert PLANTED not in result.stdout


@pytest.mark.slow
def test_compare_analyzers_off_against_on(tmp_path: Path) -> None:
    """The figures docs/analyzers.md quotes (the fake model, tests/fixtures/eval/analyzers)."""
    configs = [str(CONFIGS / "analyzers-off.toml"), str(CONFIGS / "analyzers-on.toml")]
    database = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with FakeVLLM() as server:
        result = _invoke(server, database, str(ANALYZED), "--compare", *configs, "--json")
        shown = _invoke(server, database, str(ANALYZED), "--compare", *configs)
    assert result.exit_code == 0, result.output
    off, on = json.loads(result.stdout)["configurations"]
    scores = {e["name"]: tuple(e["total"][k] for k in ("tp", "fp", "fn")) for e in (off, on)}
    assert scores == {"analyzers-off": (2, 0, 3), "analyzers-on": (5, 1, 0)}
    assert [(r["source"], r["tp"], r["fp"]) for r in off["sources"]] == [
        ("model", 2, 0),
        ("analyzer", 0, 0),
        ("both", 0, 0),
    ]
    assert [(r["source"], r["tp"], r["fp"]) for r in on["sources"]] == [
        ("model", 1, 0),
        ("analyzer", 3, 1),
        ("both", 1, 0),
    ]
    assert off["analyzers"] == {"findings": 0, "merged": 0, "digest_tokens": 0}
    assert on["analyzers"]["findings"] == 5 and on["analyzers"]["merged"] == 1
    added = on["cost"]["prompt_tokens"] - off["cost"]["prompt_tokens"]
    assert added == on["analyzers"]["digest_tokens"] > 0  # the digests, nothing else
    print(  # the figures docs/analyzers.md quotes
        f"\noff {scores['analyzers-off']} on {scores['analyzers-on']}; digest tokens "
        f"{on['analyzers']['digest_tokens']} over {len(on['items'])} items; F1 "
        f"{off['total']['f1']:.3f} -> {on['total']['f1']:.3f}"
    )
    assert shown.exit_code == 0, shown.output
    assert "by source" in shown.stdout and "merged" in shown.stdout
    assert "3/1" in shown.stdout  # the analyzers' TP/FP with them on
