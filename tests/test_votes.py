"""The vote of a deep review's passes (reviewbot.votes): properties and examples."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reviewbot.diff import Side
from reviewbot.findings import AnchorKind, Category, Finding, Severity
from reviewbot.votes import LINE_WINDOW, PassFindings, confidence, vote

PATHS = ("a.py", "b.py")
TITLES = ("eval of input", "None compared with ==", "SQL built by hand")
CATEGORIES = (Category.BUG, Category.SECURITY)


def finding(
    path: str = "a.py",
    line: int | None = 10,
    title: str = "eval of input",
    category: Category = Category.SECURITY,
    severity: Severity = Severity.MAJOR,
) -> Finding:
    return Finding(
        path=path,
        old_path=path,
        side=Side.NEW,
        line=line,
        end_line=None,
        severity=severity,
        category=category,
        title=title,
        body="body",
        suggestion=None,
        anchor=AnchorKind.FILE if line is None else AnchorKind.EXACT,
        anchor_note="",
        line_text="x",
        fingerprint=f"{path}:{title}:{category}",
        chunk_index=0,
        reported_line=line or 1,
        reported_side=Side.NEW,
    )


findings_st = st.builds(
    finding,
    path=st.sampled_from(PATHS),
    line=st.one_of(st.none(), st.integers(1, 40)),
    title=st.sampled_from(TITLES),
    category=st.sampled_from(CATEGORIES),
    severity=st.sampled_from(list(Severity)),
)
passes_st = st.lists(
    st.lists(findings_st, max_size=5).map(lambda found: PassFindings(found)),
    min_size=1,
    max_size=5,
)


def _key(result):
    return (
        [(f.path, f.line, f.title, f.votes, f.passes) for f in result.kept],
        [(f.path, f.line, f.title, f.votes, f.passes) for f in result.voted_out],
    )


@given(passes_st, st.randoms(use_true_random=False), st.integers(1, 5))
def test_the_order_of_the_passes_does_not_change_the_result(passes, rnd, keep_at) -> None:
    shuffled = [PassFindings(list(p.findings)) for p in passes]
    rnd.shuffle(shuffled)
    for p in shuffled:
        rnd.shuffle(p.findings)
    assert _key(vote(passes, keep_at)) == _key(vote(shuffled, keep_at))


@given(passes_st)
def test_one_vote_keeps_the_union(passes) -> None:
    result = vote(passes, 1)
    assert not result.voted_out
    reported = {f.path for p in passes for f in p.findings}
    assert {f.path for f in result.kept} == reported
    assert len(result.kept) <= sum(len(p.findings) for p in passes)
    for kept in result.kept:
        assert 1 <= kept.votes <= kept.passes == len(passes)


@given(passes_st)
def test_all_votes_keep_only_what_every_pass_reported(passes) -> None:
    result = vote(passes, len(passes))
    for kept in result.kept:
        assert kept.votes == len(passes)
        assert all(
            any(f.path == kept.path and (f.line is None) == (kept.line is None) for f in p.findings)
            for p in passes
        )
    for out in result.voted_out:
        assert out.votes < len(passes)


def test_two_of_three_passes_keep_a_finding_with_its_confidence() -> None:
    passes = [
        PassFindings([finding(line=10), finding("b.py", 3, "noise", Category.BUG)]),
        PassFindings([finding(line=10 + LINE_WINDOW, title="Eval of INPUT!")]),
        PassFindings([finding("b.py", 30, "other noise", Category.STYLE)]),
    ]
    result = vote(passes, 2)
    assert [(f.path, f.votes, f.passes) for f in result.kept] == [("a.py", 2, 3)]
    assert confidence(result.kept[0]) == 2 / 3
    assert sorted((f.line, f.votes) for f in result.voted_out) == [(3, 1), (30, 1)]


def test_lines_too_far_apart_or_of_another_kind_are_two_findings() -> None:
    far = finding(line=10 + LINE_WINDOW + 1)
    other = finding(line=11, title="unrelated", category=Category.BUG)
    result = vote([PassFindings([finding()]), PassFindings([far, other])], 2)
    assert not result.kept and len(result.voted_out) == 3


def test_the_most_severe_report_represents_the_group() -> None:
    passes = [
        PassFindings([finding(severity=Severity.MINOR)]),
        PassFindings([finding(severity=Severity.CRITICAL)]),
    ]
    assert vote(passes, 2).kept[0].severity is Severity.CRITICAL


def test_a_pass_that_did_not_answer_a_path_neither_votes_nor_counts() -> None:
    passes = [
        PassFindings([finding()]),
        PassFindings([finding()], unanswered=frozenset({"a.py"})),
        PassFindings([finding()]),
    ]
    result = vote(passes, 2)
    assert [(f.votes, f.passes) for f in result.kept] == [(2, 2)]
    assert not result.short_of_votes


def test_a_path_fewer_than_k_passes_answered_is_short_of_votes() -> None:
    failed = frozenset({"a.py"})
    passes = [PassFindings([finding()]), PassFindings([], failed), PassFindings([], failed)]
    result = vote(passes, 2)
    assert not result.kept and result.short_of_votes == {"a.py"}
