"""The review effort end to end (issue 37): `reviewbot run` of an MR against the fake GitLab and
the fake vLLM with its per-pass noise, on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from reviewbot.commands import main
from reviewbot.config import ConfigError, Settings, apply_repo_overrides
from reviewbot.effort import Effort, EffortChoice
from reviewbot.effort_settings import choose_effort
from reviewbot.mr import RunOptions
from reviewbot.store import Store
from tests.fakes.pass_noise import PassNoise
from tests.mr_world import PROJECT, World

pytestmark = pytest.mark.slow  # a few MR runs

DEEP = EffortChoice(Effort.DEEP, "--effort")


def _inline(world: World) -> list[str]:
    return [
        d["notes"][0]["body"]
        for d in world.gitlab.discussions(PROJECT, 1)
        if d["notes"][0]["type"] == "DiffNote"
    ]


def _summary(world: World) -> str:
    notes = world.gitlab.notes(PROJECT, 1)
    return next(note["body"] for note in notes if "Effort" in note["body"])


def test_a_deep_run_posts_the_voted_findings_with_their_confidence(world: World) -> None:
    world.vllm.noise = PassNoise(recall=0.8, false_positive_rate=0.3, seed=3)
    report = world.run(RunOptions(effort=DEEP))
    store = Store.from_url(world.database_url)
    [review] = store.reviews(project=PROJECT, mr_iid=1)
    assert (review["effort"], review["effort_reason"], review["passes"]) == ("deep", "--effort", 3)
    findings = store.findings(report.review_id)
    posted = [f for f in findings if f["state"] == "posted"]
    voted_out = [f for f in findings if f["state"] == "voted_out"]
    assert posted and voted_out
    assert all(f["votes"] >= 2 and f["passes"] == 3 for f in posted)
    assert all(f["votes"] < 2 and f["confidence"] == f["votes"] / 3 for f in voted_out)
    bodies = _inline(world)
    assert len(bodies) == len(posted)
    assert all("of 3 passes" in body for body in bodies)
    summary = _summary(world)
    assert "effort deep (3 passes, keep at 2 votes): --effort" in summary
    assert f"{len(voted_out)} voted out" in summary
    calls = store.llm_calls(report.review_id)
    assert len(calls) == 3 * len(report.review.plan.chunks)
    env = {"REVIEWBOT_DATABASE_URL": world.database_url}
    shown = CliRunner().invoke(main, ["reviews", "show", str(report.review_id)], env=env)
    assert shown.exit_code == 0, shown.output
    assert f"voted out by a deep review's passes ({len(voted_out)}):" in shown.stdout
    assert "effort" in shown.stdout and "deep" in shown.stdout
    out = world.repo.parent / "report"
    since = ["--since", (datetime.now(UTC) - timedelta(days=1)).date().isoformat()]
    made = CliRunner().invoke(
        main, ["report", *since, "--output", str(out), "--format", "md,html"], env=env
    )
    assert made.exit_code == 0, made.output
    markdown = (out / "report.md").read_text()
    assert "## Review effort" in markdown
    [row] = [line for line in markdown.splitlines() if line.startswith("| deep |")]
    assert row.endswith(f"| {len(voted_out)} |")
    html = (out / "report.html").read_text()
    effort_part = html.split("Review effort</h2>")[1].split("</table>")[0]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", effort_part)
    assert cells[0] == "deep" and cells[-1] == str(len(voted_out))


def test_a_quick_run_is_one_pass_without_tools(world: World) -> None:
    report = world.run(RunOptions(effort=EffortChoice(Effort.QUICK, "--effort")), tools="on")
    assert all(len(body.get("tools") or []) == 1 for body in world.vllm.requests)
    assert "seed" not in str(world.vllm.requests)
    [review] = Store.from_url(world.database_url).reviews(project=PROJECT, mr_iid=1)
    assert (review["effort"], review["passes"]) == ("quick", 1)
    assert report.review.voting is not None and not report.review.voting.voted_out


def test_the_triggers_effort_comes_before_the_instances_review_effort(world: World) -> None:
    report = world.run(effort_by_trigger=("cli=quick",), review_effort="deep")
    [review] = Store.from_url(world.database_url).reviews(project=PROJECT, mr_iid=1)
    assert (review["effort"], review["effort_reason"]) == ("quick", "effort_by_trigger for cli")
    assert report.review.voting is not None


def test_a_projects_policy_file_may_raise_or_lower_the_effort() -> None:
    instance = Settings(effort_by_trigger=("cli=quick",))
    for wanted in ("deep", "standard"):
        project = apply_repo_overrides(instance, f'review_effort = "{wanted}"', ".reviewbot.toml")
        if wanted == instance.review_effort:
            continue  # the instance's own value: no project choice to honour
        chosen = choose_effort(None, instance, project, "cli")
        assert chosen == EffortChoice(Effort(wanted), "the project's .reviewbot.toml")
    with pytest.raises(ConfigError, match="review_effort"):
        apply_repo_overrides(instance, 'review_effort = "max"', ".reviewbot.toml")


def test_run_takes_effort_on_the_command_line(world: World) -> None:
    env = world.settings().describe()
    assert env  # the world's settings are valid
    result = CliRunner().invoke(main, ["run", "--help"])
    assert "--effort [quick|standard|deep]" in result.output
