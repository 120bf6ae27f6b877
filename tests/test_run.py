"""`reviewbot run` end to end: fake GitLab + fake vLLM over real HTTP, on SQLite and PostgreSQL.

GitLab discussion positions: https://docs.gitlab.com/api/discussions/#create-a-new-thread-in-the-merge-request-diff
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from reviewbot.app import App
from reviewbot.commands import main
from reviewbot.comments import parse_marker
from reviewbot.gitlab import GitLabUnavailableError
from reviewbot.model import LLMUnavailableError
from reviewbot.mr import MergeRequestBusyError, RunOptions, run_merge_request
from reviewbot.store import MergeRequestKey, Store, upgrade
from tests.builders import diff_notes, summary_notes
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.vllm_server import LatencyModel
from tests.mr_world import BOT_TOKEN, FEATURE_APP, PROJECT, World, commit_on_feature, git
from tests.stderr_lines import error_lines, progress_lines

pytestmark = pytest.mark.slow  # measured: see docs/development.md


def test_run_posts_on_the_right_lines_and_records_everything(world: World) -> None:
    report = world.run()
    notes = diff_notes(world)
    lines = {(n["position"]["new_path"], n["position"]["new_line"]) for n in notes}
    assert lines == {
        ("app.py", world.line_of(FEATURE_APP, "eval(")),
        ("app.py", world.line_of(FEATURE_APP, "== None")),
        ("app.py", world.line_of(FEATURE_APP, "except:")),
    }
    assert all(n["position"]["old_line"] is None for n in notes)  # added lines: new_line only
    assert all("reviewbot:finding" in n["body"] for n in notes)
    [summary] = summary_notes(world)
    assert "3 finding(s), 3 posted inline" in summary["body"]
    assert "16/16 changed lines" in summary["body"] and report.head_sha[:12] in summary["body"]
    assert report.summary_note_id == summary["id"]
    store = Store.from_url(world.database_url)
    review = store.review(report.review_id)
    assert review["status"] == "succeeded" and review["head_sha"] == report.head_sha
    assert review["model"] == world.vllm.model and review["prompt_version"].startswith("v1+")
    assert review["changed_lines_covered"] == review["changed_lines_total"]
    calls = store.llm_calls(report.review_id)
    assert calls and all(c["prompt_tokens"] > 0 and c["ttft_ms"] is not None for c in calls)
    findings = store.findings(report.review_id)
    assert {f["state"] for f in findings} == {"posted"}
    assert all(f["discussion_id"] and f["note_id"] for f in findings)


def test_rerun_posts_nothing_twice_and_edits_the_summary(world: World) -> None:
    first = world.run()
    second = world.run()
    assert len(first.posted) == 3 and second.posted == []
    assert len(second.already_posted) == 3
    assert len(diff_notes(world)) == 3
    [summary] = summary_notes(world)
    assert summary["id"] == first.summary_note_id == second.summary_note_id


def test_push_resolves_threads_whose_line_changed(world: World) -> None:
    world.run()
    fixed = FEATURE_APP.replace("return eval(text)", "return json.loads(text)")
    head = commit_on_feature(world.repo, {"app.py": fixed}, "fix eval")
    world.gitlab.push(PROJECT, 1, head)
    report = world.run()
    assert report.head_sha == head
    assert report.resolved_threads == 1 and report.posted == []
    discussions = world.gitlab.discussions(PROJECT, 1)
    resolved = [d for d in discussions if d["notes"][0].get("resolved")]
    assert len(resolved) == 1 and "eval" in resolved[0]["notes"][0]["body"]
    assert len(diff_notes(world)) == 3  # nothing new posted


def test_the_bots_next_review_records_a_changed_line_as_addressed_once(world: World) -> None:
    """The bot resolves the thread of a line a push changed: that finding (and only it) is
    outdated and `addressed`; neither a re-run nor a later `feedback sync` records it again."""
    first = world.run()
    store = Store.from_url(world.database_url)
    eval_line = world.line_of(FEATURE_APP, "eval(")
    [eval_row] = [f for f in store.findings(first.review_id) if f["line"] == eval_line]
    fixed = FEATURE_APP.replace("return eval(text)", "return json.loads(text)")
    world.gitlab.push(PROJECT, 1, commit_on_feature(world.repo, {"app.py": fixed}, "fix eval"))
    assert world.run().resolved_threads == 1
    key = MergeRequestKey(world.gitlab.url, 7, 1)
    [addressed] = store.feedback(project=PROJECT, mr_iid=1)
    assert (addressed["kind"], addressed["value"]) == ("addressed", "addressed")
    assert (addressed["finding_id"], addressed["note_id"]) == (eval_row["id"], eval_row["note_id"])
    assert addressed["event_key"] == f"addressed:{key}:{eval_row['fingerprint']}"
    assert addressed["username"] is None  # the bot saw it, not a person
    states = {f["id"]: f["state"] for f in store.findings(first.review_id)}
    assert states.pop(eval_row["id"]) == "outdated"
    assert set(states.values()) == {"posted"}  # the other two threads are untouched
    world.run()
    assert len(store.feedback(project=PROJECT, mr_iid=1)) == 1
    synced = CliRunner().invoke(
        main,
        ["feedback", "sync", "--since", "1d"],
        env={
            "REVIEWBOT_GITLAB_URL": world.gitlab.url,
            "REVIEWBOT_GITLAB_TOKEN": BOT_TOKEN,
            "REVIEWBOT_DATABASE_URL": world.database_url,
        },
    )
    assert synced.exit_code == 0, synced.output
    assert "0 new outcomes recorded" in synced.stdout
    assert [f["id"] for f in store.feedback(project=PROJECT, mr_iid=1)] == [addressed["id"]]


def test_dry_run_posts_nothing(world: World) -> None:
    result = CliRunner().invoke(
        main,
        ["run", "1", "--project", PROJECT, "--dry-run", "--json"],
        env={
            "REVIEWBOT_GITLAB_URL": world.gitlab.url,
            "REVIEWBOT_GITLAB_TOKEN": world.settings().gitlab_token,
            "REVIEWBOT_LLM_BASE_URL": world.vllm.base_url,
            "REVIEWBOT_DATABASE_URL": world.database_url,
            "REVIEWBOT_MIN_SEVERITY": "info",
            "REVIEWBOT_ANALYZERS": ",",  # none: the model's three findings alone
        },
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["dry_run"] and len(data["posted"]) == 3
    assert "reviewbot:summary" in data["summary_markdown"]
    assert world.gitlab.discussions(PROJECT, 1) == []


def test_a_real_run_after_a_dry_run_reviews_afresh_and_posts(world: World) -> None:
    """A dry run is no earlier review: the real run asks the model and posts its comments,
    instead of carrying over findings nobody saw."""
    dry = world.run(RunOptions(dry_run=True))
    assert len(dry.published.posted) == 3 and world.gitlab.discussions(PROJECT, 1) == []
    calls_after_dry_run = len(world.vllm.requests)
    real = world.run()
    assert real.review.carried is None
    assert len(world.vllm.requests) > calls_after_dry_run
    assert len(real.published.posted) == 3
    threads = world.gitlab.discussions(PROJECT, 1)
    assert sum(thread["notes"][0]["type"] == "DiffNote" for thread in threads) == 3


def test_a_run_on_a_pipe_says_each_step(world: World) -> None:
    """Issue 32 item 15: rich's spinner shows nothing on a pipe; each step is a plain line."""
    env = world.command_env(webhook_secret="not-used")
    result = CliRunner().invoke(main, ["run", "1", "--project", PROJECT, "--dry-run"], env=env)
    assert result.exit_code == 0, result.stderr
    steps = progress_lines(result.stderr)
    assert steps[0] == "reading merge request !1"
    assert "reviewing 1 chunks" in steps and steps[-1] == "publishing"


def test_two_runs_at_once_never_double_post(world: World) -> None:
    world.vllm.latency = LatencyModel(ttft_base_s=0.3)
    outcomes: list[object] = []

    def one_run() -> None:
        try:
            outcomes.append(world.run())
        except MergeRequestBusyError as error:
            outcomes.append(error)

    threads = [threading.Thread(target=one_run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(outcomes) == 2  # each run either finished or was told the MR is busy
    assert sum(isinstance(o, MergeRequestBusyError) for o in outcomes) <= 1
    assert len(diff_notes(world)) == 3
    assert len(summary_notes(world)) == 1


@pytest.mark.parametrize(
    ("token", "project", "iid", "message"),
    [
        ("wrong-token", PROJECT, 1, "token rejected"),
        (None, PROJECT, 99, "!99"),
    ],
)
def test_failures_are_one_line(
    world: World, token: str | None, project: str, iid: int, message: str
) -> None:
    settings = world.settings()
    result = CliRunner().invoke(
        main,
        ["run", str(iid), "--project", project],
        env={
            "REVIEWBOT_GITLAB_URL": world.gitlab.url,
            "REVIEWBOT_GITLAB_TOKEN": token or settings.gitlab_token,
            "REVIEWBOT_LLM_BASE_URL": world.vllm.base_url,
            "REVIEWBOT_DATABASE_URL": world.database_url,
        },
    )
    assert result.exit_code == 1
    assert message in result.stderr and len(error_lines(result.stderr)) == 1
    assert "wrong-token" not in result.stderr


@pytest.mark.parametrize("fault", ["http_503", "disconnect"])
def test_a_model_server_failing_mid_review_is_named(world: World, fault: str) -> None:
    """Every try of the chunk fails (a 5xx, or the connection dropped as when vLLM's engine dies
    and its API server shuts down): the review fails naming the server, not only the error."""
    world.vllm.add_faults(*[fault] * 5)  # the first try and its 4 retries
    report = world.run()
    assert report.review.unreviewed  # nothing posted as clean: the part is listed unreviewed
    [review] = Store.from_url(world.database_url).reviews(project=PROJECT, mr_iid=1)
    assert review["status"] == "failed"
    assert f"the model server at {world.vllm.base_url}" in review["error"]


def test_model_down_is_a_clear_failure(world: World) -> None:
    with pytest.raises(LLMUnavailableError, match=r"127\.0\.0\.1:9") as caught:
        world.run(llm_base_url="http://127.0.0.1:9/v1")
    assert "vllm serve" in str(caught.value)
    store = Store.from_url(world.database_url)
    from sqlalchemy import text

    with store.engine.connect() as connection:
        status = connection.execute(text("select status, error from reviews")).one()
    assert status[0] == "failed" and "127.0.0.1:9" in status[1]


def test_position_gitlab_refuses_goes_to_the_summary(world: World) -> None:
    big = "".join(f"VALUE_{i} = {i}\n" for i in range(4000)) + "result = eval(VALUE_1)\n"
    head = commit_on_feature(world.repo, {"big.py": big}, "big generated-looking file")
    world.gitlab.push(PROJECT, 1, head)
    world.gitlab.too_large_bytes = 20_000  # big.py's diff is too large for GitLab to show
    report = world.run()
    refused = [(f.path, f.line) for f, _ in report.refused]
    assert refused == [("big.py", 4001)]
    assert "line_code" in report.refused[0][1]
    assert len(report.posted) == 3  # the other findings still land inline
    [summary] = summary_notes(world)
    assert "big.py" in summary["body"] and "refused" in summary["body"]
    store = Store.from_url(world.database_url)
    states = {f["path"]: f["state"] for f in store.findings(report.review_id)}
    assert states["big.py"] == "failed"


def test_draft_mode_publishes_once(world: World) -> None:
    report = world.run(publish_mode="drafts")
    assert len(report.posted) == 3 and report.refused == []
    assert len(diff_notes(world)) == 3
    again = world.run(publish_mode="drafts")
    assert again.posted == [] and len(diff_notes(world)) == 3
    store = Store.from_url(world.database_url)
    assert all(f["discussion_id"] for f in store.findings(report.review_id))


def commit_on_target(world: World, files: dict[str, str], message: str) -> None:
    """A commit on the target branch (main), then a new diff version of the MR."""
    git(world.repo, "checkout", "-q", "main")
    for name, text in files.items():
        (world.repo / name).write_text(text)
    git(world.repo, "add", "-A")
    git(world.repo, "commit", "-qm", message)
    world.gitlab.push(PROJECT, 1, git(world.repo, "rev-parse", "feature"))


def test_repository_config_of_the_target_branch_is_applied(world: World) -> None:
    config = '[reviewbot]\nexclude = ["util.py"]\nmin_severity = "major"\n'
    commit_on_target(world, {".reviewbot.toml": config}, "bot config")
    report = world.run()
    skipped = {s.path: s.reason for s in report.review.plan.coverage.skipped}
    assert skipped["util.py"] == "excluded by configuration"
    assert {f.severity.value for f in report.posted} == {"critical", "major"}  # minor filtered


def test_an_mr_cannot_silence_its_own_review_with_the_config_file(world: World) -> None:
    """Issue 10 item 10: the policy file is read from the target branch, not the MR's head."""
    silence = '[reviewbot]\nexclude = ["*"]\nmax_inline = 1\nmin_severity = "blocker"\n'
    head = commit_on_feature(world.repo, {".reviewbot.toml": silence}, "quiet please")
    world.gitlab.push(PROJECT, 1, head)
    report = world.run()
    assert len(report.posted) == 3
    [summary] = summary_notes(world)
    assert "this merge request changes .reviewbot.toml" in summary["body"]


def test_broken_repository_config_is_reported_not_fatal(world: World) -> None:
    commit_on_target(world, {".reviewbot.toml": "gitlab_token = 'x'\n"}, "bad")
    report = world.run()
    assert len(report.posted) == 3
    assert any("cannot be set from the repository" in w for w in report.warnings)
    [summary] = summary_notes(world)
    assert "cannot be set from the repository" in summary["body"]


def test_a_config_key_from_the_repository_cannot_mention_everyone(world: World) -> None:
    """Issue 10 item 10: repository text reaching a note is sanitised like model output."""
    commit_on_target(world, {".reviewbot.toml": '"@all" = 1\n'}, "mention everyone")
    world.run()
    [summary] = summary_notes(world)
    # the ignored key is still reported, its name only inside a code span
    assert "ignored .reviewbot.toml" in summary["body"]
    assert "`@all` cannot be set from the repository" in summary["body"]
    assert "@all" not in summary["body"].replace("`@all`", "")


def test_failure_midway_is_recorded_and_the_next_run_completes(world: World) -> None:
    # GitLab breaks after the first comment: 1 discussion POST succeeds, then 5xx for a while.
    calls: list[str] = []

    def fail_after_first_post(message: str) -> None:
        calls.append(message)
        if message == "publishing":
            # GET /user, the thread listing and the first POST pass; then GitLab is down
            # through every retry.
            world.gitlab.outage_after(3, "502")

    with pytest.raises(GitLabUnavailableError), App(world.settings()) as app:
        run_merge_request(app, PROJECT, 1, RunOptions(), progress=fail_after_first_post)
    world.gitlab.end_outage()
    store = Store.from_url(world.database_url)
    [failed] = store.reviews(project=PROJECT, mr_iid=1)
    assert failed["status"] == "failed" and "502" in failed["error"]
    posted_before = diff_notes(world)
    assert 1 <= len(posted_before) < 3
    recorded = store.findings(failed["id"])
    assert len([f for f in recorded if f["state"] == "posted"]) == len(posted_before)
    report = world.run()
    assert len(diff_notes(world)) == 3  # the rest is posted, nothing twice
    assert len(report.already_posted) == len(posted_before)


def test_reviews_list_and_show_what_was_recorded(world: World) -> None:
    report = world.run()
    env = {"REVIEWBOT_DATABASE_URL": world.database_url}
    listed = CliRunner().invoke(main, ["reviews", "list", "--json"], env=env)
    assert listed.exit_code == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    assert (row["id"], row["project"], row["mr_iid"], row["status"]) == (
        report.review_id,
        PROJECT,
        1,
        "succeeded",
    )
    shown = CliRunner().invoke(main, ["reviews", "show", str(report.review_id), "--json"], env=env)
    data = json.loads(shown.stdout)
    assert data["review"]["head_sha"] == report.head_sha
    assert len(data["llm_calls"]) >= 1 and data["llm_calls"][0]["ttft_ms"] is not None
    assert {f["state"] for f in data["findings"]} == {"posted"}
    assert all(f["discussion_id"] for f in data["findings"])
    text = CliRunner().invoke(main, ["reviews", "show", str(report.review_id)], env=env)
    assert text.exit_code == 0 and "app.py" in text.stdout and "posted" in text.stdout
    # figures as a person reads them: no raw floats, microseconds or internal digests
    assert not re.search(r"\d\.\d{3,}", text.stdout), text.stdout
    assert "+00:00" not in text.stdout and "'hunks'" not in text.stdout
    assert re.search(r"diff_digest: 2 files, 3 hunks", text.stdout)
    missing = CliRunner().invoke(main, ["reviews", "show", "999"], env=env)
    assert missing.exit_code == 2 and "no review 999" in missing.stderr


GITLAB_TOKEN_READ = "glpat-Zx8v1Qk3mN5pR7tW9yB2"
AWS_KEY_READ = "AKIAIOSFODNN7EXAMPL3"


def test_a_secret_the_model_quotes_is_masked_and_the_summary_says_so(world: World) -> None:
    """The model read a secrets file with its tools and quoted it: the finding is posted with the
    secret masked, its suggestion (which would commit the key again) left out, and the summary
    says a finding's text was masked."""
    line = world.line_of(FEATURE_APP, "eval(")
    world.vllm.script_tool_calls(
        (
            "report_finding",
            {
                "path": "app.py",
                "line": line,
                "severity": "critical",
                "category": "security",
                "title": f"Token {GITLAB_TOKEN_READ} in use",
                "body": f"secrets.env holds aws_access_key_id={AWS_KEY_READ}; never eval input.",
                "suggestion": f"    return parse_literal(text, key='{AWS_KEY_READ}')",
            },
        ),
        offered_or_not=True,
    )
    world.run()
    posted = "".join(note["body"] for note in world.gitlab.notes(PROJECT, 1))
    assert GITLAB_TOKEN_READ not in posted and AWS_KEY_READ not in posted
    [note] = [n for n in diff_notes(world) if n["position"]["new_line"] == line]
    assert "glpat-***" in note["body"] and "AKIA***" in note["body"]
    assert "```suggestion" not in note["body"]
    [summary] = summary_notes(world)
    assert "1 finding(s) quoted what looked like a secret" in summary["body"]


def test_a_repaired_call_is_recorded_and_shown_per_review(world: World) -> None:
    """The first call of the answer is not JSON; the repair turn resends it (issue 17): the
    review is complete, and the store, `reviews show` and the summary say 1 of 4 calls could
    not be read and 1 was resent readably."""
    world.vllm.add_faults("malformed_arguments")
    report = world.run()
    assert report.review.complete and len(report.posted) == 3
    env = {"REVIEWBOT_DATABASE_URL": world.database_url}
    shown = CliRunner().invoke(main, ["reviews", "show", str(report.review_id), "--json"], env=env)
    data = json.loads(shown.stdout)
    assert [c["outcome"] for c in data["llm_calls"]] == ["invalid_calls", "repair"]
    assert data["tool_calls_by_chunk"] == [
        {
            "chunk_index": 0,
            "tool_calls": 4,
            "invalid_tool_calls": 1,
            "repaired_tool_calls": 1,
            "model_calls": 2,
        }
    ]
    text = CliRunner().invoke(main, ["reviews", "show", str(report.review_id)], env=env)
    assert "tool calls: 4, unreadable 1 (25%), resent readably 1" in text.stdout
    [note] = [n for n in world.gitlab.notes(PROJECT, 1) if "reviewbot:summary" in n["body"]]
    assert "| Invalid model calls | 1 of 4 (1 resent readably) |" in note["body"]


def test_identical_lines_get_a_comment_each(world: World) -> None:
    block = "    try:\n        return load(path)\n    except:\n        pass\n"
    twins = f"def first(path):\n{block}\n\ndef second(path):\n{block}"
    head = commit_on_feature(world.repo, {"twins.py": twins}, "two identical blocks")
    world.gitlab.push(PROJECT, 1, head)
    report = world.run()
    notes = [n for n in diff_notes(world) if n["position"]["new_path"] == "twins.py"]
    lines = sorted(n["position"]["new_line"] for n in notes)
    assert lines == [4, 11]
    assert len({f.fingerprint for f in report.posted}) == len(report.posted)
    again = world.run()
    assert again.posted == [] and len(diff_notes(world)) == len(report.posted)


# --- what is on the MR is the truth (issue 10 item 3) ----------------------------------------


def test_a_comment_a_reviewer_deleted_is_feedback_and_not_posted_again(world: World) -> None:
    first = world.run()
    [deleted, *kept] = diff_notes(world)
    world.gitlab.delete_note(PROJECT, 1, deleted["id"])  # a human deletes the bot's comment
    again = world.run()
    assert again.posted == [] and len(again.already_posted) == len(kept)
    assert [f.fingerprint for f in again.published.deleted] == [
        parse_marker(deleted["body"]).fingerprint  # type: ignore[union-attr]
    ]
    assert len(diff_notes(world)) == len(kept)
    [summary] = summary_notes(world)
    assert f"3 finding(s), {len(kept)} posted inline." in summary["body"]  # what is on the MR
    assert "1 not posted again: its comment had been deleted." in summary["body"]
    store = Store.from_url(world.database_url)
    feedback = store.feedback(project=PROJECT, mr_iid=1)
    assert [(f["kind"], f["note_id"]) for f in feedback] == [("deleted", deleted["id"])]
    world.run()
    assert len(store.feedback(project=PROJECT, mr_iid=1)) == 1  # recorded once
    assert first.review_id is not None


def test_one_database_for_two_gitlab_instances_keeps_their_mrs_apart(
    world: World, tmp_path: Path
) -> None:
    world.run()  # group/app!1 on the first GitLab: 3 comments, recorded
    with FakeGitLab() as other:
        other.add_user("reviewbot", token=BOT_TOKEN, bot=True)
        other.add_project(PROJECT, project_id=7)  # same path, same id, same iid
        other.add_mr_from_git(PROJECT, world.repo, "main", "feature", iid=1, title="Elsewhere")
        report = world.run(gitlab_url=other.url)
        assert len(report.posted) == 3  # the first instance's records claim nothing here
        notes = [n for n in other.notes(PROJECT, 1) if n["type"] == "DiffNote"]
        assert len(notes) == 3
        [summary] = [n for n in other.notes(PROJECT, 1) if "reviewbot:summary" in n["body"]]
        assert "3 finding(s), 3 posted inline." in summary["body"]


def test_a_review_left_running_by_a_dead_run_is_closed_by_the_next(world: World) -> None:
    store = Store.from_url(world.database_url)
    upgrade(world.database_url)
    key = MergeRequestKey(world.gitlab.url, 7, 1)
    orphan = store.start_review(
        project=PROJECT,
        mr_iid=1,
        head_sha="a" * 40,
        base_sha=None,
        start_sha=None,
        trigger="webhook",
        model="m",
        prompt_version="v",
        key=key,
    )
    report = world.run()
    closed = store.review(orphan)
    assert closed["status"] == "failed" and "interrupted" in (closed["error"] or "")
    assert store.review(report.review_id)["status"] == "succeeded"  # type: ignore[arg-type]


def test_a_chunk_the_model_never_answered_is_an_incomplete_review_not_a_clean_one(
    world: World,
) -> None:
    """Issue 10 item 4: lost answers are never "0 findings" and full coverage."""
    world.vllm.add_faults(*["stream_cut_mid_call"] * 20)  # every try of the one chunk
    result = CliRunner().invoke(
        main,
        ["run", "1", "--project", PROJECT],
        env={
            "REVIEWBOT_GITLAB_URL": world.gitlab.url,
            "REVIEWBOT_GITLAB_TOKEN": world.settings().gitlab_token,
            "REVIEWBOT_LLM_BASE_URL": world.vllm.base_url,
            "REVIEWBOT_DATABASE_URL": world.database_url,
            "REVIEWBOT_GITLAB_NOTES_PER_MINUTE": "60000",
            "REVIEWBOT_CONFIG": "",
        },
    )
    assert result.exit_code == 1, result.output
    assert "incomplete review: 0 of 16 changed lines reviewed" in result.stderr
    [summary] = summary_notes(world)
    body = summary["body"]
    assert "Incomplete review" in body and "cover 0 of 16 changed lines" in body
    assert "app.py" in summary["body"].split("Not reviewed")[1]
    assert "16/16 changed lines" not in summary["body"]
    [review] = Store.from_url(world.database_url).reviews(project=PROJECT, mr_iid=1)
    assert review["status"] == "failed"
    assert (review["changed_lines_covered"], review["changed_lines_total"]) == (0, 16)
