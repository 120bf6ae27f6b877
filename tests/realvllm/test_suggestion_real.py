"""A validated multi-line suggestion, end to end on the real vLLM serving the scripted model.

The scripted model reports what the fake vLLM reports (tests/realvllm/script.py), so an added
line holding ``# suggest(+M): TEXT`` makes it report a finding over that line and the M below
with TEXT as its suggestion (tests/fakes/vllm_server.py, ``PLANTED_SUGGESTION``). The answer
goes through vLLM's chat template and qwen3_coder tool parser; the suggestion is applied to the
head file before posting (docs/suggestions.md): the valid one is posted as ``-0+1``, the broken
one (unbalanced bracket) is dropped while its finding is posted, and the summary counts it.
"""

from __future__ import annotations

from tests.builders import diff_notes, summary_notes
from tests.mr_world import FEATURE_APP, PROJECT, World, commit_on_feature
from tests.realvllm.tier import REAL_VLLM

pytestmark = REAL_VLLM

CLAMP = (
    "def clamp(x, low, high):\n"
    "    if x < low:  # suggest(+1):     if x <= low:\\n        return low\n"
    "        return low\n"
    "    return min(x, high)  # suggest(+0):     return min(x, high\n"
)


def test_a_validated_multi_line_suggestion_is_posted(real_world: World) -> None:
    head = commit_on_feature(real_world.repo, {"app.py": FEATURE_APP + "\n\n" + CLAMP}, "clamp")
    real_world.gitlab.push(PROJECT, 1, head)
    real_world.run()
    first = (FEATURE_APP + "\n\n" + CLAMP).splitlines().index(CLAMP.splitlines()[1]) + 1
    notes = {n["position"]["new_line"]: n["body"] for n in diff_notes(real_world)}
    assert "```suggestion:-0+1\n    if x <= low:\n        return low\n```" in notes[first]
    assert "Planted suggestion" in notes[first + 2]
    assert "```suggestion" not in notes[first + 2]
    [summary] = summary_notes(real_world)
    assert "dropped (does not parse: 1; their findings are kept)" in summary["body"]
