"""Team learnings end to end: ``reviewbot learnings`` against the fake GitLab and the test
database (SQLite and PostgreSQL), then ``reviewbot run`` against the fake vLLM, which records
every request: a learning reaches the prompt of the chunks whose files it matches, and a
"don't flag" learning of the finding's category and path suppresses it (never posted, stored
as ``suppressed_by_learning`` with the learning's id); a learning made in a bot thread
(``/reviewbot learn``, through the webhook and a worker) does the same for the next review.
Core and store: tests/test_learnings.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reviewbot.app import App
from reviewbot.commands import main
from reviewbot.findings import FindingState
from reviewbot.learnings.learning import Learning, LearningError, LearningSource
from reviewbot.learnings.teaching import add_learning, project_learnings
from reviewbot.mr import RunOptions, run_merge_request
from reviewbot.store import LearningBook, Store, upgrade
from tests.mr_world import PROJECT, World, commit_on_feature, world  # noqa: F401
from tests.test_reply import DEVELOPER, Thread

pytestmark = pytest.mark.slow  # measured: see docs/development.md

NONE_LEARNING = "We compare with == None on purpose in app.py; don't flag it"


def cli(world: World, *args: str) -> Any:  # noqa: F811
    """`reviewbot <args>` in this world's environment: (exit code, output)."""
    result = CliRunner().invoke(main, list(args), env=world.command_env("secret"))
    return result.exit_code, result.output  # stdout and stderr, as a terminal shows them


def add(world: World, text: str, *options: str) -> dict[str, Any]:  # noqa: F811
    code, output = cli(world, "learnings", "add", "--project", PROJECT, *options, "--json", text)
    assert code == 0, output
    return json.loads(output)


def user_prompts(world: World) -> list[str]:  # noqa: F811
    return [
        next(m["content"] for m in body["messages"] if m["role"] == "user")
        for body in world.vllm.requests
    ]


def posted_titles(world: World) -> list[str]:  # noqa: F811
    return [
        note["body"]
        for discussion in world.gitlab.discussions(PROJECT, 1)
        for note in discussion["notes"]
        if "reviewbot:finding" in note["body"]
    ]


def stored(world: World, review_id: int) -> list[dict[str, Any]]:  # noqa: F811
    store = Store.from_url(world.database_url)
    try:
        return store.findings(review_id)
    finally:
        store.close()


def test_a_cli_learning_reaches_the_prompt_and_suppresses_a_matching_finding(
    world: World,  # noqa: F811
) -> None:
    made = add(world, NONE_LEARNING, "--path", "app.py", "--category", "bug")
    assert made["status"] == "active" and made["excludes"] and made["project_id"] == 7
    report = world.run()
    [prompt] = user_prompts(world)
    assert f'<learning name="learning {made["id"]}" category="bug">' in prompt
    assert "don't flag it" in prompt and prompt.index("<learnings>") < prompt.index("<file")
    posted = posted_titles(world)
    assert not any("None" in body for body in posted)  # suppressed: never posted
    assert any("eval" in body for body in posted)  # another category: posted
    findings = stored(world, report.review_id)
    [quiet] = [f for f in findings if f["state"] == FindingState.SUPPRESSED.value]
    assert quiet["category"] == "bug" and quiet["learning_id"] == made["id"]
    coverage = report.review.coverage
    assert coverage.changed_lines_covered == coverage.changed_lines_total


def summary_note(world: World) -> str:  # noqa: F811
    [note] = [n for n in world.gitlab.notes(PROJECT, 1) if "reviewbot:summary" in n["body"]]
    return note["body"]


def test_the_summary_says_how_many_findings_each_learning_withheld(
    world: World,  # noqa: F811
) -> None:
    """A "don't flag anything" learning must not make the MR read as clean (issue 32)."""
    everything = add(world, "Don't flag anything", "--path", "**", "--category", "security")
    none_checks = add(world, NONE_LEARNING, "--path", "app.py", "--category", "bug")
    report = world.run()
    quiet = [f for f in stored(world, report.review_id) if f["state"] == "suppressed_by_learning"]
    by_learning = {
        made["id"]: sum(1 for f in quiet if f["learning_id"] == made["id"])
        for made in (everything, none_checks)
    }
    assert all(by_learning.values()) and sum(by_learning.values()) == len(quiet)
    body = summary_note(world)
    heading = body.split("\n\n| ")[0]  # before the counts table: where "N finding(s)" is
    assert f"{len(quiet)} more withheld by team learnings" in heading
    shown = f"learning {everything['id']} (`Don't flag anything`): {by_learning[everything['id']]}"
    assert shown in heading
    assert f"learning {none_checks['id']} (`We compare with == None" in heading
    assert [w.findings for w in report.withheld] == [by_learning[i] for i in sorted(by_learning)]
    code, output = cli(world, "run", "1", "--project", PROJECT, "--dry-run", "--json")
    assert code == 0, output
    assert json.loads(output)["withheld"] == [
        {"learning_id": learning_id, "findings": count}
        for learning_id, count in sorted(by_learning.items())
    ]


def test_a_learning_of_another_path_or_category_does_not_suppress(world: World) -> None:  # noqa: F811
    other_path = add(world, NONE_LEARNING, "--path", "tests/**", "--category", "bug")
    other_category = add(world, NONE_LEARNING, "--path", "app.py", "--category", "style")
    instruction = add(world, "Prefer small functions", "--path", "app.py", "--category", "bug")
    report = world.run()
    [prompt] = user_prompts(world)
    assert f'name="learning {other_path["id"]}"' not in prompt  # its glob matches no file
    assert f'name="learning {other_category["id"]}"' in prompt
    assert f'name="learning {instruction["id"]}"' in prompt
    assert any("None" in body for body in posted_titles(world))
    states = {f["state"] for f in stored(world, report.review_id)}
    assert FindingState.SUPPRESSED.value not in states


def test_a_removed_learning_no_longer_applies(world: World) -> None:  # noqa: F811
    made = add(world, NONE_LEARNING, "--path", "app.py", "--category", "bug")
    code, output = cli(world, "learnings", "remove", str(made["id"]))
    assert code == 0 and f"learning {made['id']} removed" in output
    world.run()
    [prompt] = user_prompts(world)
    assert "<learnings>" not in prompt
    assert any("None" in body for body in posted_titles(world))


def test_learnings_past_their_budget_are_named_and_every_line_is_reviewed(
    world: World,  # noqa: F811
) -> None:
    made = add(world, NONE_LEARNING, "--category", "bug")
    report = world.run(learnings_tokens=0)
    [prompt] = user_prompts(world)
    assert "<learnings>" not in prompt
    assert any(
        f"learning `learning {made['id']}` not given to chunk(s) 1" in line
        for line in report.warnings
    )
    coverage = report.review.coverage
    assert coverage.changed_lines_covered == coverage.changed_lines_total
    # not in the prompt, but still in force: the finding it excludes is not posted
    assert not any("None" in body for body in posted_titles(world))


def test_the_cli_lists_and_refuses_bad_input_with_exit_2(world: World) -> None:  # noqa: F811
    made = add(world, NONE_LEARNING, "--path", "app.py", "--category", "bug")
    code, output = cli(world, "learnings", "list", "--project", PROJECT, "--json")
    assert code == 0 and [item["id"] for item in json.loads(output)] == [made["id"]]
    code, output = cli(world, "learnings", "list", "--project", PROJECT)
    assert code == 0 and "don't flag it" in output
    for args, message in (
        (("add", "--project", PROJECT, "   "), "text is empty"),
        (("add", "--project", PROJECT, "--path", "../x", "hi"), "leads out of the repository"),
        (("add", "--project", PROJECT, "--category", "nits", "hi"), "nits"),
        (("add", "hi"), "exactly one of a project or a group"),
        (("add", "--project", PROJECT, "x" * 501), "at most 500"),
        (("accept", "999"), "learning 999 not found"),
        (("reject", str(made["id"])), "is active: it cannot be rejected"),
    ):
        code, output = cli(world, "learnings", *args)
        assert code == 2, (args, output)
        assert message in output and len(output.strip().splitlines()) == 1, output


# Paths GitLab never gives a group or project (reviewbot.namespaces): the webhook refuses them
# in a payload with 422, and the command line with exit 2 before anything is stored.
NOT_GROUP_PATHS = ("../x", "group/../x", "/etc", "group/", "a/./b", "group.", "g\u00e9")


@pytest.mark.parametrize("group", NOT_GROUP_PATHS)
def test_a_group_path_gitlab_never_has_is_refused_with_exit_2_and_nothing_is_stored(
    world: World,  # noqa: F811
    group: str,
) -> None:
    """`learnings add --group ../x` was stored (a learning no project's groups ever match)."""
    code, output = cli(world, "learnings", "add", "--group", group, "Prefer pathlib")
    assert code == 2, output
    [line] = output.strip().splitlines()
    assert line.startswith("reviewbot: error: --group: group ") and "is not a group path" in line
    with App(world.settings()) as app:
        assert project_learnings(app.learnings(), app.gitlab()) == []


def test_a_project_path_gitlab_never_has_is_refused_as_the_webhook_refuses_it(
    world: World,  # noqa: F811
) -> None:
    code, output = cli(world, "learnings", "add", "--project", "../x", "Prefer pathlib")
    assert code == 2 and "is not a project path like group/name" in output, output
    assert not [path for _, path in world.gitlab.requests if "/projects/" in path]


def test_a_project_gitlab_does_not_show_is_exit_1_as_in_every_command(
    world: World,  # noqa: F811
) -> None:
    """GitLab answers 404 for a project that is not there and for one the token cannot see:
    that is GitLab's answer, exit 1 (docs/cli.md), not input the command can refuse."""
    code, output = cli(world, "learnings", "add", "--project", "group/gone", "Prefer pathlib")
    assert code == 1, output
    [line] = output.strip().splitlines()
    assert line == (
        "reviewbot: error: project group/gone not found (or the token's user cannot see it)"
    )


# -- proposals from feedback ------------------------------------------------------------------


def none_note(world: World, iid: int) -> int:  # noqa: F811
    """The note id of the bot's `== None` comment on MR ``iid``."""
    return next(
        discussion["notes"][0]["id"]
        for discussion in world.gitlab.discussions(PROJECT, iid)
        if discussion["notes"][0]["type"] == "DiffNote" and "None" in discussion["notes"][0]["body"]
    )


def review(world: World, *iids: int) -> list[int]:  # noqa: F811
    """`reviewbot run` of each MR (opened from the same branches as !1 when new)."""
    ids = []
    for iid in iids:
        if iid != 1:
            world.gitlab.add_mr_from_git(PROJECT, world.repo, "main", "feature", iid=iid, title="x")
        with App(world.settings()) as app:
            ids.append(run_merge_request(app, PROJECT, iid, RunOptions()).review_id)
    return ids


def test_three_thumbs_down_propose_a_learning_once_and_accepting_applies_it(
    world: World,  # noqa: F811
) -> None:
    review(world, 1, 2, 3)
    for iid in (1, 2):
        world.gitlab.add_award_emoji(PROJECT, iid, none_note(world, iid), "thumbsdown", "alice")
    code, output = cli(world, "feedback", "sync", "--since", "1d")
    assert code == 0 and "proposed" not in output  # two are not enough (threshold 3)
    world.gitlab.add_award_emoji(PROJECT, 3, none_note(world, 3), "thumbsdown", "alice")
    code, output = cli(world, "feedback", "sync", "--since", "1d")
    assert code == 0 and "proposed" in output, output
    code, listed = cli(world, "learnings", "list", "--status", "proposed", "--json")
    [proposal] = json.loads(listed)
    assert proposal["category"] == "bug" and proposal["path_globs"] == ["*"]
    assert proposal["source"] == "proposal" and proposal["excludes"]
    assert proposal["proposal_evidence"]["count"] == 3
    assert {item["mr_iid"] for item in proposal["proposal_evidence"]["findings"]} == {1, 2, 3}
    code, output = cli(world, "feedback", "sync", "--since", "1d")
    assert "proposed" not in output  # once per kind of finding
    before = len(world.vllm.requests)
    [proposed_review] = review(world, 4)  # proposed is not applied
    assert "<learnings>" not in user_prompts(world)[before]
    assert any(
        f["state"] == "posted" and f["category"] == "bug" for f in stored(world, proposed_review)
    )
    code, output = cli(world, "learnings", "accept", str(proposal["id"]))
    assert code == 0 and "accepted" in output
    before = len(world.vllm.requests)
    [accepted_review] = review(world, 5)
    assert f'name="learning {proposal["id"]}"' in user_prompts(world)[before]
    states = {f["category"]: f["state"] for f in stored(world, accepted_review)}
    assert states["bug"] == FindingState.SUPPRESSED.value


def test_the_report_lists_learnings_in_use_with_suppressions_and_suggested_ones(
    world: World,  # noqa: F811
    tmp_path: Path,
) -> None:
    made = add(world, NONE_LEARNING, "--path", "app.py", "--category", "bug")
    unused = add(world, "Prefer pathlib", "--path", "util.py")
    world.run()
    review(world, 2)  # suppressed there too: two findings in all
    store = Store.from_url(world.database_url)
    try:
        proposal = LearningBook(store.engine).propose(
            Learning(
                text="Don't flag time.sleep in scripts",
                gitlab_url=world.gitlab.url,
                project_id=7,
                project=PROJECT,
                category="performance",
                proposal_key="k",
                proposal_evidence={"title": "sleep", "count": 4, "findings": []},
            )
        )
    finally:
        store.close()
    now = datetime.now(UTC)
    window = (
        "--since",
        (now - timedelta(hours=1)).isoformat(),
        "--until",
        (now + timedelta(hours=1)).isoformat(),
    )
    code, output = cli(world, "report", *window, "--output", str(tmp_path), "--project", PROJECT)
    assert code == 0, output
    section = json.loads((tmp_path / "report.json").read_text())["learnings"]
    suppressed = {row["id"]: row["suppressed"] for row in section["in_use"]}
    assert suppressed == {made["id"]: 2, unused["id"]: 0}
    [suggested] = section["suggested"]
    assert suggested["id"] == proposal and suggested["turned_down"] == 4
    markdown = (tmp_path / "report.md").read_text()
    assert "## Learnings in use" in markdown and "## Suggested learnings" in markdown
    assert "reviewbot learnings accept ID" in markdown
    html = (tmp_path / "report.html").read_text()
    assert "Learnings in use" in html and "Suggested learnings" in html
    assert "time.sleep in scripts" in html


def test_a_thread_learning_keeps_where_it_was_made(world: World) -> None:  # noqa: F811
    """The API the `/reviewbot learn` thread command builds on (reviewbot.learnings.teaching)."""
    thread = {"author_id": 5, "mr_iid": 1, "discussion_id": "d" * 40, "note_id": 99}
    with App(world.settings()) as app:
        made = add_learning(
            app.learnings(),
            app.gitlab(),
            NONE_LEARNING,
            project="7",
            category="bug",
            author="alice",
            source=LearningSource.THREAD,
            thread=thread,
        )
        with pytest.raises(LearningError, match="unknown thread field"):
            add_learning(app.learnings(), app.gitlab(), "x", project="7", thread={"line": 3})
    assert made.source is LearningSource.THREAD and made.project == PROJECT
    assert (made.author, made.author_id, made.mr_iid, made.note_id) == ("alice", 5, 1, 99)
    assert made.group_path == "group" and made.discussion_id == "d" * 40


# -- proposals on GitLab (reviewbot.learnings.proposals) -------------------------------------------

DEVELOPER_LEVEL, REPORTER_LEVEL = 30, 20  # GitLab's access levels
PROPOSAL_MARKER = "<!-- reviewbot:learning-proposal:"
THREAD_NOTES_POST = r"/projects/[^/]+/merge_requests/3/discussions/[^/]+/notes$"


def proposal_notes(world: World, iid: int) -> list[dict[str, Any]]:  # noqa: F811
    return [
        note
        for discussion in world.gitlab.discussions(PROJECT, iid)
        for note in discussion["notes"]
        if PROPOSAL_MARKER in note["body"]
    ]


def turn_down_three(world: World) -> None:  # noqa: F811
    review(world, 1, 2, 3)
    for iid in (1, 2, 3):
        world.gitlab.add_award_emoji(PROJECT, iid, none_note(world, iid), "thumbsdown", "alice")


def test_a_proposal_is_posted_once_where_it_was_turned_down_and_a_developers_thumbs_up_accepts_it(
    world: World,  # noqa: F811
) -> None:
    turn_down_three(world)
    world.gitlab.add_member(PROJECT, "reader", REPORTER_LEVEL)
    world.gitlab.add_member(PROJECT, "dave", DEVELOPER_LEVEL)
    # the note is stored but its answer lost, twice: it is still posted once
    world.gitlab.add_fault_for("POST", THREAD_NOTES_POST, "stored:502", times=2)
    code, output = cli(world, "feedback", "sync", "--since", "1d")
    assert code == 0, output
    [proposal] = json.loads(cli(world, "learnings", "list", "--status", "proposed", "--json")[1])
    [note] = proposal_notes(world, 3)  # the latest finding's thread
    assert proposal_notes(world, 1) == [] and proposal_notes(world, 2) == []
    assert proposal["text"] in note["body"]
    assert f"`reviewbot learnings accept {proposal['id']}`" in note["body"]
    assert f"learning {proposal['id']} proposed on {PROJECT}!3 (note {note['id']})" in output
    assert (proposal["mr_iid"], proposal["note_id"]) == (3, None)  # it came from no one's note
    assert cli(world, "feedback", "sync", "--since", "1d")[0] == 0
    assert len(proposal_notes(world, 3)) == 1  # never posted twice
    # 👍 from the bot itself and from a Reporter: ignored, with the reason
    world.gitlab.add_award_emoji(PROJECT, 3, note["id"], "thumbsup", "reviewbot")
    world.gitlab.add_award_emoji(PROJECT, 3, note["id"], "thumbsup", "reader")
    world.gitlab.add_award_emoji(PROJECT, 3, note["id"], "thumbsdown", "dave")
    code, output = cli(world, "feedback", "sync", "--since", "1d")
    assert f"learning {proposal['id']}: 👍 by @reviewbot ignored (a bot)" in output
    ignored = f"learning {proposal['id']}: 👍 by @reader ignored (only a project member with"
    assert f"{ignored} the Developer role or above may accept" in output
    listed = json.loads(cli(world, "learnings", "list", "--status", "proposed", "--json")[1])
    assert [item["id"] for item in listed] == [proposal["id"]]  # 👎 accepts nothing either
    # a Developer's 👍 accepts it: the next review is taught
    world.gitlab.add_award_emoji(PROJECT, 3, note["id"], "thumbsup", "dave")
    code, output = cli(world, "feedback", "sync", "--since", "1d")
    assert f"learning {proposal['id']} accepted by @dave (👍 on its note)" in output
    [active] = json.loads(cli(world, "learnings", "list", "--status", "active", "--json")[1])
    assert (active["id"], active["accepted_by"]) == (proposal["id"], "dave")
    before = len(world.vllm.requests)
    [taught] = review(world, 4)
    assert f'name="learning {proposal["id"]}"' in user_prompts(world)[before]
    states = {f["category"]: f["state"] for f in stored(world, taught)}
    assert states["bug"] == FindingState.SUPPRESSED.value


def test_with_proposal_notes_off_nothing_is_posted(world: World) -> None:  # noqa: F811
    turn_down_three(world)
    env = {**world.command_env("secret"), "REVIEWBOT_LEARNING_PROPOSAL_NOTES": "false"}
    result = CliRunner().invoke(main, ["feedback", "sync", "--since", "1d"], env=env)
    assert result.exit_code == 0 and "proposed" in result.output, result.output
    assert all(proposal_notes(world, iid) == [] for iid in (1, 2, 3))


def test_a_proposal_whose_thread_is_gone_stays_listed_and_the_sync_goes_on(
    world: World,  # noqa: F811
) -> None:
    turn_down_three(world)
    off = {**world.command_env("secret"), "REVIEWBOT_LEARNING_PROPOSAL_NOTES": "false"}
    assert CliRunner().invoke(main, ["feedback", "sync", "--since", "1d"], env=off).exit_code == 0
    world.gitlab.delete_note(PROJECT, 3, none_note(world, 3))  # its thread disappears
    code, output = cli(world, "feedback", "sync", "--since", "1d")
    assert code == 0 and "proposed on" not in output, output
    [proposal] = json.loads(cli(world, "learnings", "list", "--status", "proposed", "--json")[1])
    assert proposal["proposal_note_id"] is None
    assert cli(world, "learnings", "accept", str(proposal["id"]))[0] == 0


# -- a learning made in a thread, end to end -------------------------------------------------

TESTS_FILE = """def test_total():
    result = None
    if result == None:
        assert True
"""
THREAD_LEARNING = "/reviewbot learn don't flag == None comparisons in tests/**"


def test_a_learning_made_in_a_thread_changes_the_next_review(world: World) -> None:  # noqa: F811
    """`/reviewbot learn …` in a bot thread, through the webhook and a worker, makes a learning
    the next review's prompt holds and that suppresses the finding it names (only there)."""
    (world.repo / "tests").mkdir()
    head = commit_on_feature(world.repo, {"tests/test_app.py": TESTS_FILE}, "a test")
    world.gitlab.push(PROJECT, 1, head)
    world.run()
    world.gitlab.add_member(PROJECT, "alice", DEVELOPER)
    thread = Thread(world, "== None")
    try:
        thread.discussion = next(
            d
            for d in world.gitlab.discussions(PROJECT, 1)
            if (d["notes"][0].get("position") or {}).get("new_path") == "tests/test_app.py"
        )
        thread.id = thread.discussion["id"]
        note = thread.say(THREAD_LEARNING)
        assert thread.hook(note)["status"] == "queued"
        thread.work()
        [answer] = thread.answers(note["id"])
    finally:
        thread.close()
    with App(world.settings()) as app:
        [learning] = project_learnings(app.learnings(), app.gitlab(), project=PROJECT)
    assert f"Learned (learning {learning.id}" in answer["body"]
    assert (learning.path_globs, learning.category, learning.excludes) == (
        ("tests/**",),
        "bug",
        True,
    )
    assert (learning.discussion_id, learning.note_id) == (thread.id, note["id"])
    before = len(world.vllm.requests)
    [review_id] = review(world, 2)
    [prompt] = user_prompts(world)[before:]
    assert f'<learning name="learning {learning.id}" category="bug">' in prompt
    assert "don't flag == None comparisons in tests/**" in prompt
    posted = {
        (d["notes"][0].get("position") or {}).get("new_path")
        for d in world.gitlab.discussions(PROJECT, 2)
        if "None" in d["notes"][0]["body"] and d["notes"][0]["type"] == "DiffNote"
    }
    assert posted == {"app.py"}  # the learning's glob is tests/**: app.py's is still posted
    [quiet] = [f for f in stored(world, review_id) if f["state"] == FindingState.SUPPRESSED.value]
    assert (quiet["path"], quiet["learning_id"]) == ("tests/test_app.py", learning.id)


def test_a_dry_run_suppression_is_not_counted_in_the_report(
    world: World,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A dry run posts nothing: what its learnings held back is not counted either (issue 32
    item 8); the review that posts counts its one suppression."""
    made = add(world, NONE_LEARNING, "--path", "app.py", "--category", "bug")
    world.run(RunOptions(dry_run=True))
    world.run(RunOptions(full=True))
    now = datetime.now(UTC)
    window = (
        "--since",
        (now - timedelta(hours=1)).isoformat(),
        "--until",
        (now + timedelta(hours=1)).isoformat(),
    )
    code, output = cli(world, "report", *window, "--output", str(tmp_path), "--project", PROJECT)
    assert code == 0, output
    section = json.loads((tmp_path / "report.json").read_text())["learnings"]
    assert {row["id"]: row["suppressed"] for row in section["in_use"]} == {made["id"]: 1}


# -- evidence the database holds in another shape (issue 32, item 13) -------------------------

UNREADABLE_EVIDENCE = (
    [{"id": 1, "mr_iid": 1, "discussion_id": "d"}],  # a list where the object should be
    "four findings",
    4,
    {"count": "four", "findings": []},
    {"count": 4, "findings": "all of them"},
    {"count": 4, "findings": [1, 2]},
)


def propose_with(world: World, evidence: object) -> int:  # noqa: F811
    """A proposal stored with ``evidence`` as its JSON (edited by hand, or another version)."""
    upgrade(world.database_url)
    store = Store.from_url(world.database_url)
    try:
        made = LearningBook(store.engine).propose(
            Learning(
                text="Don't flag time.sleep in scripts",
                gitlab_url=world.gitlab.url,
                project_id=7,
                project=PROJECT,
                category="performance",
                proposal_key="k",
                proposal_evidence=evidence,  # type: ignore[arg-type]
            )
        )
    finally:
        store.close()
    assert made is not None
    return made


@pytest.mark.parametrize("evidence", UNREADABLE_EVIDENCE, ids=repr)
def test_a_proposal_whose_stored_evidence_is_unreadable_is_reported_as_such(
    world: World,  # noqa: F811
    tmp_path: Path,
    evidence: object,
) -> None:
    """The report was an AttributeError traceback (`list` has no `get`): now it renders, and
    the suggested learning's "turned down" says the evidence is unreadable."""
    proposal = propose_with(world, evidence)
    now = datetime.now(UTC)
    window = ("--since", (now - timedelta(hours=1)).isoformat(), "--until", now.isoformat())
    code, output = cli(world, "report", *window, "--output", str(tmp_path))
    assert code == 0, output
    [suggested] = json.loads((tmp_path / "report.json").read_text())["learnings"]["suggested"]
    assert suggested["id"] == proposal and suggested["turned_down"] is None
    markdown = (tmp_path / "report.md").read_text()
    row = next(line for line in markdown.splitlines() if "time.sleep" in line)
    assert "| evidence unreadable |" in row
    assert "evidence unreadable" in (tmp_path / "report.html").read_text()


def test_a_proposal_whose_stored_evidence_is_unreadable_is_not_posted_and_says_why(
    world: World,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    proposal = propose_with(world, UNREADABLE_EVIDENCE[0])
    with caplog.at_level("INFO", logger="reviewbot.learnings.proposals"):
        code, output = cli(world, "feedback", "sync", "--since", "1d")
    assert code == 0, output
    assert f"learning {proposal}: not proposed on GitLab: evidence unreadable" in caplog.text
    assert proposal_notes(world, 1) == []
    assert cli(world, "learnings", "accept", str(proposal))[0] == 0  # the CLI still accepts it
