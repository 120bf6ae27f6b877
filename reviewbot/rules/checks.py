"""Named checks: a rule of the rules file that is answered pass or fail for the whole MR (pure).

A check is an entry of ``rules:`` (in the instance's rules file, ``.reviewbot/rules.yaml`` or
the ``[[rules]]`` of ``.reviewbot.toml``) with a ``check:`` key instead of ``instructions``::

    rules:
      - name: payments-clean
        paths: ["src/payments/**"]
        check:
          no_findings: {min_severity: major}
      - name: no-secrets
        check: {no_secrets: true}
      - name: ruff-clean
        check: {no_new_analyzer_findings: ruff}
      - name: migrations-reversible
        paths: ["migrations/**"]
        check:
          ask: Does every new migration define a working downgrade?

``check:`` holds exactly one condition of a closed vocabulary (:class:`CheckKind`); the first
three are judged from the review's own data (``reviewbot.rules.check_verdicts``), ``ask`` by
the model. A bad check is a problem naming the check and the field, like any bad rule; the
other checks and rules still apply. Duo's file has no checks.

Owns: :class:`Check`, its vocabulary and the parsing and validation of check entries. Must not:
judge a check (``reviewbot.rules.check_verdicts``) or read a file.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from reviewbot.findings import Category, Severity
from reviewbot.rules.pathglob import glob_matches, glob_problem

__all__ = [
    "CHECK_KEY",
    "Check",
    "CheckKind",
    "check_entries",
    "is_check_entry",
    "parse_checks",
    "parse_toml_checks",
]

CHECK_KEY = "check"
CHECK_ENTRY_KEYS = frozenset({"name", "paths", CHECK_KEY})
MAX_CHECKS = 50  # checks per file: each is a line of a commit status description and the summary
MAX_QUESTION_CHARS = 1_000  # an `ask:` question
MAX_CHECK_NAME_CHARS = 100
MAX_CHECK_GLOBS = 50
MAX_TOOL_CHARS = 100
MAX_SHOWN_CHARS = 60


class CheckKind(StrEnum):
    """The conditions a check may hold (the closed vocabulary of ``check:``)."""

    NO_FINDINGS = "no_findings"  # no finding at or above a severity in the check's paths
    NO_SECRETS = "no_secrets"  # no added line holds a secret; no scanner/model reports one
    NO_NEW_ANALYZER_FINDINGS = "no_new_analyzer_findings"  # analyzer TOOL reported nothing
    ASK = "ask"  # a question the model answers from the chunks


NO_FINDINGS_KEYS = frozenset({"min_severity", "categories"})


@dataclass(frozen=True)
class Check:
    """One named check: the files it is about and its pass condition."""

    name: str
    origin: str  # the file it was read from
    kind: CheckKind
    paths: tuple[str, ...] = ()  # globs; "!" excludes; none: every file
    min_severity: Severity = Severity.INFO  # no_findings: this severity or worse fails
    categories: frozenset[Category] | None = None  # no_findings: only these (None: all)
    tool: str = ""  # no_new_analyzer_findings: the analyzer's name
    question: str = ""  # ask: what the model is asked

    @property
    def model_judged(self) -> bool:
        return self.kind is CheckKind.ASK

    def applies_to(self, path: str) -> bool:
        includes = [glob for glob in self.paths if not glob.startswith("!")]
        excludes = [glob[1:] for glob in self.paths if glob.startswith("!")]
        included = not includes or any(glob_matches(glob, path) for glob in includes)
        return included and not any(glob_matches(glob, path) for glob in excludes)

    def condition(self) -> str:
        """The condition in words, for the summary."""
        where = f" in {', '.join(self.paths)}" if self.paths else ""
        if self.kind is CheckKind.NO_FINDINGS:
            kinds = f" ({', '.join(sorted(self.categories))})" if self.categories else ""
            return f"no finding of severity {self.min_severity.value} or worse{kinds}{where}"
        if self.kind is CheckKind.NO_SECRETS:
            return f"no secret added{where}"
        if self.kind is CheckKind.NO_NEW_ANALYZER_FINDINGS:
            return f"analyzer {self.tool} reported nothing{where}"
        return f"the model answers yes: {self.question}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "origin": self.origin,
            "kind": self.kind.value,
            "paths": list(self.paths),
            "condition": self.condition(),
        }


def is_check_entry(item: object) -> bool:
    """Whether a ``rules:`` entry is a check (it has ``check:``), not a prompt rule."""
    return isinstance(item, dict) and CHECK_KEY in item


def check_entries(data: Any) -> list[Any]:
    """The ``rules:`` entries of parsed rules-file data that are checks (else none)."""
    if isinstance(data, dict) and isinstance(data.get("reviewbot"), dict):
        nested = data["reviewbot"]
        data = nested if "rules" in nested else data
    items = data.get("rules") if isinstance(data, dict) else None
    return [item for item in items if is_check_entry(item)] if isinstance(items, list) else []


def parse_checks(data: Any, origin: str) -> tuple[list[Check], list[str]]:
    """The checks among the ``rules:`` entries of parsed ``data`` and a problem per bad one."""
    entries = check_entries(data)
    problems: list[str] = []
    if len(entries) > MAX_CHECKS:
        problems.append(f"{origin}: only the first {MAX_CHECKS} of {len(entries)} checks are used")
    checks: dict[str, Check] = {}
    for number, entry in enumerate(entries[:MAX_CHECKS], 1):
        check, problem = _check_from(entry, origin, number)
        if problem:
            problems.append(problem)
            continue
        assert check is not None
        if check.name in checks:
            problems.append(
                f"{origin}: check {_shown(check.name)} is defined twice; the last is used"
            )
        checks[check.name] = check
    return list(checks.values()), problems


def parse_toml_checks(text: str, origin: str) -> tuple[list[Check], list[str]]:
    """The checks of ``.reviewbot.toml``'s ``[[rules]]`` (a broken file: none; its problem is
    reported by reviewbot.repo_policy)."""
    try:
        return parse_checks(tomllib.loads(text), origin)
    except (tomllib.TOMLDecodeError, RecursionError):
        return [], []


def _check_from(entry: Mapping[str, Any], origin: str, number: int) -> tuple[Check | None, str]:
    name = entry.get("name")
    label = f"check {_shown(name)}" if isinstance(name, str) and name.strip() else f"check {number}"
    where = f"{origin}: {label} ignored"
    unknown = sorted(str(key) for key in entry if key not in CHECK_ENTRY_KEYS)
    if unknown:
        allowed = ", ".join(sorted(CHECK_ENTRY_KEYS))
        return None, f"{where}: unknown key {', '.join(map(_shown, unknown))} (allowed: {allowed})"
    if not isinstance(name, str) or not name.strip():
        return None, f"{where}: `name` is missing or not text"
    name = " ".join(name.split())
    if len(name) > MAX_CHECK_NAME_CHARS:
        return None, f"{where}: `name` is longer than {MAX_CHECK_NAME_CHARS} characters"
    paths, problem = _paths(entry.get("paths"))
    if problem:
        return None, f"{where}: `paths` {problem}"
    condition = entry.get(CHECK_KEY)
    if not isinstance(condition, dict) or len(condition) != 1:
        kinds = ", ".join(kind.value for kind in CheckKind)
        return None, f"{where}: `check` must be a mapping with exactly one of {kinds}"
    ((key, value),) = condition.items()
    try:
        kind = CheckKind(str(key))
    except ValueError:
        kinds = ", ".join(kind.value for kind in CheckKind)
        return None, f"{where}: `check.{_plain(key)}` is not a condition (one of {kinds})"
    check, problem = _condition(Check(name, origin, kind, paths), value)
    return (None, f"{where}: `check.{kind.value}` {problem}") if problem else (check, "")


def _condition(check: Check, value: Any) -> tuple[Check, str]:
    """``check`` with its condition's arguments, or a problem with them."""
    if check.kind is CheckKind.NO_SECRETS:
        return check, "" if value is True else "must be `true`"
    if check.kind is CheckKind.NO_NEW_ANALYZER_FINDINGS:
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_TOOL_CHARS:
            return check, f"must be an analyzer's name (text, at most {MAX_TOOL_CHARS} characters)"
        return _with(check, tool=value.strip()), ""
    if check.kind is CheckKind.ASK:
        if not isinstance(value, str) or not value.strip():
            return check, "must be a question (text)"
        if len(value) > MAX_QUESTION_CHARS:
            return check, f"is longer than {MAX_QUESTION_CHARS} characters"
        return _with(check, question=" ".join(value.split())), ""
    return _no_findings(check, value)


def _no_findings(check: Check, value: Any) -> tuple[Check, str]:
    if value is True:
        return check, ""
    if not isinstance(value, dict):
        return check, "must be `true` or a mapping of min_severity, categories"
    unknown = sorted(str(key) for key in value if key not in NO_FINDINGS_KEYS)
    if unknown:
        allowed = ", ".join(sorted(NO_FINDINGS_KEYS))
        return check, f"has unknown key {', '.join(map(_shown, unknown))} (allowed: {allowed})"
    severity = check.min_severity
    if "min_severity" in value:
        try:
            severity = Severity(str(value["min_severity"]))
        except ValueError:
            allowed = ", ".join(s.value for s in Severity)
            return check, f"`min_severity` must be one of {allowed}"
    categories = None
    if "categories" in value:
        raw = value["categories"]
        raw = [raw] if isinstance(raw, str) else raw
        try:
            categories = frozenset(Category(str(item)) for item in raw)
        except (TypeError, ValueError):
            allowed = ", ".join(c.value for c in Category)
            return check, f"`categories` must be a list of {allowed}"
    return _with(check, min_severity=severity, categories=categories), ""


def _with(check: Check, **changes: Any) -> Check:
    return replace(check, **changes)


def _paths(value: Any) -> tuple[tuple[str, ...], str]:
    if value is None:
        return (), ""
    value = [value] if isinstance(value, str) else value
    if not isinstance(value, list) or not all(isinstance(glob, str) for glob in value):
        return (), "must be a list of globs"
    if len(value) > MAX_CHECK_GLOBS:
        return (), f"has more than {MAX_CHECK_GLOBS} globs"
    for glob in value:
        problem = glob_problem(glob)
        if problem:
            return (), f"glob {_shown(glob)} {problem}"
    return tuple(glob.strip() for glob in value), ""


def _plain(key: Any) -> str:
    return " ".join(str(key).split())[:MAX_SHOWN_CHARS].replace("`", "'")


def _shown(text: Any) -> str:
    return "`" + _plain(text) + "`"
