"""``walkthrough_target = "description"``: the walkthrough in the MR's description between hidden
markers, through the fake GitLab's ``PUT /projects/:id/merge_requests/:iid``: written once, the
author's text byte-identical, a lost answer checked on the MR before writing again
(docs/walkthrough.md)."""

from __future__ import annotations

import pytest

from reviewbot.app import App
from reviewbot.gitlab.descriptions import MAX_MR_DESCRIPTION_CHARS, BlockWrite
from reviewbot.marked_block import BLOCK_END, BLOCK_START, block_text, find_block
from reviewbot.mr import RunOptions
from tests.mr_world import PROJECT, World, commit_on_feature, git, world  # noqa: F401

pytestmark = pytest.mark.slow

DEVELOPER = 30
MR_PUT = r"/merge_requests/1$"
IN_DESCRIPTION = "_walkthrough: in the merge request's description_"
ON = {"walkthrough": "on", "walkthrough_target": "description"}
LATE_S = 2.0  # the stored write is answered this late (as tests/test_exactly_once.py)
CLIENT_TIMEOUT_S = 0.5  # the client gives up waiting first


def _summary(world: World) -> str:  # noqa: F811
    return next(
        n["body"] for n in world.gitlab.notes(PROJECT, 1) if "reviewbot:summary" in n["body"]
    )


def _puts(world: World) -> int:  # noqa: F811
    return sum(
        1
        for method, path in world.gitlab.requests
        if method == "PUT" and path.endswith("/merge_requests/1")
    )


def _walkthrough_calls(world: World) -> int:  # noqa: F811
    return sum(
        1
        for body in world.vllm.requests
        if "walkthrough of a GitLab merge request" in body["messages"][0]["content"]
    )


def _push(world: World, files: dict[str, str]) -> None:  # noqa: F811
    commit_on_feature(world.repo, files, "more")
    world.gitlab.push(PROJECT, 1, git(world.repo, "rev-parse", "feature"))


def test_written_once_into_the_description_and_not_again_when_it_holds_it(world: World) -> None:  # noqa: F811
    world.gitlab.add_member(PROJECT, "reviewbot", DEVELOPER)
    author = world.gitlab.description(PROJECT, 1)

    report = world.run(**ON)

    description = world.gitlab.description(PROJECT, 1)
    assert description.startswith(author + "\n\n" + BLOCK_START)
    assert description.endswith(BLOCK_END) and description.count(BLOCK_START) == 1
    assert "This merge request, Add parsing, changes" in (block_text(description) or "")
    summary = _summary(world)
    assert IN_DESCRIPTION in summary and "**Walkthrough**" not in summary
    assert report.review.complete and _puts(world) == 1

    world.run(**ON)  # the same head: the walkthrough kept, the description already holds it

    assert world.gitlab.description(PROJECT, 1) == description
    assert _puts(world) == 1 and _walkthrough_calls(world) == 1


@pytest.mark.parametrize("fault", ["stored:502", "stored:500", "502"])
def test_a_failed_or_lost_answer_is_checked_on_the_mr_before_writing_again(
    world: World,  # noqa: F811
    fault: str,
) -> None:
    world.gitlab.add_member(PROJECT, "reviewbot", DEVELOPER)
    author = world.gitlab.description(PROJECT, 1)
    world.gitlab.add_fault_for("PUT", MR_PUT, fault)

    world.run(**ON)

    description = world.gitlab.description(PROJECT, 1)
    assert description.count(BLOCK_START) == 1 and description.count(BLOCK_END) == 1
    assert description[: len(author)] == author  # byte-identical
    block = find_block(description)
    assert block is not None and description[block.end :] == ""
    stored = [params for iid, params in world.gitlab.mr_updates if iid == 1]
    assert len(stored) == 1  # GitLab stored the description once
    # a stored write is found on the MR (no second PUT); one that was not is sent again
    assert _puts(world) == (1 if fault.startswith("stored:") else 2)
    assert IN_DESCRIPTION in _summary(world)


def test_the_authors_edits_between_reviews_are_kept_and_the_block_replaced_in_place(
    world: World,  # noqa: F811
) -> None:
    world.gitlab.add_member(PROJECT, "reviewbot", DEVELOPER)
    world.run(**ON)
    first = world.gitlab.description(PROJECT, 1)
    block = find_block(first)
    assert block is not None
    before = f"Reworded by the author, who mentions `{BLOCK_START}` inline.\r\n\r\n"
    after = f"\r\n\r\nAdded below:\r\n```\r\n{BLOCK_END}\r\n```\r\nThanks!\r\n"
    edited = before + first[block.start : block.end] + after
    world.gitlab.edit_description(PROJECT, 1, edited)
    _push(world, {"extra.py": "VALUE = 1\n"})

    world.run(**ON)

    description = world.gitlab.description(PROJECT, 1)
    assert description.startswith(before) and description.endswith(after)
    assert description.count(f"\n{BLOCK_START}") + description.startswith(BLOCK_START) == 1
    assert "`extra.py`" in (block_text(description) or "")


def test_a_block_the_author_removed_is_appended_once_at_the_end(world: World) -> None:  # noqa: F811
    world.gitlab.add_member(PROJECT, "reviewbot", DEVELOPER)
    world.run(**ON)
    world.gitlab.edit_description(PROJECT, 1, "Rewritten by the author.")

    world.run(**ON)
    world.run(**ON)

    description = world.gitlab.description(PROJECT, 1)
    assert description.startswith("Rewritten by the author.\n\n" + BLOCK_START)
    assert description.count(BLOCK_START) == 1


def test_without_the_right_to_edit_the_summary_says_why_and_the_review_goes_on(
    world: World,  # noqa: F811
) -> None:
    author = world.gitlab.description(PROJECT, 1)

    report = world.run(**ON)  # the bot is no member: GitLab answers 403

    assert world.gitlab.description(PROJECT, 1) == author
    assert "_walkthrough: not written (the description could not be edited:" in _summary(world)
    assert report.review.complete and report.findings


def test_a_dry_run_writes_no_description(world: World) -> None:  # noqa: F811
    world.gitlab.add_member(PROJECT, "reviewbot", DEVELOPER)
    author = world.gitlab.description(PROJECT, 1)

    world.run(RunOptions(dry_run=True), **ON)

    assert world.gitlab.description(PROJECT, 1) == author and _puts(world) == 0


def test_an_answer_lost_to_the_timeout_is_checked_on_the_mr_before_writing_again(
    world: World,  # noqa: F811
) -> None:
    world.gitlab.add_member(PROJECT, "reviewbot", DEVELOPER)
    author = world.gitlab.description(PROJECT, 1)
    world.gitlab.add_fault_for("PUT", MR_PUT, f"stored:slow:{LATE_S}")

    world.run(gitlab_timeout_s=CLIENT_TIMEOUT_S, **ON)

    description = world.gitlab.description(PROJECT, 1)
    assert description[: len(author)] == author and description.count(BLOCK_START) == 1
    assert _puts(world) == 1 and len(world.gitlab.mr_updates) == 1


def test_a_description_that_would_pass_gitlabs_limit_is_not_written(world: World) -> None:  # noqa: F811
    world.gitlab.add_member(PROJECT, "reviewbot", DEVELOPER)
    author = "x" * (MAX_MR_DESCRIPTION_CHARS - 10)
    world.gitlab.edit_description(PROJECT, 1, author)
    with App(world.settings()) as app:
        project_id = app.gitlab().snapshot(PROJECT, 1).project_id
        done = app.gitlab().write_description_block(project_id, 1, "A walkthrough.")

    assert done is BlockWrite.TOO_LONG and _puts(world) == 0
    assert world.gitlab.description(PROJECT, 1) == author
