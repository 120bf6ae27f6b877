"""The walkthrough against the real vLLM serving the scripted model: one plain-text call (no
tools, no thinking) through vLLM's chat template, written into the summary note."""

from __future__ import annotations

from reviewbot.states import CallPurpose
from tests.mr_world import PROJECT, World
from tests.realvllm.tier import REAL_VLLM

pytestmark = REAL_VLLM


def test_a_review_writes_its_walkthrough_once(real_world: World) -> None:
    report = real_world.run(walkthrough="on")

    bodies = [note["body"] for note in real_world.gitlab.notes(PROJECT, 1)]
    [summary] = [body for body in bodies if "**Walkthrough**" in body]
    assert "This merge request, Add parsing, changes" in summary
    assert "- `app.py`: modified" in summary
    calls = [c for c in report.review.model_calls if c.purpose is CallPurpose.WALKTHROUGH]
    assert len(calls) == 1 and calls[0].outcome == "ok" and calls[0].completion_tokens > 0
