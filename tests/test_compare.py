"""`reviewbot eval --compare`: the paired bootstrap and the pairs on plain data, configuration
files that cannot be used (one line, before any model call), the comparison printed, stored and
shown by the report, an incomplete configuration never scored, and the context fixture set
(tests/fixtures/eval/context, written by make_context.py) against the fake vLLM:

- on the team dataset (tests/fixtures/eval/team) two configurations that differ only in scope
  context give the same scores: no difference beyond noise;
- the context set hides each kind of evidence from the configurations that cannot see it:
  checked on the rendered prompts here (no fake needed), and end to end with the fake's
  ``needs_evidence`` mode (skipped until the fake has it) and with the repository tools (skipped
  until the ``tools`` setting exists).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewbot.commands import main
from reviewbot.compare import (
    ALL_PAIRS_UP_TO,
    BOOTSTRAP_RESAMPLES,
    Configuration,
    Interval,
    PairResult,
    compare,
    pair_results,
    paired_bootstrap,
    pairs_of,
    read_configurations,
)
from reviewbot.config import ConfigError, Settings
from reviewbot.errors import BadInputError
from reviewbot.eval import EvalIncompleteError, ItemReview, Predicted, load_dataset
from reviewbot.prompts import render_messages
from reviewbot.repo.localdiff import local_context
from reviewbot.review import plan_offline, review_options
from reviewbot.store import Store
from reviewbot.tokens import local_counter
from tests.fakes.vllm_server import FakeVLLM
from tests.hypothesis_profiles import examples
from tests.store_fixtures import store_url  # noqa: F401

FIXTURES = Path(__file__).parent / "fixtures" / "eval"
TEAM = FIXTURES / "team"
CONTEXT = FIXTURES / "context"
CONFIGS = FIXTURES / "configs"
HAS_TOOLS = "tools" in {f.name for f in dataclasses.fields(Settings)}
NEEDS_EVIDENCE = "needs_evidence" in inspect.signature(FakeVLLM).parameters
MARKER = re.compile(r"#\s*hazard\((\w+)\):")
WORD = re.compile(r"[A-Za-z_]\w*")
KINDS = ("diff", "near", "cross", "clean")


# --- the bootstrap (pure) --------------------------------------------------------------------

differences = st.lists(
    st.floats(min_value=-1, max_value=1, allow_nan=False), min_size=1, max_size=30
)


@pytest.mark.slow
@settings(max_examples=examples(25), deadline=None)
@given(differences, st.floats(min_value=-1, max_value=1, allow_nan=False))
def test_the_bootstrap_is_seeded_within_the_differences_and_moves_with_them(
    values: list[float], shift: float
) -> None:
    interval = paired_bootstrap(values, resamples=500)
    assert interval == paired_bootstrap(values, resamples=500)
    assert min(values) - 1e-9 <= interval.low <= interval.high <= max(values) + 1e-9
    moved = paired_bootstrap([value + shift for value in values], resamples=500)
    assert moved.low == pytest.approx(interval.low + shift, abs=1e-9)
    assert moved.high == pytest.approx(interval.high + shift, abs=1e-9)


def test_the_interval_excludes_zero_only_when_the_items_agree() -> None:
    assert paired_bootstrap([0.5] * 10) == Interval(0.5, 0.5)
    assert paired_bootstrap([0.25, 0.5, 1.0, 0.0] * 5).excludes_zero()
    assert not paired_bootstrap([1.0, -1.0] * 10).excludes_zero()
    # one item of 21 better: its mean is above 0, but most resamples never draw it
    lone = paired_bootstrap([0.0] * 20 + [1.0])
    assert lone.low == 0.0 and not lone.excludes_zero()
    with pytest.raises(ValueError, match="at least one difference"):
        paired_bootstrap([])


def _pair(a_f1: list[float], b_f1: list[float]) -> PairResult:
    rows = tuple((f"item-{i}", a, b) for i, (a, b) in enumerate(zip(a_f1, b_f1, strict=True)))
    return PairResult("A", "B", rows, paired_bootstrap([b - a for _, a, b in rows]))


def test_a_verdict_says_better_or_worse_only_beyond_noise() -> None:
    better = _pair([0.0] * 8 + [1.0] * 4, [1.0] * 12)
    assert (better.better, better.improved, better.worsened) == ("B", 8, 0)
    assert better.verdict == "B is better than A beyond noise"
    assert better.mean_difference == pytest.approx(8 / 12)
    worse = _pair([1.0] * 12, [0.0] * 8 + [1.0] * 4)
    assert worse.better == "A" and worse.verdict == "B is worse than A beyond noise"
    mixed = _pair([0.0, 1.0] * 6, [1.0, 0.0] * 6)
    assert mixed.better is None and "no difference beyond noise" in mixed.verdict
    document = better.to_json()
    assert document["resamples"] == BOOTSTRAP_RESAMPLES and document["unchanged"] == 4
    assert document["interval"][0] > 0 and len(document["differences"]) == 12


def test_every_configuration_is_compared_with_the_first_and_every_pair_while_few() -> None:
    assert pairs_of(2) == [(0, 1)]
    assert pairs_of(3) == [(0, 1), (0, 2), (1, 2)]
    assert len(pairs_of(ALL_PAIRS_UP_TO)) == ALL_PAIRS_UP_TO * (ALL_PAIRS_UP_TO - 1) // 2
    assert pairs_of(ALL_PAIRS_UP_TO + 1) == [(0, b) for b in range(1, ALL_PAIRS_UP_TO + 1)]


def _configuration(name: str) -> Configuration:
    return Configuration(name, f"{name}.toml", {}, Settings())


def test_an_incomplete_configuration_is_not_scored_and_its_pairs_say_why() -> None:
    items = load_dataset(TEAM)
    found = ItemReview([Predicted("calc.py", "new", 6, "security")], "m", "v1")

    def reviewer(configuration: Configuration) -> Any:
        def review(item: Any) -> ItemReview:
            if configuration.name == "broken" and item.name == items[1].name:
                raise EvalIncompleteError(f"{item.name}: part of the diff was not reviewed")
            return found

        return review

    seen: list[tuple[str, str]] = []
    names = ("first", "broken", "third")
    results = compare(
        "team",
        items,
        [_configuration(name) for name in names],
        reviewer,
        on_item=lambda configuration, score: seen.append((configuration.name, score.item)),
    )
    assert [r.result is None for r in results] == [False, True, False]
    assert "part of the diff was not reviewed" in (results[1].incomplete or "")
    # the broken configuration stops at its incomplete item: 4 + 1 + 4 items scored
    assert [name for name, _ in seen].count("broken") == 1 and len(seen) == 9
    pairs = {(p.a, p.b): p for p in pair_results(results)}
    assert pairs["first", "broken"].interval is None
    assert (
        pairs["first", "broken"].verdict == "broken vs first: not compared (broken is incomplete)"
    )
    assert pairs["first", "third"].interval == Interval(0.0, 0.0)


# --- configuration files ---------------------------------------------------------------------


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_configuration_is_named_by_its_name_key_or_its_file(tmp_path: Path) -> None:
    plain = _write(tmp_path, "diff-only.toml", "scope_context_tokens = 0\nexclude = ['*.md']\n")
    named = _write(tmp_path, "b.toml", 'name = "wide context"\n[reviewbot]\ncontext_lines = 20\n')
    inner = _write(tmp_path, "c.toml", '[reviewbot]\nname = "inner"\nmin_severity = "major"\n')
    base = Settings(context_lines=5)
    first, second, third = read_configurations([plain, named, inner], base)
    assert (first.name, second.name, third.name) == ("diff-only", "wide context", "inner")
    assert first.overrides == {"exclude": ["*.md"], "scope_context_tokens": 0}
    assert (first.settings.scope_context_tokens, first.settings.context_lines) == (0, 5)
    assert second.settings.context_lines == 20 and third.settings.min_severity == "major"
    assert first.path == str(plain)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("scope_tokens = 0\n", "unknown setting 'scope_tokens'"),
        ("context_lines = -1\n", "context_lines must be 0 or more, got -1"),
        ("context_lines = 'many'\n", "context_lines: cannot use 'many'"),
        ("min_severity = 'loud'\n", "min_severity: 'loud' is not one of"),
        ("context_lines = \n", "is not valid TOML"),
        ("llm_base_url = 'http://other:8000/v1'\n", "llm_base_url cannot be set here"),
        ("database_url = 'sqlite:///other.db'\n", "database_url cannot be set here"),
        ("name = 3\n", "name must be a non-empty string"),
        ("name = '  '\n", "name must be a non-empty string"),
    ],
)
def test_a_configuration_that_cannot_be_used_is_one_error_naming_its_file(
    tmp_path: Path, text: str, message: str
) -> None:
    good = _write(tmp_path, "good.toml", "")
    bad = _write(tmp_path, "bad.toml", text)
    with pytest.raises(ConfigError) as raised:
        read_configurations([good, bad], Settings())
    assert str(bad) in str(raised.value) and message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_comparison_needs_two_files_that_can_be_read_and_names_that_differ(
    tmp_path: Path,
) -> None:
    one = _write(tmp_path, "one.toml", "")
    with pytest.raises(BadInputError, match="at least 2 configuration files, got 1"):
        read_configurations([one], Settings())
    with pytest.raises(ConfigError, match=r"missing\.toml: no such file"):
        read_configurations([one, tmp_path / "missing.toml"], Settings())
    with pytest.raises(ConfigError, match=r"is not a regular file \(a directory\)"):
        read_configurations([one, tmp_path], Settings())
    (tmp_path / "other").mkdir()
    twin = _write(tmp_path / "other", "one.toml", "context_lines = 1\n")
    with pytest.raises(BadInputError, match="both named 'one': give one a name key"):
        read_configurations([one, twin], Settings())


# --- the command -----------------------------------------------------------------------------


def _invoke(server: Any, database_url: str, *args: str) -> Any:
    env = {
        "REVIEWBOT_LLM_BASE_URL": server.base_url,
        "REVIEWBOT_DATABASE_URL": database_url,
        "REVIEWBOT_CONFIG": "",
    }
    return CliRunner().invoke(main, ["eval", *args], env=env)


def _configs(tmp_path: Path) -> list[str]:
    return [
        str(_write(tmp_path, "diff-only.toml", "scope_context_tokens = 0\n")),
        str(_write(tmp_path, "scope.toml", "")),
    ]


def _report(database_url: str, output: Path) -> dict[str, Any]:
    now = datetime.now(UTC)
    window = [
        "--since",
        (now - timedelta(hours=1)).isoformat(),
        "--until",
        (now + timedelta(hours=1)).isoformat(),
    ]
    result = CliRunner().invoke(
        main,
        ["report", *window, "--output", str(output)],
        env={"REVIEWBOT_DATABASE_URL": database_url, "REVIEWBOT_CONFIG": ""},
    )
    assert result.exit_code == 0, result.output
    return json.loads((output / "report.json").read_text())


@pytest.mark.slow
def test_a_comparison_is_printed_stored_and_shown_by_the_report(
    vllm: Any,
    store_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    configs = _configs(tmp_path)
    result = _invoke(vllm, store_url, str(TEAM), "--compare", *configs, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    first, second = document["configurations"]
    assert (first["name"], second["name"]) == ("diff-only", "scope")
    assert first["overrides"] == {"scope_context_tokens": 0} and second["overrides"] == {}
    for entry in (first, second):  # the team dataset's numbers (tests/test_eval.py)
        assert (entry["total"]["tp"], entry["total"]["fp"], entry["total"]["fn"]) == (2, 3, 2)
        assert entry["cost"]["model_calls"] == len(entry["items"]) == 4
        assert entry["cost"]["prompt_tokens"] > 0 and entry["cost"]["completion_tokens"] > 0
        assert entry["cost_per_item"]["model_calls"] == 1.0
    (pair,) = document["pairs"]
    assert (pair["a"], pair["b"], pair["interval"], pair["unchanged"]) == (
        "diff-only",
        "scope",
        [0.0, 0.0],
        4,
    )
    assert pair["verdict"].startswith("no difference beyond noise between scope and diff-only")

    store = Store.from_url(store_url)
    try:
        stored = store.latest_eval_comparison(datetime.now(UTC) + timedelta(minutes=1))
    finally:
        store.close()
    assert stored is not None and stored["id"] == document["comparison_id"]
    assert [c["name"] for c in stored["configurations"]] == ["diff-only", "scope"]
    assert stored["pairs"][0]["verdict"] == pair["verdict"]
    run = stored["runs"]["scope"]
    assert (run["id"], run["comparison_id"], run["tp"]) == (second["run_id"], stored["id"], 2)
    assert run["model_calls"] == 4 and run["prompt_tokens"] == second["cost"]["prompt_tokens"]
    assert run["wall_s"] is not None and run["cached_tokens"] is not None

    report = _report(store_url, tmp_path / "report")
    shown = report["eval_comparison"]
    assert [c["name"] for c in shown["configurations"]] == ["diff-only", "scope"]
    assert shown["configurations"][0]["cost_per_item"]["model_calls"] == 1.0
    assert shown["pairs"][0]["verdict"] == pair["verdict"]
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "## Latest eval comparison" in markdown and "| scope vs diff-only | +0.000 |" in markdown
    html = (tmp_path / "report" / "report.html").read_text()
    assert "Latest eval comparison" in html and "scope vs diff-only" in html


@pytest.mark.slow
def test_a_hostile_configuration_name_is_neutralised_in_the_report(
    vllm: Any, tmp_path: Path
) -> None:
    database = f"sqlite:///{tmp_path / 'db.sqlite'}"
    hostile = "@all <img src=x> | /close"
    named = str(_write(tmp_path, "named.toml", f"name = {json.dumps(hostile)}\n"))
    result = _invoke(vllm, database, str(TEAM), "--compare", _configs(tmp_path)[0], named)
    assert result.exit_code == 0, result.output
    report = _report(database, tmp_path / "report")
    assert report["eval_comparison"]["configurations"][1]["name"] == hostile
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "`@all` &lt;img src=x&gt; \\| /close" in markdown and "<img" not in markdown
    assert "<img" not in (tmp_path / "report" / "report.html").read_text()


@pytest.mark.slow
def test_the_tables_show_scores_cost_pairs_and_the_verdict(
    vllm: Any,
    tmp_path: Path,
) -> None:
    database = f"sqlite:///{tmp_path / 'db.sqlite'}"
    # only critical findings: 02's "== None" (minor, unlabelled) is no longer an FP there
    critical = str(_write(tmp_path, "critical.toml", 'min_severity = "critical"\n'))
    result = _invoke(vllm, database, str(TEAM), "--compare", *_configs(tmp_path), critical)
    assert result.exit_code == 0, result.output
    for words in ("mean F1", "prompt tokens", "thinking", "95% interval", "mean ΔF1", "wall s"):
        assert words in result.stdout
    assert "no difference beyond noise between scope and diff-only" in result.stdout
    assert "no difference beyond noise between critical and diff-only" in result.stdout
    changed = [line for line in result.stdout.splitlines() if "02-sql-and-off-by-one" in line]
    assert len(changed) == 2 and all("0.500" in line and "+0.167" in line for line in changed)
    assert "stored as eval comparison 1" in result.stdout


@pytest.mark.slow
def test_a_plain_eval_run_records_its_cost(vllm: Any, tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'db.sqlite'}"
    result = _invoke(vllm, database, str(TEAM), "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    store = Store.from_url(database)
    try:
        run = store.eval_run(document["run_id"])
    finally:
        store.close()
    assert (run["model_calls"], run["comparison_id"], run["configuration"]) == (4, None, None)
    assert run["prompt_tokens"] == document["cost"]["prompt_tokens"] > 0
    assert document["items"][0]["cost"]["model_calls"] == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--compare", "ONE"], "at least 2 configuration files, got 1"),
        (["ONE", "TWO"], "(CONFIG_FILES...) are configurations: give --compare"),
        (["--compare", "ONE", "BAD"], "bad.toml: unknown setting 'tool_rounds_typo'"),
        (["--compare", "ONE", "MISSING"], "missing.toml: no such file"),
    ],
)
def test_bad_configurations_are_one_line_and_exit_2_before_any_model_call(
    vllm: Any, tmp_path: Path, args: list[str], message: str
) -> None:
    files = {
        "ONE": str(_write(tmp_path, "one.toml", "")),
        "TWO": str(_write(tmp_path, "two.toml", "")),
        "BAD": str(_write(tmp_path, "bad.toml", "tool_rounds_typo = 3\n")),
        "MISSING": str(tmp_path / "missing.toml"),
    }
    database = tmp_path / "db.sqlite"
    result = _invoke(vllm, f"sqlite:///{database}", str(TEAM), *[files.get(a, a) for a in args])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("reviewbot: error: ") and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert vllm.paths == [] and not database.exists()


@pytest.mark.slow
def test_a_configuration_whose_review_is_incomplete_is_stored_unscored_and_exits_1(
    tmp_path: Path,
) -> None:
    from tests.fakes.vllm_server import MalformedCalls

    database = f"sqlite:///{tmp_path / 'db.sqlite'}"
    repairs = str(_write(tmp_path, "repairs.toml", ""))
    no_repair = str(_write(tmp_path, "no-repair.toml", "llm_max_repair_rounds = 0\n"))
    unreadable = MalformedCalls(kinds=("missing_line",), repair="fix")
    with FakeVLLM(malformed=unreadable) as server:
        result = _invoke(server, database, str(TEAM), "--compare", repairs, no_repair, "--json")
    assert result.exit_code == 1
    assert "reviewbot: error: not every configuration was scored: 01-eval-calls" in result.stderr
    document = json.loads(result.stdout)
    fixed, broken = document["configurations"]
    assert fixed["complete"] and fixed["total"]["tp"] == 2
    assert not broken["complete"] and "total" not in broken and broken["run_id"] is None
    assert "01-eval-calls: part of the diff was not reviewed" in broken["incomplete"]
    assert document["pairs"][0]["interval"] is None and not document["complete"]
    store = Store.from_url(database)
    try:
        stored = store.latest_eval_comparison(datetime.now(UTC) + timedelta(minutes=1))
    finally:
        store.close()
    assert stored is not None and list(stored["runs"]) == ["repairs"]
    assert stored["configurations"][1]["incomplete"] == broken["incomplete"]


# --- the context fixture set -----------------------------------------------------------------


def _kind(name: str) -> str:
    return name.split("-", 1)[0]


def _conversation(item: Any, settings: Settings) -> str:
    """The text of every prompt a review of ``item`` under ``settings`` sends (offline plan)."""
    options = review_options(settings)
    context = local_context(item.name, item.files, options.plan_options.exclusions)
    planned = plan_offline(
        item.files,
        context=context,
        counter=local_counter(None),
        options=options,
        contents=item.head,
    )
    parts = len(planned.chunks)
    return "\n".join(
        message["content"]
        for chunk in planned.chunks
        for message in render_messages(context, chunk, part=chunk.index + 1, parts=parts)
    )


def _evidence_marker(item: Any, truth: Any) -> str:
    line = item.head[truth.evidence.path].splitlines()[truth.evidence.line - 1]
    found = re.search(r"#\s*hazard\(\w+\):.*", line)
    assert found, f"{item.name}: the evidence line has no marker: {line!r}"
    return found.group(0)


def test_the_context_set_has_tens_of_items_of_every_kind_with_their_evidence() -> None:
    items = load_dataset(CONTEXT)
    kinds = [_kind(item.name) for item in items]
    assert len(items) >= 24 and set(kinds) == set(KINDS)
    assert all(kinds.count(kind) >= 4 for kind in KINDS)
    for item in items:
        assert bool(item.truth) == (_kind(item.name) != "clean"), item.name
        for truth in item.truth:
            assert truth.evidence is not None
            added = item.head[truth.path].splitlines()[truth.line - 1]
            symbol = MARKER.search(_evidence_marker(item, truth))
            assert symbol and symbol.group(1) in WORD.findall(added), item.name
            # cross-file evidence lies in a file the diff does not touch
            touched = {file.new_path for file in item.files}
            assert (truth.evidence.path not in touched) == (_kind(item.name) == "cross")


def test_each_kind_of_evidence_is_shown_only_to_the_configurations_that_can_see_it() -> None:
    """diff: in every prompt; near: only with enclosing-scope context; cross: in no prompt
    (only a tool answer can bring it)."""
    diff_only, scope = Settings(scope_context_tokens=0), Settings()
    for item in load_dataset(CONTEXT):
        kind = _kind(item.name)
        for truth in item.truth:
            marker = _evidence_marker(item, truth)
            assert (marker in _conversation(item, diff_only)) == (kind == "diff"), item.name
            assert (marker in _conversation(item, scope)) == (kind in ("diff", "near")), item.name


def test_no_added_line_of_a_clean_item_uses_a_marked_symbol_even_with_every_file_in_view() -> None:
    """The needs-evidence rule on the clean items, with every head file in the conversation
    (what tools could bring at most): no finding, so any finding is a false positive."""
    for item in load_dataset(CONTEXT):
        if _kind(item.name) != "clean":
            continue
        everything = "\n".join(item.head.values())
        for file in item.files:
            for hunk in file.hunks:
                for line in hunk.lines:
                    if line.kind.value != "added":
                        continue
                    seen = everything.replace(line.text, "", 1)
                    marked = {s for s in WORD.findall(line.text) if f"# hazard({s}):" in seen}
                    assert not marked, f"{item.name}: {line.text!r} uses {marked}"


def _shipped(name: str, tmp_path: Path) -> str:
    """A shipped configuration; until the ``tools`` setting exists, without its tools line."""
    path = CONFIGS / f"{name}.toml"
    if HAS_TOOLS:
        return str(path)
    text = "".join(
        line for line in path.read_text().splitlines(keepends=True) if not line.startswith("tools")
    )
    return str(_write(tmp_path, path.name, text))


def _context_comparison(tmp_path: Path, names: tuple[str, ...]) -> dict[str, Any]:
    database = f"sqlite:///{tmp_path / 'db.sqlite'}"
    configs = [_shipped(name, tmp_path) for name in names]
    with FakeVLLM(needs_evidence=True) as server:  # type: ignore[call-arg]
        result = _invoke(server, database, str(CONTEXT), "--compare", *configs, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _found_by_kind(entry: dict[str, Any]) -> dict[str, tuple[int, int, int]]:
    counts: dict[str, list[int]] = {kind: [0, 0, 0] for kind in KINDS}
    for item in entry["items"]:
        total = counts[_kind(item["item"])]
        for index, name in enumerate(("tp", "fp", "fn")):
            total[index] += item[name]
    return {kind: (tp, fp, fn) for kind, (tp, fp, fn) in counts.items()}


@pytest.mark.slow
@pytest.mark.skipif(not NEEDS_EVIDENCE, reason="the fake vLLM has no needs_evidence mode yet")
def test_scope_context_finds_the_near_bugs_that_the_diff_alone_misses(tmp_path: Path) -> None:
    document = _context_comparison(tmp_path, ("diff-only", "scope"))
    diff_only, scope = document["configurations"]
    assert _found_by_kind(diff_only) == {
        "diff": (8, 0, 0),
        "near": (0, 0, 8),
        "cross": (0, 0, 7),
        "clean": (0, 0, 0),
    }
    assert _found_by_kind(scope) == {
        "diff": (8, 0, 0),
        "near": (8, 0, 0),
        "cross": (0, 0, 7),
        "clean": (0, 0, 0),
    }
    (pair,) = document["pairs"]
    assert (pair["improved"], pair["worsened"], pair["better"]) == (8, 0, "scope")
    assert pair["verdict"] == "scope is better than diff-only beyond noise"
    assert scope["cost"]["prompt_tokens"] > diff_only["cost"]["prompt_tokens"]


@pytest.mark.slow
@pytest.mark.skipif(
    not (NEEDS_EVIDENCE and HAS_TOOLS), reason="needs the tools setting and the fake's mode"
)
def test_tools_find_the_cross_file_bugs_at_a_higher_token_cost(tmp_path: Path) -> None:
    document = _context_comparison(tmp_path, ("diff-only", "scope", "tools"))
    diff_only, scope, tools = document["configurations"]
    assert _found_by_kind(diff_only)["near"] == (0, 0, 8)
    assert _found_by_kind(diff_only)["cross"] == (0, 0, 7)
    assert _found_by_kind(scope)["near"] == (8, 0, 0)
    assert _found_by_kind(scope)["cross"] == (0, 0, 7)
    assert _found_by_kind(tools) == {
        "diff": (8, 0, 0),
        "near": (8, 0, 0),
        "cross": (7, 0, 0),
        "clean": (0, 0, 0),
    }
    pairs = {(p["a"], p["b"]): p for p in document["pairs"]}
    assert pairs["scope", "tools"]["better"] == "tools"
    assert pairs["diff-only", "tools"]["improved"] == 15
    assert pairs["diff-only", "scope"]["better"] == "scope"
    tokens = [entry["cost"]["prompt_tokens"] for entry in (diff_only, scope, tools)]
    assert tokens == sorted(tokens) and len(set(tokens)) == 3
    assert tools["cost"]["model_calls"] > scope["cost"]["model_calls"]


@pytest.mark.slow
@pytest.mark.skipif(
    not (NEEDS_EVIDENCE and HAS_TOOLS), reason="needs the tools setting and the fake's mode"
)
def test_verification_keeps_the_bugs_only_the_tools_find_and_its_cost_shows(
    tmp_path: Path,
) -> None:
    document = _context_comparison(tmp_path, ("tools", "tools-verify"))
    tools, verified = document["configurations"]
    assert _found_by_kind(verified) == _found_by_kind(tools)
    assert _found_by_kind(verified)["cross"] == (7, 0, 0)
    assert verified["cost"]["model_calls"] > tools["cost"]["model_calls"]
    assert verified["cost"]["prompt_tokens"] > tools["cost"]["prompt_tokens"]
    (pair,) = document["pairs"]
    assert (pair["improved"], pair["worsened"]) == (0, 0)
