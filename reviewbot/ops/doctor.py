"""``reviewbot doctor``: what each finding about a dependency means, and how to fix it.

Pure functions: facts in (what GitLab, the model server and the database answered, the
settings), one :class:`Check` out, with a status (``ok``, ``warn``, ``fail``), what was found
and, unless all is well, how to fix it. Asking the services is
:mod:`reviewbot.ops.doctor_probes`' job; printing is :mod:`reviewbot.commands.render_ops`'.

Nothing here prints or returns a secret: tokens, API keys and database passwords never reach a
:class:`Check`.

Owns: what each answer means: its status, what was found and the fix. Must not: ask a service
(`reviewbot.ops.doctor_probes` does), print, or put a secret in a ``Check``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from reviewbot.chunking import Budget, plan
from reviewbot.config import LLM_BACKEND_VLLM, Settings
from reviewbot.diff import parse_git_diff
from reviewbot.llm.answers import FINISH_LENGTH, parse_answer
from reviewbot.model import ModelAnswer
from reviewbot.prompts import ReviewContext, file_summaries, render_messages
from reviewbot.roles import DEVELOPER_ACCESS_LEVEL, ROLE_NAMES
from reviewbot.tokens import TokenCounter
from reviewbot.toolcalls import TOOL_CALL_OPEN

__all__ = [
    "DEVELOPER_ACCESS_LEVEL",
    "MODEL_API_KEY_FIX",
    "TOOL_PARSER_FIX",
    "Check",
    "ProbePrompt",
    "Status",
    "context_length_check",
    "database_check",
    "exit_code",
    "generation_config_check",
    "gitlab_user_check",
    "metric_samples",
    "prefix_caching_check",
    "priority_check",
    "probe_prompt",
    "project_role_check",
    "prompt_tokens_details_check",
    "repository_cache_check",
    "repository_fetch_check",
    "repository_source_check",
    "settings_check",
    "tally",
    "token_scopes_check",
    "tokenize_check",
    "tool_call_check",
    "vllm_argv_for",
    "webhook_secret_check",
]

# GitLab roles (Gitlab::Access): reviewbot resolves threads and posts on MRs as a Developer.
REQUIRED_SCOPE = "api"
# A token expiring this soon gets a warning: renewing it is a job for this week.
TOKEN_EXPIRY_WARNING_DAYS = 14
DEFAULT_CONTEXT_LENGTH = Budget().max_model_len
VLLM_DEFAULT_PORT = 8000
DEFAULT_PORT_TEXT = str(VLLM_DEFAULT_PORT)
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})
MIB = 2**20
OLDEST_CACHE_GIT = (2, 29)  # git fetch --no-write-fetch-head
GIT_VERSION = re.compile(r"git version (\d+)\.(\d+)")

TOOL_PARSER_FIX = "start vLLM with --enable-auto-tool-choice --tool-call-parser qwen3_coder"
PROMPT_TOKENS_DETAILS_FIX = (
    "start vLLM with --enable-prompt-tokens-details (deploy/vllm profiles do): without it "
    "usage.prompt_tokens_details.cached_tokens stays empty and cache reuse cannot be measured"
)
PREFIX_CACHING_FIX = "start vLLM with --enable-prefix-caching (deploy/vllm profiles do)"
REASONING_PARSER_FIX = "start vLLM with --reasoning-parser qwen3"
GENERATION_CONFIG_FIX = (
    "start vLLM with --generation-config vllm (deploy/vllm profiles do), so that only the "
    "sampling parameters reviewbot sends apply"
)
PRIORITY_CHECK = "priority scheduling"
PRIORITY_FIX = (
    "start vLLM with --scheduling-policy priority (deploy/vllm profiles do), so that thread "
    "answers and first reviews do not wait behind a long review"
)
MODEL_SERVER_FIX = (
    "start the model server (systemctl start reviewbot-vllm@PROFILE, see deploy/vllm/) or point "
    "REVIEWBOT_LLM_BASE_URL at its OpenAI-compatible /v1 URL"
)
MODEL_API_KEY_FIX = (
    "set REVIEWBOT_LLM_API_KEY to the model server's API key (vLLM: VLLM_API_KEY in "
    "/etc/reviewbot/vllm/api-key.env, or its --api-key)"
)
GITLAB_TOKEN_FIX = (
    "create a project (or group) access token with the api scope and the Developer role and "
    "set REVIEWBOT_GITLAB_TOKEN to it"
)
DATABASE_UPGRADE_FIX = "run `reviewbot db upgrade` (every command also migrates on first use)"
GIT_FIX = (
    "install git on this host (apt install git / dnf install git) and put it on the PATH of "
    "the user reviewbot runs as: one fetch then serves a whole review"
)
CACHE_ON_FIX = "set REVIEWBOT_REPO_CACHE_MAX_BYTES above 0 (default 10 GiB)"
CACHE_DIR_FIX = (
    "make REVIEWBOT_REPO_CACHE_DIR a folder the user reviewbot runs as may write, on a disk "
    "with room for the cap"
)
CACHE_SIZE_FIX = (
    "raise REVIEWBOT_REPO_CACHE_MAX_BYTES, or let the next fetch evict (a clone in use, or "
    "larger than the cap alone, stays)"
)
FETCH_FIX = (
    "check that this host reaches GitLab's git over HTTP(S) at REVIEWBOT_GITLAB_URL and that "
    "the token has the api (or read_repository) scope; raise REVIEWBOT_REPO_FETCH_TIMEOUT_S "
    "for a large repository"
)
WEBHOOK_SECRET_FIX = (
    "set REVIEWBOT_WEBHOOK_SECRET to a long random string and the same secret token in GitLab's "
    "webhook settings"
)

# The probe: the bot's real prompt for a tiny diff with one obvious problem.
PROBE_PATH = "probe/doctor_probe.py"
PROBE_DIFF = f"""diff --git a/{PROBE_PATH} b/{PROBE_PATH}
new file mode 100644
--- /dev/null
+++ b/{PROBE_PATH}
@@ -0,0 +1,3 @@
+def parse(text):
+    # evaluates whatever the user sent
+    return eval(text)
"""
PROBE_TITLE = "reviewbot doctor: tool-call probe"

# vLLM's Prometheus names (vllm/v1/metrics/loggers.py); gpu_prefix_* before vLLM 0.10.
CACHE_CONFIG_METRIC = "vllm:cache_config_info"
PREFIX_QUERY_METRICS = ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
PREFIX_HIT_METRICS = ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
_SAMPLE_LINE = re.compile(r"^(?P<name>[^\s{]+)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Check:
    """One finding of ``reviewbot doctor``: ``fix`` says what to do unless the status is ok."""

    name: str
    status: Status
    detail: str
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        return {
            "name": self.name,
            "status": self.status.value,
            "detail": self.detail,
            "fix": self.fix,
        }


def tally(checks: Sequence[Check]) -> str:
    """How many checks ended each way: ``4 ok, 1 warnings, 0 failed``."""
    counts = {status: sum(c.status is status for c in checks) for status in Status}
    return f"{counts[Status.OK]} ok, {counts[Status.WARN]} warnings, {counts[Status.FAIL]} failed"


def exit_code(checks: Sequence[Check]) -> int:
    """0 when nothing failed (warnings are fine), 1 otherwise."""
    return 1 if any(check.status is Status.FAIL for check in checks) else 0


# ---------------------------------------------------------------------------------------------
# Settings


def settings_check(settings: Settings, source: str) -> Check:
    """The settings loaded (a ConfigError never gets this far); a base URL without /v1 warns."""
    described = (
        f"from {source}; model server {settings.llm_base_url} ({settings.llm_backend} backend)"
    )
    if not urlsplit(settings.llm_base_url).path.rstrip("/").endswith("/v1"):
        return Check(
            "settings",
            Status.WARN,
            f"{described}: the model URL does not end in /v1",
            "set REVIEWBOT_LLM_BASE_URL to the server's OpenAI-compatible URL, e.g. "
            "http://127.0.0.1:8000/v1",
        )
    return Check("settings", Status.OK, described)


def webhook_secret_check(settings: Settings) -> Check:
    if settings.webhook_secret:
        return Check("webhook secret", Status.OK, "REVIEWBOT_WEBHOOK_SECRET is set")
    return Check(
        "webhook secret",
        Status.WARN,
        "REVIEWBOT_WEBHOOK_SECRET is not set: `reviewbot serve` refuses to start without it "
        "(CLI and CI reviews do not need it)",
        WEBHOOK_SECRET_FIX,
    )


# ---------------------------------------------------------------------------------------------
# GitLab


def gitlab_user_check(user: Mapping[str, Any]) -> Check:
    """Whose token it is; a human's token works, but the comments then come from that human."""
    name = f"@{user.get('username')}"
    if user.get("bot"):
        return Check("gitlab token", Status.OK, f"valid, user {name} (a bot user)")
    return Check(
        "gitlab token",
        Status.WARN,
        f"valid, user {name} is a person, not a bot: the comments will be posted as {name}",
        "use a project or group access token: its bot user becomes the reviewer",
    )


def token_scopes_check(token: Mapping[str, Any], today: date) -> Check:
    """The token's scopes include ``api`` (reviewbot posts notes), and it is not about to expire."""
    scopes = [str(scope) for scope in token.get("scopes") or ()]
    listed = ", ".join(scopes) or "none"
    if REQUIRED_SCOPE not in scopes:
        return Check(
            "token scopes",
            Status.FAIL,
            f"scopes {listed}: without {REQUIRED_SCOPE!r} reviewbot cannot post comments",
            GITLAB_TOKEN_FIX,
        )
    expires = token.get("expires_at")
    if expires:
        days = (date.fromisoformat(str(expires)[:10]) - today).days
        if days <= TOKEN_EXPIRY_WARNING_DAYS:
            return Check(
                "token scopes",
                Status.WARN,
                f"scopes {listed}; the token expires on {expires} (in {days} days)",
                "rotate the token and update REVIEWBOT_GITLAB_TOKEN before it expires",
            )
        return Check("token scopes", Status.OK, f"scopes {listed}; expires on {expires}")
    return Check("token scopes", Status.OK, f"scopes {listed}; no expiry date")


def project_role_check(project: str, username: str, access_level: int | None) -> Check:
    """The token's user is at least a Developer of ``project``."""
    if access_level is None:
        return Check(
            "project role",
            Status.FAIL,
            f"@{username} is not a member of {project}",
            f"add @{username} to {project} as Developer, or use a project access token of it",
        )
    role = ROLE_NAMES.get(access_level, f"access level {access_level}")
    if access_level < DEVELOPER_ACCESS_LEVEL:
        return Check(
            "project role",
            Status.FAIL,
            f"@{username} is {role} on {project}: reviewbot needs Developer to post and resolve "
            "its threads",
            f"give @{username} the Developer role on {project}",
        )
    return Check("project role", Status.OK, f"@{username} is {role} on {project}")


# ---------------------------------------------------------------------------------------------
# The model server


@dataclass(frozen=True)
class ProbePrompt:
    """The bot's real review prompt (templates and all) for a three-line diff with an eval():
    ``messages`` with the diff, ``shared`` without (what every chunk of the MR repeats)."""

    context: ReviewContext
    messages: list[dict[str, str]]
    shared: list[dict[str, str]]


def probe_prompt(counter: TokenCounter) -> ProbePrompt:
    files = parse_git_diff(PROBE_DIFF)
    chunk = plan(files, Budget(), counter).chunks[0]
    context = ReviewContext(title=PROBE_TITLE, files=file_summaries(files))
    return ProbePrompt(context, render_messages(context, chunk), render_messages(context, None))


def context_length_check(
    *,
    served: int | None,
    configured: int | None,
    output_reserve: int,
    overhead: int,
    headroom: float,
) -> Check:
    """The served context holds the configured one, and leaves room for a diff."""
    if configured is not None and served is not None and configured > served:
        return Check(
            "context length",
            Status.FAIL,
            f"REVIEWBOT_MAX_MODEL_LEN={configured} but the server serves {served} tokens: "
            "prompts longer than that would be refused",
            f"set REVIEWBOT_MAX_MODEL_LEN to {served} or less, or start vLLM with "
            f"--max-model-len {configured}",
        )
    effective = configured or served or DEFAULT_CONTEXT_LENGTH
    budget = Budget(effective, output_reserve, overhead, headroom)
    if budget.available <= 0:
        return Check(
            "context length",
            Status.FAIL,
            f"no room for a diff: context {effective} - output {output_reserve} - prompt "
            f"{overhead} - margin {budget.margin}",
            "lower REVIEWBOT_MAX_OUTPUT_TOKENS or serve a longer context (--max-model-len)",
        )
    room = f"a chunk's diff may use up to {budget.available} tokens"
    if served is None and configured is None:
        return Check(
            "context length",
            Status.WARN,
            f"the server does not say its context length; reviewbot assumes {effective} ({room})",
            "set REVIEWBOT_MAX_MODEL_LEN to what the server gives one request",
        )
    source = "served" if configured is None else f"REVIEWBOT_MAX_MODEL_LEN, served {served}"
    return Check("context length", Status.OK, f"{effective} tokens ({source}); {room}")


def tool_call_check(answer: ModelAnswer, tools: list[dict], mode: str) -> Check:
    """The probe's answer holds a parsed ``report_finding`` call (the server's tool parser)."""
    parsed = parse_answer(answer, mode, tools)
    from_parser = [call for call in answer.tool_calls if call.name]
    if from_parser and parsed.calls:
        first = parsed.calls[0]
        return Check(
            "tool calls",
            Status.OK,
            f"the probe came back as {len(parsed.calls)} parsed report_finding call(s) "
            f"({first.get('path')}:{first.get('line')}, {first.get('severity')})",
        )
    if parsed.calls and TOOL_CALL_OPEN not in answer.content and answer.reasoning:
        return Check(
            "tool calls",
            Status.WARN,
            "the probe's tool call came back inside the model's thinking, not as a parsed tool "
            "call (vllm#39056): reviewbot recovers such calls, but one cut off there is lost",
            "set REVIEWBOT_ENABLE_THINKING=false, or run a vLLM whose parser ends the thinking "
            f"at {TOOL_CALL_OPEN} (0.32 does)",
        )
    if parsed.calls:
        return Check(
            "tool calls",
            Status.FAIL,
            "the probe's tool call came back as text in the answer, not as a parsed tool call: "
            "the server's tool-call parser does not read Qwen3.5's format",
            TOOL_PARSER_FIX,
        )
    if from_parser:
        return Check(
            "tool calls",
            Status.FAIL,
            f"the probe's tool call could not be decoded: {'; '.join(parsed.invalid)}",
            TOOL_PARSER_FIX,
        )
    if answer.finish_reason == FINISH_LENGTH:
        return Check(
            "tool calls",
            Status.WARN,
            f"not confirmed: the probe's answer was cut at {answer.completion_tokens} tokens "
            f"before any tool call ({len(answer.reasoning)} characters of reasoning)",
            "set REVIEWBOT_ENABLE_THINKING=false for shorter answers, then run doctor again",
        )
    return Check(
        "tool calls",
        Status.FAIL,
        f"the probe got no tool call (finish_reason {answer.finish_reason}, "
        f"{answer.completion_tokens} tokens of text)",
        TOOL_PARSER_FIX,
    )


def tokenize_check(backend: str, count: int | None, prompt_tokens: int | None) -> Check:
    """``/tokenize`` counts the probe exactly as the chat request did (vLLM backend)."""
    if backend != LLM_BACKEND_VLLM:
        return Check(
            "tokenize",
            Status.OK,
            f"not used by the {backend} backend: prompts are counted locally with headroom",
        )
    if count is None:
        return Check(
            "tokenize",
            Status.WARN,
            "the server has no /tokenize: budgets use the local count with headroom",
            "serve the model with vLLM, whose /tokenize counts prompts exactly",
        )
    if prompt_tokens is not None and count != prompt_tokens:
        return Check(
            "tokenize",
            Status.WARN,
            f"/tokenize counts {count} tokens but the request used {prompt_tokens}: "
            "chunk budgets may be off",
            "check that REVIEWBOT_LLM_MODEL and the server's chat template are the ones served",
        )
    same = ", as the request used" if prompt_tokens is not None else ""
    return Check("tokenize", Status.OK, f"/tokenize counts the probe at {count} tokens{same}")


def metric_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of each sample of a Prometheus text exposition."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE_LINE.match(line)
        if match is None:
            continue
        try:
            value = float(match["value"])
        except ValueError:
            continue
        labels = dict(_LABEL.findall(match["labels"] or ""))
        samples.append((match["name"], labels, value))
    return samples


def prefix_caching_check(metrics_text: str | None) -> Check:
    """Prefix caching from vLLM's /metrics: ``vllm:cache_config_info``'s
    ``enable_prefix_caching`` label, else whether the cache was queried at all (vLLM V1 never
    queries it when caching is off; the probe has just sent a request)."""
    if metrics_text is None:
        return Check(
            "prefix caching",
            Status.WARN,
            "cannot tell: the server has no vLLM /metrics",
            PREFIX_CACHING_FIX,
        )
    samples = metric_samples(metrics_text)
    flags = {
        labels["enable_prefix_caching"]
        for name, labels, _ in samples
        if name == CACHE_CONFIG_METRIC and "enable_prefix_caching" in labels
    }
    queries = sum(value for name, _, value in samples if name in PREFIX_QUERY_METRICS)
    hits = sum(value for name, _, value in samples if name in PREFIX_HIT_METRICS)
    counted = f"{hits:.0f} of {queries:.0f} queried prompt tokens were cache hits so far"
    if flags == {"True"} or (not flags and queries > 0):
        return Check("prefix caching", Status.OK, f"on; {counted}")
    if flags == {"False"} or (not flags and queries == 0):
        reason = (
            "cache_config_info says enable_prefix_caching=False"
            if flags
            else ("the cache was never queried, not even by the probe")
        )
        return Check(
            "prefix caching",
            Status.WARN,
            f"off ({reason}): every chunk of a review prefills the shared prompt again",
            PREFIX_CACHING_FIX,
        )
    return Check(
        "prefix caching",
        Status.WARN,
        f"cannot tell: enable_prefix_caching={'/'.join(sorted(flags))}; {counted}",
        PREFIX_CACHING_FIX,
    )


def prompt_tokens_details_check(answer: ModelAnswer | None) -> Check:
    """``usage.prompt_tokens_details.cached_tokens`` is reported (vLLM needs
    --enable-prompt-tokens-details)."""
    if answer is None:
        return Check(
            "cached tokens",
            Status.WARN,
            "not checked: the probe got no answer",
            PROMPT_TOKENS_DETAILS_FIX,
        )
    if answer.cached_tokens is None:
        return Check(
            "cached tokens",
            Status.WARN,
            "the answer's usage has no prompt_tokens_details.cached_tokens",
            PROMPT_TOKENS_DETAILS_FIX,
        )
    return Check(
        "cached tokens",
        Status.OK,
        f"reported ({answer.cached_tokens} of the probe's {answer.prompt_tokens} prompt tokens "
        "came from the cache)",
    )


def vllm_argv_for(command_lines: Sequence[Sequence[str]], base_url: str) -> list[str] | None:
    """The command line of the local vLLM server behind ``base_url``, if one runs here.

    A vLLM server is ``vllm serve ...`` (or ``python -m vllm.entrypoints.cli.main serve``) or
    ``python -m vllm.entrypoints.openai.api_server``;
    it serves ``base_url`` when its ``--port`` (8000 by default) is the URL's port. Only
    loopback URLs can be served by a process of this host as far as we can tell.
    """
    parts = urlsplit(base_url)
    if (parts.hostname or "") not in LOOPBACK_HOSTS:
        return None
    port = str(parts.port or VLLM_DEFAULT_PORT)
    for argv in command_lines:
        if _is_vllm_server(argv) and (_flag_value(argv, "--port") or DEFAULT_PORT_TEXT) == port:
            return list(argv)
    return None


def generation_config_check(argv: Sequence[str] | None, base_url: str) -> Check:
    """Whether the model's generation_config.json applies on top of reviewbot's sampling.

    vLLM does not say over HTTP (neither ``/v1/models`` nor ``/version`` carry it), so this
    reads the command line of a vLLM process of this host that serves ``base_url``.
    """
    if argv is None:
        return Check(
            "generation config",
            Status.WARN,
            f"cannot tell: vLLM does not report --generation-config over HTTP, and no vLLM "
            f"process of this host serves {base_url}",
            GENERATION_CONFIG_FIX,
        )
    value = _flag_value(argv, "--generation-config")
    if value == "vllm":
        return Check(
            "generation config",
            Status.OK,
            "--generation-config vllm: only the sampling parameters reviewbot sends apply",
        )
    source = (
        "the model's generation_config.json"
        if value in (None, "auto")
        else (f"the generation_config.json in {value}")
    )
    return Check(
        "generation config",
        Status.WARN,
        f"--generation-config {value or 'auto (the default)'}: {source} (Qwen3.5: top_k 20, "
        "top_p 0.8) applies on top of the temperature reviewbot sends",
        GENERATION_CONFIG_FIX,
    )


def priority_check(
    enabled: bool, refusal: str | None, argv: Sequence[str] | None, base_url: str
) -> Check:
    """Whether the server runs requests by their priority (the setting priority_scheduling).

    ``refusal``: the server's answer to a request with a non-zero priority when it refused it
    (None: taken). vLLM 0.32 takes the field under any policy and does not say its policy over
    HTTP, so a request taken is judged by the command line of a vLLM of this host (``argv``).
    """
    if not enabled:
        detail = "off (priority_scheduling = false): every request waits its turn"
        return Check(PRIORITY_CHECK, Status.OK, detail)
    if refusal is not None:
        return Check(
            PRIORITY_CHECK,
            Status.WARN,
            f"the server refuses request priorities ({refusal}): it runs without "
            "--scheduling-policy priority; reviewbot sends none, so nothing fails, but thread "
            "answers wait behind long reviews",
            PRIORITY_FIX,
        )
    if argv is None:
        return Check(
            PRIORITY_CHECK,
            Status.WARN,
            "the server takes request priorities, but whether it runs by them cannot be told: "
            "vLLM takes the field under any policy and does not report --scheduling-policy "
            f"over HTTP, and no vLLM process of this host serves {base_url}",
            PRIORITY_FIX,
        )
    policy = _flag_value(argv, "--scheduling-policy")
    if policy == "priority":
        return Check(
            PRIORITY_CHECK,
            Status.OK,
            "--scheduling-policy priority: thread answers run first, then first reviews, "
            "incremental reviews, evals and load tests",
        )
    return Check(
        PRIORITY_CHECK,
        Status.WARN,
        f"--scheduling-policy {policy or 'fcfs (the default)'}: the server takes each "
        "request's priority and ignores it, first come first served",
        PRIORITY_FIX,
    )


def _is_vllm_server(argv: Sequence[str]) -> bool:
    words = [word.rsplit("/", 1)[-1] for word in argv]
    if "vllm.entrypoints.openai.api_server" in words:
        return True
    pairs = set(itertools.pairwise(words))
    # `vllm serve`, or its console script's module run by a Python (`python -m
    # vllm.entrypoints.cli.main serve`: how the H200 check starts it, deploy/h200-check)
    return ("vllm", "serve") in pairs or ("vllm.entrypoints.cli.main", "serve") in pairs


def _flag_value(argv: Sequence[str], flag: str) -> str | None:
    for index, word in enumerate(argv):
        if word == flag and index + 1 < len(argv):
            return argv[index + 1]
        if word.startswith(flag + "="):
            return word.split("=", 1)[1]
    return None


# ---------------------------------------------------------------------------------------------
# Where the repository comes from (reviewbot.repo.source)


def repository_source_check(git_version: str | None, cache_on: bool, cache_dir: str) -> Check:
    """Which source reviews read the repository from: the cache needs git and a cap above 0."""
    if git_version is None:
        return Check(
            "repository source",
            Status.WARN,
            "git is not on PATH: files are read through GitLab's API, one request per file "
            "(the CI checkout still serves `reviewbot ci`)",
            GIT_FIX,
        )
    version = _version_tuple(git_version)
    if version is not None and version < OLDEST_CACHE_GIT:
        return Check(
            "repository source",
            Status.WARN,
            f"{git_version} is older than git {'.'.join(map(str, OLDEST_CACHE_GIT))}, which "
            "the cache's fetch needs (`--no-write-fetch-head`): every fetch fails and files are "
            "read through GitLab's API",
            "upgrade git on this host",
        )
    if not cache_on:
        return Check(
            "repository source",
            Status.WARN,
            f"{git_version}; the repository cache is off: files are read through GitLab's API",
            CACHE_ON_FIX,
        )
    return Check("repository source", Status.OK, f"{git_version}; the host's cache at {cache_dir}")


def repository_cache_check(
    cache_dir: str, not_writable: str | None, size_bytes: int, cap_bytes: int
) -> Check:
    """The cache folder is writable, and its clones' size against the cap."""
    if not_writable is not None:
        return Check("repository cache", Status.FAIL, not_writable, CACHE_DIR_FIX)
    held = f"{_mib(size_bytes)} of {_mib(cap_bytes)} in {cache_dir}"
    if size_bytes > cap_bytes:
        return Check("repository cache", Status.WARN, f"over the cap: {held}", CACHE_SIZE_FIX)
    return Check("repository cache", Status.OK, f"writable; {held}")


def repository_fetch_check(
    what: str, seconds: float | None, error: str | None, limit_s: float
) -> Check:
    """A fetch of the project's default branch (``what``) worked within ``limit_s``."""
    if error is not None:
        return Check("repository fetch", Status.FAIL, f"{what}: {error}", FETCH_FIX)
    assert seconds is not None
    detail = f"fetched {what} in {seconds:.1f} s (limit {limit_s:g} s)"
    return Check("repository fetch", Status.OK, detail)


def _version_tuple(git_version: str) -> tuple[int, ...] | None:
    match = GIT_VERSION.search(git_version)
    return tuple(int(part) for part in match.groups()) if match else None


def _mib(size: int) -> str:
    return f"{size / MIB:,.1f} MiB"


# ---------------------------------------------------------------------------------------------
# The database


def database_check(
    where: str, revision: str | None, head: str, known: bool, exists: bool = True
) -> Check:
    """The database is at the code's newest migration (``where`` is its redacted URL)."""
    if not exists:
        return Check(
            "database",
            Status.WARN,
            f"no database yet at {where} (created on first use)",
            DATABASE_UPGRADE_FIX,
        )
    if revision == head:
        return Check("database", Status.OK, f"{where} is at revision {head} (current)")
    if revision is None:
        return Check(
            "database", Status.WARN, f"{where} is reachable but blank", DATABASE_UPGRADE_FIX
        )
    if not known:
        return Check(
            "database",
            Status.FAIL,
            f"{where} is at revision {revision}, which this reviewbot does not know: a newer "
            "reviewbot migrated it",
            "upgrade reviewbot on this host to the version the other hosts run",
        )
    return Check(
        "database",
        Status.WARN,
        f"{where} is at revision {revision}, behind this reviewbot's {head}",
        DATABASE_UPGRADE_FIX,
    )
