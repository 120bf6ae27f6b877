"""The effort a job gets, read from the load just before it runs (issue 37, docs/effort.md).

With ``effort_follows_load`` on, the worker asks :class:`LoadEffort` for each job it claims:
the queue's backlog (:meth:`reviewbot.queue.JobQueue.backlog`) and every model box's gauges
(:func:`reviewbot.ops.router_probes.pool_gauges`, as ``doctor`` and ``loadtest`` read them) go
to the pure :func:`reviewbot.effort_choice.choose_effort`. A second look while idle
(``Trigger.IDLE``) is always ``deep``. Off, the choice is None: the settings decide.

Owns: reading the load and turning it into the job's :class:`EffortChoice`. Must not: run the
review or decide what a deep review is (the run does).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from reviewbot.config import Settings
from reviewbot.effort import Effort, EffortChoice
from reviewbot.effort_choice import BoxGauges, LoadLimits, choose_effort
from reviewbot.ops.router_probes import pool_gauges
from reviewbot.queue import Job, JobQueue
from reviewbot.states import Trigger

__all__ = ["SECOND_LOOK", "LoadEffort", "load_limits"]

# The most effort the load may choose: deep (a setting of the run may still cap it).
CEILING = EffortChoice(Effort.DEEP, "effort_follows_load")
SECOND_LOOK = EffortChoice(Effort.DEEP, "second look while idle (idle_review): deep")

GaugeReader = Callable[[Settings, float], Sequence[BoxGauges]]


def load_limits(settings: Settings) -> LoadLimits:
    """The settings' thresholds between idle, busy and backed up."""
    return LoadLimits(
        idle_running_below=settings.effort_idle_running_below,
        quick_queue_depth=settings.effort_quick_queue_depth,
        first_comment_slo_s=settings.first_comment_slo_s,
    )


class LoadEffort:
    """Chooses each job's effort from the queue and the boxes' gauges now."""

    def __init__(
        self, settings: Settings, queue: JobQueue, read_gauges: GaugeReader = pool_gauges
    ) -> None:
        self.settings = settings
        self.queue = queue
        self._read_gauges = read_gauges

    def gauges(self) -> Sequence[BoxGauges]:
        """Every box's gauges now (an unread box says why)."""
        return self._read_gauges(self.settings, self.settings.effort_metrics_timeout_s)

    def now(self) -> EffortChoice:
        """The effort the load allows for a job run now, and why."""
        depth, oldest_s = self.queue.backlog()
        return choose_effort(depth, oldest_s, self.gauges(), load_limits(self.settings), CEILING)

    def choice_for(self, job: Job) -> EffortChoice | None:
        """``job``'s effort: deep for a second look; from the load when ``effort_follows_load``
        is on; else None (the run takes it from the settings)."""
        if job.trigger == Trigger.IDLE.value:
            return SECOND_LOOK
        if not self.settings.effort_follows_load:
            return None
        return self.now()
