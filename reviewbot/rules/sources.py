"""Where a review's rules are read from: the instance's rules file, and the repository's rule
files at the target branch (reviewbot.rules.ruleset parses and merges them).

Every repository file is read through the ``read`` callable the caller hands in, at the commit
the caller chose: the MR's start SHA (the target branch), never its head, so an MR cannot
rewrite the rules that review it. An MR that changes a rules file is told so in the summary.
``read`` gives each file's bytes; a file that is there but is not text
(``reviewbot.repo_policy.rules_file_text``) is named in the summary as such ("AGENTS.md is not
UTF-8 text; not used"), never as missing; ``.reviewbot.toml``'s is said by
``reviewbot.repo_policy``, which reads the same bytes for the settings.

Owns: which files a review reads its rules from, reading the instance file (a regular file of
bounded size, through reviewbot.input_files), and the warnings about rules files the MR
changes, that are missing or that are not text. Must not: parse a rules format or decode a
file (reviewbot.rules.ruleset does), choose the commit, or know about GitLab or the database.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace

from reviewbot.config import Settings
from reviewbot.input_files import InputFileRefused, read_input_file
from reviewbot.repo.view import TreeUnavailable
from reviewbot.repo_policy import NOT_TEXT, rules_file_text
from reviewbot.rules.ruleset import (
    DUO_RULES_FILE,
    MAX_RULES_FILE_BYTES,
    REPO_CONFIG_FILE,
    REPO_RULES_FILE,
    GroupRuleTexts,
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
# paths -> {path: bytes} of those that exist at the target branch; TreeUnavailable when the
# target's tree cannot be listed at all
ReadAtTarget = Callable[[Sequence[str]], Mapping[str, bytes]]


def review_rules(
    settings: Settings,
    read: ReadAtTarget,
    *,
    changed_paths: Collection[str] = (),
    repository_paths: Iterable[str] | None = None,
    groups: Sequence[GroupRuleTexts] = (),
) -> RuleSet:
    """The merged rules of a review; its problems include the rules files the MR changes
    (``changed_paths``) and, when ``repository_paths`` (the target's files) are known, each
    glob that matches none of them. ``groups``: the rules of the project's groups' settings
    projects, the outermost first (after the instance's, before the repository's)."""
    if settings.rules_tokens <= 0:
        return RuleSet()
    instance, instance_problems = _instance_text(settings.rules_file)
    wanted = repository_rule_files(settings.rules_context_files)
    found, unlisted = _read_rule_files(read, wanted)
    texts = {
        path: text for path, data in found.items() if (text := rules_file_text(data)) is not None
    }
    merged = merge_rules(
        replace(_rule_texts(instance, texts, settings.rules_context_files), groups=tuple(groups))
    )
    unmatched = unmatched_globs(merged, repository_paths) if repository_paths is not None else []
    problems = [
        *unlisted,
        *instance_problems,
        *_changed_by_mr(wanted, changed_paths),
        *merged.problems,
        *([] if unlisted else _not_there(settings.rules_context_files, found)),
        *_not_text(wanted, found, texts),
        *unmatched,
    ]
    return replace(merged, problems=tuple(problems))


def _read_rule_files(
    read: ReadAtTarget, wanted: Sequence[str]
) -> tuple[Mapping[str, bytes], list[str]]:
    """The repository's rules files that exist at the target branch, and the problem when its
    tree could not be listed (then no file is known to be missing: none was looked at)."""
    try:
        return read(wanted), []
    except TreeUnavailable as unlisted:
        names = ", ".join(wanted)
        return {}, [f"the repository's rules files were not read ({names}): {unlisted}"]


def _document(entry: str) -> str:
    """The file of a ``rules_context_files`` entry ("CONTRIBUTING.md#Review checklist")."""
    return entry.split("#", 1)[0]


def _rule_texts(
    instance: str | None, texts: Mapping[str, str], context_files: Sequence[str]
) -> RuleTexts:
    return RuleTexts(
        instance=instance,
        instance_origin=INSTANCE_ORIGIN,
        repo_toml=texts.get(REPO_CONFIG_FILE),
        repo_yaml=texts.get(REPO_RULES_FILE),
        duo_yaml=texts.get(DUO_RULES_FILE),
        context={
            entry: texts[path] for entry in context_files if (path := _document(entry)) in texts
        },
    )


def _not_there(context_files: Sequence[str], found: Mapping[str, bytes]) -> list[str]:
    return [
        f"rules_context_files: {path} does not exist at the target branch"
        for entry in context_files
        if (path := _document(entry)) not in found
    ]


def _not_text(
    wanted: Sequence[str], found: Mapping[str, bytes], texts: Mapping[str, str]
) -> list[str]:
    """A problem per rules file that is there but is not text (``.reviewbot.toml``'s is
    reviewbot.repo_policy's to say)."""
    return [
        f"{path} {NOT_TEXT}"
        for path in wanted
        if path in found and path not in texts and path != REPO_CONFIG_FILE
    ]


def _instance_text(path: str | None) -> tuple[str | None, list[str]]:
    if not path:
        return None, []
    try:
        data = read_input_file(path, MAX_RULES_FILE_BYTES)
    except InputFileRefused as refused:
        return None, [f"ignored {INSTANCE_ORIGIN}: it {refused}"]
    except OSError as error:
        return None, [f"ignored {INSTANCE_ORIGIN}: {error.strerror or type(error).__name__}"]
    text = rules_file_text(data)
    if text is None:
        return None, [f"{INSTANCE_ORIGIN} {NOT_TEXT}"]
    return text, []


def _changed_by_mr(wanted: Sequence[str], changed_paths: Collection[str]) -> list[str]:
    """A warning per rules file the MR changes (``.reviewbot.toml`` has its own, from
    reviewbot.repo_policy)."""
    return [
        f"this merge request changes {path}: the review used the target branch's rules; the "
        "change applies once it is merged"
        for path in wanted
        if path in changed_paths and path != REPO_CONFIG_FILE
    ]
