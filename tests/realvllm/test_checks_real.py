"""A model-judged named check (``ask:``) against the real vLLM serving the scripted model: the
question goes through vLLM's chat template and its answer through the qwen3_coder tool parser
as a ``check_verdict`` call, and its verdict becomes the commit status on the fake GitLab
(docs/checks.md). The script fails a check whose diff adds a line with ``# check-fails``.
"""

from __future__ import annotations

from reviewbot.store import Store
from tests.mr_world import FEATURE_APP, PROJECT, World, commit_on_feature, git
from tests.realvllm.tier import REAL_VLLM
from tests.test_run_rules import commit_on_target, summary_body

pytestmark = REAL_VLLM

ASKED = """\
rules:
  - name: parser-safe
    paths: ["app.py"]
    check:
      ask: Is every parser in app.py safe on untrusted text?
"""


def test_a_model_judged_check_fails_the_commit_status(real_world: World) -> None:
    commit_on_target(real_world, {".reviewbot/rules.yaml": ASKED}, "asked check")
    head = commit_on_feature(
        real_world.repo, {"app.py": FEATURE_APP + "# check-fails\n"}, "a failing parser"
    )
    real_world.gitlab.push(PROJECT, 1, head)
    report = real_world.run()
    [verdict] = report.checks.verdicts
    assert (verdict.name, verdict.outcome.value) == ("parser-safe", "fail")
    line = len(FEATURE_APP.splitlines()) + 1
    assert verdict.reason == f"the model: app.py:{line} is marked failing"
    [status] = real_world.gitlab.commit_statuses(7, git(real_world.repo, "rev-parse", "feature"))
    assert (status["status"], status["description"]) == (
        "failed",
        "1 of 1 checks failed: parser-safe",
    )
    assert "| parser-safe | ❌ fail |" in summary_body(real_world)
    calls = Store.from_url(real_world.database_url).llm_calls(report.review_id)
    [check_call] = [call for call in calls if call["purpose"] == "check"]
    assert check_call["prompt_tokens"] > 0 and check_call["outcome"] == "ok"

    # the marker removed: the model passes the check, the new head's status is success
    head = commit_on_feature(real_world.repo, {"app.py": FEATURE_APP}, "marker removed")
    real_world.gitlab.push(PROJECT, 1, head)
    report = real_world.run()
    assert [(v.name, v.outcome.value) for v in report.checks.verdicts] == [("parser-safe", "pass")]
    [status] = real_world.gitlab.commit_statuses(7, head)
    assert (status["status"], status["description"]) == ("success", "all 1 checks passed")
