"""Steps within deadlines, for ``reviewbot doctor``: each step on a thread of its own, waited
for so long and no longer, so a service that takes the connection and never answers costs its
step a few seconds, never the run.

Owns: how long each kind of step may take (`DoctorTimeouts`), the step's thread
(`Background`), `within` and `within_or`, and the grace a step's deadline adds to its request
timeout. Must not: know what a step asks or what its answer means (`doctor_probes`,
`model_probes`, `reviewbot.ops.doctor`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = [
    "DEADLINE_GRACE_S",
    "Background",
    "CheckTimeoutError",
    "DoctorTimeouts",
    "within",
    "within_or",
]

T = TypeVar("T")

# A step's deadline is its request timeout plus this, so the adapter's own error (which says
# more) usually arrives first.
DEADLINE_GRACE_S = 0.5


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


class CheckTimeoutError(TimeoutError):
    """A step did not finish within its deadline."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no answer within {seconds:g} s")
        self.seconds = seconds


class Background(Generic[T]):
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

    def wait(self, seconds: float) -> bool:
        """Whether the action ended within ``seconds`` (its value or error is then ready)."""
        return self._done.wait(max(seconds, 0.0))

    def result(self, seconds: float) -> T:
        if not self._done.wait(max(seconds, 0.0)):
            raise CheckTimeoutError(seconds)
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


def within(seconds: float, action: Callable[[], T]) -> T:
    """``action()``, or CheckTimeoutError once ``seconds`` have passed (the action's thread is
    left to end on its own timeout)."""
    return Background(action).result(seconds)


def within_or(seconds: float, action: Callable[[], T], fallback: T) -> T:
    """``action()``, or ``fallback`` when it has not finished after ``seconds``."""
    try:
        return within(seconds, action)
    except CheckTimeoutError:
        return fallback
