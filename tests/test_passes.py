"""A deep review's passes through the fake vLLM (reviewbot.passes, review.review_files)."""

from __future__ import annotations

import difflib
from dataclasses import replace

import pytest

from reviewbot.config import Settings
from reviewbot.diff import parse_git_diff
from reviewbot.effort import Effort, EffortChoice
from reviewbot.effort_settings import choose_effort
from reviewbot.llm.factory import runner_for
from reviewbot.model import LLMSettings, request_priority
from reviewbot.passes import PASS_SEED_BASE, PassPlan, pass_plan, with_effort
from reviewbot.prompts import ReviewContext, file_summaries
from reviewbot.review import ReviewOptions, review_files, review_options
from reviewbot.states import Workload
from reviewbot.tokens import local_counter
from tests.fakes.pass_noise import NOISE_TITLE, PassNoise
from tests.fakes.vllm_server import FakeVLLM

DEEP = EffortChoice(Effort.DEEP, "test")
FILES = 3
DEEP_TEMPERATURE = 0.7
CLEAN = 4
SPREAD = 10  # lines between two changes: more than twice the vote's line window


def merge_request() -> list:
    """Three files, each with one `eval(` line the fake always finds and clean lines."""
    text = ""
    for n in range(FILES):
        path = f"pkg/m{n}.py"
        old = [f"x{i} = {i}" for i in range(SPREAD * (CLEAN + 2))]
        new = list(old)
        new[SPREAD] = "y = eval(s)"
        for k in range(CLEAN):  # clean added lines, apart so that no two pass for one place
            new[SPREAD * (k + 2)] = f"z{k} = {k} + 1"
        lines = difflib.unified_diff(old, new, f"a/{path}", f"b/{path}", lineterm="")
        text += f"diff --git a/{path} b/{path}\n" + "".join(line + "\n" for line in lines)
    return parse_git_diff(text)


def review(server: FakeVLLM, plan: PassPlan, **settings):
    files = merge_request()
    llm_settings = LLMSettings(base_url=server.base_url, backoff_base_s=0.001, **settings)
    with runner_for(llm_settings) as llm:
        return review_files(
            files,
            context=ReviewContext(title="t", files=file_summaries(files)),
            llm=llm,
            counter=local_counter(),
            options=ReviewOptions(passes=plan),
            priority=request_priority(Workload.FIRST_REVIEW),
        )


def test_a_deep_review_sends_every_chunk_once_per_pass_with_its_seed_and_priority() -> None:
    with FakeVLLM() as server:
        result = review(server, PassPlan(3, 2, 0.7, DEEP))
    chunks = len(result.plan.chunks)
    assert len(server.requests) == 3 * chunks and len(result.calls) == 3 * chunks
    first = [body for body in server.requests if "seed" not in body]
    later = [body for body in server.requests if "seed" in body]
    assert len(first) == chunks
    assert {body["seed"] for body in later} == {PASS_SEED_BASE + 2, PASS_SEED_BASE + 3}
    assert {body["temperature"] for body in later} == {0.7}
    assert {body["priority"] for body in first} == {request_priority(Workload.FIRST_REVIEW)}
    assert {body["priority"] for body in later} == {request_priority(Workload.BACKGROUND)}
    # a noiseless model: every pass finds the same three, all kept at 3 of 3
    assert [(f.votes, f.passes) for f in result.findings.findings] == [(3, 3)] * FILES
    assert result.voting is not None and not result.voting.voted_out
    assert result.complete


def test_without_seeds_the_later_passes_differ_by_their_temperature_alone() -> None:
    with FakeVLLM() as server:
        result = review(server, PassPlan(3, 2, 0.7, DEEP, seeded=False))
    assert not any("seed" in body for body in server.requests)
    later = [body for body in server.requests if body["temperature"] == DEEP_TEMPERATURE]
    assert len(later) == 2 * len(result.plan.chunks)


def test_the_first_pass_is_the_standard_request_byte_for_byte() -> None:
    with FakeVLLM() as server:
        review(server, PassPlan())
        standard = list(server.requests)
    with FakeVLLM() as server:
        review(server, PassPlan(3, 2, 0.7, DEEP))
        first = [body for body in server.requests if "seed" not in body]
    key = sorted(standard, key=str) == sorted(first, key=str)
    assert key


def test_later_passes_reorder_only_the_diff_and_share_the_prefix() -> None:
    with FakeVLLM() as server:
        result = review(server, PassPlan(3, 2, 0.7, DEEP), concurrency=1)
    system = {str(body["messages"][0]) for body in server.requests}
    assert len(system) == 1  # tools and system prompt: one prefix for every pass
    assert result.cached_tokens > 0


def test_voting_keeps_what_most_passes_found_and_votes_out_the_noise() -> None:
    """The same noisy answers (the draws depend on the request's seed only), kept at 1 vote
    (the union) and at 2: the vote removes noise and keeps every true finding."""
    noise = PassNoise(recall=0.8, false_positive_rate=0.2, seed=7)
    with FakeVLLM(noise=noise) as server:
        union = review(server, PassPlan(3, 1, 0.7, DEEP)).findings.findings
        result = review(server, PassPlan(3, 2, 0.7, DEEP))
    kept = result.findings.findings
    assert kept and all(f.votes >= 2 and f.passes == 3 for f in kept)
    noisy = [f for f in union if f.title == NOISE_TITLE]
    assert len([f for f in kept if f.title == NOISE_TITLE]) < len(noisy)
    assert len([f for f in kept if "eval" in f.title.lower()]) == FILES
    voting = result.voting
    assert voting is not None and voting.voted_out
    assert all(f.votes < 2 for f in voting.voted_out)
    assert "voted out" in voting.describe()


def test_a_failed_pass_does_not_count_and_too_few_answers_is_not_reviewed() -> None:
    with FakeVLLM() as server:
        server.add_faults(*["http_500"] * 40)  # every try of the first requests fails
        result = review(server, PassPlan(3, 3, 0.7, DEEP), max_retries=0, concurrency=1)
    assert not result.complete
    assert result.unreviewed
    assert not result.findings.findings


@pytest.mark.parametrize(
    ("effort", "tools", "verify", "passes"),
    [("quick", False, False, 1), ("standard", True, True, 1), ("deep", True, False, 3)],
)
def test_the_effort_sets_the_review_options(effort, tools, verify, passes) -> None:
    settings = Settings(tools="on", verify="on")
    choice = EffortChoice(Effort(effort), "test")
    options = with_effort(review_options(settings), choice, settings)
    assert (options.tools, options.verify.enabled, options.passes.count) == (
        tools,
        verify,
        passes,
    )
    assert with_effort(
        review_options(settings), choice, replace(settings, deep_verify=True)
    ).verify.enabled is (effort != "quick")


def test_the_run_details_name_the_effort_its_passes_and_why() -> None:
    plan = pass_plan(EffortChoice(Effort.DEEP, "--effort"), 3, 2, 0.7)
    assert plan.describe() == "effort deep (3 passes, keep at 2 votes): --effort"
    assert pass_plan(EffortChoice(Effort.QUICK, "x"), 3, 2, 0.7).describe() == "effort quick: x"


def test_the_effort_is_chosen_run_first_then_project_then_trigger_then_setting() -> None:
    instance = Settings(effort_by_trigger=("ci=quick",))
    run = EffortChoice(Effort.DEEP, "--effort")
    assert choose_effort(run, instance, instance, "ci") is run
    project = replace(instance, review_effort="deep")
    assert choose_effort(None, instance, project, "ci").reason == "the project's .reviewbot.toml"
    assert choose_effort(None, instance, instance, "ci") == EffortChoice(
        Effort.QUICK, "effort_by_trigger for ci"
    )
    assert choose_effort(None, instance, instance, "cli") == EffortChoice(
        Effort.STANDARD, "setting review_effort"
    )
