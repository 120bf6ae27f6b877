"""The settings of the review of the merge request as a whole: the walkthrough and the linked
issues (docs/walkthrough.md, docs/linked-issues.md).

:class:`OverviewSettings` is a base class of :class:`reviewbot.config.Settings`: its fields are
Settings' fields (the generated reference, the environment, TOML and flags see them all), and
:data:`OVERVIEW_CHOICES` names the choices Settings checks when built.

Owns: these settings' defaults, bounds, choices and help. Must not: read anything, or know any
other setting.
"""

from __future__ import annotations

from dataclasses import dataclass

from reviewbot.setting_fields import Bounds, setting

ON, OFF = "on", "off"
ON_OFF = (ON, OFF)
SUMMARY, DESCRIPTION = "summary", "description"
WALKTHROUGH_TARGETS = (SUMMARY, DESCRIPTION)
DEFAULT_REQUIREMENTS_TOKENS = 6000  # the diff the requirements check shows (whole files)
DEFAULT_WALKTHROUGH_TOKENS = 600  # the walkthrough's answer: a few sentences and a line a file
MAX_CHANGED_LINES = 10_000_000
DEFAULT_LINKED_ISSUES_TOKENS = 1500  # the linked issues' share of the MR part of the prompt
MAX_OVERVIEW_TOKENS = 100_000


@dataclass(frozen=True)
class OverviewSettings:
    """The walkthrough and the linked issues: fields of Settings."""

    walkthrough: str = setting(
        OFF,  # one more model call per review: off until eval --compare measures its worth
        choices=ON_OFF,
        help="`on`: one more model call per review writes a short walkthrough of the MR (what it "
        "does, one line per file) into the summary note ([walkthrough.md](walkthrough.md)).",
    )
    walkthrough_min_changed_lines: int = setting(
        0,
        bounds=Bounds(0, MAX_CHANGED_LINES),
        help="A walkthrough only for MRs with at least this many changed lines (0: every MR).",
    )
    walkthrough_tokens: int = setting(
        DEFAULT_WALKTHROUGH_TOKENS,
        bounds=Bounds(1, MAX_OVERVIEW_TOKENS),
        help="At most this many tokens of the walkthrough's answer.",
    )
    walkthrough_target: str = setting(
        SUMMARY,
        choices=WALKTHROUGH_TARGETS,
        help="Where the walkthrough goes: `summary` (the bot's summary note) or `description` "
        "(the MR's description, between hidden markers; the author's text is never touched; "
        "the bot's user must be the author or a Developer).",
    )

    linked_issues: str = setting(
        ON,
        choices=ON_OFF,
        help="`on`: the issues the MR closes (and its related issues, where GitLab has the "
        "endpoint) go into the prompt as data ([linked-issues.md](linked-issues.md)).",
    )
    linked_issues_tokens: int = setting(
        DEFAULT_LINKED_ISSUES_TOKENS,
        bounds=Bounds(0, MAX_OVERVIEW_TOKENS),
        help="At most this many tokens (estimated) of linked issues in the prompt.",
    )
    requirements_check: str = setting(
        OFF,  # one more model call per review: off until eval --compare measures its worth
        choices=ON_OFF,
        help="`on`: one more model call asks whether the change meets each linked issue's "
        "requirements (met, not met, cannot tell), shown in the summary note "
        "([linked-issues.md](linked-issues.md)). Nothing is written into an issue.",
    )
    requirements_check_tokens: int = setting(
        DEFAULT_REQUIREMENTS_TOKENS,
        bounds=Bounds(0, MAX_OVERVIEW_TOKENS),
        help="At most this many tokens of the MR's diff in the requirements check's prompt "
        "(whole files, in order; the others are named as not shown).",
    )


# Each choice-valued field of the group and the values it may take (checked by Settings).
OVERVIEW_CHOICES = (
    ("walkthrough", ON_OFF),
    ("walkthrough_target", WALKTHROUGH_TARGETS),
    ("linked_issues", ON_OFF),
    ("requirements_check", ON_OFF),
)
