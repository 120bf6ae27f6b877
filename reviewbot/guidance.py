"""The team's wishes for one merge request, read once: the target branch's ``.reviewbot.toml``
applied to the settings (reviewbot.repo_policy), the review rules of the instance and of the
repository (reviewbot.rules.sources), and the learnings in force for the project
(reviewbot.learnings.teaching).

The review run (reviewbot.mr) and the answer in a thread (reviewbot.replies.answer) both read
them here, at the MR's target branch (its start SHA: an MR never rewrites the rules that review
it), through the caller's :class:`~reviewbot.repo.files.RepoFiles` (a CI checkout, the host's
cache or GitLab's API, whichever serves the run).

Owns: :class:`TeamGuidance` and :func:`read_team_guidance`: the order (policy, then rules by the
policy's settings, then learnings) and the words of what could not be read. Must not: parse a
policy or a rules format, choose the commit or the source of the files, or say anything on the
MR (the caller shows ``warnings``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from reviewbot.config import Settings
from reviewbot.group_settings import GroupSettings
from reviewbot.learnings.learning import Learning
from reviewbot.learnings.teaching import active_learnings
from reviewbot.repo.files import RepoFiles
from reviewbot.repo.view import TreeUnavailable
from reviewbot.repo_policy import NOT_TEXT, REPO_CONFIG_FILE, repo_policy, rules_file_text
from reviewbot.rules.ruleset import REPO_RULES_FILE, GroupRuleTexts, RuleSet
from reviewbot.rules.sources import review_rules
from reviewbot.store import LearningBook, MergeRequestKey

__all__ = ["NO_GROUPS", "TeamGuidance", "apply_group_layers", "read_team_guidance"]

RULES_PROBLEM_PREFIX = "review rules: "
NO_GROUPS = GroupSettings()


@dataclass(frozen=True)
class TeamGuidance:
    """What the team wants of a review of one MR."""

    settings: Settings  # the instance's, with the target branch's .reviewbot.toml applied
    rules: RuleSet
    learnings: list[Learning] = field(default_factory=list)  # in force, the project's first
    warnings: list[str] = field(default_factory=list)  # for the summary, in reading order


def read_team_guidance(
    settings: Settings,
    files: RepoFiles,
    target_sha: str,
    learnings: LearningBook,
    key: MergeRequestKey,
    project_path: str,
    *,
    changed_paths: Collection[str] = (),
    repository_paths: Iterable[str] | None = None,
    groups: GroupSettings = NO_GROUPS,
) -> TeamGuidance:
    """The team's wishes for MR ``key`` (``project_path``) at ``target_sha``. ``changed_paths``:
    the files the MR changes (a policy or rules file among them is said to apply once merged);
    ``repository_paths``: the target's files when known (a rule glob that matches none is
    said); ``groups``: the settings layers of the project's groups (reviewbot.group_settings),
    applied before the target branch's files, the outermost first."""
    warnings: list[str] = list(groups.problems)
    settings, group_rules = apply_group_layers(settings, groups, warnings)
    try:
        data = files.read_bytes(target_sha, [REPO_CONFIG_FILE]).get(REPO_CONFIG_FILE)
    except TreeUnavailable as unlisted:
        warnings.append(
            f"{REPO_CONFIG_FILE} was not read at the target branch ({unlisted}): the instance's "
            "settings were used"
        )
        data = None
    policy = repo_policy(settings, data, changed_by_mr=REPO_CONFIG_FILE in changed_paths)
    warnings.extend(policy.warnings)
    rules = review_rules(
        policy.settings,
        lambda paths: files.read_bytes(target_sha, paths),
        changed_paths=changed_paths,
        repository_paths=repository_paths,
        groups=group_rules,
    )
    warnings.extend(f"{RULES_PROBLEM_PREFIX}{problem}" for problem in rules.problems)
    taught = active_learnings(learnings, key, project_path)
    return TeamGuidance(policy.settings, rules, taught, warnings)


def apply_group_layers(
    settings: Settings, groups: GroupSettings, warnings: list[str]
) -> tuple[Settings, list[GroupRuleTexts]]:
    """``settings`` with each group's ``.reviewbot.toml`` applied, the outermost first, and
    each group's rules texts; a file that is not text is said and not used."""
    rules = []
    for layer in groups.layers:
        texts: dict[str, str | None] = {}
        for path, data in layer.files.items():
            texts[path] = rules_file_text(data)
            if texts[path] is None:
                warnings.append(f"{layer.origin(path)} {NOT_TEXT}")
        policy_bytes = layer.files.get(REPO_CONFIG_FILE) if texts.get(REPO_CONFIG_FILE) else None
        policy = repo_policy(
            settings, policy_bytes, changed_by_mr=False, origin=layer.origin(REPO_CONFIG_FILE)
        )
        settings = policy.settings
        warnings.extend(policy.warnings)
        rules.append(
            GroupRuleTexts(
                toml=texts.get(REPO_CONFIG_FILE),
                toml_origin=layer.origin(REPO_CONFIG_FILE),
                yaml=texts.get(REPO_RULES_FILE),
                yaml_origin=layer.origin(REPO_RULES_FILE),
            )
        )
    return settings, rules
