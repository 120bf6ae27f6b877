"""Workers: take review jobs from the durable queue and run them.

The worker runs on one `reviewbot.app.App` (one Store, one GitLab client, one model client
for all its jobs). Every request to the model holds one of `llm_total_concurrency` slots
shared by all workers on the same database (`reviewbot.slots`, the App's
`shared_model_slots`), so their sum stays within the model server's limit.

- `loop`: the `Worker`, which claims, runs, heartbeats and settles jobs;
- `jobs`: what a job does (`run_job`: a review, or an answer in a bot thread) and its share of
  the model's request budget.

Owns: the worker's public names. Must not: hold code of its own. The commands `reviewbot
worker` and `reviewbot jobs` are `reviewbot.commands.worker` and `reviewbot.commands.jobs`.
"""

from reviewbot.worker.jobs import is_retryable, job_concurrency, run_job
from reviewbot.worker.loop import (
    DEFAULT_GRACE_S,
    DEFAULT_LEASE_S,
    DEFAULT_POLL_S,
    MIN_LEASE_S,
    Worker,
    WorkerStats,
)

__all__ = [
    "DEFAULT_GRACE_S",
    "DEFAULT_LEASE_S",
    "DEFAULT_POLL_S",
    "MIN_LEASE_S",
    "Worker",
    "WorkerStats",
    "is_retryable",
    "job_concurrency",
    "run_job",
]
