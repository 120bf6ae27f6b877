"""One table for what every failure means: the CLI's exit code and the worker's retry decision.

Every entry point (``reviewbot plan|review|run|ci|serve``, the worker) asks :func:`disposition`
about an exception instead of keeping its own list, so a new error class is classified once.

Entries name their exception by module and class. An exception of a module that was never
imported cannot have been raised, so a lookup never imports anything: ``reviewbot plan`` stays
free of the model client, python-gitlab and SQLAlchemy. ``tests/test_app.py`` checks that
every entry names a real exception class.

Exit codes (all commands): 0 success, 1 the work failed, 2 bad input; ``reviewbot ci`` and
``reviewbot loadtest`` and ``reviewbot capacity`` add 3 (findings at or above ``--fail-on``; an
SLO missed; a configuration that does not fit).

Owns: ``BadInputError``, the exit codes and the one table of what each failure means (exit code,
retry or not, the message). Must not: import a module whose exceptions it names, print, or exit (the
commands and the worker act on its answer).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

from reviewbot.redaction import scrub_secrets

__all__ = [
    "ERROR_TABLE",
    "EXIT_BAD_INPUT",
    "EXIT_DOES_NOT_FIT",
    "EXIT_FAILURE",
    "EXIT_FINDINGS",
    "EXIT_OK",
    "EXIT_SLO_MISSED",
    "BadInputError",
    "Disposition",
    "disposition",
    "first_line",
]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
EXIT_FINDINGS = 3
EXIT_SLO_MISSED = 3  # `reviewbot loadtest`: the same code, its own name
EXIT_DOES_NOT_FIT = 3  # `reviewbot capacity`: the configuration as given does not fit


class BadInputError(Exception):
    """The user's input cannot be used (exit 2): raised by the commands and by the library code
    that reads what a command was given (a diff file, a head tree, a load test's inputs)."""


def first_line(error: BaseException) -> str:
    """The driver's own message without SQLAlchemy's statement dump, and never a password."""
    original = getattr(error, "orig", None) or error
    lines = str(original).strip().splitlines()
    return scrub_secrets(lines[0] if lines else "") or type(error).__name__


def _as_is(error: BaseException) -> str:
    return str(error)


def _database_url(error: BaseException) -> str:
    return f"bad database URL: {first_line(error)}"


def _database(error: BaseException) -> str:
    return f"database error: {first_line(error)}"


def _network(error: BaseException) -> str:
    return f"network error: {type(error).__name__}: {first_line(error)}"


@dataclass(frozen=True)
class Disposition:
    """What a failure means: the exit code, whether a queued job is tried again (and whether
    that try counts against its attempts: waiting for a busy MR does not), one line."""

    exit_code: int
    retry: bool
    describe: Callable[[BaseException], str] = _as_is
    counts_as_attempt: bool = True

    def message(self, error: BaseException) -> str:
        """The one line every entry point prints: never a password or a token."""
        return scrub_secrets(self.describe(error)) or type(error).__name__


BAD_INPUT = Disposition(EXIT_BAD_INPUT, retry=False)
FAILED = Disposition(EXIT_FAILURE, retry=False)
TRANSIENT = Disposition(EXIT_FAILURE, retry=True)
WAIT = Disposition(EXIT_FAILURE, retry=True, counts_as_attempt=False)

# Most specific first: the first entry the error is an instance of decides.
ERROR_TABLE: tuple[tuple[str, str, Disposition], ...] = (
    # the user's input cannot be used
    ("reviewbot.config", "ConfigError", BAD_INPUT),
    ("reviewbot.errors", "BadInputError", BAD_INPUT),
    ("reviewbot.repo.localgit", "GitError", BAD_INPUT),
    ("reviewbot.chunking", "BudgetTooSmallError", BAD_INPUT),
    ("reviewbot.window", "WindowError", BAD_INPUT),
    ("reviewbot.eval", "DatasetError", BAD_INPUT),
    ("reviewbot.learnings.learning", "LearningError", BAD_INPUT),
    ("sqlalchemy.exc", "ArgumentError", Disposition(EXIT_BAD_INPUT, False, _database_url)),
    # an id given on the command line that is not in the database (`jobs show 7`)
    ("reviewbot.store.store", "RecordNotFound", BAD_INPUT),
    # `reviewbot capacity`: a model config.json, a GPU or launch settings it cannot plan
    ("reviewbot.ops.model_shape", "ModelConfigError", BAD_INPUT),
    ("reviewbot.ops.gpus", "UnknownGpuError", BAD_INPUT),
    ("reviewbot.ops.capacity", "CapacityError", BAD_INPUT),
    # GitLab: a web page (any type but JSON) where the API should be is a wrong
    # REVIEWBOT_GITLAB_URL (bad input; settings are built once per process, so a retry would
    # get the same page); what is missing or forbidden stays so; an outage passes, and so does
    # JSON that does not parse (a body cut short on the way); JSON of the wrong shape or nested
    # too deep is GitLab's failure, the same on every try
    ("reviewbot.gitlab", "GitLabNotAPIError", BAD_INPUT),
    ("reviewbot.gitlab", "GitLabNotFoundError", FAILED),
    ("reviewbot.gitlab", "GitLabAuthError", FAILED),
    ("reviewbot.gitlab", "GitLabBadAnswerError", FAILED),
    ("reviewbot.gitlab", "GitLabGarbledAnswerError", TRANSIENT),
    ("reviewbot.gitlab", "GitLabUnavailableError", TRANSIENT),
    ("reviewbot.gitlab", "GitLabError", FAILED),
    # the model server: down or overloaded passes; misconfigured (no such model, no tool
    # parser, an answer that is not what the API promises) stays so
    ("reviewbot.model", "LLMUnavailableError", TRANSIENT),
    ("reviewbot.model", "RetryableModelError", TRANSIENT),
    ("reviewbot.model", "LLMError", FAILED),
    # another run holds the MR, part of the diff was not reviewed, the worker is stopping
    ("reviewbot.mr", "MergeRequestBusyError", WAIT),
    ("reviewbot.mr", "ReviewIncompleteError", TRANSIENT),
    ("reviewbot.slots", "SlotWaitCancelledError", TRANSIENT),
    ("reviewbot.eval", "EvalIncompleteError", FAILED),
    # a job not in a state for what was asked (`jobs retry` of a queued job)
    ("reviewbot.queue", "JobStateError", FAILED),
    # `reviewbot ci`: an artifact (Code Quality report, summary) that cannot be written
    ("reviewbot.ci", "ArtifactWriteError", FAILED),
    # `reviewbot report`: its folder cannot be made or a file written (--output /proc/x)
    ("reviewbot.report.document", "ReportWriteError", FAILED),
    # the database cannot be opened, went away mid-run (DBAPIError), or refused what we asked
    ("reviewbot.store.store", "DatabaseUnavailableError", TRANSIENT),
    ("sqlalchemy.exc", "DBAPIError", Disposition(EXIT_FAILURE, True, _database)),
    ("sqlalchemy.exc", "SQLAlchemyError", Disposition(EXIT_FAILURE, False, _database)),
    # transports: python-gitlab's (requests) and the model client's (httpx)
    ("requests", "ConnectionError", Disposition(EXIT_FAILURE, True, _network)),
    ("requests", "Timeout", Disposition(EXIT_FAILURE, True, _network)),
    ("httpx", "TransportError", Disposition(EXIT_FAILURE, True, _network)),
    ("httpx2", "TransportError", Disposition(EXIT_FAILURE, True, _network)),
    ("builtins", "ConnectionError", Disposition(EXIT_FAILURE, True, _network)),
    ("builtins", "TimeoutError", Disposition(EXIT_FAILURE, True, _network)),
)


def _loaded_class(module: str, name: str) -> type[BaseException] | None:
    loaded = sys.modules.get(module)
    kind = getattr(loaded, name, None) if loaded is not None else None
    return kind if isinstance(kind, type) and issubclass(kind, BaseException) else None


def disposition(error: BaseException) -> Disposition | None:
    """How ``error`` is reported and whether it is worth retrying; None for an unknown error
    (a bug: the CLI shows its traceback, the worker fails the job without retrying)."""
    for module, name, outcome in ERROR_TABLE:
        kind = _loaded_class(module, name)
        if kind is not None and isinstance(error, kind):
            return outcome
    return None
