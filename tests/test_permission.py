"""Who may change state through reviewbot: every reply command says whether it changes
anything, so a new command cannot skip the role check by being forgotten (issue 32)."""

from __future__ import annotations

from reviewbot.permission import COMMAND_CHANGES, Change
from reviewbot.states import ReplyCommand


def test_every_reply_command_says_whether_it_changes_state() -> None:
    assert set(COMMAND_CHANGES) == set(ReplyCommand)


def test_the_commands_that_change_state_are_ignore_and_learn() -> None:
    changing = {command for command, change in COMMAND_CHANGES.items() if change is not None}
    assert changing == {ReplyCommand.IGNORE, ReplyCommand.LEARN}
    assert COMMAND_CHANGES[ReplyCommand.IGNORE] is Change.IGNORE
