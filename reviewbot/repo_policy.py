"""The review policy a repository sets for itself: its ``.reviewbot.toml``, as the target
branch has it (pure).

The file is read from the target branch (the start commit of the MR's latest diff version), not
from the MR's head: an author cannot silence the review of their own MR. A change to it in the
MR applies once merged; the summary says so.

Owns: applying the file to the settings (through `reviewbot.config.apply_repo_overrides`,
which says which keys a repository may set), and the warnings the summary shows about it (a
broken file, or one that is not text, is ignored and named, never fatal), and the one rule by
which the team's files (this one and the rules files, reviewbot.rules) are decoded:
:func:`rules_file_text`. Must not: read the file (the run hands its bytes in) or know where the
review goes.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from reviewbot.config import ConfigError, Settings, apply_repo_overrides

__all__ = ["NOT_TEXT", "REPO_CONFIG_FILE", "RepoPolicy", "repo_policy", "rules_file_text"]

REPO_CONFIG_FILE = ".reviewbot.toml"
# What the summary says of a rules file that is there but is not text: "<path> is not ...".
NOT_TEXT = "is not UTF-8 text; not used"
# A file starting with one of these is text in that encoding (UTF-32's before UTF-16's: the
# UTF-32 little-endian mark starts with UTF-16's); each codec drops its mark.
BYTE_ORDER_MARKS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
NUL = "\0"


@dataclass(frozen=True)
class RepoPolicy:
    """The settings a review of the repository uses, and what the summary says about them."""

    settings: Settings
    warnings: tuple[str, ...] = ()


def repo_policy(
    settings: Settings,
    target: bytes | None,
    *,
    changed_by_mr: bool,
    origin: str = REPO_CONFIG_FILE,
) -> RepoPolicy:
    """``settings`` with the target branch's file (``target``, its bytes; None: it has none)
    applied when it is valid text; ``changed_by_mr``: the MR's diff touches the file;
    ``origin``: how the warnings name the file (a group's settings project names its own)."""
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
        warnings.append(f"{origin} {NOT_TEXT}")
        return RepoPolicy(settings, tuple(warnings))
    try:
        return RepoPolicy(apply_repo_overrides(settings, target_text, origin), tuple(warnings))
    except ConfigError as error:
        warnings.append(f"ignored {origin}: {error}")
        return RepoPolicy(settings, tuple(warnings))


def rules_file_text(data: bytes) -> str | None:
    """The text of a rules file's ``data``: UTF-8, or the encoding its byte order mark names
    (UTF-8, UTF-16, UTF-32); None when it is not text (it does not decode, or holds a NUL)."""
    encoding = next((name for mark, name in BYTE_ORDER_MARKS if data.startswith(mark)), "utf-8")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError:
        return None
    return None if NUL in text else text
