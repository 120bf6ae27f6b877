"""Interactive work first against the real vLLM (issue 34 part 3): the tier's server runs with
``--scheduling-policy priority`` (reviewbot's serve flags), so a thread answer sent through
reviewbot's client while a load of long low-priority prompts fills the server overtakes the
ones still waiting, although they were sent before it.

On the CPU backend vLLM schedules at most 2,048 prompt tokens a step (its default
``--max-num-batched-tokens`` there), so a few prompts of several thousand tokens keep requests
waiting for many steps; each prompt is distinct, so none is read from the prefix cache. The test
sends the whole load at once, waits (on ``/metrics``) until some of it waits, then asks; it
compares orders of completion, never times.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable

import httpx

from reviewbot.llm.factory import runner_for
from reviewbot.llm.vllm import PRIORITY_FIELD
from reviewbot.model import LLMSettings, request_priority
from reviewbot.states import Workload
from tests.realvllm.server import SERVED_MODEL, SharedServer
from tests.realvllm.tier import REAL_VLLM

pytestmark = REAL_VLLM

LOAD_REQUESTS = 12
PROMPT_LINES = 600  # about 5,900 tokens: three of the server's prefill steps each
WAITING_BEFORE_ASKING = 4  # load requests that still wait when the thread answer is sent
OVERTAKEN = 2  # of them, at least this many end after it (one may end in the same step)
TIMEOUT_S = 300.0
WAIT_LIMIT_S = 120.0
POLL_S = 0.1
GAUGE = r"^vllm:num_requests_{}\{{[^}}]*\}}\s+(\S+)"
WAITING_RE = re.compile(GAUGE.format("waiting"), re.MULTILINE)
RUNNING_RE = re.compile(GAUGE.format("running"), re.MULTILINE)


def prompt(name: str) -> list[dict[str, str]]:
    """A prompt of its own: the first line differs from any earlier run's (the prefix cache)."""
    lines = "\n".join(f"line {n} of the {name} text" for n in range(PROMPT_LINES))
    return [{"role": "user", "content": f"{uuid.uuid4().hex} {name}:\n{lines}\nSay OK."}]


def gauge(server: SharedServer, pattern: re.Pattern[str]) -> int:
    text = httpx.get(f"{server.root_url}/metrics", timeout=30).text
    return int(sum(float(value) for value in pattern.findall(text)))


def waiting(server: SharedServer) -> int:
    return gauge(server, WAITING_RE)


def arrived(server: SharedServer, done: int) -> bool:
    """Whether the whole load is in the server (or done), and enough of it still waits."""
    waits = waiting(server)
    return waits >= WAITING_BEFORE_ASKING and waits + gauge(server, RUNNING_RE) + done >= (
        LOAD_REQUESTS
    )


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_LIMIT_S
    while not condition():
        assert time.monotonic() < deadline, "the server never reached the state waited for"
        time.sleep(POLL_S)


def test_a_thread_answer_overtakes_the_waiting_load(real_vllm: SharedServer) -> None:
    """The load's prompts are all alike in size and sent before the answer: first come first
    served, the answer would end last (or tied with the last); by priority it goes before the
    ones still waiting when it was sent."""
    finished: list[str] = []
    lock = threading.Lock()

    def load(number: int) -> None:
        body = {
            "model": SERVED_MODEL,
            "messages": prompt(f"load {number}"),
            "max_tokens": 1,
            PRIORITY_FIELD: request_priority(Workload.LOAD_TEST),
        }
        answer = httpx.post(f"{real_vllm.base_url}/chat/completions", json=body, timeout=TIMEOUT_S)
        answer.raise_for_status()
        with lock:
            finished.append(f"load {number}")

    threads = [threading.Thread(target=load, args=(n,)) for n in range(LOAD_REQUESTS)]
    for thread in threads:
        thread.start()
    wait_for(lambda: arrived(real_vllm, len(finished)))
    settings = LLMSettings(base_url=real_vllm.base_url, enable_thinking=False)
    with runner_for(settings) as runner:
        answer = runner.chat(prompt("thread"), 1, priority=request_priority(Workload.THREAD_ANSWER))
    with lock:
        finished.append("thread")
    for thread in threads:
        thread.join()
    assert answer.completion_tokens == 1
    assert len(finished) - 1 - finished.index("thread") >= OVERTAKEN, finished
