"""Where a review's rules are read from: the instance's rules file, and the repository's rule
files at the target branch (reviewbot.rules parses and merges them).

Every repository file is read through the ``read`` callable the caller hands in, at the commit
the caller chose: the MR's start SHA (the target branch), never its head, so an MR cannot
rewrite the rules that review it. An MR that changes a rules file is told so in the summary.

Owns: which files a review reads its rules from, reading the instance file (a regular file of
bounded size, through reviewbot.input_files), and the warnings about rules files the MR
changes. Must not: parse a rules format (reviewbot.rules does), choose the commit, or know
about GitLab or the database.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace

from reviewbot.config import Settings
from reviewbot.input_files import InputFileRefused, read_input_file
from reviewbot.repo.view import TreeUnavailable
from reviewbot.rules import (
    DUO_RULES_FILE,
    MAX_RULES_FILE_BYTES,
    REPO_CONFIG_FILE,
    REPO_RULES_FILE,
    RuleSet,
    RuleTexts,
    merge_rules,
    repository_rule_files,
    unmatched_globs,
)

__all__ = ["ReadAtTarget", "review_rules"]

# How the instance's file is named in what the summary says: the setting, not the path (the
# server's file system is none of the MR's readers' business).
INSTANCE_ORIGIN = "the instance's rules_file"
# paths -> {path: text} of those that exist at the target branch; TreeUnavailable when the
# target's tree cannot be listed at all
ReadAtTarget = Callable[[Sequence[str]], Mapping[str, str]]


def review_rules(
    settings: Settings,
    read: ReadAtTarget,
    *,
    changed_paths: Collection[str] = (),
    repository_paths: Iterable[str] | None = None,
) -> RuleSet:
    """The merged rules of a review; its problems include the rules files the MR changes
    (``changed_paths``) and, when ``repository_paths`` (the target's files) are known, each
    glob that matches none of them."""
    if settings.rules_tokens <= 0:
        return RuleSet()
    instance, instance_problems = _instance_text(settings.rules_file)
    wanted = repository_rule_files(settings.rules_context_files)
    found, unlisted = _read_rule_files(read, wanted)
    texts = RuleTexts(
        instance=instance,
        instance_origin=INSTANCE_ORIGIN,
        repo_toml=found.get(REPO_CONFIG_FILE),
        repo_yaml=found.get(REPO_RULES_FILE),
        duo_yaml=found.get(DUO_RULES_FILE),
        context={
            entry: found[path]
            for entry in settings.rules_context_files
            if (path := entry.split("#", 1)[0]) in found
        },
    )
    merged = merge_rules(texts)
    missing = [
        f"rules_context_files: {entry.split('#', 1)[0]} does not exist at the target branch"
        for entry in settings.rules_context_files
        if entry.split("#", 1)[0] not in found and not unlisted
    ]
    unmatched = unmatched_globs(merged, repository_paths) if repository_paths is not None else []
    problems = [
        *unlisted,
        *instance_problems,
        *_changed_by_mr(wanted, changed_paths),
        *merged.problems,
        *missing,
        *unmatched,
    ]
    return replace(merged, problems=tuple(problems))


def _read_rule_files(
    read: ReadAtTarget, wanted: Sequence[str]
) -> tuple[Mapping[str, str], list[str]]:
    """The repository's rules files that exist at the target branch, and the problem when its
    tree could not be listed (then no file is known to be missing: none was looked at)."""
    try:
        return read(wanted), []
    except TreeUnavailable as unlisted:
        names = ", ".join(wanted)
        return {}, [f"the repository's rules files were not read ({names}): {unlisted}"]


def _instance_text(path: str | None) -> tuple[str | None, list[str]]:
    if not path:
        return None, []
    try:
        data = read_input_file(path, MAX_RULES_FILE_BYTES)
    except InputFileRefused as refused:
        return None, [f"ignored {INSTANCE_ORIGIN}: it {refused}"]
    except OSError as error:
        return None, [f"ignored {INSTANCE_ORIGIN}: {error.strerror or type(error).__name__}"]
    return data.decode("utf-8", errors="replace"), []


def _changed_by_mr(wanted: Sequence[str], changed_paths: Collection[str]) -> list[str]:
    """A warning per rules file the MR changes (``.reviewbot.toml`` has its own, from
    reviewbot.repo_policy)."""
    return [
        f"this merge request changes {path}: the review used the target branch's rules; the "
        "change applies once it is merged"
        for path in wanted
        if path in changed_paths and path != REPO_CONFIG_FILE
    ]
