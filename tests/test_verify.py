"""reviewbot.verify: the candidate list, reading verdicts (hostile answers included), the bar."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reviewbot.diff import Side
from reviewbot.findings import AnchorKind, Category, Finding, Severity
from reviewbot.model import ModelAnswer, ToolCallText
from reviewbot.verify import (
    apply_verdicts,
    candidate_list,
    candidates,
    read_verdicts,
)


def finding(line: int, severity: Severity = Severity.MAJOR) -> Finding:
    return Finding(
        path="app.py",
        old_path="app.py",
        side=Side.NEW,
        line=line,
        end_line=None,
        severity=severity,
        category=Category.BUG,
        title=f"title {line}",
        body="body",
        suggestion=None,
        anchor=AnchorKind.EXACT,
        anchor_note="",
        line_text="x",
        fingerprint=f"fp{line}",
        chunk_index=0,
        reported_line=line,
        reported_side=Side.NEW,
    )


def answer(*arguments: object) -> ModelAnswer:
    calls = [ToolCallText("verdict", a if isinstance(a, str) else json.dumps(a)) for a in arguments]
    return ModelAnswer(tool_calls=calls)


def verdict(number: int, said: str, confidence: float = 0.9) -> dict:
    return {"id": number, "verdict": said, "reason": "why", "confidence": confidence}


def test_candidates_are_at_or_above_the_severity() -> None:
    found = [finding(1, Severity.INFO), finding(2, Severity.MINOR), finding(3, Severity.BLOCKER)]
    assert [f.line for f in candidates(found, Severity.MINOR)] == [2, 3]


def test_the_list_numbers_each_candidate_with_its_place() -> None:
    text = candidate_list([finding(4), finding(9)])
    assert "1. [major/bug] app.py:4: title 4" in text and "2. [major/bug] app.py:9: title 9" in text


def test_a_sure_drop_drops_and_a_doubtful_one_keeps() -> None:
    found = [finding(1), finding(2), finding(3)]
    checked = read_verdicts(answer(verdict(1, "drop"), verdict(2, "drop", 0.5)), 3)
    outcome = apply_verdicts(found, found, checked, 0.7)
    assert [j.verdict for j in outcome.judged] == ["drop", "keep", "unverified"]
    assert [f.line for f in outcome.kept] == [2, 3]
    assert outcome.verified == 2 and outcome.failed  # the third had no verdict


def test_unknown_ids_and_unreadable_calls_are_counted_not_applied() -> None:
    found = [finding(1)]
    checked = read_verdicts(answer(verdict(7, "drop"), "{not json", verdict(1, "keep")), 1)
    assert (checked.unknown_ids, checked.unreadable, list(checked.verdicts)) == (1, 1, [1])
    outcome = apply_verdicts(found, found, checked, 0.7)
    assert outcome.failed and outcome.kept == found


def test_no_answer_keeps_everything_unverified() -> None:
    found = [finding(1), finding(2)]
    outcome = apply_verdicts(found, found[:1], None, 0.7)
    assert outcome.kept == found and [j.verdict for j in outcome.judged] == ["unverified", None]


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
HOSTILE = st.one_of(
    st.text(max_size=40),
    st.fixed_dictionaries(
        {"id": JSONISH, "verdict": st.sampled_from(["keep", "drop", "maybe"]) | JSONISH},
        optional={"reason": JSONISH, "confidence": JSONISH},
    ).map(json.dumps),
)


@pytest.mark.slow
@given(st.lists(HOSTILE, max_size=6), st.integers(min_value=0, max_value=4))
def test_hostile_verdicts_never_invent_or_lose_a_finding(texts: list[str], count: int) -> None:
    found = [finding(line) for line in range(1, count + 1)]
    checked = read_verdicts(
        ModelAnswer(tool_calls=[ToolCallText("verdict", t) for t in texts]), count
    )
    assert all(1 <= number <= count for number in checked.verdicts)
    outcome = apply_verdicts(found, found, checked, 0.7)
    assert [j.finding for j in outcome.judged] == found
    assert all(j.confidence is None or 0 <= j.confidence <= 1 for j in outcome.judged)
