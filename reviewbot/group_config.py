"""The instance settings of rules shared by a group (reviewbot.group_settings): which project of
each group holds them, and how long what was read is kept.

A base of :class:`reviewbot.config.Settings` (its fields are settings like any other, in the
generated reference), kept apart so the settings of one feature live together.

Owns: the two settings and the check of the project pattern. Must not: read GitLab or merge
rules (reviewbot.group_settings and reviewbot.rules do).
"""

from __future__ import annotations

from dataclasses import dataclass

from reviewbot.setting_fields import Bounds, setting

__all__ = ["GROUP_PLACEHOLDER", "GroupConfig", "group_project_problem"]

GROUP_PLACEHOLDER = "{group}"
DEFAULT_GROUP_SETTINGS_TTL_S = 300
MAX_GROUP_SETTINGS_TTL_S = 86_400
MAX_PATTERN_CHARS = 255


def group_project_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot name a group's settings project, or None ("" is off)."""
    if not pattern:
        return None
    rest = pattern.replace(GROUP_PLACEHOLDER, "")
    if pattern.count(GROUP_PLACEHOLDER) != 1 or "{" in rest or "}" in rest:
        return f"must hold {GROUP_PLACEHOLDER} exactly once and no other braces, got {pattern!r}"
    if len(pattern) > MAX_PATTERN_CHARS or not pattern.startswith(GROUP_PLACEHOLDER):
        return (
            f"must start with {GROUP_PLACEHOLDER} (a project of that group or below it) and be "
            f"at most {MAX_PATTERN_CHARS} characters, got {pattern!r}"
        )
    if any(part in ("", ".", "..") for part in rest.split("/")[1:]) or not rest.startswith("/"):
        return f"must be {GROUP_PLACEHOLDER}/<project path>, got {pattern!r}"
    return None


@dataclass(frozen=True)
class GroupConfig:
    group_settings_project: str = setting(
        "",
        default_text="not set: no group settings are read",
        help="The project of each group that holds rules, checks and `.reviewbot.toml` policy "
        "keys for every project below the group, e.g. `{group}/reviewbot-settings`; read at "
        "its default branch, for each group above the MR's project, the nearest last "
        "([rules.md](rules.md#rules-shared-by-a-group)).",
    )
    group_settings_ttl_s: int = setting(
        DEFAULT_GROUP_SETTINGS_TTL_S,
        bounds=Bounds(0, MAX_GROUP_SETTINGS_TTL_S),
        help="How long a worker keeps what it read of a group's settings project before it "
        "reads it again; 0 reads it for every review.",
    )
