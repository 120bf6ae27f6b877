"""An answer in the bot's thread through the real vLLM: the reply's messages (finding, code at
the head, the thread, rules and learnings) go through vLLM's own chat template, and the answer
comes back as plain text, posted once (the fake vLLM's version: tests/test_reply.py)."""

from __future__ import annotations

from tests.mr_world import World
from tests.realvllm.tier import REAL_VLLM
from tests.test_reply import BOT, Thread

pytestmark = REAL_VLLM


def test_a_mention_is_answered_once_by_the_real_server(real_world: World) -> None:
    real_world.run()
    thread = Thread(real_world, "== None", enable_thinking=False)
    try:
        note = thread.say("@reviewbot why is this a problem?")
        assert thread.hook(note)["status"] == "queued"
        thread.work()
        [answer] = thread.answers(note["id"])
        assert answer["author"]["username"] == BOT
        [reply] = thread.replies()
        assert (reply.status, reply.reply_note_id) == ("posted", answer["id"])
        assert reply.prompt_tokens > 0 and reply.completion_tokens > 0
    finally:
        thread.close()
