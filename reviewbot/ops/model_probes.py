"""The model server's checks of ``reviewbot doctor``: reachable and serving the model, its
context, a real tool-call probe, /tokenize, prefix caching, cached-token figures, thinking and
the generation config, and (through `reviewbot.ops.router_probes`) a vllm-router's boxes.

Once the served model is known, each check runs on its own thread with a deadline of its own,
so a stalled step (a hung probe, /version or /metrics) costs its own check and no other; each
verdict is recorded as it is made (`Verdicts`), so a group that overran its time, on a loaded
host or behind a library that did not return, still says every verdict it made, and fails by
name only the checks it did not finish.

Owns: asking the model server, each step within its deadline, and gathering the verdicts.
Must not: judge an answer (`reviewbot.ops.doctor` does) or print.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx

from reviewbot.config import LLM_BACKEND_VLLM, Settings
from reviewbot.llm.factory import BACKENDS, llm_settings_from
from reviewbot.llm.openai_compatible import CHAT_PATH
from reviewbot.llm.vllm import PRIORITY_REFUSED_MARKERS
from reviewbot.model import (
    MAX_ERROR_CHARS,
    MODE_CONTENT,
    LLMError,
    LLMUnavailableError,
    ModelAnswer,
    ModelBackend,
    ModelNotFoundError,
    ModelRequest,
    OutputModeRefusedError,
    ServerInfo,
    request_priority,
)
from reviewbot.ops.deadlines import (
    DEADLINE_GRACE_S,
    Background,
    CheckTimeoutError,
    DoctorTimeouts,
    within,
    within_or,
)
from reviewbot.ops.doctor import (
    MODEL_API_KEY_FIX,
    MODEL_SERVER_FIX,
    TOOL_PARSER_FIX,
    Check,
    ProbePrompt,
    Status,
    context_length_check,
    generation_config_check,
    prefix_caching_check,
    priority_check,
    probe_prompt,
    prompt_tokens_details_check,
    tokenize_check,
    tool_call_check,
    vllm_argv_for,
)
from reviewbot.ops.router_probes import router_pool_checks
from reviewbot.ops.thinking import thinking_check
from reviewbot.prompts import tool_schemas
from reviewbot.redaction import hide_url_password
from reviewbot.review import local_overhead
from reviewbot.states import Workload
from reviewbot.tokens import TokenCounter, local_counter

__all__ = [
    "HUNG_SERVER_FIX",
    "MODEL_CHECKS",
    "VERDICT_RESERVE_S",
    "Verdicts",
    "local_command_lines",
    "model_checks",
    "model_verdicts",
]

# The probe asks for one short tool call; thinking models may spend a few hundred tokens first.
PROBE_MAX_TOKENS = 1024
PROBE_TEMPERATURE = 0.0
# Every step ends this long before the group's time is up, and its verdict (a Check built from
# the answer, or from the timeout) is made in it: on a loaded host (2 cores, load 8) waking a
# thread and building a check took over a second.
VERDICT_RESERVE_S = 1.0
VERSION_SUFFIX = "/v1"
PROC = Path("/proc")
UNAUTHORIZED_STATUSES = frozenset({401, 403})
# The model group's checks in the order they are shown (a vllm-router's come after the first);
# "generation config" follows for vLLM.
MODEL_CHECKS = (
    "model server",
    "context length",
    "tool calls",
    "tokenize",
    "prefix caching",
    "cached tokens",
    "thinking",
)
GENERATION_CONFIG = "generation config"
PRIORITY_SCHEDULING = "priority scheduling"
# The smallest answer that shows the server took the request.
PRIORITY_PROBE_TOKENS = 1
HUNG_SERVER_FIX = (
    "the server takes connections but does not answer: see its log (journalctl -u "
    "reviewbot-vllm@PROFILE); the health timer restarts it after 3 failed probes in a row"
)
UNFINISHED_FIX = (
    "run it again; if it repeats, see the model server's log and this host's load "
    "(a step that outlives its deadline is a stuck library: report it)"
)
SERVER_LOG_FIX = "see the server's log"


@dataclass
class Verdicts:
    """A group's checks as they are made, in the group's order whenever they are read; a
    check expected but not made yet is failed by its own name (`so_far`)."""

    expected: list[str]
    seconds: float  # the group's time, for the words of an unfinished check
    _made: list[Check] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, *checks: Check) -> None:
        with self._lock:
            self._made.extend(checks)

    def only(self, check: Check) -> None:
        """The group ends with this one check (the server is not there: nothing else to ask)."""
        with self._lock:
            self.expected = []
            self._made = [check]

    def so_far(self) -> list[Check]:
        with self._lock:
            made = list(self._made)
            expected = list(self.expected)
        names = {check.name for check in made}
        unfinished = [
            Check(
                name,
                Status.FAIL,
                f"no verdict within the model checks' {self.seconds:g} s",
                UNFINISHED_FIX,
            )
            for name in expected
            if name not in names
        ]
        after_first = 0.5  # checks the group did not plan (a router's) follow its first
        order = {name: rank for rank, name in enumerate(expected or MODEL_CHECKS)}
        both = made + unfinished
        return sorted(both, key=lambda c: (order.get(c.name, after_first), both.index(c)))


def model_verdicts(settings: Settings, timeouts: DoctorTimeouts) -> Verdicts:
    """The verdicts the model group is expected to make for these settings."""
    vllm = settings.llm_backend == LLM_BACKEND_VLLM
    only_vllm = [GENERATION_CONFIG, PRIORITY_SCHEDULING] if vllm else []
    return Verdicts([*MODEL_CHECKS, *only_vllm], timeouts.model_total_s)


@dataclass
class _Deadline:
    """The model group's time: each step gets its own timeout, but ends VERDICT_RESERVE_S
    before the group's."""

    ends_at: float

    def step(self, seconds: float) -> float:
        last = self.ends_at - VERDICT_RESERVE_S - time.monotonic()
        return max(0.0, min(seconds + DEADLINE_GRACE_S, last))

    def left(self) -> float:
        return max(0.0, self.ends_at - time.monotonic())


@dataclass(frozen=True)
class _Probing:
    """What every step of the group shares."""

    settings: Settings
    timeouts: DoctorTimeouts
    backend: ModelBackend
    http: httpx.Client
    deadline: _Deadline
    verdicts: Verdicts
    counter: TokenCounter
    prompt: ProbePrompt
    tools: list[dict]

    @property
    def root_url(self) -> str:
        return self.backend.base_url.removesuffix(VERSION_SUFFIX)

    @property
    def shown_url(self) -> str:  # what the checks say: never a password
        return hide_url_password(self.backend.base_url)

    @property
    def is_vllm(self) -> bool:
        return self.settings.llm_backend == LLM_BACKEND_VLLM


def model_checks(
    settings: Settings,
    timeouts: DoctorTimeouts,
    command_lines: Callable[[], Sequence[Sequence[str]]],
    verdicts: Verdicts,
    ends_at: float,
) -> list[Check]:
    """Every check of the model server, each recorded in ``verdicts`` as it is made; by
    ``ends_at`` (the group's time, `time.monotonic`), what was made and the unfinished ones."""
    llm_settings = replace(
        llm_settings_from(settings),
        connect_timeout_s=timeouts.model_s,
        request_timeout_s=timeouts.tool_probe_s,
        max_retries=0,
        max_output_tokens=PROBE_MAX_TOKENS,
    )
    backend: ModelBackend = BACKENDS[settings.llm_backend](llm_settings)
    headers = {"Authorization": f"Bearer {settings.llm_api_key}"} if settings.llm_api_key else {}
    http = httpx.Client(timeout=timeouts.model_s, headers=headers)
    try:
        # The local work (loading the tokenizer takes ~0.4 s, more on a loaded host) comes
        # before the first request, inside the group's time.
        counter = local_counter(settings.llm_model)
        probing = _Probing(
            settings,
            timeouts,
            backend,
            http,
            _Deadline(ends_at),
            verdicts,
            counter,
            probe_prompt(counter),
            tool_schemas(),
        )
        _ask_everything(probing, command_lines)
        return verdicts.so_far()
    finally:
        backend.close()
        http.close()


def _ask_everything(
    probing: _Probing, command_lines: Callable[[], Sequence[Sequence[str]]]
) -> None:
    """The served model first (nothing else is worth asking without it), then every other
    step at once, each within its own deadline; waits for them until the group's time is up."""
    served = _served(probing)
    if isinstance(served, Check):
        probing.verdicts.only(served)
        return
    counting = Background(lambda: _shared_count(probing))
    probe = Background(lambda: _probed(probing))
    steps = [
        Background(lambda: _model_server(probing, served)),
        Background(lambda: _router(probing)),
        Background(lambda: _context_length(probing, served, counting)),
        probe,
        Background(lambda: _tokenize_after_the_probe(probing, counting, probe)),
        Background(lambda: _prefix_caching(probing, probe)),
    ]
    if probing.is_vllm:
        steps.append(Background(lambda: _generation_config(probing, command_lines)))
        steps.append(Background(lambda: _priority(probing, command_lines, probe)))
    for step in steps:
        if step.wait(probing.deadline.left()):
            step.result(0)  # a step's own error (a bug) is raised here, never hidden
    # a step still running has no verdict: Verdicts.so_far names it


def _served(probing: _Probing) -> ServerInfo | Check:
    """The served model, or the failed "model server" check."""
    backend, deadline, model_s = probing.backend, probing.deadline, probing.timeouts.model_s
    try:
        return within(deadline.step(model_s), backend.server_info)
    except ModelNotFoundError as error:
        return Check(
            "model server",
            Status.FAIL,
            str(error),
            "set REVIEWBOT_LLM_MODEL to a served model, or unset it to use the first",
        )
    except LLMError as error:
        detail, fix = str(error), MODEL_SERVER_FIX
        if isinstance(error, LLMUnavailableError):
            detail = detail.replace(backend.setup_hint, "").strip()  # the fix says it better
        elif within_or(
            deadline.step(model_s),
            lambda: _refuses_the_key(probing.http, backend.base_url),
            False,
        ):
            fix = MODEL_API_KEY_FIX
        return Check("model server", Status.FAIL, detail, fix)
    except CheckTimeoutError as error:
        return Check("model server", Status.FAIL, f"{probing.shown_url}: {error}", HUNG_SERVER_FIX)


def _model_server(probing: _Probing, info: ServerInfo) -> None:
    """The served model, with vLLM's version when it tells it in time."""
    version = (
        within_or(
            probing.deadline.step(probing.timeouts.model_s),
            lambda: _vllm_version(probing.http, probing.root_url),
            None,
        )
        if probing.is_vllm
        else None
    )
    served = f"serves {info.model} at {probing.shown_url}"
    probing.verdicts.add(
        Check("model server", Status.OK, served + (f" (vLLM {version})" if version else ""))
    )


def _router(probing: _Probing) -> None:
    """A vllm-router in front: its boxes, each asked directly (reviewbot.ops.router_probes)."""
    step_s = probing.deadline.step(probing.timeouts.model_s)
    checks = within_or(
        step_s,
        lambda: router_pool_checks(probing.settings, probing.http, probing.root_url, step_s),
        [],
    )
    probing.verdicts.add(*checks)


def _shared_count(probing: _Probing) -> int | str:
    """The server's count of the prompt's shared part, or why there is none."""
    try:
        return within(
            probing.deadline.step(probing.timeouts.model_s),
            lambda: probing.backend.count_prompt_tokens(probing.prompt.shared, probing.tools),
        )
    except (LLMError, CheckTimeoutError) as error:
        return str(error)


def _counted(probing: _Probing, counting: Background[int | str]) -> int | str:
    try:
        return counting.result(probing.deadline.left())
    except CheckTimeoutError as error:
        return f"counting the prompt's tokens: {error}"


def _context_length(probing: _Probing, info: ServerInfo, counting: Background[int | str]) -> None:
    counted = _counted(probing, counting)
    settings = probing.settings
    shared = counted if isinstance(counted, int) else None
    overhead = shared or local_overhead(probing.counter, probing.prompt.context)
    probing.verdicts.add(
        context_length_check(
            served=info.max_model_len,
            configured=settings.max_model_len,
            output_reserve=settings.max_output_tokens,
            overhead=overhead,
            headroom=probing.counter.headroom,
        )
    )


def _probed(probing: _Probing) -> tuple[ModelAnswer | None, Check]:
    """The probe, and its checks (tool calls, cached tokens, thinking) recorded."""
    backend = probing.backend
    fix = TOOL_PARSER_FIX if probing.is_vllm else backend.setup_hint
    answer, probe_check = _probe(
        backend, probing.prompt.messages, probing.tools, fix, probing.deadline, probing.timeouts
    )
    probing.verdicts.add(
        probe_check,
        prompt_tokens_details_check(answer),
        thinking_check(
            probing.settings.enable_thinking,
            answer,
            _thinking_tokens(probing.counter, answer),
            probing.settings.max_output_tokens,
        ),
    )
    return answer, probe_check


def _thinking_tokens(counter: TokenCounter, answer: ModelAnswer | None) -> int | None:
    """The probe's tokens of thinking: the server's count, else the reasoning text counted."""
    if answer is None:
        return None
    if answer.reasoning_tokens is not None:
        return answer.reasoning_tokens
    return counter.count(answer.reasoning) if answer.reasoning else 0


def _after_the_probe(
    probing: _Probing, probe: Background[tuple[ModelAnswer | None, Check]]
) -> ModelAnswer | None:
    """The probe's answer, waited for while a step of its own still fits in the group's time
    after it (a stalled probe never takes a later step's time); None without one."""
    own_step_s = probing.timeouts.model_s + DEADLINE_GRACE_S + VERDICT_RESERVE_S
    if not probe.wait(probing.deadline.left() - own_step_s):
        return None
    return probe.result(0)[0]


def _tokenize_after_the_probe(
    probing: _Probing,
    counting: Background[int | str],
    probe: Background[tuple[ModelAnswer | None, Check]],
) -> None:
    """/tokenize of the probe's prompt against the tokens the probe was charged (unless
    counting already failed)."""
    counted = _counted(probing, counting)
    if isinstance(counted, str):
        probing.verdicts.add(Check("tokenize", Status.WARN, counted, SERVER_LOG_FIX))
        return
    answer = _after_the_probe(probing, probe)
    probing.verdicts.add(
        _tokenize(
            probing.backend,
            probing.settings,
            probing.prompt.messages,
            probing.tools,
            answer,
            probing.deadline,
            probing.timeouts,
        )
    )


def _prefix_caching(probing: _Probing, probe: Background[tuple[ModelAnswer | None, Check]]) -> None:
    """vLLM's /metrics, read after the probe so that its prompt is in the figures."""
    _after_the_probe(probing, probe)
    try:
        metrics = within(
            probing.deadline.step(probing.timeouts.model_s),
            lambda: _metrics_text(probing.http, probing.root_url),
        )
        check = prefix_caching_check(metrics)
    except CheckTimeoutError as error:
        detail = f"cannot tell: {probing.root_url}/metrics gave {error}"
        check = Check("prefix caching", Status.WARN, detail, SERVER_LOG_FIX)
    probing.verdicts.add(check)


def _generation_config(
    probing: _Probing, command_lines: Callable[[], Sequence[Sequence[str]]]
) -> None:
    argv = vllm_argv_for(command_lines(), probing.backend.base_url)
    probing.verdicts.add(generation_config_check(argv, probing.shown_url))


def _priority(
    probing: _Probing,
    command_lines: Callable[[], Sequence[Sequence[str]]],
    probe: Background[tuple[ModelAnswer | None, Check]],
) -> None:
    """One tiny request with a background priority, sent as reviews send theirs (never sent
    again without it, as a review's would be): taken or refused, and the local command line.
    Sent after the probe, so that the probe is the first chat request the server sees."""
    _after_the_probe(probing, probe)
    enabled = probing.settings.priority_scheduling
    refusal = None
    if enabled:
        request = ModelRequest(
            messages=[{"role": "user", "content": "Say OK."}],
            tools=[],
            mode=MODE_CONTENT,
            stream=False,
            max_tokens=PRIORITY_PROBE_TOKENS,
            temperature=PROBE_TEMPERATURE,
            priority=request_priority(Workload.BACKGROUND),
        )
        body = probing.backend.chat_body(request)  # type: ignore[attr-defined]
        try:
            answer = within(
                probing.deadline.step(probing.timeouts.model_s),
                lambda: probing.http.post(probing.backend.base_url + CHAT_PATH, json=body),
            )
        except (CheckTimeoutError, httpx.TransportError) as error:
            detail = f"cannot tell: a request with a priority got no answer ({error})"
            probing.verdicts.add(Check(PRIORITY_SCHEDULING, Status.WARN, detail, SERVER_LOG_FIX))
            return
        text = " ".join(answer.text.split())[:MAX_ERROR_CHARS]
        if any(marker in text.lower() for marker in PRIORITY_REFUSED_MARKERS):
            refusal = f"HTTP {answer.status_code}: {text}"
    argv = vllm_argv_for(command_lines(), probing.backend.base_url)
    probing.verdicts.add(priority_check(enabled, refusal, argv, probing.shown_url))


def _probe(
    backend: ModelBackend,
    messages: list[dict],
    tools: list[dict],
    fix: str,
    deadline: _Deadline,
    timeouts: DoctorTimeouts,
) -> tuple[ModelAnswer | None, Check]:
    """One streamed request with the real prompt and ``report_finding``, as reviews send it
    (in the backend's first output mode: tool calls)."""
    mode = backend.output_modes[0]
    request = ModelRequest(
        messages=messages,
        tools=tools,
        mode=mode,
        stream=True,
        max_tokens=PROBE_MAX_TOKENS,
        temperature=PROBE_TEMPERATURE,
    )
    step_s = deadline.step(timeouts.tool_probe_s)
    try:
        answer = within(step_s, lambda: backend.execute(request))
    except OutputModeRefusedError as error:
        return None, Check(
            "tool calls",
            Status.FAIL,
            f"the server refused a request with tools: {error}",
            fix,
        )
    except LLMError as error:
        return None, Check("tool calls", Status.FAIL, f"the probe failed: {error}", SERVER_LOG_FIX)
    except CheckTimeoutError:
        return None, Check(
            "tool calls",
            Status.FAIL,
            f"no answer to the probe within {step_s:.1f} s",
            "check that the server is not hung or saturated (its log, `reviewbot loadtest`); "
            "a slow GPU that thinks first may need REVIEWBOT_ENABLE_THINKING=false",
        )
    return answer, tool_call_check(answer, tools, mode)


def _tokenize(
    backend: ModelBackend,
    settings: Settings,
    messages: list[dict],
    tools: list[dict],
    answer: ModelAnswer | None,
    deadline: _Deadline,
    timeouts: DoctorTimeouts,
) -> Check:
    try:
        count = within(
            deadline.step(timeouts.model_s), lambda: backend.count_prompt_tokens(messages, tools)
        )
    except (LLMError, CheckTimeoutError) as error:
        return Check("tokenize", Status.WARN, str(error), SERVER_LOG_FIX)
    return tokenize_check(settings.llm_backend, count, answer.prompt_tokens if answer else None)


def _refuses_the_key(http: httpx.Client, base_url: str) -> bool:
    """The server answers ``GET /models`` with 401 or 403: the API key is missing or wrong."""
    try:
        return http.get(f"{base_url}/models").status_code in UNAUTHORIZED_STATUSES
    except httpx.HTTPError:
        return False


def _vllm_version(http: httpx.Client, root_url: str) -> str | None:
    """vLLM's ``GET /version``; None when it does not answer one (an error, a body that is not
    JSON, or JSON nested deeper than ``json.loads`` can go: a RecursionError)."""
    try:
        body = http.get(f"{root_url}/version").json()
    except (httpx.HTTPError, ValueError, RecursionError):
        return None
    version = body.get("version") if isinstance(body, dict) else None
    return str(version) if version else None


def _metrics_text(http: httpx.Client, root_url: str) -> str | None:
    """vLLM's Prometheus ``GET /metrics``; None when the server has none."""
    try:
        response = http.get(f"{root_url}/metrics")
    except httpx.HTTPError:
        return None
    return response.text if response.is_success else None


def local_command_lines() -> list[list[str]]:
    """The argv of every process of this host that we may read (Linux /proc)."""
    lines = []
    for cmdline in PROC.glob("[0-9]*/cmdline"):
        try:
            raw = cmdline.read_bytes()
        except OSError:  # the process ended, or is not ours to read
            continue
        if raw:
            lines.append([part.decode(errors="replace") for part in raw.rstrip(b"\0").split(b"\0")])
    return lines
