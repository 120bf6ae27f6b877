"""What is on the MR is the truth for what to post (issue 10 item 3): a comment a reviewer
deleted is not posted again, while an MR that lost all of the bot's comments (a GitLab
restored from a backup, an MR recreated) gets them again. Fake GitLab + fake vLLM over HTTP,
on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from reviewbot.comments import parse_marker
from reviewbot.store import Store
from tests.mr_world import (
    PROJECT,
    World,
    world,  # noqa: F401
)
from tests.store_fixtures import store_url  # noqa: F401

pytestmark = pytest.mark.slow  # measured: see docs/development.md

SUMMARY_MARKER = "<!-- reviewbot:summary -->"
LOST_NOTE = "held none of reviewbot's earlier comments"


def bot_notes(world: World) -> list[dict]:  # noqa: F811
    return [n for n in world.gitlab.notes(PROJECT, 1) if parse_marker(n["body"]) is not None]


def diff_notes(world: World) -> list[dict]:  # noqa: F811
    return [n for n in bot_notes(world) if SUMMARY_MARKER not in n["body"]]


def summary(world: World) -> str:  # noqa: F811
    [note] = [n for n in bot_notes(world) if SUMMARY_MARKER in n["body"]]
    return str(note["body"])


def test_an_mr_that_lost_every_comment_of_the_bot_gets_them_again(world: World) -> None:  # noqa: F811
    first = world.run()
    assert len(first.posted) == 3
    for note in bot_notes(world):  # a restore to before the review: the notes are gone
        world.gitlab.delete_note(PROJECT, 1, note["id"])
    again = world.run()
    assert len(again.posted) == 3 and again.published.deleted == []
    assert len(diff_notes(world)) == 3
    assert "3 finding(s), 3 posted inline." in summary(world) and LOST_NOTE in summary(world)
    store = Store.from_url(world.database_url)
    assert store.feedback(project=PROJECT, mr_iid=1) == []  # nobody deleted anything
    third = world.run()
    assert third.posted == [] and LOST_NOTE not in summary(world)


def test_comments_deleted_while_the_summary_stays_are_not_posted_again(world: World) -> None:  # noqa: F811
    world.run()
    for note in diff_notes(world):  # a reviewer deletes every comment, not the summary
        world.gitlab.delete_note(PROJECT, 1, note["id"])
    again = world.run()
    assert again.posted == [] and len(again.published.deleted) == 3
    assert diff_notes(world) == []
    assert "3 finding(s), 0 posted inline." in summary(world)
    assert "3 not posted again: its comment had been deleted." in summary(world)
    assert LOST_NOTE not in summary(world)


def test_comments_posted_again_are_the_ones_first_posted(world: World) -> None:  # noqa: F811
    """The second run carries the first run's findings over from the store (same head, no
    model call): what it posts again must be what was posted, suggestion included."""
    world.run()
    first = sorted(note["body"] for note in diff_notes(world))
    assert any("```suggestion" in body for body in first)  # the `== None` finding has one
    for note in bot_notes(world):  # a restore to before the review: the notes are gone
        world.gitlab.delete_note(PROJECT, 1, note["id"])
    again = world.run()
    assert again.review.carried is not None and len(again.posted) == 3
    assert sorted(note["body"] for note in diff_notes(world)) == first
