"""The review policy a repository sets for itself: its ``.reviewbot.toml``, as the target
branch has it (pure).

The file is read from the target branch (the start commit of the MR's latest diff version), not
from the MR's head: an author cannot silence the review of their own MR. A change to it in the
MR applies once merged; the summary says so.

Owns: applying the file to the settings (through `reviewbot.config.apply_repo_overrides`,
which says which keys a repository may set), and the warnings the summary shows about it (a
broken file, or one that is not text by ``reviewbot.rules.rules_file_text``, is ignored and
named, never fatal). Must not: read the file (the run hands its bytes in) or know where the
review goes.
"""

from __future__ import annotations

from dataclasses import dataclass

from reviewbot.config import ConfigError, Settings, apply_repo_overrides
from reviewbot.rules.ruleset import NOT_TEXT, rules_file_text

__all__ = ["REPO_CONFIG_FILE", "RepoPolicy", "repo_policy"]

REPO_CONFIG_FILE = ".reviewbot.toml"


@dataclass(frozen=True)
class RepoPolicy:
    """The settings a review of the repository uses, and what the summary says about them."""

    settings: Settings
    warnings: tuple[str, ...] = ()


def repo_policy(settings: Settings, target: bytes | None, *, changed_by_mr: bool) -> RepoPolicy:
    """``settings`` with the target branch's file (``target``, its bytes; None: it has none)
    applied when it is valid text; ``changed_by_mr``: the MR's diff touches the file."""
    warnings = []
    if changed_by_mr:
        warnings.append(
            f"this merge request changes {REPO_CONFIG_FILE}: the review used the target "
            "branch's version; the change applies once it is merged"
        )
    if target is None:
        return RepoPolicy(settings, tuple(warnings))
    target_text = rules_file_text(target)
    if target_text is None:
        warnings.append(f"{REPO_CONFIG_FILE} {NOT_TEXT}")
        return RepoPolicy(settings, tuple(warnings))
    try:
        return RepoPolicy(apply_repo_overrides(settings, target_text), tuple(warnings))
    except ConfigError as error:
        warnings.append(f"ignored {REPO_CONFIG_FILE}: {error}")
        return RepoPolicy(settings, tuple(warnings))
