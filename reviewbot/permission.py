"""Who may change state through reviewbot: one rule, checked in one place (issue 32).

reviewbot writes with its own token (Developer role or above), so whatever a human asks it to
change, it would change with more rights than the human may have. GitLab lets only a
Developer (or more) or the MR's author resolve a thread; a Guest, a Reporter or a logged-in
non-member of an internal or public project resolves nothing, and makes no team decision. So
every change asked of reviewbot is made only for a project member with the **Developer role
or above** (``GET /projects/:id/members/all/:user_id``, inherited roles included, cached by
``reviewbot.gitlab.account``):

- the thread commands (:data:`COMMAND_CHANGES`, one entry for every ``ReplyCommand``, so a
  new command is classified when it is added): ``/reviewbot ignore`` resolves the thread and
  records the finding as not useful; ``/reviewbot learn <text>`` makes a learning and a bare
  ``/reviewbot learn`` confirms the thread's proposal;
- ``@bot don't flag this …`` proposes a learning (from anyone else: an ordinary answer);
- a 👍 on a proposal's note accepts it (``reviewbot.learnings.proposals``).

:func:`refusal` is the check: None when the change may be made, else the reason, which the
caller says where the human asked (``reviewbot.replies.answer`` answers it once in the thread and
stores it) or logs.

Owns: :class:`Change`, :data:`COMMAND_CHANGES`, :func:`refusal`, :func:`role_name`. Must not:
read the role itself (``reviewbot.gitlab.account``), post anything, or write SQL.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Protocol

from reviewbot.roles import DEVELOPER_ACCESS_LEVEL, ROLE_NAMES
from reviewbot.states import ReplyCommand

__all__ = ["COMMAND_CHANGES", "Change", "MemberRoles", "refusal", "role_name"]


class Change(StrEnum):
    """A change a human may ask reviewbot to make; the value completes "may ..."."""

    IGNORE = "ignore a finding (resolve its thread and record it as not useful)"
    LEARN = "make or confirm a learning"
    PROPOSE = "propose a learning"
    ACCEPT = "accept a proposed learning"


# Every thread command, and the change it makes (None: it only answers). A mention that
# states a wish to teach is a PROPOSE, checked where the wish is recognised
# (reviewbot.replies.answer).
COMMAND_CHANGES: Mapping[ReplyCommand, Change | None] = MappingProxyType(
    {
        ReplyCommand.ASK: None,
        ReplyCommand.EXPLAIN: None,
        ReplyCommand.FIX: None,  # a suggestion: applying it is the human's own act on GitLab
        ReplyCommand.IGNORE: Change.IGNORE,
        ReplyCommand.LEARN: Change.LEARN,
    }
)


class MemberRoles(Protocol):
    """What the check needs from GitLab (``reviewbot.gitlab.GitLabClient``)."""

    def member_access_level(self, project: str | int, user_id: int) -> int | None: ...


def role_name(level: int | None) -> str:
    """GitLab's name of an access level ("not a member" for None)."""
    if level is None:
        return "not a member"
    return ROLE_NAMES.get(level, f"access level {level}")


def refusal(roles: MemberRoles, project: str | int, user_id: object, change: Change) -> str | None:
    """Why user ``user_id`` may not make ``change`` on ``project``; None when they may."""
    wanted = f"only a project member with the Developer role or above may {change.value}"
    if not isinstance(user_id, int) or isinstance(user_id, bool):
        return f"{wanted} (the author is unknown)"
    level = roles.member_access_level(project, user_id)
    if level is not None and level >= DEVELOPER_ACCESS_LEVEL:
        return None
    held = role_name(level) if level is None else f"role {role_name(level)}"
    return f"{wanted} ({held})"
