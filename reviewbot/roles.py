"""GitLab's roles by access level, and the one that may change what reviewbot does (pure).

Owns: the names of ``Gitlab::Access`` levels (https://docs.gitlab.com/api/members/#roles) and
the Developer level that commands changing state need (``reviewbot.permission``) and that
``reviewbot doctor`` checks the bot's token for. Must not: ask GitLab anything.
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ["DEVELOPER_ACCESS_LEVEL", "ROLE_NAMES"]

DEVELOPER_ACCESS_LEVEL = 30  # Gitlab::Access::DEVELOPER
ROLE_NAMES = MappingProxyType(
    {
        0: "no access",
        5: "Minimal Access",
        10: "Guest",
        15: "Planner",
        20: "Reporter",
        30: "Developer",
        40: "Maintainer",
        50: "Owner",
        60: "Admin",
    }
)
