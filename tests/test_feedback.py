"""What became of a posted finding, derived from GitLab's answers or from what the bot's next
review saw (pure: plain data in, events out). The sync against the fake GitLab is tested end to
end in test_accuracy_end_to_end.py, the next review's outcomes in test_run.py and
test_mr_truth.py."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from reviewbot.diff import parse_git_diff
from reviewbot.feedback import (
    MergeRequestFacts,
    lines_changed,
    next_review_outcomes,
    outcome_events,
    outcome_key,
    recorded_as_posted,
)
from reviewbot.states import FeedbackKind
from reviewbot.store import MergeRequestKey

KEY = MergeRequestKey("https://gitlab.example.com", 7, 3)
NOW = datetime(2026, 3, 12, 9, 0, tzinfo=UTC)
OLD_HEAD, NEW_HEAD = "a" * 40, "b" * 40
# app.py at the old head had 6 lines; the new head rewrites line 3 and deletes old line 5
CHANGES = parse_git_diff(
    "diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n"
    "@@ -2,4 +2,3 @@\n two\n-three\n+THREE\n four\n-five\n"
    "diff --git a/gone.py b/gone.py\ndeleted file mode 100644\n--- a/gone.py\n+++ /dev/null\n"
    "@@ -1 +0,0 @@\n-x\n"
)


def _finding(**overrides: Any) -> dict[str, Any]:
    base = {
        "id": 1,
        "project": "group/app",
        "fingerprint": "fp1",
        "path": "app.py",
        "side": "new",
        "line": 4,
        "end_line": None,
        "note_id": 100,
        "discussion_id": "d1",
        "head_sha": OLD_HEAD,
        "state": "posted",
    }
    return {**base, **overrides}


def _thread(
    note_id: int = 100,
    *,
    resolved_by: str | None = None,
    replies: tuple[str, ...] = (),
    suggestion_applied: bool = False,
) -> dict[str, Any]:
    first = {
        "id": note_id,
        "author": {"username": "reviewbot"},
        "resolved": resolved_by is not None,
        "resolved_by": {"username": resolved_by} if resolved_by else None,
        "resolved_at": "2026-03-11T10:00:00.000Z" if resolved_by else None,
        "suggestions": [{"id": 1, "applied": suggestion_applied}],
    }
    notes = [first] + [
        {
            "id": note_id + n,
            "author": {"username": who},
            "created_at": "2026-03-11T11:00:00Z",
            "system": False,
        }
        for n, who in enumerate(replies, 1)
    ]
    return {"id": "d1", "notes": notes}


def _facts(
    discussions: list[dict[str, Any]],
    *,
    state: str = "opened",
    awards: dict[int, list[dict[str, Any]]] | None = None,
) -> MergeRequestFacts:
    return MergeRequestFacts(
        state=state,
        merged_at=NOW if state == "merged" else None,
        web_url=None,
        latest_head_sha=NEW_HEAD,
        discussions=discussions,
        awards=awards or {},
        changes_since={OLD_HEAD: CHANGES},
    )


def _events(findings: list[dict[str, Any]], facts: MergeRequestFacts, **kwargs: Any) -> list[Any]:
    options = {"bot_username": "reviewbot", "votes_in_force": set(), "on_record": {}, "now": NOW}
    options.update(kwargs)
    return outcome_events(KEY, findings, facts, **options)


def _kinds(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["kind"], e["value"]) for e in events]


def test_lines_changed_covers_the_range_and_deleted_files() -> None:
    assert lines_changed(CHANGES, "app.py", 3, 3)
    assert not lines_changed(CHANGES, "app.py", 4, 4)
    assert lines_changed(CHANGES, "app.py", 4, 5)  # a multi-line finding ending on a change
    assert not lines_changed(CHANGES, "other.py", 3, 3)
    assert lines_changed(CHANGES, "gone.py", 1, 1)


def test_a_thread_left_alone_on_an_open_mr_has_no_outcome() -> None:
    assert _events([_finding()], _facts([_thread()])) == []


def test_human_resolution_replies_and_applied_suggestion() -> None:
    thread = _thread(
        resolved_by="alice", replies=("alice", "reviewbot", "bob"), suggestion_applied=True
    )
    events = _events([_finding()], _facts([thread]))
    assert [kind for kind, _ in _kinds(events)] == [
        "resolution",
        "reply",
        "reply",
        "suggestion_applied",
    ]
    resolution, first_reply, second_reply, _ = events
    assert (resolution["username"], resolution["created_at"]) == (
        "alice",
        datetime(2026, 3, 11, 10, tzinfo=UTC),
    )
    assert [first_reply["username"], second_reply["username"]] == ["alice", "bob"]
    assert first_reply["event_key"] == "reply:https://gitlab.example.com:101"
    assert resolution["event_key"] == f"resolution:{KEY}:fp1"


def test_a_thread_resolved_by_the_bot_is_not_a_human_resolution() -> None:
    assert _events([_finding()], _facts([_thread(resolved_by="reviewbot")])) == []


def test_addressed_when_a_later_version_changes_the_line() -> None:
    events = _events([_finding(line=3)], _facts([_thread()]))
    assert _kinds(events) == [("addressed", "addressed")]
    assert events[0]["event_key"] == f"addressed:{KEY}:fp1"  # the key reviewbot.mr uses too
    # reviewed at the latest head: nothing changed since
    assert _events([_finding(line=3, head_sha=NEW_HEAD)], _facts([_thread()])) == []
    # already on record (the bot resolved its stale thread): not again
    assert _events([_finding(line=3)], _facts([_thread()]), on_record={1: {"addressed"}}) == []


def test_merged_with_the_thread_open_and_the_line_unchanged_is_ignored() -> None:
    merged = _facts([_thread()], state="merged")
    assert _kinds(_events([_finding()], merged)) == [("ignored", "ignored")]
    assert _kinds(_events([_finding(line=3)], merged)) == [("addressed", "addressed")]
    resolved = _facts([_thread(resolved_by="alice")], state="merged")
    assert _kinds(_events([_finding()], resolved)) == [("resolution", "resolution")]


def test_a_comment_gone_from_the_mr_is_deleted_once() -> None:
    assert _kinds(_events([_finding()], _facts([]))) == [("deleted", "deleted")]
    assert _events([_finding()], _facts([]), on_record={1: {"deleted"}}) == []


def test_votes_by_humans_are_recorded_and_taken_back_votes_revoked() -> None:
    awards = {
        100: [
            {
                "id": 5,
                "name": "thumbsup",
                "user": {"username": "alice"},
                "created_at": "2026-03-11T09:00:00Z",
            },
            {"id": 6, "name": "thumbsdown", "user": {"username": "reviewbot"}},
            {"id": 7, "name": "tada", "user": {"username": "bob"}},
            {"id": 8, "name": "-1", "user": {"username": "bob"}},
        ]
    }
    in_force = {(1, "alice", "thumbsup"), (1, "carol", "thumbsup")}
    events = _events([_finding()], _facts([_thread()], awards=awards), votes_in_force=in_force)
    assert [(e["username"], e["value"]) for e in events] == [
        ("alice", "thumbsup"),
        ("bob", "thumbsdown"),
        ("carol", "thumbsup:revoked"),
    ]
    assert events[0]["event_key"] == "award:https://gitlab.example.com:5"
    assert events[0]["created_at"] == datetime(2026, 3, 11, 9, tzinfo=UTC)


# --- what the bot's own next review saw ------------------------------------------------------


def test_the_next_review_records_a_resolved_thread_as_addressed_and_a_gone_one_deleted() -> None:
    recorded = {
        "fixed": _finding(id=1, fingerprint="fixed", note_id=101),
        "gone": _finding(id=2, fingerprint="gone", note_id=102),
        "kept": _finding(id=3, fingerprint="kept", note_id=103),
        "again": _finding(id=4, fingerprint="again", note_id=104),
        "resolved-before": _finding(id=5, fingerprint="resolved-before", state="resolved"),
    }
    outcomes = next_review_outcomes(
        KEY,
        recorded,
        resolved=["fixed", "never-recorded"],
        posted_now={"again"},  # its comment had gone and this review posted it again
        on_mr={"fixed", "kept"},
    )
    assert outcomes.outdated == [1]
    assert [(e["finding_id"], e["kind"], e["event_key"]) for e in outcomes.events] == [
        (1, "addressed", f"addressed:{KEY}:fixed"),
        (2, "deleted", f"deleted:{KEY}:gone"),
    ]
    assert outcomes.events[1] == {
        "finding_id": 2,
        "project": "group/app",
        "note_id": 102,
        "kind": "deleted",
        "value": "deleted",
        "event_key": f"deleted:{KEY}:gone",
        "gitlab_url": "https://gitlab.example.com",
        "project_id": 7,
        "mr_iid": 3,
    }


def test_the_next_review_and_a_sync_key_an_outcome_alike() -> None:
    """A comment deleted on the MR is one event whoever sees it first."""
    finding = _finding(fingerprint="gone")
    [from_sync] = outcome_events(
        KEY,
        [finding],
        _facts([]),
        bot_username="reviewbot",
        votes_in_force=set(),
        on_record={},
        now=NOW,
    )
    [from_review] = next_review_outcomes(
        KEY, {"gone": finding}, resolved=[], posted_now=set(), on_mr=set()
    ).events
    assert from_sync["event_key"] == from_review["event_key"]
    assert from_review["event_key"] == outcome_key(FeedbackKind.DELETED, KEY, "gone")


def test_only_findings_still_posted_are_recorded_as_posted() -> None:
    recorded = {
        "open": _finding(fingerprint="open"),
        "done": _finding(fingerprint="done", state="resolved"),
        "old": _finding(fingerprint="old", state="outdated"),
    }
    assert recorded_as_posted(recorded) == {"open"}
