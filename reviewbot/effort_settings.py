"""The settings of the review effort (issue 37, docs/effort.md), and the one rule that picks a
run's effort from them.

:class:`EffortSettings` is a base of :class:`reviewbot.config.Settings`: its fields are settings
like any other (file, ``REVIEWBOT_*``, the generated reference), declared here to keep
``config.py`` to one screenful per concern. Its checks join the named checks' (it is listed
before ``CheckSettings`` among the bases, and its ``check_settings_problem`` asks theirs after
its own), so ``Settings`` refuses a bad effort with one line like any other setting.

Resolution, first that applies: the run's own choice (``RunOptions.effort``: ``--effort``, or
the worker from the pool's load) > the project's ``.reviewbot.toml`` (``review_effort``, when it
differs from the instance's) > ``effort_by_trigger`` for the run's trigger > ``review_effort``.

Owns: the effort settings, their defaults, bounds and help, and :func:`choose_effort`. Must not:
read anything, or be read as a global.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from reviewbot.effort import Effort, EffortChoice
from reviewbot.setting_fields import Bounds, setting, shown
from reviewbot.states import Trigger

__all__ = [
    "DEFAULT_DEEP_PASSES",
    "DEFAULT_DEEP_TEMPERATURE",
    "DEFAULT_DEEP_VOTES",
    "EFFORT_CHOICES",
    "EffortSettings",
    "choose_effort",
    "effort_by_trigger",
]

EFFORT_CHOICES = tuple(effort.value for effort in Effort)
TRIGGER_CHOICES = tuple(trigger.value for trigger in Trigger)
DEFAULT_DEEP_PASSES = 3
MIN_DEEP_PASSES = 2
MAX_DEEP_PASSES = 9  # each pass is a full set of model calls per chunk
MAX_RESERVED_SLOTS = 4096  # config.MAX_CONCURRENCY: as many as llm_total_concurrency may name
DEFAULT_DEEP_VOTES = 2
DEFAULT_DEEP_TEMPERATURE = 0.7
MAX_TEMPERATURE = 2.0  # the OpenAI API's upper bound
TRIGGER_SEPARATOR = "="


@dataclass(frozen=True)
class EffortSettings:
    """The review effort's settings: a base of ``Settings``."""

    review_effort: str = setting(
        Effort.STANDARD.value,
        choices=EFFORT_CHOICES,
        help="How hard a review looks: `quick` (one pass per chunk, no repository tools, no "
        "verification), `standard` (one pass with the configured aids) or `deep` (`deep_passes` "
        "independent passes per chunk, merged by vote). A repository's `.reviewbot.toml` may "
        "set it too ([effort](effort.md)).",
    )
    effort_by_trigger: tuple[str, ...] = setting(
        default_factory=tuple,
        accepts="items `TRIGGER=EFFORT` (triggers: " + ", ".join(TRIGGER_CHOICES) + ")",
        default_text="none",
        help="The effort for the reviews of a trigger, e.g. `idle=deep, ci=quick` (a TOML list "
        "or a comma-separated `REVIEWBOT_EFFORT_BY_TRIGGER`); a trigger not named uses "
        "`review_effort`.",
    )
    deep_passes: int = setting(
        DEFAULT_DEEP_PASSES,
        bounds=Bounds(MIN_DEEP_PASSES, MAX_DEEP_PASSES),
        help="Independent passes per chunk of a `deep` review (N).",
    )
    deep_votes: int = setting(
        DEFAULT_DEEP_VOTES,
        bounds=Bounds(1, MAX_DEEP_PASSES),
        help="Passes that must report a finding for a `deep` review to post it (K, at most "
        "`deep_passes`); the others are stored as `voted_out`, never posted.",
    )
    deep_temperature: float = setting(
        DEFAULT_DEEP_TEMPERATURE,
        bounds=Bounds(0, MAX_TEMPERATURE),
        help="Sampling temperature of a `deep` review's passes after the first (the first is "
        "the standard request, at `temperature`).",
    )
    deep_seed: bool = setting(
        True,
        help="Send each of a `deep` review's passes after the first its own `seed` (the same "
        "on every run). Turn it off for vLLM's CPU build: vLLM 0.32 on CPU dies on a request "
        "with a seed (`CPU Generator does not use offset`); the passes then differ by their "
        "temperature alone ([effort](effort.md)).",
    )
    deep_verify: bool = setting(
        False,
        help="Run the verification pass ([verification](verification.md)) on a `deep` "
        "review's voted findings too.",
    )
    background_reserved_slots: int | None = setting(
        None,
        bounds=Bounds(0, MAX_RESERVED_SLOTS),
        default_text="half of `llm_total_concurrency`, rounded down",
        help="Shared model slots that background work (a `deep` review's passes after the "
        "first, an idle second look: the lowest priority) never takes, kept for fresh reviews "
        "and thread answers: vLLM's priority orders waiting requests only, so a running pass "
        "would otherwise delay a new MR. Background work always keeps at least one slot "
        "([effort](effort.md#a-fresh-mr-while-deep-passes-load-the-pool)).",
    )

    def check_settings_problem(self) -> str | None:
        """What is wrong with these settings, in a sentence (None: nothing); then the next
        base's checks (the named checks')."""
        if self.review_effort not in EFFORT_CHOICES:
            return (
                f"review_effort must be one of {', '.join(EFFORT_CHOICES)}, "
                f"got {shown(self.review_effort)}"
            )
        if self.deep_votes > self.deep_passes:
            return (
                f"deep_votes ({self.deep_votes}) must be at most deep_passes "
                f"({self.deep_passes}): a finding cannot get more votes than there are passes"
            )
        try:
            effort_by_trigger(self.effort_by_trigger)
        except ValueError as error:
            return f"effort_by_trigger: {error}"
        following = super()
        check = getattr(following, "check_settings_problem", None)
        return check() if check is not None else None


def effort_by_trigger(items: tuple[str, ...]) -> dict[str, Effort]:
    """The ``effort_by_trigger`` items as a map; ValueError names the item that is wrong."""
    out: dict[str, Effort] = {}
    for item in items:
        trigger, separator, effort = (part.strip() for part in item.partition(TRIGGER_SEPARATOR))
        if not separator or trigger not in TRIGGER_CHOICES or effort not in EFFORT_CHOICES:
            raise ValueError(
                f"{shown(item)} is not TRIGGER=EFFORT (triggers: {', '.join(TRIGGER_CHOICES)}; "
                f"efforts: {', '.join(EFFORT_CHOICES)})"
            )
        if trigger in out:
            raise ValueError(f"trigger {trigger!r} is named twice")
        out[trigger] = Effort(effort)
    return out


def choose_effort(
    run_choice: EffortChoice | None,
    instance: EffortSettings,
    project: EffortSettings,
    trigger: str,
) -> EffortChoice:
    """The effort a run uses, and why: ``run_choice`` (the worker's or ``--effort``) first,
    then the project's ``review_effort`` where its ``.reviewbot.toml`` changed it from the
    ``instance``'s, then the trigger's entry of ``effort_by_trigger``, then ``review_effort``."""
    if run_choice is not None:
        return run_choice
    if project.review_effort != instance.review_effort:
        return EffortChoice(Effort(project.review_effort), "the project's .reviewbot.toml")
    by_trigger: Mapping[str, Effort] = effort_by_trigger(project.effort_by_trigger)
    if trigger in by_trigger:
        return EffortChoice(by_trigger[trigger], f"effort_by_trigger for {trigger}")
    return EffortChoice(Effort(project.review_effort), "setting review_effort")
