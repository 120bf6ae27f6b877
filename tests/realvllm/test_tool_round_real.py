"""A tool round end to end against the real vLLM (issue 34 part 2).

The scripted model (``tests.realvllm.script``: ``scripted-lookup: SYMBOL``) answers the first
request of a chunk with three repository calls in the Qwen3-Coder XML; the server's
``qwen3_coder`` parser must turn them into ``tool_calls`` with ids and typed arguments, reviewbot
answers each by its id, and the second request, which offers the same tools and repeats the
first prompt, must be served (in both forms: the compact ``repo`` tool's commands and the four
typed tools): the scripted model then reports the hazard that only a tool
answer showed, and the server's prefix cache serves at least the shared system turn (with the
tools) of the second request, in whole KV blocks.
"""

from __future__ import annotations

import pytest

from reviewbot.diff import parse_git_diff
from reviewbot.llm.factory import runner_for
from reviewbot.model import ChunkResult, LLMSettings
from reviewbot.prompts import ReviewContext, file_summaries
from reviewbot.repo.tools import REFUSED, ToolForm
from reviewbot.repo.view import MemoryView
from reviewbot.review import ReviewOptions, review_files
from reviewbot.tokens import local_counter
from tests.realvllm.script import EVIDENCE_TITLE
from tests.realvllm.server import SharedServer
from tests.realvllm.test_cache_and_repair_real import (
    block_size,
    system_turn_tokens,
    warm_the_system_turn,
)
from tests.realvllm.tier import REAL_VLLM

pytestmark = REAL_VLLM

OLD_APP = "from lib import lookup\n\n\ndef handle(key):\n    return key\n"
NEW_APP = (
    "from lib import lookup\n\n\ndef handle(key):\n"
    "    value = lookup(key)  # scripted-lookup: lookup\n    return value.name\n"
)
LIB = "def lookup(key):  # hazard(lookup): returns None for an unknown key\n    return None\n"
LOOKUP_LINE = 5
DIFF = (
    "diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n@@ -1,5 +1,6 @@\n"
    " from lib import lookup\n \n \n def handle(key):\n-    return key\n"
    "+    value = lookup(key)  # scripted-lookup: lookup\n+    return value.name\n"
)
CALLED = {
    ToolForm.COMPACT: ["repo", "repo", "repo"],
    ToolForm.TYPED: ["find_definition", "search_code", "read_file"],
}


@pytest.mark.parametrize("form", list(ToolForm))
def test_a_tool_round_is_parsed_answered_by_id_and_served_from_the_prefix_cache(
    real_vllm: SharedServer, form: ToolForm
) -> None:
    block = block_size(real_vllm)
    shared = system_turn_tokens(real_vllm)
    warm_the_system_turn(real_vllm)
    files = parse_git_diff(DIFF)
    head = {"app.py": NEW_APP, "lib.py": LIB}
    done: list[ChunkResult] = []
    settings = LLMSettings(base_url=real_vllm.base_url, enable_thinking=False)
    with runner_for(settings) as llm:
        result = review_files(
            files,
            context=ReviewContext(title="Two files", files=file_summaries(files)),
            llm=llm,
            counter=local_counter(),
            options=ReviewOptions(tools=True, tool_form=form),
            contents=head,
            repository=MemoryView("1" * 40, head),
            on_chunk_done=done.append,
        )
    assert result.complete
    assert [c.outcome for c in result.calls] == ["tool_round", "ok"]
    first, second = result.calls
    assert first.repo_tool_calls == len(CALLED[form]) and first.tool_answer_tokens > 0
    # the parser read the three calls; reviewbot answered each by the id the server gave it
    [chunk] = done
    assert chunk.conversation is not None
    [assistant] = [m for m in chunk.conversation if m["role"] == "assistant"]
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == CALLED[form]
    ids = [call["id"] for call in assistant["tool_calls"]]
    replies = [m for m in chunk.conversation if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in replies] == ids and len(set(ids)) == len(ids)
    # the server's ids, shaped as the fake vLLM makes them (tests.fakes.vllm_server._tool_call)
    assert all(call_id.startswith("chatcmpl-tool-") for call_id in ids)
    assert "hazard(lookup)" in replies[0]["content"]  # the definition was shown
    assert not any(REFUSED in m["content"] for m in replies)  # each command was read
    # the second request was served, from the cache for at least the shared system turn
    assert second.prompt_tokens > first.prompt_tokens
    assert second.cached_tokens is not None and second.cached_tokens % block == 0
    assert second.cached_tokens >= shared // block * block > 0
    print(  # the figures for the closing note (pytest -s)
        f"block {block}, shared {shared}; first {first.prompt_tokens} prompt, "
        f"{first.cached_tokens} cached; second {second.prompt_tokens} prompt, "
        f"{second.cached_tokens} cached"
    )
    titles = {(f.path, f.line, f.title) for f in result.findings.findings}
    assert ("app.py", LOOKUP_LINE, EVIDENCE_TITLE.format(symbol="lookup")) in titles
