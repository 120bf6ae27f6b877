"""Review rules end to end: `reviewbot run`, `reviewbot ci` and the worker against the fake
GitLab (files served at each SHA from a real git repository) and the fake vLLM, which records
every request and follows a rule that says ``Flag every added line containing "TEXT".``
(tests/fakes/vllm_server.py, rule_findings). Rules on plain data: tests/test_rules.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reviewbot.app import App
from reviewbot.commands import main
from reviewbot.commands.ci import ci_command
from reviewbot.commands.render import run_json
from reviewbot.queue import JobQueue
from reviewbot.store import Store
from reviewbot.worker import Worker
from tests.mr_world import BOT_TOKEN, PROJECT, World, commit_on_feature, git

pytestmark = pytest.mark.slow  # measured: see docs/development.md

REPO_RULES = """\
rules:
  - name: util-clamp
    paths: ["util.py"]
    instructions: |
      Flag every added line containing "max(".
"""
DUO_RULES = """\
instructions:
  - name: app-subprocess
    fileFilters:
      - "*.py"
      - "!util.py"
    instructions: |
      Flag every added line containing "subprocess.run".
"""
TOML_RULES = """\
[reviewbot]
min_severity = "info"

[[reviewbot.rules]]
name = "readme-tone"
paths = ["README.md"]
instructions = "README sentences are short."
"""
CONTRIBUTING = """\
# Contributing

## Review checklist

- Functions say what they return.

## Releases

Tag them.
"""
INSTANCE_RULES = """\
rules:
  - name: house-python
    paths: ["**/*.py"]
    instructions: Imports are sorted.
"""


def commit_on_target(world: World, files: Mapping[str, str | bytes], message: str) -> None:
    """A commit on the target branch (main), then a new diff version of the MR; a file given
    as bytes is committed as they are."""
    git(world.repo, "checkout", "-q", "main")
    for name, content in files.items():
        (world.repo / name).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            (world.repo / name).write_bytes(content)
        else:
            (world.repo / name).write_text(content)
    git(world.repo, "add", "-A")
    git(world.repo, "commit", "-qm", message)
    world.gitlab.push(PROJECT, 1, git(world.repo, "rev-parse", "feature"))


def prompts(world: World) -> list[str]:
    """The user message of every chat request the model got."""
    return [
        next(m["content"] for m in body["messages"] if m["role"] == "user")
        for body in world.vllm.requests
    ]


def rules_in(prompt: str) -> set[str]:
    names = set()
    for part in prompt.split('<rule name="')[1:]:
        names.add(part.split('"', 1)[0])
    return names


def summary_body(world: World) -> str:
    [note] = [n for n in world.gitlab.notes(PROJECT, 1) if "reviewbot:summary" in n["body"]]
    return note["body"]


def all_sources(world: World, tmp_path: Path) -> dict[str, object]:
    """Rules in all four sources on the target branch; the settings that read them."""
    commit_on_target(
        world,
        {
            ".reviewbot/rules.yaml": REPO_RULES,
            ".gitlab/duo/mr-review-instructions.yaml": DUO_RULES,
            ".reviewbot.toml": TOML_RULES,
            "CONTRIBUTING.md": CONTRIBUTING,
        },
        "review rules",
    )
    instance = tmp_path / "instance-rules.yaml"
    instance.write_text(INSTANCE_RULES)
    return {
        "rules_file": str(instance),
        "rules_context_files": ("CONTRIBUTING.md#Review checklist",),
    }


# A context this small cuts the MR into several chunks, not all of them with util.py (the
# repository tools' schemas alone would take a fifth of it: these tests are about rules).
SMALL_CONTEXT = {"max_model_len": 2800, "max_output_tokens": 1024, "tools": "off"}


def test_rules_of_each_source_reach_the_prompt_of_the_matching_chunk_only(
    world: World, tmp_path: Path
) -> None:
    report = world.run(**all_sources(world, tmp_path), **SMALL_CONTEXT)
    every_file = {"house-python", "CONTRIBUTING.md#Review checklist"}
    shown = []
    for prompt in prompts(world):
        files = {f for f in ("app.py", "util.py") if f'<file path="{f}"' in prompt}
        expected = every_file | {"app-subprocess"} if "app.py" in files else set(every_file)
        expected |= {"util-clamp"} if "util.py" in files else set()
        assert rules_in(prompt) == expected, files
        shown.append(files)
    # several chunks, and some without util.py: its rule is not in theirs
    assert len(shown) >= 2 and {"app.py"} in shown
    # readme-tone ([[rules]] of .reviewbot.toml) is for README.md, which the MR leaves alone
    [util_prompt] = [p for p in prompts(world) if '<file path="util.py"' in p]
    assert "Functions say what they return." in util_prompt and "Tag them." not in util_prompt
    # the rules come after the MR context and before the diff
    assert util_prompt.index("# Merge request") < util_prompt.index("<rules>")
    assert util_prompt.index("</rules>") < util_prompt.index("# Diff to review")
    cited = {(f.path, f.rule) for f in report.posted if f.rule}
    assert cited == {("app.py", "app-subprocess"), ("util.py", "util-clamp")}
    # `reviewbot run --json` shows the rules, each chunk's and each finding's
    data = run_json(report)
    assert {f["rule"] for f in data["findings"]} == {None, "app-subprocess", "util-clamp"}
    assert len(data["rules"]["rules"]) == 5 and data["rules"]["unknown_cited"] == 0
    assert all("house-python" in names for names in data["rules"]["by_chunk"].values())
    assert report.review.coverage.changed_lines_covered == 16


def test_a_rule_the_mr_adds_does_not_review_it_and_the_summary_says_so(world: World) -> None:
    (world.repo / ".reviewbot").mkdir()
    head = commit_on_feature(world.repo, {".reviewbot/rules.yaml": REPO_RULES}, "my own rules")
    world.gitlab.push(PROJECT, 1, head)
    report = world.run()
    assert all("util-clamp" not in rules_in(prompt) for prompt in prompts(world))
    assert not any(f.rule for f in report.posted)
    assert (
        "this merge request changes .reviewbot/rules.yaml: the review used the target branch's "
        "rules" in summary_body(world)
    )


def test_a_finding_citing_a_rule_is_stored_and_reported_per_rule(
    world: World, tmp_path: Path
) -> None:
    commit_on_target(world, {".gitlab/duo/mr-review-instructions.yaml": DUO_RULES}, "duo")
    report = world.run()
    [cited] = [f for f in report.posted if f.rule]
    store = Store.from_url(world.database_url)
    rows = {row["fingerprint"]: row["rule"] for row in store.findings(report.review_id)}
    assert rows[cited.fingerprint] == "app-subprocess"
    assert sorted(rule for rule in rows.values() if rule) == ["app-subprocess"]
    [thread] = [
        d["notes"][0]
        for d in world.gitlab.discussions(PROJECT, 1)
        if d["notes"][0]["type"] == "DiffNote" and "team rule" in d["notes"][0]["body"]
    ]
    world.gitlab.add_award_emoji(PROJECT, 1, thread["id"], "thumbsup", "alice")
    env = {
        "REVIEWBOT_GITLAB_URL": world.gitlab.url,
        "REVIEWBOT_GITLAB_TOKEN": BOT_TOKEN,
        "REVIEWBOT_DATABASE_URL": world.database_url,
        "REVIEWBOT_CONFIG": "",
    }
    runner = CliRunner()
    synced = runner.invoke(main, ["feedback", "sync", "--since", "1d"], env=env)
    assert synced.exit_code == 0, synced.output
    now = datetime.now(UTC)
    window = ["--since", (now - timedelta(hours=1)).isoformat()]
    window += ["--until", (now + timedelta(hours=1)).isoformat()]
    output = tmp_path / "report"
    made = runner.invoke(main, ["report", *window, "--output", str(output)], env=env)
    assert made.exit_code == 0, made.output
    document: dict[str, Any] = json.loads((output / "report.json").read_text())
    [row] = document["by_rule"]
    assert (row["rule"], row["findings"], row["findings_posted"]) == ("app-subprocess", 1, 1)
    assert (row["thumbs_up"], row["thumbs_down"], row["acceptance"]) == (1, 0, 1.0)
    assert "## By review rule" in (output / "report.md").read_text()
    assert "app-subprocess" in (output / "report.html").read_text()


def test_a_broken_rules_file_is_named_in_the_summary_and_the_review_still_posts(
    world: World, tmp_path: Path
) -> None:
    broken = "rules:\n  - name: '@all please'\n    instructions: [unclosed\n"
    duo_typo = "instructions:\n  - name: x\n    fileFilter: ['*.py']\n    instructions: y\n"
    commit_on_target(
        world,
        {".reviewbot/rules.yaml": broken, ".gitlab/duo/mr-review-instructions.yaml": duo_typo},
        "broken rules",
    )
    instance = tmp_path / "instance.yaml"
    twice = "  - name: '@all /merge'\n    instructions: x\n"
    instance.write_text(INSTANCE_RULES + twice + twice)
    report = world.run(rules_file=str(instance))
    assert len(report.posted) == 3  # the model's own findings, as without rules
    body = summary_body(world)
    assert "ignored .reviewbot/rules.yaml: not valid YAML" in body
    assert "rule 1 ignored: unknown key `fileFilter`" in body
    assert all("house-python" in rules_in(p) for p in prompts(world))  # the valid rules apply
    # repository text in the summary is sanitised: the name only inside a code span
    assert "rule `@all /merge` is defined twice" in body
    assert "@all" not in body.replace("`@all /merge`", "")


def test_rules_past_the_budget_are_named_and_every_changed_line_is_still_reviewed(
    world: World,
) -> None:
    """A huge rules file and a small context: the chunk planner keeps room for rules, the
    rules that do not fit are dropped and named; coverage stays 100%."""
    many = "rules:\n" + "".join(
        f"  - name: r{i}\n    paths: ['**']\n    instructions: |\n"
        f"      {'Short rule.' if i % 10 == 0 else 'words ' * 600}\n"
        for i in range(40)
    )
    commit_on_target(world, {".reviewbot/rules.yaml": many}, "too many rules")
    report = world.run(**SMALL_CONTEXT, rules_tokens=100_000)
    coverage = report.review.coverage
    assert coverage.changed_lines_covered == coverage.changed_lines_total == 16
    assert report.review.complete and not report.review.unreviewed
    room = SMALL_CONTEXT["max_model_len"] - SMALL_CONTEXT["max_output_tokens"]
    assert all(call.prompt_tokens <= room for call in report.review.calls)  # as the server counts
    assert all(rules_in(prompt) for prompt in prompts(world))  # some rules fit each chunk
    dropped = report.review.rules.dropped
    assert dropped and len(dropped) < 40
    body = summary_body(world)
    assert all(f"review rule `{name}` not given to chunk(s)" in body for name in dropped)


def test_the_worker_reviews_with_the_target_branchs_rules(world: World) -> None:
    commit_on_target(world, {".reviewbot/rules.yaml": REPO_RULES}, "rules")
    with App(world.settings()) as app:
        queue = JobQueue(app.store)
        queue.enqueue(project=PROJECT, mr_iid=1, head_sha=None, trigger="webhook")
        Worker(app, queue, poll_s=0.05).run(burst=True, handle_signals=False)
        [job] = queue.list()
    assert job.status == "succeeded", job
    assert any("util-clamp" in rules_in(prompt) for prompt in prompts(world))


def test_ci_reviews_with_the_rules_of_the_target_in_the_checkout(
    world: World, tmp_path: Path
) -> None:
    commit_on_target(world, {".reviewbot/rules.yaml": REPO_RULES}, "rules")
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", f"file://{world.repo}", str(checkout))
    head = git(world.repo, "rev-parse", "feature")
    git(checkout, "checkout", "-q", head)
    env = {
        "CI_PIPELINE_SOURCE": "merge_request_event",
        "CI_MERGE_REQUEST_IID": "1",
        "CI_MERGE_REQUEST_PROJECT_ID": "7",
        "CI_MERGE_REQUEST_PROJECT_PATH": PROJECT,
        "CI_PROJECT_PATH": PROJECT,
        "CI_PROJECT_ID": "7",
        "CI_SERVER_URL": world.gitlab.url,
        "CI_API_V4_URL": f"{world.gitlab.url}/api/v4",
        "CI_PROJECT_DIR": str(checkout),
        "CI_COMMIT_SHA": head,
        "CI_JOB_URL": "https://gitlab.example.com/group/app/-/jobs/1",
        "REVIEWBOT_CONFIG": "",
        "REVIEWBOT_GITLAB_TOKEN": BOT_TOKEN,
        "REVIEWBOT_LLM_BASE_URL": world.vllm.base_url,
        "REVIEWBOT_DATABASE_URL": world.database_url,
        "REVIEWBOT_GITLAB_NOTES_PER_MINUTE": "60000",
    }
    result = CliRunner().invoke(ci_command, [], env=env)
    assert result.exit_code == 0, result.output
    assert any("util-clamp" in rules_in(prompt) for prompt in prompts(world))
    file_reads = [path for _, path in world.gitlab.requests if "/repository/files/" in path]
    assert not any("rules.yaml" in path for path in file_reads)  # read from the checkout


def test_a_changed_rule_on_the_target_reviews_again_an_unchanged_one_does_not(
    world: World,
) -> None:
    """Rules shape the findings: an incremental review compares them like the settings."""
    commit_on_target(world, {".reviewbot/rules.yaml": REPO_RULES}, "rules")
    world.run()
    asked = len(world.vllm.requests)
    commit_on_target(world, {"README.md": "# app, documented\n"}, "docs only")
    world.run()
    assert len(world.vllm.requests) == asked  # same patches, same rules: nothing to ask
    stricter = REPO_RULES.replace('"max("', '"min("')
    commit_on_target(world, {".reviewbot/rules.yaml": stricter}, "stricter rule")
    report = world.run()
    assert len(world.vllm.requests) > asked
    assert {f.rule for f in report.findings if f.rule} == {"util-clamp"}


def test_an_unreadable_instance_file_is_said_without_its_path(world: World, tmp_path: Path) -> None:
    missing = tmp_path / "secret-place" / "rules.yaml"
    world.run(rules_file=str(missing))
    body = summary_body(world)
    assert "ignored the instance's rules_file: No such file or directory" in body
    assert "secret-place" not in body


HOSTILE_RULES = """\
rules:
  - name: deep
    paths: ['**/**/**/**/**/**/**/**/**/**/**/**/x']
    instructions: Flag every added line containing "max(".
  - name: stars
    paths: ['*a*a*a*a*a*a*a*a*a*a*a*ab*']
    instructions: Flag every added line containing "max(".
"""
LONG_NAME = "a" * 200 + ".txt"  # one segment: every `*` of the second glob may take it
RUN_TIMEOUT_S = 120  # a guard against a hang; the run takes seconds


@pytest.mark.timeout(RUN_TIMEOUT_S)
def test_a_backtracking_glob_on_the_target_neither_hangs_the_review_nor_goes_unsaid(
    world: World,
) -> None:
    """Globs that a backtracking regex took minutes over (issue 32): the too-starry one is
    refused with the reason, the other is matched, in linear time, to a long file name the
    MR changes."""
    commit_on_target(
        world, {".reviewbot/rules.yaml": HOSTILE_RULES, LONG_NAME: "long\n"}, "hostile rules"
    )
    head = commit_on_feature(world.repo, {LONG_NAME: "longer\n"}, "touch the long one")
    world.gitlab.push(PROJECT, 1, head)
    report = world.run()
    assert len(report.posted) == 3  # the model's own findings, as without rules
    body = summary_body(world)
    assert "glob `**/**/**/**/**/**/**/**/**/**/**/**/x` has more than 16 `*`" in body
    [long_prompt] = [p for p in prompts(world) if f'<file path="{LONG_NAME}"' in p]
    assert "stars" not in rules_in(long_prompt)  # matched, and it does not match
    assert all("deep" not in rules_in(p) for p in prompts(world))


def test_a_rule_name_the_model_made_up_is_dropped_and_counted_in_the_run_details_only(
    world: World,
) -> None:
    """The review has no rules; the model fills every finding's ``rule`` anyway. The findings
    are posted without the name, stored without it, and the summary counts them in its run
    details, never as a warning (issue 32 item 8)."""
    world.vllm.add_faults("invented_rule")
    report = world.run()
    assert len(report.posted) == 3 and not any(f.rule for f in report.posted)
    store = Store.from_url(world.database_url)
    try:
        assert [row["rule"] for row in store.findings(report.review_id)] == [None] * 3
    finally:
        store.close()
    body = summary_body(world)
    assert "Warnings" not in body
    details = body.split("Run details", 1)[1]
    assert "| Unknown rule names | 3 finding(s) named a rule this review does not have: " in details
    assert "pep8-strict" not in body


# -- rules files in other encodings (issue 32, item 13) ----------------------------------------

UTF16_BE_WITH_MARK = b"\xfe\xff" + CONTRIBUTING.encode("utf-16-be")
PNG_START = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10"
LATIN1_RULES = "rules:\n  - name: caf\u00e9\n    instructions: x\n".encode("latin-1")


def test_rules_files_saved_with_a_byte_order_mark_are_read_and_used(world: World) -> None:
    """A rules file saved as "Unicode" (UTF-16) or "UTF-8 with BOM" by an editor on Windows was
    binary to the reader (NUL bytes): silently left out, and AGENTS.md said not to exist."""
    commit_on_target(
        world,
        {
            ".reviewbot/rules.yaml": REPO_RULES.encode("utf-16"),
            ".gitlab/duo/mr-review-instructions.yaml": DUO_RULES.encode("utf-8-sig"),
            ".reviewbot.toml": TOML_RULES.encode("utf-32"),
            "CONTRIBUTING.md": UTF16_BE_WITH_MARK,
        },
        "rules saved on Windows",
    )
    report = world.run(rules_context_files=("CONTRIBUTING.md#Review checklist",))
    names = {rule["name"] for rule in run_json(report)["rules"]["rules"]}
    assert names == {
        "util-clamp",
        "app-subprocess",
        "readme-tone",
        "CONTRIBUTING.md#Review checklist",
    }
    [util_prompt] = [p for p in prompts(world) if '<file path="util.py"' in p]
    assert {"util-clamp", "CONTRIBUTING.md#Review checklist"} <= rules_in(util_prompt)
    assert "Functions say what they return." in util_prompt
    body = summary_body(world)
    assert "not UTF-8 text" not in body and "does not exist" not in body


def test_a_rules_file_that_is_not_text_is_named_as_such_never_as_missing(world: World) -> None:
    commit_on_target(
        world,
        {
            "AGENTS.md": PNG_START,
            ".reviewbot/rules.yaml": LATIN1_RULES,
            ".reviewbot.toml": TOML_RULES.encode("utf-16-le"),  # no byte order mark
        },
        "rules that are not text",
    )
    report = world.run(rules_context_files=("AGENTS.md", "MISSING.md"))
    assert len(report.posted) == 3  # the model's own findings, as without rules
    assert not run_json(report)["rules"]["rules"]
    body = summary_body(world)
    for path in ("AGENTS.md", ".reviewbot/rules.yaml", ".reviewbot.toml"):
        assert body.count(f"{path} is not UTF-8 text; not used") == 1, path
    assert "AGENTS.md does not exist" not in body
    assert "rules_context_files: MISSING.md does not exist at the target branch" in body
