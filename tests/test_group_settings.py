"""Rules and policy shared by a group (issue 36 part 4): each group above a project may keep a
settings project (``group_settings_project``) whose rules and ``.reviewbot.toml`` apply to every
project below it; the nearest group wins by rule name, the project's own files win over every
group. On plain data (the groups of a path, the pattern, the cache, the precedence), then end to
end through the fake GitLab: a group rule applied to two projects and overridden in one, a
nested group, a settings project that cannot be read named in the summary.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from reviewbot.app import App
from reviewbot.commands import main
from reviewbot.config import ConfigError, Settings
from reviewbot.group_config import group_project_problem
from reviewbot.group_settings import (
    GroupSettingsCache,
    _Read,
    enclosing_groups,
    read_group_settings,
)
from reviewbot.mr import RunOptions, run_merge_request
from reviewbot.rules.ruleset import GroupRuleTexts, RuleSource, RuleTexts, merge_rules
from tests.mr_world import PROJECT, World, git, init_repo, make_repo

SETTINGS_PROJECT = "{group}/reviewbot-settings"
GROUP_RULES = """\
rules:
  - name: house-style
    paths: ["**/*.py"]
    instructions: The group's style applies.
  - name: group-only
    instructions: Every project of the group gets this one.
"""
GROUP_TOML = """\
[reviewbot]
exclude = ["generated/**"]

[[reviewbot.rules]]
name = "from-group-toml"
instructions = "Read from the group's .reviewbot.toml."
"""
PROJECT_OVERRIDE = """\
rules:
  - name: house-style
    paths: ["**/*.py"]
    instructions: This project's own style wins.
"""


def yaml_rule(name: str, instructions: str) -> str:
    return f"rules:\n  - name: {name}\n    instructions: {instructions}\n"


# --- on plain data ---------------------------------------------------------------------------


def test_the_groups_of_a_project_are_listed_outermost_first() -> None:
    assert enclosing_groups("acme/platform/api") == ["acme", "acme/platform"]
    assert enclosing_groups("/acme/api/") == ["acme"]
    assert enclosing_groups("api") == []


@pytest.mark.parametrize(
    "pattern",
    [
        "reviewbot-settings",
        "{group}/{group}",
        "{group}/{name}",
        "x/{group}",
        "{group}",
        "{group}/../secrets",
        "{group}//settings",
        "{group}/" + "a" * 300,
    ],
)
def test_a_pattern_that_cannot_name_a_settings_project_is_refused(pattern: str) -> None:
    assert group_project_problem(pattern)
    with pytest.raises(ConfigError, match="group_settings_project"):
        Settings(group_settings_project=pattern)


def test_good_patterns_and_off_are_accepted() -> None:
    for pattern in ("", "{group}/reviewbot-settings", "{group}/ops/review-rules"):
        assert group_project_problem(pattern) is None


def test_the_nearest_group_wins_by_name_and_the_project_wins_over_every_group() -> None:
    outer = GroupRuleTexts(yaml=yaml_rule("style", "outer"), yaml_origin="group a")
    inner = GroupRuleTexts(
        yaml=yaml_rule("style", "inner") + "  - name: inner-only\n    instructions: x\n",
        yaml_origin="group a/b",
    )
    texts = RuleTexts(instance=yaml_rule("style", "instance"), groups=(outer, inner))
    merged = {rule.name: rule for rule in merge_rules(texts).rules}
    assert merged["style"].instructions == "inner" and merged["style"].origin == "group a/b"
    assert merged["style"].source is RuleSource.GROUP
    project = RuleTexts(
        instance=yaml_rule("style", "instance"),
        groups=(outer, inner),
        repo_yaml=yaml_rule("style", "project"),
    )
    merged = {rule.name: rule for rule in merge_rules(project).rules}
    assert merged["style"].instructions == "project" and "inner-only" in merged


def test_a_group_toml_gives_rules_without_calling_its_settings_unknown_keys() -> None:
    group = GroupRuleTexts(toml=GROUP_TOML, toml_origin="group a: .reviewbot.toml")
    merged = merge_rules(RuleTexts(groups=(group,)))
    assert [rule.name for rule in merged.rules] == ["from-group-toml"]
    assert merged.problems == ()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_cache_keeps_a_reading_for_its_ttl_and_never_keeps_a_failed_one() -> None:
    clock = Clock()
    cache = GroupSettingsCache(60, clock)
    loads: list[str] = []

    def load(problem: str | None = None) -> _Read:
        loads.append("read")
        return _Read(None, problem)

    cache.get(("gl", "a/s"), load)
    cache.get(("gl", "a/s"), load)
    assert len(loads) == 1
    clock.now = 61
    cache.get(("gl", "a/s"), load)
    assert len(loads) == 2
    cache.get(("gl", "b/s"), lambda: load("403 Forbidden"))
    cache.get(("gl", "b/s"), lambda: load("403 Forbidden"))
    assert len(loads) == 4  # a failed read is tried again by the next review


# --- end to end through the fake GitLab ------------------------------------------------------


def settings_repo(path: Path, files: dict[str, str]) -> Path:
    init_repo(path)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "settings")
    return path


def add_settings_project(world: World, tmp_path: Path, path: str, files: dict[str, str]) -> None:
    world.gitlab.add_project(path)
    repo = settings_repo(tmp_path / path.replace("/", "_"), files)
    world.gitlab.set_repository(path, repo, "main")


def add_second_project(world: World, tmp_path: Path, path: str, own_rules: str | None) -> None:
    repo = make_repo(tmp_path / path.replace("/", "_"))
    if own_rules is not None:
        git(repo, "checkout", "-q", "main")
        (repo / ".reviewbot").mkdir()
        (repo / ".reviewbot" / "rules.yaml").write_text(own_rules)
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "own rules")
        git(repo, "checkout", "-q", "feature")
        git(repo, "rebase", "-q", "main")
    world.gitlab.add_project(path)
    world.gitlab.add_mr_from_git(path, repo, "main", "feature", iid=1, title="Add parsing")


def rules_seen(world: World, since: int = 0) -> dict[str, str]:
    """Each rule in the prompts of the model requests after ``since``: its instructions."""
    seen = {}
    for body in world.vllm.requests[since:]:
        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
        for part in prompt.split('<rule name="')[1:]:
            name, _, rest = part.partition('"')
            seen[name] = rest.split(">", 1)[1].split("</rule>", 1)[0].strip()
    return seen


def summary_body(world: World, project: str) -> str:
    [note] = [n for n in world.gitlab.notes(project, 1) if "reviewbot:summary" in n["body"]]
    return note["body"]


@pytest.mark.slow
def test_a_group_rule_applies_to_two_projects_and_one_overrides_it(
    world: World, tmp_path: Path
) -> None:
    add_settings_project(
        world,
        tmp_path,
        "group/reviewbot-settings",
        {".reviewbot/rules.yaml": GROUP_RULES, ".reviewbot.toml": GROUP_TOML},
    )
    add_second_project(world, tmp_path, "group/other", PROJECT_OVERRIDE)
    report = world.run(group_settings_project=SETTINGS_PROJECT, tools="off")
    assert report.review.complete
    first = rules_seen(world)
    assert first["house-style"] == "The group's style applies."
    assert {"group-only", "from-group-toml"} <= first.keys()
    seen = len(world.vllm.requests)
    with App(world.settings(group_settings_project=SETTINGS_PROJECT, tools="off")) as app:
        other = run_merge_request(app, "group/other", 1, RunOptions())
    assert other.review.complete
    second = rules_seen(world, seen)
    assert second["house-style"] == "This project's own style wins."
    assert "group-only" in second  # the group's other rules still apply there
    assert "were not read" not in summary_body(world, PROJECT)


@pytest.mark.slow
def test_without_the_setting_no_group_project_is_read(world: World, tmp_path: Path) -> None:
    add_settings_project(
        world, tmp_path, "group/reviewbot-settings", {".reviewbot/rules.yaml": GROUP_RULES}
    )
    world.run(tools="off")
    assert "house-style" not in rules_seen(world)


def test_the_nearest_of_nested_groups_wins_and_a_group_without_a_project_is_no_problem(
    world: World, tmp_path: Path
) -> None:
    add_settings_project(
        world, tmp_path, "acme/reviewbot-settings", {".reviewbot/rules.yaml": GROUP_RULES}
    )
    add_settings_project(
        world,
        tmp_path,
        "acme/platform/reviewbot-settings",
        {".reviewbot/rules.yaml": yaml_rule("house-style", "The platform's style.")},
    )
    with App(world.settings()) as app:
        found = read_group_settings(app.gitlab(), "acme/platform/sub/api", SETTINGS_PROJECT)
    assert [layer.group for layer in found.layers] == ["acme", "acme/platform"]
    assert found.problems == ()  # acme/platform/sub has no settings project: no problem
    texts = [
        GroupRuleTexts(
            yaml=layer.files[".reviewbot/rules.yaml"].decode(),
            yaml_origin=layer.origin(".reviewbot/rules.yaml"),
        )
        for layer in found.layers
    ]
    merged = {rule.name: rule for rule in merge_rules(RuleTexts(groups=texts)).rules}
    assert merged["house-style"].instructions == "The platform's style."
    assert merged["house-style"].origin == (
        "group acme/platform: acme/platform/reviewbot-settings@main:.reviewbot/rules.yaml"
    )


@pytest.mark.slow
def test_a_settings_project_that_cannot_be_read_is_named_and_the_review_goes_on(
    world: World, tmp_path: Path
) -> None:
    add_settings_project(
        world, tmp_path, "group/reviewbot-settings", {".reviewbot/rules.yaml": GROUP_RULES}
    )
    world.gitlab.add_fault_for("GET", r"/projects/group%2Freviewbot-settings$", "403")
    report = world.run(group_settings_project=SETTINGS_PROJECT, tools="off")
    assert report.review.complete and "house-style" not in rules_seen(world)
    body = summary_body(world, PROJECT)
    assert "the settings of group group (group/reviewbot-settings) were not read" in body
    assert "its rules and policy were not applied" in body


@pytest.mark.slow
def test_a_group_policy_key_applies_and_the_project_file_wins(world: World, tmp_path: Path) -> None:
    add_settings_project(
        world,
        tmp_path,
        "group/reviewbot-settings",
        {".reviewbot.toml": '[reviewbot]\nmin_severity = "blocker"\n'},
    )
    with App(world.settings(group_settings_project=SETTINGS_PROJECT, tools="off")) as app:
        blocked = run_merge_request(app, PROJECT, 1, RunOptions(dry_run=True))
    assert blocked.review.complete and blocked.review.findings.selection.inline == []
    git(world.repo, "checkout", "-q", "main")
    (world.repo / ".reviewbot.toml").write_text('[reviewbot]\nmin_severity = "info"\n')
    git(world.repo, "add", "-A")
    git(world.repo, "commit", "-qm", "project policy")
    git(world.repo, "checkout", "-q", "feature")
    git(world.repo, "rebase", "-q", "main")
    world.gitlab.push(PROJECT, 1, git(world.repo, "rev-parse", "feature"))
    with App(world.settings(group_settings_project=SETTINGS_PROJECT, tools="off")) as app:
        shown = run_merge_request(app, PROJECT, 1, RunOptions(dry_run=True))
    assert (
        shown.review.findings.selection.inline
    )  # the project's info wins over the group's blocker


def test_plan_with_a_project_shows_where_each_group_rule_came_from(
    world: World, tmp_path: Path
) -> None:
    add_settings_project(
        world,
        tmp_path,
        "group/reviewbot-settings",
        {".reviewbot/rules.yaml": GROUP_RULES, ".reviewbot.toml": GROUP_TOML},
    )
    env = {**world.command_env("s"), "REVIEWBOT_GROUP_SETTINGS_PROJECT": SETTINGS_PROJECT}
    args = ["plan", "--git", "main..feature", "--repo", str(world.repo), "--offline", "--json"]
    result = CliRunner().invoke(main, [*args, "--project", PROJECT], env=env)
    assert result.exit_code == 0, result.output
    rules = {rule["name"]: rule for rule in json.loads(result.stdout)["rules"]["rules"]}
    assert rules["house-style"]["source"] == "group"
    assert rules["house-style"]["origin"] == (
        "group group: group/reviewbot-settings@main:.reviewbot/rules.yaml"
    )
    assert rules["from-group-toml"]["origin"].endswith("@main:.reviewbot.toml")
    without = CliRunner().invoke(main, args, env=env)
    assert "house-style" not in without.stdout  # without --project no group is read
    off = {**env, "REVIEWBOT_GROUP_SETTINGS_PROJECT": ""}
    refused = CliRunner().invoke(main, [*args, "--project", PROJECT], env=off)
    assert refused.exit_code == 2 and "--project needs the setting" in refused.output
