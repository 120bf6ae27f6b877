"""Path globs (reviewbot.rules.pathglob): the same answers as the regular expressions they used to
be translated into, in time linear in the path's length (issue 32).

The reference below is the translation reviewbot used before (``rules._translate``), kept
here as the oracle: on small globs and paths, where its backtracking cannot blow up, the
automaton must answer exactly as it did. A hostile glob over a long path is counted in the
automaton's steps (at most ``len(path) × nodes``) and guarded by a timeout, never timed.
More glob semantics on plain cases: tests/test_rules.py.
"""

from __future__ import annotations

import re
import warnings

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reviewbot.learnings.learning import LearningError, checked_globs
from reviewbot.rules.pathglob import (
    MAX_GLOB_CHARS,
    MAX_GLOB_STARS,
    compiled_glob,
    glob_matches,
    glob_problem,
)
from reviewbot.rules.ruleset import RuleSource, parse_yaml_rules
from tests.hypothesis_profiles import examples

HOSTILE_SEGMENTS = "**/" * 12 + "x?"  # 12 `**/`: the old regex nests 12 `(?:[^/]*/)*`
HOSTILE_STARS = "*a" * 12 + "b*"  # 12 `[^/]*a`, and no "b" in the path
HOSTILE_TIMEOUT_S = 30  # a guard against a hang; the matches take milliseconds
SMALL_EXAMPLES = 2000
LINEAR_RATIO = 2.1  # twice the path, at most twice the steps (and the first few characters)


# -- the reference: the regular expression a glob was translated into before ------------------


def reference_matches(glob: str, path: str) -> bool:
    pattern = glob.strip().lstrip("/")
    if pattern.endswith("/"):
        pattern += "**"
    with warnings.catch_warnings():
        # A class such as [?--] makes Python warn that a future version may read "--" as a
        # set difference; the reference is today's reading, which the automaton keeps.
        warnings.simplefilter("ignore", FutureWarning)
        compiled = re.compile(_translate(pattern), re.DOTALL)
    return compiled.fullmatch(path) is not None


def _translate(glob: str) -> str:
    out, index = [], 0
    while index < len(glob):
        if glob.startswith("**/", index):
            out.append("(?:[^/]*/)*")
            index += 3
        elif glob.startswith("/**", index) and index + 3 == len(glob):
            out.append("/.*")
            index += 3
        elif glob.startswith("**", index):
            out.append(".*")
            index += 2
        elif glob[index] == "*":
            out.append("[^/]*")
            index += 1
        elif glob[index] == "?":
            out.append("[^/]")
            index += 1
        elif glob[index] == "[" and (end := _class_end(glob, index)) > 0:
            out.append(_class(glob[index + 1 : end]))
            index = end + 1
        else:
            out.append(re.escape(glob[index]))
            index += 1
    return "".join(out)


def _class_end(glob: str, start: int) -> int:
    index = start + 1
    if index < len(glob) and glob[index] in "!^":
        index += 1
    if index < len(glob) and glob[index] == "]":
        index += 1
    end = glob.find("]", index)
    return -1 if end < 0 or "/" in glob[start:end] else end


def _class(body: str) -> str:
    negated = body[:1] in ("!", "^")
    members = body[1:] if negated else body
    escaped = "".join("\\" + char if char in "\\^[]" else char for char in members)
    return f"[^/{escaped}]" if negated else f"[{escaped}]"


# -- the same answers ---------------------------------------------------------------------------

small_globs = st.text(alphabet="ab./*?[]!^-\\\n", max_size=8)
small_paths = st.text(alphabet="ab./-\n", max_size=10)


@pytest.mark.slow
@given(small_globs, small_paths)
@settings(max_examples=examples(SMALL_EXAMPLES), deadline=None)
@example("**/a", "b/a")
@example("a/**", "a/")
@example("a**b", "a/x/b")
@example("[!a]", "/")
@example("[]a]", "]")
@example("[a-]", "-")
@example("/a/", "a/b")
@example("**/", "b/")
@example("*/**/", "a//")
def test_the_automaton_answers_as_the_regular_expression_did(glob: str, path: str) -> None:
    try:
        expected = reference_matches(glob, path)
    except re.error:  # a class Python could not read ([b-a]): it raised, now matches nothing
        assert glob_matches(glob, path) is False
        assert glob_problem(glob) is not None
        return
    assert glob_matches(glob, path) is expected


@pytest.mark.slow
@given(
    st.lists(st.sampled_from(["**/", "*", "**", "?", "a", "b", "/", "[ab]", "[!a]"]), max_size=6),
    st.lists(st.sampled_from(["a", "b", "/", "ab", "ba/"]), max_size=6),
)
@settings(max_examples=examples(SMALL_EXAMPLES), deadline=None)
def test_globs_built_of_wildcards_answer_as_the_regular_expression_did(
    parts: list[str], pieces: list[str]
) -> None:
    glob, path = "".join(parts), "".join(pieces)
    assert glob_matches(glob, path) is reference_matches(glob, path)


# -- linear in the path's length ---------------------------------------------------------------


@pytest.mark.timeout(HOSTILE_TIMEOUT_S)
@pytest.mark.parametrize(
    ("glob", "unit"),
    [(HOSTILE_SEGMENTS, "a/"), (HOSTILE_STARS, "a"), ("*" * MAX_GLOB_STARS + "b*", "a")],
)
def test_a_hostile_glob_costs_steps_linear_in_the_path(glob: str, unit: str) -> None:
    compiled = compiled_glob(glob)
    short, long = unit * 500 + "yz", unit * 1000 + "yz"
    assert not glob_matches(glob, short) and not glob_matches(glob, long)
    assert compiled.steps(long) <= len(long) * len(compiled.nodes)
    assert compiled.steps(long) / compiled.steps(short) < LINEAR_RATIO  # twice the path


@pytest.mark.timeout(HOSTILE_TIMEOUT_S)
def test_a_hostile_glob_over_a_deep_path_answers_in_steps_not_in_minutes() -> None:
    path = "a/" * 2000 + "x"
    assert glob_matches(HOSTILE_SEGMENTS, path + "y")
    assert not glob_matches(HOSTILE_SEGMENTS, path + "/y")
    assert compiled_glob(HOSTILE_SEGMENTS).steps(path + "/y") < len(path) * 30


# -- bounded globs ------------------------------------------------------------------------------


def test_a_glob_too_long_or_with_too_many_stars_is_not_usable() -> None:
    assert glob_problem("a" * MAX_GLOB_CHARS) is None
    assert glob_problem("a" * (MAX_GLOB_CHARS + 1)) == f"is longer than {MAX_GLOB_CHARS} characters"
    assert glob_problem("*" * MAX_GLOB_STARS) is None
    assert glob_problem("**/" * 12 + "x") == f"has more than {MAX_GLOB_STARS} `*`"
    assert glob_problem("[b-a].py") == "has a character class that is not valid ([b-a])"


def test_a_rules_file_or_a_learning_with_a_hostile_glob_is_refused_with_the_reason() -> None:
    text = f"rules:\n  - name: deep\n    paths: ['{'**/' * 12}x']\n    instructions: x\n"
    rules, problems = parse_yaml_rules(text, ".reviewbot/rules.yaml", RuleSource.REPOSITORY)
    assert rules == [] and f"has more than {MAX_GLOB_STARS} `*`" in problems[0]
    with pytest.raises(LearningError, match="has more than"):
        checked_globs(["*a" * 17 + "b"])
