"""The pure parts of reviewbot.learnings.proposals: where a proposal is posted and what its note
says (the GitLab round trip is in tests/test_learnings_end_to_end.py)."""

from __future__ import annotations

from reviewbot.learnings.learning import Learning, LearningSource, LearningStatus
from reviewbot.learnings.proposals import proposal_marker, proposal_note_body, proposal_thread


def _proposal(findings: list[dict[str, object]], **fields: object) -> Learning:
    values: dict[str, object] = {
        "text": 'Don\'t flag bug findings like "x" in src/**: the team turned down 3 of them',
        "gitlab_url": "https://gitlab.example.com",
        "project_id": 7,
        "project": "group/app",
        "path_globs": ("src/**",),
        "category": "bug",
        "status": LearningStatus.PROPOSED,
        "source": LearningSource.PROPOSAL,
        "proposal_key": "learning-proposal:abc",
        "proposal_evidence": {"count": 3, "findings": findings},
        "id": 14,
    }
    values.update(fields)
    return Learning(**values)  # type: ignore[arg-type]


def test_the_thread_is_the_latest_finding_that_has_one() -> None:
    findings = [
        {"id": 3, "mr_iid": 1, "discussion_id": "d3"},
        {"id": 9, "mr_iid": 4, "discussion_id": None},  # a summary-only finding: no thread
        {"id": 5, "mr_iid": 2, "discussion_id": "d5"},
    ]
    assert proposal_thread(_proposal(findings)) == (2, "d5")
    assert proposal_thread(_proposal([{"id": 1, "mr_iid": None, "discussion_id": "d"}])) is None
    assert proposal_thread(_proposal([], proposal_evidence=None)) is None


def test_the_note_says_what_how_and_where_and_ends_with_its_marker() -> None:
    body = proposal_note_body(_proposal([]))
    assert "3 findings of this kind were turned down" in body
    assert "files `src/**`, category `bug`" in body
    assert "`reviewbot learnings accept 14`" in body and "👍 this comment" in body
    assert body.endswith(proposal_marker(_proposal([])))
    assert proposal_marker(_proposal([])) == "<!-- reviewbot:learning-proposal:abc -->"


def test_hostile_scope_and_text_are_defused() -> None:
    body = proposal_note_body(
        _proposal([], text="/close @all", project="a/@all", path_globs=("x`|y",))
    )
    quoted = body.splitlines()[2]
    assert quoted.startswith("> ") and "/close" not in quoted.replace("\\/close", "")
    assert "@all" not in body.replace("`@all`", "")
    assert "`x'/y`" in body
