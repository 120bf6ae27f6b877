"""The asking half of ``reviewbot doctor``: GitLab, the model server, the database and where
the repository comes from (git, the host's cache, a fetch of the project's default branch).

Each group of checks runs on its own thread, all at once; inside a group the checks run
in order (a token's scopes are only worth asking once the token works). Every request has a
timeout of its own (the adapters') and every step a deadline (:func:`within`), so a service
that accepts the connection and never answers costs its check a few seconds, never the run:
when all is well the whole run takes about as long as the tool-call probe.

What the answers mean is :mod:`reviewbot.ops.doctor`'s business; this module only gathers
them. Adapters are built here with short timeouts and no retries (a doctor reports, it does
not insist), not taken from :class:`reviewbot.app.App`, whose clients are tuned for reviews.

Owns: asking GitLab, the model server, the database and git, each step within its deadline, and
handing the answers to `reviewbot.ops.doctor`. Must not: judge an answer (`reviewbot.ops.doctor`
does), print, or migrate or create the database (it only reads the revision).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Generic, TypeVar

import httpx

from reviewbot.app import require_gitlab_settings
from reviewbot.config import LLM_BACKEND_VLLM, ConfigError, Settings
from reviewbot.errors import first_line
from reviewbot.gitlab import (
    GitLabAuthError,
    GitLabClient,
    GitLabError,
    GitLabNotAPIError,
    GitLabNotFoundError,
    GitLabSettings,
)
from reviewbot.llm.backend import (
    LLMError,
    LLMUnavailableError,
    ModelAnswer,
    ModelBackend,
    ModelNotFoundError,
    ModelRequest,
    OutputModeRefusedError,
    ServerInfo,
)
from reviewbot.llm.factory import BACKENDS, llm_settings_from
from reviewbot.localgit import GitError, git_version
from reviewbot.ops.doctor import (
    GITLAB_TOKEN_FIX,
    MODEL_API_KEY_FIX,
    MODEL_SERVER_FIX,
    TOOL_PARSER_FIX,
    Check,
    Status,
    context_length_check,
    database_check,
    generation_config_check,
    gitlab_user_check,
    prefix_caching_check,
    probe_prompt,
    project_role_check,
    prompt_tokens_details_check,
    repository_cache_check,
    repository_fetch_check,
    repository_source_check,
    settings_check,
    tally,
    thinking_check,
    token_scopes_check,
    tokenize_check,
    tool_call_check,
    vllm_argv_for,
    webhook_secret_check,
)
from reviewbot.ops.router_probes import router_pool_checks
from reviewbot.ops.weights_doctor import weights_checks
from reviewbot.prompts import tool_schemas
from reviewbot.redaction import hide_url_password
from reviewbot.repo.cache import CacheError, ProjectRemote, cache_size, probe_fetch
from reviewbot.review import local_overhead
from reviewbot.tokens import local_counter

__all__ = [
    "CheckTimeoutError",
    "DoctorOptions",
    "DoctorTimeouts",
    "local_command_lines",
    "run_doctor",
    "within",
]

T = TypeVar("T")

# The probe asks for one short tool call; thinking models may spend a few hundred tokens first.
PROBE_MAX_TOKENS = 1024
PROBE_TEMPERATURE = 0.0
# A step's deadline is its request timeout plus this, so the adapter's own error (which says
# more) usually arrives first.
DEADLINE_GRACE_S = 0.5
# What a whole group may overrun its steps' deadlines by before it is given up as stuck: the
# steps end by then, only local work is left (building the checks), and on a loaded host
# (2 cores, load 8) that took longer than one step's grace. 20 s + 1.5 s stays under the 22 s
# deploy/vllm/health-check.sh gives `doctor --model-only` (a test holds it there).
GROUP_OVERRUN_GRACE_S = 1.5
VERSION_SUFFIX = "/v1"
PROC = Path("/proc")
UNAUTHORIZED_STATUSES = frozenset({401, 403})
# GitLab steps one after another: reachable, token user, token scopes, role on the project.
GITLAB_STEPS = 4
# libpq waits forever for connect_timeout 0 and treats 1 as 2 seconds.
LIBPQ_MIN_CONNECT_TIMEOUT_S = 2
HUNG_SERVER_FIX = (
    "the server takes connections but does not answer: see its log (journalctl -u "
    "reviewbot-vllm@PROFILE); the health timer restarts it after 3 failed probes in a row"
)
_GITLAB_FIX = "check REVIEWBOT_GITLAB_URL and that this host can reach GitLab"
NOT_THE_API_FIX = (
    "REVIEWBOT_GITLAB_URL is the address you open GitLab at (https://gitlab.example.com), "
    "without /api/v4 or a page; a login in front of GitLab must let the API through"
)
_REPOSITORY_FIX = "check that git answers on this host and that the cache folder's disk responds"
_DATABASE_FIX = (
    "check REVIEWBOT_DATABASE_URL, that the database server runs and that its user may connect"
)


@dataclass(frozen=True)
class DoctorTimeouts:
    """Seconds each kind of step may take. The model group as a whole stays under the 25 s the
    health unit (deploy/systemd/reviewbot-vllm-health.service) gives ``doctor --model-only``."""

    gitlab_s: float = 5.0
    model_s: float = 5.0
    tool_probe_s: float = 15.0
    model_total_s: float = 20.0
    database_s: float = 5.0
    fetch_s: float = 15.0  # the fetch probe, at most (and at most repo_fetch_timeout_s)


@dataclass(frozen=True)
class DoctorOptions:
    project: str | None = None  # also check the token user's role on this project
    model_only: bool = False  # the model server's checks only (the health timer's probe)
    settings_source: str = "defaults and REVIEWBOT_* variables"
    verify_weights: bool = False  # verify the model's weights now (ops/weights_doctor.py)
    timeouts: DoctorTimeouts = field(default_factory=DoctorTimeouts)


class CheckTimeoutError(TimeoutError):
    """A step did not finish within its deadline."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no answer within {seconds:g} s")
        self.seconds = seconds


class _Background(Generic[T]):
    """``action`` on a daemon thread (which never holds up the exit), waited for so long."""

    def __init__(self, action: Callable[[], T]) -> None:
        self._done = threading.Event()
        self._value: T | None = None
        self._error: BaseException | None = None
        threading.Thread(target=self._run, args=(action,), daemon=True).start()

    def _run(self, action: Callable[[], T]) -> None:
        try:
            self._value = action()
        except BaseException as error:  # noqa: BLE001 - raised again in the waiting thread
            self._error = error
        finally:
            self._done.set()

    def result(self, seconds: float) -> T:
        if not self._done.wait(max(seconds, 0.0)):
            raise CheckTimeoutError(seconds)
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


def within(seconds: float, action: Callable[[], T]) -> T:
    """``action()``, or CheckTimeoutError once ``seconds`` have passed (the action's thread is
    left to end on its own timeout)."""
    return _Background(action).result(seconds)


def within_or(seconds: float, action: Callable[[], T], fallback: T) -> T:
    """``action()``, or ``fallback`` when it has not finished after ``seconds``."""
    try:
        return within(seconds, action)
    except CheckTimeoutError:
        return fallback


def run_doctor(
    settings: Settings,
    options: DoctorOptions,
    *,
    command_lines: Callable[[], Sequence[Sequence[str]]] | None = None,
    today: date | None = None,
    say: Callable[[str], None] | None = None,
) -> list[Check]:
    """Every check, in a stable order: settings, GitLab, model server, database, webhook.

    ``command_lines``: the processes of this host (default: read from /proc), where a local
    vLLM's ``--generation-config`` is found. ``say`` hears each group's verdicts as the group
    ends ("gitlab: 4 ok"), and when the weights are checked."""
    say = say or _quiet
    timeouts = options.timeouts
    # (the check that stands for the group if it overruns, its fix, the group)
    groups: list[tuple[str, str, Callable[[], list[Check]]]] = [
        (
            "model server",
            HUNG_SERVER_FIX,
            lambda: model_checks(settings, timeouts, command_lines or local_command_lines),
        )
    ]
    if not options.model_only:

        def gitlab() -> list[Check]:
            return gitlab_checks(settings, options.project, timeouts, today)

        def database() -> list[Check]:
            return [database_check_of(settings, timeouts), *_webhook(settings)]

        def repository() -> list[Check]:
            return repository_checks(settings, options.project, timeouts)

        groups = [
            ("gitlab", _GITLAB_FIX, gitlab),
            *groups,
            ("database", _DATABASE_FIX, database),
            ("repository", _REPOSITORY_FIX, repository),
        ]
    started = [(name, fix, _Background(group)) for name, fix, group in groups]
    checks = [settings_check(settings, options.settings_source)]
    allowed_s = group_deadline_s(timeouts, options.model_only)
    deadline = time.monotonic() + allowed_s
    for name, fix, running in started:
        try:
            group = running.result(deadline - time.monotonic())
        except CheckTimeoutError:
            # Every step has a deadline of its own, so this is a bug or a stuck library: still
            # one failed check, never a traceback (and never past the health unit's limit).
            detail = f"the checks did not end within {allowed_s:g} s"
            group = [Check(name, Status.FAIL, detail, fix)]
        say(f"{name}: {tally(group)}")
        checks.extend(group)
    if options.verify_weights or not options.model_only:  # minutes of hashing: no deadline
        hashing = " (hashing every shard again: minutes)" if options.verify_weights else ""
        say(f"checking the model's weights{hashing}")
        checks.extend(weights_checks(settings, verify=options.verify_weights))
    return checks


def _quiet(_: str) -> None:
    return None


def group_deadline_s(timeouts: DoctorTimeouts, model_only: bool) -> float:
    """How long the checks may take before a group is given up as stuck; no group should get
    near this: each of its steps has its own deadline."""
    if model_only:
        return timeouts.model_total_s + GROUP_OVERRUN_GRACE_S
    return (
        max(
            GITLAB_STEPS * _gitlab_step_s(timeouts),
            timeouts.model_total_s,
            timeouts.database_s,
            _repository_s(timeouts),
        )
        + GROUP_OVERRUN_GRACE_S
    )


def _repository_s(timeouts: DoctorTimeouts) -> float:
    """The repository group: reading the project, then the fetch probe."""
    return _gitlab_step_s(timeouts) + timeouts.fetch_s + DEADLINE_GRACE_S


def _gitlab_step_s(timeouts: DoctorTimeouts) -> float:
    """One GitLab step's deadline: its request timeout, and the grace for the adapter's error."""
    return timeouts.gitlab_s + DEADLINE_GRACE_S


def _webhook(settings: Settings) -> list[Check]:
    return [webhook_secret_check(settings)]


# ---------------------------------------------------------------------------------------------
# GitLab


def gitlab_checks(
    settings: Settings, project: str | None, timeouts: DoctorTimeouts, today: date | None
) -> list[Check]:
    """Reachable, token valid (and whose), scopes, and the role on ``project``."""
    try:
        url, token = require_gitlab_settings(settings)
    except ConfigError as error:
        return [Check("gitlab", Status.FAIL, str(error), GITLAB_TOKEN_FIX)]
    step_s = _gitlab_step_s(timeouts)
    client = GitLabClient(
        GitLabSettings(url=url, token=token, timeout_s=timeouts.gitlab_s, max_retries=0)
    )
    unreachable_fix = f"check REVIEWBOT_GITLAB_URL ({url}) and that this host can reach it"
    try:
        version = f"GitLab {within(step_s, client.version)} at {url}"
    except GitLabAuthError:
        version = f"GitLab at {url} answers (its version needs a valid token)"
    except GitLabNotAPIError as error:
        return [Check("gitlab", Status.FAIL, str(error), NOT_THE_API_FIX)]
    except GitLabError as error:
        return [Check("gitlab", Status.FAIL, str(error), unreachable_fix)]
    except CheckTimeoutError as error:
        return [Check("gitlab", Status.FAIL, f"{url}: {error}", unreachable_fix)]
    checks = [Check("gitlab", Status.OK, version)]
    try:
        user = within(step_s, client.current_user)
    except GitLabAuthError:
        checks.append(
            Check("gitlab token", Status.FAIL, f"{url} rejected the token", GITLAB_TOKEN_FIX)
        )
        return checks
    except (GitLabError, CheckTimeoutError) as error:
        checks.append(Check("gitlab token", Status.FAIL, str(error), unreachable_fix))
        return checks
    checks.append(gitlab_user_check(user))
    try:
        info = within(step_s, client.token_info)
        checks.append(token_scopes_check(info, today or date.today()))
    except (GitLabError, CheckTimeoutError) as error:
        checks.append(
            Check(
                "token scopes",
                Status.WARN,
                f"cannot read the token's scopes: {error}",
                "make sure the token has the api scope",
            )
        )
    if project is not None:
        checks.append(_project_role(client, project, user, step_s))
    return checks


def _project_role(client: GitLabClient, project: str, user: dict, step_s: float) -> Check:
    username = str(user.get("username"))
    try:
        level = within(step_s, lambda: client.project_access_level(project, int(user["id"])))
    except GitLabNotFoundError as error:
        return Check(
            "project role",
            Status.FAIL,
            str(error),
            "give --project as a numeric id or group/name the token's user is a member of",
        )
    except (GitLabError, CheckTimeoutError) as error:
        return Check("project role", Status.FAIL, str(error), GITLAB_TOKEN_FIX)
    return project_role_check(project, username, level)


# ---------------------------------------------------------------------------------------------
# Where the repository comes from


def repository_checks(
    settings: Settings, project: str | None, timeouts: DoctorTimeouts
) -> list[Check]:
    """git on PATH and the cache on; the cache folder writable and its size; with
    ``project``, a fetch of its default branch within the fetch timeout."""
    try:
        version: str | None = git_version()
    except GitError:
        version = None
    cache_on = settings.repo_cache_max_bytes > 0
    checks = [repository_source_check(version, cache_on, settings.repo_cache_dir)]
    if version is None or not cache_on:
        return checks
    root = Path(settings.repo_cache_dir)
    problem = _not_writable(root)
    size = cache_size(root) if problem is None else 0
    checks.append(repository_cache_check(str(root), problem, size, settings.repo_cache_max_bytes))
    if problem is None and project is not None and settings.gitlab_url and settings.gitlab_token:
        checks.append(_fetch_check(settings, project, timeouts))
    return checks


def _not_writable(root: Path) -> str | None:
    """Why no clone can be written under ``root``, or None."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = root / f".doctor-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        return f"cannot write in {root}: {error.strerror or error}"
    return None


def _fetch_check(settings: Settings, project: str, timeouts: DoctorTimeouts) -> Check:
    url, token = require_gitlab_settings(settings)
    limit_s = min(settings.repo_fetch_timeout_s, timeouts.fetch_s)
    client = GitLabClient(
        GitLabSettings(url=url, token=token, timeout_s=timeouts.gitlab_s, max_retries=0)
    )
    try:
        record = within(_gitlab_step_s(timeouts), lambda: client.project(project))
        path, branch = str(record["path_with_namespace"]), str(record.get("default_branch") or "")
    except (GitLabError, CheckTimeoutError, KeyError) as error:
        return repository_fetch_check(f"project {project}", None, first_line(error), limit_s)
    finally:
        client.close()
    what = f"{branch or 'the default branch'} of {path}"
    if not branch:
        return repository_fetch_check(what, None, "the project has no default branch", limit_s)
    remote = ProjectRemote(url, record.get("id", project), path, token=token)
    started = time.monotonic()
    try:
        within(
            limit_s + DEADLINE_GRACE_S,
            lambda: probe_fetch(Path(settings.repo_cache_dir), remote, branch, limit_s),
        )
    except (CacheError, CheckTimeoutError) as error:
        return repository_fetch_check(what, None, str(error), limit_s)
    return repository_fetch_check(what, time.monotonic() - started, None, limit_s)


# ---------------------------------------------------------------------------------------------
# The model server


@dataclass
class _Deadline:
    """The model group's time: each step gets its own timeout, but never past the group's."""

    ends_at: float

    def step(self, seconds: float) -> float:
        return max(0.0, min(seconds + DEADLINE_GRACE_S, self.ends_at - time.monotonic()))


def model_checks(
    settings: Settings,
    timeouts: DoctorTimeouts,
    command_lines: Callable[[], Sequence[Sequence[str]]],
) -> list[Check]:
    """Reachable and serving the model, context, a real tool-call probe, /tokenize, prefix
    caching, cached-token figures, thinking, generation config."""
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
        return _model_checks(settings, timeouts, backend, http, command_lines)
    finally:
        backend.close()
        http.close()


def _model_checks(
    settings: Settings,
    timeouts: DoctorTimeouts,
    backend: ModelBackend,
    http: httpx.Client,
    command_lines: Callable[[], Sequence[Sequence[str]]],
) -> list[Check]:
    deadline = _Deadline(time.monotonic() + timeouts.model_total_s)
    # The local work (loading the tokenizer takes ~0.4 s, more on a loaded host) comes before
    # the first request: the steps after a hung request get what is left of the group's time,
    # and nothing slow may remain to do once it is spent.
    counter = local_counter(settings.llm_model)
    tools = tool_schemas()
    prompt = probe_prompt(counter)
    base_url = backend.base_url
    root_url = base_url.removesuffix(VERSION_SUFFIX)
    shown_url = hide_url_password(base_url)  # what the checks say: never a password
    is_vllm = settings.llm_backend == LLM_BACKEND_VLLM
    served = _served(backend, http, deadline, timeouts, is_vllm)
    if isinstance(served, Check):
        return [served]
    info, served_text = served
    checks = [Check("model server", Status.OK, served_text)]
    # a vllm-router in front: its boxes, each asked directly (reviewbot.ops.router_probes)
    step_s = deadline.step(timeouts.model_s)
    checks += within_or(step_s, lambda: router_pool_checks(settings, http, root_url, step_s), [])
    shared_count, tokenize_error = None, None
    try:
        shared_count = within(
            deadline.step(timeouts.model_s),
            lambda: backend.count_prompt_tokens(prompt.shared, tools),
        )
    except (LLMError, CheckTimeoutError) as error:
        tokenize_error = str(error)
    overhead = shared_count or local_overhead(counter, prompt.context)
    checks.append(
        context_length_check(
            served=info.max_model_len,
            configured=settings.max_model_len,
            output_reserve=settings.max_output_tokens,
            overhead=overhead,
            headroom=counter.headroom,
        )
    )

    fix = TOOL_PARSER_FIX if is_vllm else backend.setup_hint
    answer, probe_check = _probe(backend, prompt.messages, tools, fix, deadline, timeouts)
    checks.append(probe_check)
    if tokenize_error is not None:
        checks.append(Check("tokenize", Status.WARN, tokenize_error, "see the server's log"))
    else:
        checks.append(
            _tokenize(backend, settings, prompt.messages, tools, answer, deadline, timeouts)
        )
    try:
        metrics = within(deadline.step(timeouts.model_s), lambda: _metrics_text(http, root_url))
        checks.append(prefix_caching_check(metrics))
    except CheckTimeoutError as error:
        detail = f"cannot tell: {root_url}/metrics gave {error}"
        checks.append(Check("prefix caching", Status.WARN, detail, "see the server's log"))
    checks.append(prompt_tokens_details_check(answer))
    checks.append(thinking_check(settings.enable_thinking, answer))
    if is_vllm:
        argv = vllm_argv_for(command_lines(), base_url)
        checks.append(generation_config_check(argv, shown_url))
    return checks


def _served(
    backend: ModelBackend,
    http: httpx.Client,
    deadline: _Deadline,
    timeouts: DoctorTimeouts,
    is_vllm: bool,
) -> tuple[ServerInfo, str] | Check:
    """The served model and how the check words it, or the failed "model server" check."""
    base_url = backend.base_url
    shown_url = hide_url_password(base_url)  # what the checks say: never a password
    try:
        info = within(deadline.step(timeouts.model_s), backend.server_info)
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
            deadline.step(timeouts.model_s), lambda: _refuses_the_key(http, base_url), False
        ):
            fix = MODEL_API_KEY_FIX
        return Check("model server", Status.FAIL, detail, fix)
    except CheckTimeoutError as error:
        return Check("model server", Status.FAIL, f"{shown_url}: {error}", HUNG_SERVER_FIX)
    root_url = base_url.removesuffix(VERSION_SUFFIX)
    version = (
        within_or(deadline.step(timeouts.model_s), lambda: _vllm_version(http, root_url), None)
        if is_vllm
        else None
    )
    return info, f"serves {info.model} at {shown_url}" + (f" (vLLM {version})" if version else "")


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
        return None, Check(
            "tool calls", Status.FAIL, f"the probe failed: {error}", "see the server's log"
        )
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
        return Check("tokenize", Status.WARN, str(error), "see the server's log")
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


# ---------------------------------------------------------------------------------------------
# The database


def database_check_of(settings: Settings, timeouts: DoctorTimeouts) -> Check:
    """Reachable, and at the newest migration (never migrated, nor created, by the doctor)."""
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from reviewbot.store import make_engine, normalize_database_url, redact_url
    from reviewbot.store.migrate import alembic_config, engine_revision, head_revision

    where = redact_url(settings.database_url)
    try:
        url = normalize_database_url(settings.database_url)
    except ArgumentError as error:
        return Check(
            "database", Status.FAIL, f"bad database URL: {first_line(error)}", _DATABASE_FIX
        )
    head = head_revision()
    if url.get_backend_name() == "sqlite":
        if url.database and url.database != ":memory:" and not Path(url.database).exists():
            return database_check(where, None, head, known=True, exists=False)
    elif "connect_timeout" not in url.query:
        seconds = max(LIBPQ_MIN_CONNECT_TIMEOUT_S, math.ceil(timeouts.database_s))
        url = url.update_query_dict({"connect_timeout": str(seconds)})
    engine = make_engine(url.render_as_string(hide_password=False))
    try:
        revision = within(timeouts.database_s + DEADLINE_GRACE_S, lambda: engine_revision(engine))
    except SQLAlchemyError as error:
        return Check("database", Status.FAIL, f"{where}: {first_line(error)}", _DATABASE_FIX)
    except CheckTimeoutError as error:
        return Check("database", Status.FAIL, f"{where}: {error}", _DATABASE_FIX)
    finally:
        engine.dispose()
    known = True
    if revision is not None:
        try:
            ScriptDirectory.from_config(alembic_config()).get_revision(revision)
        except CommandError:  # "Can't locate revision identified by ..."
            known = False
    return database_check(where, revision, head, known)
