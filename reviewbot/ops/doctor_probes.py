"""The asking half of ``reviewbot doctor``: GitLab, the model server, the database and where
the repository comes from (git, the host's cache, a fetch of the project's default branch).

Each group of checks runs on its own thread, all at once; inside a group the checks run
in order (a token's scopes are only worth asking once the token works), except the model
server's, which run at once once the served model is known (`reviewbot.ops.model_probes`).
Every request has a timeout of its own (the adapters') and every step a deadline
(`reviewbot.ops.deadlines.within`), so a service that accepts the connection and never answers
costs its check a few seconds, never the run: when all is well the whole run takes about as
long as the tool-call probe.

What the answers mean is :mod:`reviewbot.ops.doctor`'s business; this module only gathers
them. Adapters are built here with short timeouts and no retries (a doctor reports, it does
not insist), not taken from :class:`reviewbot.app.App`, whose clients are tuned for reviews.

Owns: asking GitLab, the database and git, each step within its deadline, running the groups
(the model server's is `reviewbot.ops.model_probes`) and handing the answers to
`reviewbot.ops.doctor`. Must not: judge an answer (`reviewbot.ops.doctor`
does), print, or migrate or create the database (it only reads the revision).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from reviewbot.app import require_gitlab_settings
from reviewbot.config import ConfigError, Settings
from reviewbot.errors import first_line
from reviewbot.gitlab import (
    GitLabAuthError,
    GitLabClient,
    GitLabError,
    GitLabNotAPIError,
    GitLabNotFoundError,
    GitLabSettings,
)
from reviewbot.ops.deadlines import (
    DEADLINE_GRACE_S,
    Background,
    CheckTimeoutError,
    DoctorTimeouts,
    within,
)
from reviewbot.ops.doctor import (
    GITLAB_TOKEN_FIX,
    Check,
    Status,
    database_check,
    gitlab_user_check,
    project_role_check,
    repository_cache_check,
    repository_fetch_check,
    repository_source_check,
    settings_check,
    tally,
    token_scopes_check,
    webhook_secret_check,
)
from reviewbot.ops.model_probes import (
    HUNG_SERVER_FIX,
    Verdicts,
    local_command_lines,
    model_checks,
    model_verdicts,
)
from reviewbot.ops.weights_doctor import weights_checks
from reviewbot.repo.cache import CacheError, ProjectRemote, cache_size, probe_fetch
from reviewbot.repo.localgit import GitError, git_version

__all__ = [
    "CheckTimeoutError",
    "DoctorOptions",
    "DoctorTimeouts",
    "local_command_lines",
    "run_doctor",
    "within",
]

# What a whole group may overrun its steps' deadlines by before it is given up: the steps end
# by then, only local work is left (building the checks). The model group's steps end a second
# before its time (model_probes.VERDICT_RESERVE_S) and its verdicts stand even past this; the
# other groups become one failed check. 20 s + 1.5 s stays under the 22 s
# deploy/vllm/health-check.sh gives `doctor --model-only` (a test holds it there).
GROUP_OVERRUN_GRACE_S = 1.5
# GitLab steps one after another: reachable, token user, token scopes, role on the project.
GITLAB_STEPS = 4
# libpq waits forever for connect_timeout 0 and treats 1 as 2 seconds.
LIBPQ_MIN_CONNECT_TIMEOUT_S = 2
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
class DoctorOptions:
    project: str | None = None  # also check the token user's role on this project
    model_only: bool = False  # the model server's checks only (the health timer's probe)
    settings_source: str = "defaults and REVIEWBOT_* variables"
    verify_weights: bool = False  # verify the model's weights now (ops/weights_doctor.py)
    timeouts: DoctorTimeouts = field(default_factory=DoctorTimeouts)


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
    began = time.monotonic()
    verdicts = model_verdicts(settings, timeouts)

    def model() -> list[Check]:
        lines = command_lines or local_command_lines
        return model_checks(settings, timeouts, lines, verdicts, began + timeouts.model_total_s)

    # (the check that stands for the group if it overruns, its fix, the group, and the
    # verdicts it records as it goes: those are kept if it overruns)
    groups: list[tuple[str, str, Callable[[], list[Check]], Verdicts | None]] = [
        ("model server", HUNG_SERVER_FIX, model, verdicts)
    ]
    if not options.model_only:

        def gitlab() -> list[Check]:
            return gitlab_checks(settings, options.project, timeouts, today)

        def database() -> list[Check]:
            return [database_check_of(settings, timeouts), *_webhook(settings)]

        def repository() -> list[Check]:
            return repository_checks(settings, options.project, timeouts)

        groups = [
            ("gitlab", _GITLAB_FIX, gitlab, None),
            *groups,
            ("database", _DATABASE_FIX, database, None),
            ("repository", _REPOSITORY_FIX, repository, None),
        ]
    started = [(name, fix, Background(group), made) for name, fix, group, made in groups]
    checks = [settings_check(settings, options.settings_source)]
    allowed_s = group_deadline_s(timeouts, options.model_only)
    deadline = began + allowed_s
    for name, fix, running, made in started:
        try:
            group = running.result(deadline - time.monotonic())
        except CheckTimeoutError:
            # Every step has a deadline of its own, so this is a loaded host or a stuck
            # library: the verdicts made so far stand, each unfinished check fails by its own
            # name (the model group); a group that records none is one failed check. Never a
            # traceback, never past the health unit's limit.
            detail = f"the checks did not end within {allowed_s:g} s"
            group = made.so_far() if made else [Check(name, Status.FAIL, detail, fix)]
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
