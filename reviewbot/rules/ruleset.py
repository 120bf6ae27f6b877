"""Review rules the team writes: parsed from their four sources, merged, matched to a chunk's
paths and cut to a token budget (pure).

Sources, lowest precedence first (a later rule of the same name replaces an earlier one):

1. the instance's rules file (setting ``rules_file``; YAML, the format of the repository file);
2. the repository's ``[[rules]]`` in ``.reviewbot.toml``, then its ``.reviewbot/rules.yaml``;
3. GitLab Duo's ``.gitlab/duo/mr-review-instructions.yaml``, read as Duo documents it
   (``instructions:`` a list of ``name``, ``fileFilters``, ``instructions``);
4. sections of the repository's documents named in the setting ``rules_context_files``
   (``"CONTRIBUTING.md#Review checklist"``; the whole file without ``#``), size-capped.

Every repository file is read from the target branch by the caller, as bytes: a file is text
when it is UTF-8, or UTF-8, UTF-16 or UTF-32 starting with its byte order mark (as editors on
Windows save it), :func:`reviewbot.repo_policy.rules_file_text`; any other file (binary, another
encoding) is not used and is named as :data:`reviewbot.repo_policy.NOT_TEXT`, never as a file that
does not exist. A broken file, an unknown key, a wrong type or a file over the cap is a *problem*
(a sentence for the summary); the valid rules still apply. YAML is parsed with ``yaml.safe_load``
only, after a size cap and a scan of its events that refuses aliases (no "billion laughs") and
nesting deeper than MAX_YAML_DEPTH (PyYAML's composer recurses).

Globs are matched on the whole path from the repository root, as Duo's ``fileFilters`` are
(``*.rb`` is a file at the root; ``**/*.rb`` anywhere), by ``reviewbot.rules.pathglob`` in time
linear in the path's length: ``*`` and ``?`` stay within one path segment, ``**`` spans any
number of segments, ``[abc]`` is a class, a trailing ``/`` means everything under that folder;
``!`` marks an exclude. A glob too long or with too many ``*`` is a problem, like one that
names no file. A file matches a rule when it matches one of its includes (no includes: every
file) and none of its excludes.

Owns: the rule formats, what counts as a rules file's text, their validation and merge, which
rules a set of paths gets and which of them fit a token budget. Must not: read a file (the
caller hands the bytes in), render the prompt (``reviewbot.prompts``) or count tokens itself
(a counter is handed in).
"""

from __future__ import annotations

import bisect
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import yaml

from reviewbot.findings import Category, Severity
from reviewbot.rules.checks import Check, is_check_entry, parse_checks, parse_toml_checks
from reviewbot.rules.pathglob import glob_matches, glob_problem

__all__ = [
    "DUO_RULES_FILE",
    "MAX_RULES_FILE_BYTES",
    "REPO_RULES_FILE",
    "GroupRuleTexts",
    "Rule",
    "RuleSet",
    "RuleSource",
    "RuleTexts",
    "context_rule",
    "fit_rules",
    "merge_rules",
    "parse_duo_rules",
    "parse_toml_rules",
    "parse_yaml_rules",
    "repository_rule_files",
    "rules_for_paths",
    "unmatched_globs",
]

REPO_RULES_FILE = ".reviewbot/rules.yaml"
DUO_RULES_FILE = ".gitlab/duo/mr-review-instructions.yaml"
REPO_CONFIG_FILE = ".reviewbot.toml"  # the [[rules]] array (reviewbot.repo_policy reads the rest)
MAX_RULES_FILE_BYTES = 262_144  # a rules file is a few KB; 256 KiB is far past any real one
MAX_CONTEXT_CHARS = 8_000  # a section of AGENTS.md/CONTRIBUTING.md given as a rule
MAX_RULE_CHARS = 4_000  # one rule's instructions
MAX_RULES = 200  # rules per file
MAX_GLOBS = 50  # globs per rule
MAX_NAME_CHARS = 100  # findings.rule holds a name of this length
MAX_YAML_DEPTH = 10  # a rules file nests three levels
MAX_SHOWN_CHARS = 60  # a name or glob quoted in a problem
RULE_KEYS = frozenset({"name", "paths", "instructions", "severity", "category"})
DUO_KEYS = frozenset({"name", "fileFilters", "instructions"})
HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")


class RuleSource(StrEnum):
    """Where a rule comes from, lowest precedence first."""

    INSTANCE = "instance"
    GROUP = "group"  # a group's settings project (reviewbot.group_settings), nearest last
    REPOSITORY = "repository"
    DUO = "duo"
    CONTEXT = "context"
    LEARNING = "learning"  # a team learning (reviewbot.learnings.learning), from the database


@dataclass(frozen=True)
class Rule:
    """One named rule: the files it is for and what the reviewer should look for there."""

    name: str
    source: RuleSource
    origin: str  # the file it was read from
    instructions: str
    paths: tuple[str, ...] = ()  # globs; "!" excludes; none: every file
    severity: Severity | None = None  # a hint: how severe what it finds usually is
    category: Category | None = None

    def applies_to(self, path: str) -> bool:
        includes = [glob for glob in self.paths if not glob.startswith("!")]
        excludes = [glob[1:] for glob in self.paths if glob.startswith("!")]
        included = not includes or any(glob_matches(glob, path) for glob in includes)
        return included and not any(glob_matches(glob, path) for glob in excludes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source.value,
            "origin": self.origin,
            "paths": list(self.paths),
            "instructions": self.instructions,
            "severity": self.severity.value if self.severity else None,
            "category": self.category.value if self.category else None,
        }


@dataclass(frozen=True)
class RuleSet:
    """The merged rules of one review, its checks (``reviewbot.rules.checks``) and every
    problem met reading them."""

    rules: tuple[Rule, ...] = ()
    problems: tuple[str, ...] = ()
    checks: tuple[Check, ...] = ()

    @property
    def names(self) -> frozenset[str]:
        return frozenset(rule.name for rule in self.rules)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rules": [rule.to_dict() for rule in self.rules],
            "problems": list(self.problems),
            "checks": [check.to_dict() for check in self.checks],
        }


@dataclass(frozen=True)
class GroupRuleTexts:
    """A group's rules: its settings project's ``.reviewbot.toml`` and rules file (None: the
    file is not there), each named by its origin ("group acme: acme/reviewbot-settings@main:
    .reviewbot/rules.yaml")."""

    toml: str | None = None
    toml_origin: str = ""
    yaml: str | None = None
    yaml_origin: str = ""


@dataclass(frozen=True)
class RuleTexts:
    """The texts a review's rules come from (None: the file does not exist there)."""

    instance: str | None = None
    instance_origin: str = "rules_file"
    groups: Sequence[GroupRuleTexts] = ()  # the outermost group first
    repo_toml: str | None = None
    repo_yaml: str | None = None
    duo_yaml: str | None = None
    context: Mapping[str, str] = field(default_factory=dict)  # "PATH#Section" -> file text


def repository_rule_files(context_files: Sequence[str]) -> list[str]:
    """Every repository path a review reads its rules from (at the target branch)."""
    documents = [entry.split("#", 1)[0] for entry in context_files]
    return list(dict.fromkeys([REPO_CONFIG_FILE, REPO_RULES_FILE, DUO_RULES_FILE, *documents]))


def merge_rules(texts: RuleTexts) -> RuleSet:
    """Every source parsed and merged in precedence order (later wins on the same name)."""
    parsed: list[tuple[list[Rule], list[str]]] = []
    if texts.instance is not None:
        parsed.append(parse_yaml_rules(texts.instance, texts.instance_origin, RuleSource.INSTANCE))
    for group in texts.groups:
        if group.toml is not None:
            parsed.append(parse_toml_rules(group.toml, group.toml_origin, RuleSource.GROUP))
        if group.yaml is not None:
            parsed.append(parse_yaml_rules(group.yaml, group.yaml_origin, RuleSource.GROUP))
    if texts.repo_toml is not None:
        parsed.append(parse_toml_rules(texts.repo_toml, REPO_CONFIG_FILE))
    if texts.repo_yaml is not None:
        parsed.append(parse_yaml_rules(texts.repo_yaml, REPO_RULES_FILE, RuleSource.REPOSITORY))
    if texts.duo_yaml is not None:
        parsed.append(parse_duo_rules(texts.duo_yaml, DUO_RULES_FILE))
    for entry, text in texts.context.items():
        rule, problems = context_rule(entry, text)
        parsed.append(([rule] if rule else [], problems))
    merged: dict[str, Rule] = {}
    problems: list[str] = []
    for rules, found in parsed:
        problems += found
        for rule in rules:
            merged.pop(rule.name, None)  # a later source's rule goes to the end, in its order
            merged[rule.name] = rule
    checks, check_problems = _merged_checks(texts)
    return RuleSet(tuple(merged.values()), (*problems, *check_problems), checks)


def _merged_checks(texts: RuleTexts) -> tuple[tuple[Check, ...], list[str]]:
    """The checks of the instance's file, ``.reviewbot.toml`` and ``.reviewbot/rules.yaml``,
    merged like rules (a later one of the same name wins)."""
    parsed: list[tuple[list[Check], list[str]]] = []
    if texts.instance is not None:
        parsed.append(parse_checks(_safe_yaml(texts.instance, "")[0], texts.instance_origin))
    if texts.repo_toml is not None and len(texts.repo_toml.encode()) <= MAX_RULES_FILE_BYTES:
        parsed.append(parse_toml_checks(texts.repo_toml, REPO_CONFIG_FILE))
    if texts.repo_yaml is not None:
        parsed.append(parse_checks(_safe_yaml(texts.repo_yaml, "")[0], REPO_RULES_FILE))
    merged: dict[str, Check] = {}
    problems: list[str] = []
    for checks, found in parsed:
        problems += found
        for check in checks:
            merged.pop(check.name, None)
            merged[check.name] = check
    return tuple(merged.values()), problems


# --- the formats -----------------------------------------------------------------------------


def parse_yaml_rules(text: str, origin: str, source: RuleSource) -> tuple[list[Rule], list[str]]:
    """The rules of a reviewbot rules file (``rules:`` a list of rules) and its problems."""
    data, problem = _safe_yaml(text, origin)
    if problem:
        return [], [problem]
    return _rule_list(data, origin, source, "rules", RULE_KEYS, _rule_from)


def parse_duo_rules(text: str, origin: str = DUO_RULES_FILE) -> tuple[list[Rule], list[str]]:
    """GitLab Duo's review instructions, as Duo reads them (``instructions:`` a list)."""
    data, problem = _safe_yaml(text, origin)
    if problem:
        return [], [problem]
    return _rule_list(data, origin, RuleSource.DUO, "instructions", DUO_KEYS, _duo_rule_from)


def parse_toml_rules(
    text: str, origin: str = REPO_CONFIG_FILE, source: RuleSource = RuleSource.REPOSITORY
) -> tuple[list[Rule], list[str]]:
    """The ``[[rules]]`` array of ``.reviewbot.toml`` (top level or under ``[reviewbot]``): a
    repository's, or a group settings project's (``source``)."""
    if len(text.encode()) > MAX_RULES_FILE_BYTES:
        return [], [f"ignored the rules of {origin}: larger than {MAX_RULES_FILE_BYTES:,} bytes"]
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        return [], []  # reviewbot.repo_policy reports a broken .reviewbot.toml
    nested = data.get("reviewbot")
    table = nested if isinstance(nested, dict) and "rules" in nested else data
    if "rules" not in table:
        return [], []
    return _rule_list(table, origin, source, "rules", RULE_KEYS, _rule_from, settings_too=True)


def context_rule(entry: str, text: str) -> tuple[Rule | None, list[str]]:
    """A rule of every file made of ``entry``'s document (``PATH#Section``: that section)."""
    path, _, section = entry.partition("#")
    body = _section(text, section.strip()) if section.strip() else text
    if body is None:
        return None, [f"ignored {_shown(entry)}: {_shown(path)} has no section {_shown(section)}"]
    body, problems = body.strip(), []
    if not body:
        return None, [f"ignored {_shown(entry)}: it is empty"]
    if len(body) > MAX_CONTEXT_CHARS:
        body = body[:MAX_CONTEXT_CHARS] + "\n… (cut)"
        problems.append(f"{_shown(entry)} cut to its first {MAX_CONTEXT_CHARS:,} characters")
    return Rule(entry[:MAX_NAME_CHARS], RuleSource.CONTEXT, path, body), problems


def _section(text: str, title: str) -> str | None:
    """The Markdown section under the heading ``title`` (any level, case ignored), up to the
    next heading of the same or a higher level; None when there is no such heading."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        heading = HEADING.match(line)
        if heading and heading[2].strip().casefold() == title.casefold():
            level = len(heading[1])
            end = next(
                (
                    later
                    for later in range(index + 1, len(lines))
                    if (other := HEADING.match(lines[later])) and len(other[1]) <= level
                ),
                len(lines),
            )
            return "\n".join(lines[index + 1 : end])
    return None


def _safe_yaml(text: str, origin: str) -> tuple[Any, str | None]:
    """``yaml.safe_load`` of ``text`` after the size, alias and depth checks."""
    if len(text.encode()) > MAX_RULES_FILE_BYTES:
        return None, f"ignored {origin}: larger than {MAX_RULES_FILE_BYTES:,} bytes"
    try:
        depth = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                return None, f"ignored {origin}: YAML aliases (*name) are not allowed here"
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    return None, f"ignored {origin}: nested deeper than {MAX_YAML_DEPTH} levels"
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        return yaml.safe_load(text), None
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        at = f" (line {where.line + 1})" if where is not None else ""
        reason = " ".join(str(getattr(error, "problem", None) or error).split())
        return None, f"ignored {origin}: not valid YAML{at}: {reason}"


RuleBuilder = Callable[[Mapping[str, Any], str, RuleSource, int], tuple[Rule | None, list[str]]]


def _rule_list(
    data: Any,
    origin: str,
    source: RuleSource,
    key: str,
    allowed: frozenset[str],
    build: RuleBuilder,
    *,
    settings_too: bool = False,  # a .reviewbot.toml: its other keys are settings
) -> tuple[list[Rule], list[str]]:
    if data is None:
        return [], []
    if not isinstance(data, dict):
        return [], [f"ignored {origin}: expected a mapping with `{key}:`, got {_kind(data)}"]
    problems = [
        f"{origin}: unknown key {_shown(str(name))} ignored (allowed: {key})"
        for name in data
        if name != key and not settings_too
    ]
    items = data.get(key)
    if items is None:
        return [], problems
    if not isinstance(items, list):
        return [], [*problems, f"ignored {origin}: `{key}` must be a list, got {_kind(items)}"]
    if len(items) > MAX_RULES:
        problems.append(f"{origin}: only the first {MAX_RULES} of {len(items)} rules are used")
    rules: dict[str, Rule] = {}
    for number, item in enumerate(items[:MAX_RULES], 1):
        if not isinstance(item, dict):
            problems.append(
                f"{origin}: rule {number} ignored: expected a mapping, got {_kind(item)}"
            )
            continue
        if is_check_entry(item) and source is not RuleSource.DUO:
            continue  # a check, not a rule for the prompt (reviewbot.rules.checks)
        unknown = sorted(str(name) for name in item if name not in allowed)
        if unknown:
            names = ", ".join(_shown(name) for name in unknown)
            problems.append(
                f"{origin}: rule {number} ignored: unknown key {names} "
                f"(allowed: {', '.join(sorted(allowed))})"
            )
            continue
        rule, found = build(item, origin, source, number)
        problems += found
        if rule is None:
            continue
        if rule.name in rules:
            problems.append(
                f"{origin}: rule {_shown(rule.name)} is defined twice; the last is used"
            )
        rules[rule.name] = rule
    return list(rules.values()), problems


def _rule_from(
    item: Mapping[str, Any], origin: str, source: RuleSource, number: int
) -> tuple[Rule | None, list[str]]:
    where = f"{origin}: rule {number}"
    name, problem = _text(item.get("name"), "name", where)
    instructions, instructions_problem = _text(item.get("instructions"), "instructions", where)
    paths, paths_problem = _globs(item.get("paths"), "paths", where)
    severity, severity_problem = _enum(item.get("severity"), Severity, "severity", where)
    category, category_problem = _enum(item.get("category"), Category, "category", where)
    problems = [
        p
        for p in (problem, instructions_problem, paths_problem, severity_problem, category_problem)
        if p
    ]
    if problems:
        return None, problems
    return _built(name, source, origin, instructions, paths, severity, category, where)


def _duo_rule_from(
    item: Mapping[str, Any], origin: str, source: RuleSource, number: int
) -> tuple[Rule | None, list[str]]:
    where = f"{origin}: instruction {number}"
    name, problem = _text(item.get("name"), "name", where)
    instructions, instructions_problem = _text(item.get("instructions"), "instructions", where)
    paths, paths_problem = _globs(item.get("fileFilters"), "fileFilters", where)
    problems = [p for p in (problem, instructions_problem, paths_problem) if p]
    if problems:
        return None, problems
    return _built(name, source, origin, instructions, paths, None, None, where)


def _built(
    name: str,
    source: RuleSource,
    origin: str,
    instructions: str,
    paths: tuple[str, ...],
    severity: Severity | None,
    category: Category | None,
    where: str,
) -> tuple[Rule | None, list[str]]:
    problems = []
    if len(name) > MAX_NAME_CHARS:
        return None, [f"{where} ignored: its name is longer than {MAX_NAME_CHARS} characters"]
    if len(instructions) > MAX_RULE_CHARS:
        instructions = instructions[:MAX_RULE_CHARS] + "\n… (cut)"
        problems.append(
            f"{where} ({_shown(name)}): instructions cut to {MAX_RULE_CHARS:,} characters"
        )
    return Rule(name, source, origin, instructions, paths, severity, category), problems


def _text(value: Any, key: str, where: str) -> tuple[str, str | None]:
    if value is None:
        return "", f"{where} ignored: `{key}` is missing"
    if not isinstance(value, str):
        return "", f"{where} ignored: `{key}` must be text, got {_kind(value)}"
    text = " ".join(value.split()) if key == "name" else value.strip()
    if not text:
        return "", f"{where} ignored: `{key}` is empty"
    return text, None


def _globs(value: Any, key: str, where: str) -> tuple[tuple[str, ...], str | None]:
    if value is None:
        return (), None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(glob, str) for glob in value):
        return (), f"{where} ignored: `{key}` must be a list of globs, got {_kind(value)}"
    if len(value) > MAX_GLOBS:
        return (), f"{where} ignored: more than {MAX_GLOBS} globs in `{key}`"
    for glob in value:
        problem = glob_problem(glob)
        if problem:
            return (), f"{where} ignored: glob {_shown(glob)} {problem}"
    return tuple(glob.strip() for glob in value), None


def _enum(value: Any, kind: type[StrEnum], key: str, where: str) -> tuple[Any, str | None]:
    if value is None:
        return None, None
    try:
        return kind(value), None
    except ValueError:
        allowed = ", ".join(member.value for member in kind)
        return None, f"{where} ignored: `{key}` must be one of {allowed}, got {_shown(str(value))}"


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "text"}.get(type(value), type(value).__name__)


def _shown(text: str) -> str:
    one_line = " ".join(str(text).split())
    cut = one_line if len(one_line) <= MAX_SHOWN_CHARS else one_line[:MAX_SHOWN_CHARS] + "…"
    return "`" + cut.replace("`", "'") + "`"


# --- globs (matched by reviewbot.rules.pathglob) --------------------------------------------------


def unmatched_globs(rule_set: RuleSet, paths: Iterable[str]) -> list[str]:
    """A problem per include glob that matches none of ``paths`` (the repository's files).
    Only the paths that start with a glob's literal prefix are tried (a sorted list, bisected):
    a repository of 100,000 files is not matched 100,000 times per glob."""
    known = sorted(paths)
    problems = []
    for rule in rule_set.rules:
        for glob in rule.paths:
            if not glob.startswith("!") and not _matches_any(glob, known):
                problems.append(
                    f"rule {_shown(rule.name)} ({rule.origin}): glob {_shown(glob)} matches no "
                    "file of the repository at the target branch"
                )
    return problems


def _matches_any(glob: str, known: list[str]) -> bool:
    prefix = re.split(r"[*?\[]", glob.strip().lstrip("/"), maxsplit=1)[0]
    start = bisect.bisect_left(known, prefix)
    for path in known[start:]:
        if not path.startswith(prefix):
            return False
        if glob_matches(glob, path):
            return True
    return False


# --- matching and the budget -----------------------------------------------------------------


def rules_for_paths(rule_set: RuleSet, paths: Iterable[str]) -> tuple[Rule, ...]:
    """The rules that apply to at least one of ``paths``, in merge order."""
    wanted = list(paths)
    return tuple(rule for rule in rule_set.rules if any(rule.applies_to(p) for p in wanted))


def fit_rules(
    rules: Sequence[Rule], cost: Callable[[Sequence[Rule]], int], budget: int
) -> tuple[tuple[Rule, ...], tuple[Rule, ...]]:
    """The rules (in order) whose rendered block ``cost`` stays within ``budget`` tokens, and
    those dropped for lack of room. A rule that does not fit is skipped and the later, smaller
    ones are still tried."""
    kept: list[Rule] = []
    dropped: list[Rule] = []
    for rule in rules:
        if budget > 0 and cost([*kept, rule]) <= budget:
            kept.append(rule)
        else:
            dropped.append(rule)
    return tuple(kept), tuple(dropped)
