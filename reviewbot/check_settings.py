"""The settings of the named checks and their commit status (docs/checks.md).

:class:`CheckSettings` is a base of :class:`reviewbot.config.Settings`: its fields are settings
like any other (file, ``REVIEWBOT_*``, the generated reference), declared here to keep
``config.py`` to one screenful per concern.

Owns: the checks' settings, their defaults, bounds and help. Must not: read anything, or be
read as a global.
"""

from __future__ import annotations

from dataclasses import dataclass

from reviewbot.setting_fields import Bounds, setting, shown

__all__ = ["DEFAULT_CHECK_CONTEXT_TOKENS", "DEFAULT_COMMIT_STATUS_NAME", "CheckSettings"]

DEFAULT_COMMIT_STATUS_NAME = "reviewbot"
MAX_COMMIT_STATUS_NAME = 255  # GitLab's limit on a commit status name
# A model-judged check sees the MR's file list and as much of its diff as fits in this many
# tokens (the rest is named as not shown, and the model may answer "cannot tell").
DEFAULT_CHECK_CONTEXT_TOKENS = 12_000
MAX_CHECK_CONTEXT_TOKENS = 1_000_000


@dataclass(frozen=True)
class CheckSettings:
    """The named checks' settings: a base of ``Settings``."""

    commit_status: bool = setting(
        True,
        help="Post the outcome of the rules file's named checks as a GitLab commit status on "
        "the MR's head commit (`pending` when the review starts, `success` or `failed` at the "
        "end; never `success` for an incomplete review). Nothing is posted when the rules "
        "define no check ([checks](checks.md)).",
    )
    commit_status_name: str = setting(
        DEFAULT_COMMIT_STATUS_NAME,
        accepts=f"text of 1 to {MAX_COMMIT_STATUS_NAME} characters",
        help="The commit status's name: the job name a merge check or a pipeline shows.",
    )
    check_context_tokens: int = setting(
        DEFAULT_CHECK_CONTEXT_TOKENS,
        bounds=Bounds(1, MAX_CHECK_CONTEXT_TOKENS),
        help="Tokens of the MR's diff a model-judged check (`ask:`) is shown; what does not "
        "fit is named as not shown.",
    )

    def check_settings_problem(self) -> str | None:
        """What is wrong with these settings, in a sentence (None: nothing)."""
        name = self.commit_status_name
        if not name.strip() or len(name) > MAX_COMMIT_STATUS_NAME:
            return (
                f"commit_status_name must be text of 1 to {MAX_COMMIT_STATUS_NAME} characters, "
                f"got {shown(name)}"
            )
        return None
