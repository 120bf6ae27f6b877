"""The compact repository tool (issue 34 part 2): one ``repo(cmd)`` whose command line reads like
a read-only shell, answered as the typed call it stands for.

Its command line is read by :mod:`reviewbot.repo.command_line`, answered by
:class:`reviewbot.repo.tools.RepositoryTools` in the compact form, and offered by a review
with ``tools = "on"``: a review that calls no tool pays its ~60-token schema, and the fake
model that needs evidence from another file finds the bug through it as through the typed tools.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reviewbot.config import Settings
from reviewbot.repo.command_line import COMMAND_FORMS, CommandProblem, TypedCall, parse_command
from reviewbot.repo.tools import (
    COMPACT_SCHEMA,
    REFUSED,
    REPO_TOOL,
    RepositoryTools,
    ToolForm,
    repository_tool_schemas,
)
from reviewbot.repo.view import MemoryView
from reviewbot.review import offered_tools, review_options
from reviewbot.tokens import QwenBPECounter
from tests.hypothesis_profiles import examples

SHA = "c0ffee" + "0" * 34
FILES = {
    "src/db.py": "import sqlite3\n\n\ndef find_user(name):\n    return None\n",
    "src/app.py": "from db import find_user\n\nuser = find_user('x')\n",
    "README.md": "# demo\n",
}
# the compact schema's budget: 5% of the smallest review prompt of the eval items (issue 34)
MAX_COMPACT_SCHEMA_TOKENS = 63


def tools() -> RepositoryTools:
    return RepositoryTools(MemoryView(SHA, FILES))


def ask(command: object) -> str:
    return tools().answer(REPO_TOOL, json.dumps({"cmd": command}), 4000).text


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cat src/db.py", TypedCall("read_file", {"path": "src/db.py"})),
        ("cat -n src/db.py", TypedCall("read_file", {"path": "src/db.py"})),
        (
            "cat src/db.py:4-5",
            TypedCall("read_file", {"path": "src/db.py", "start_line": 4, "end_line": 5}),
        ),
        (
            "sed -n '4,5p' src/db.py",
            TypedCall("read_file", {"path": "src/db.py", "start_line": 4, "end_line": 5}),
        ),
        (
            "head -n 2 src/db.py",
            TypedCall("read_file", {"path": "src/db.py", "start_line": 1, "end_line": 2}),
        ),
        (
            "head -3 src/db.py",
            TypedCall("read_file", {"path": "src/db.py", "start_line": 1, "end_line": 3}),
        ),
        ("grep -rn find_user", TypedCall("search_code", {"pattern": "find_user", "regex": False})),
        (
            "grep -rnE 'find_\\w+' src/",
            TypedCall("search_code", {"pattern": "find_\\w+", "regex": True, "path_glob": "src/*"}),
        ),
        (
            'grep -e "-x" *.py',
            TypedCall("search_code", {"pattern": "-x", "regex": False, "path_glob": "*.py"}),
        ),
        ("grep -rn user .", TypedCall("search_code", {"pattern": "user", "regex": False})),
        ("ls", TypedCall("list_directory", {"path": ""})),
        ("ls -la ./src/", TypedCall("list_directory", {"path": "src"})),
        ("def Store.find", TypedCall("find_definition", {"symbol": "Store.find"})),
        ("/bin/cat src/db.py", TypedCall("read_file", {"path": "src/db.py"})),
    ],
)
def test_a_command_reads_as_the_typed_call_it_stands_for(command: str, expected: TypedCall) -> None:
    assert parse_command(command) == expected


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("", "non-empty"),
        (None, "non-empty"),
        (42, "non-empty"),
        ("cat src/db.py | grep x", "no pipes"),
        ("cat a; rm -rf /", "no pipes"),
        ("cat a > b", "no pipes"),
        ("cat a&&ls", "no pipes"),
        ("cat a 2>/dev/null", "no pipes"),
        ("rm -rf src", "unknown command 'rm'"),
        ("python -c 'import os'", "unknown command 'python'"),
        ("cat 'unterminated", "cannot split"),
        ("cat a b", "cat reads one FILE"),
        ("sed -i 's/a/b/' src/db.py", "sed -n 'A,Bp' FILE"),
        ("sed -n '1,$p' src/db.py", "is not A,Bp"),
        ("grep -i user", "only -r -n -E -F -e"),
        ("grep", "one TEXT"),
        ("grep a b c", "one TEXT"),
        ("head -n many src/db.py", "number of lines"),
        ("def", "one NAME"),
        ("ls a b", "one DIR"),
        ("cat " + "a" * 2000, "at most"),
        ("cat a\x00b", "without NUL"),
    ],
)
def test_a_command_it_does_not_read_is_refused_with_the_reason_and_the_forms(
    command: object, reason: str
) -> None:
    problem = parse_command(command)
    assert isinstance(problem, CommandProblem) and reason in problem.reason
    assert COMMAND_FORMS in problem.explain()


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_any_command_line_is_read_or_refused_never_raised(command: str) -> None:
    assert isinstance(parse_command(command), TypedCall | CommandProblem)
    answer = ask(command)
    assert answer.startswith('<tool_result tool="repo">') and answer.endswith("</tool_result>")


def test_the_compact_tool_answers_as_the_typed_tools_do_and_names_itself() -> None:
    typed = RepositoryTools(MemoryView(SHA, FILES), form=ToolForm.TYPED)
    arguments = json.dumps({"path": "src/db.py", "start_line": 4, "end_line": 5})
    expected = typed.answer("read_file", arguments, 4000).text
    assert ask("sed -n '4,5p' src/db.py") == expected.replace('tool="read_file"', 'tool="repo"')
    assert "4 | def find_user(name):" in ask("cat src/db.py")
    assert "src/db.py:4-5 (function_definition)" in ask("def find_user")
    assert "src/app.py:3:" in ask("grep -rn find_user src")  # a directory searches below it
    assert "README.md" in ask("ls")


def test_a_refused_command_and_a_typed_name_in_the_compact_form_are_answers_not_errors() -> None:
    assert ask("rm -rf /").startswith(f'<tool_result tool="repo">\n{REFUSED}unknown command')
    assert REFUSED in ask("cat ../../etc/passwd")  # confined as the typed tools are
    answer = tools().answer("read_file", json.dumps({"path": "src/db.py"}), 4000)
    assert answer.refused and "no repository tool named 'read_file'" in answer.text
    missing = tools().answer(REPO_TOOL, "{}", 4000)
    assert missing.refused and "cmd must be a non-empty command" in missing.text


def test_each_form_offers_its_own_names_and_schemas() -> None:
    compact, typed = tools(), RepositoryTools(MemoryView(SHA, FILES), form=ToolForm.TYPED)
    assert compact.names == {REPO_TOOL} and compact.schemas() == [COMPACT_SCHEMA]
    assert typed.names == {"read_file", "search_code", "find_definition", "list_directory"}
    assert [s["function"]["name"] for s in repository_tool_schemas(ToolForm.TYPED)] == [
        "read_file",
        "search_code",
        "find_definition",
        "list_directory",
    ]


def test_the_compact_schema_costs_at_most_five_percent_of_a_small_review() -> None:
    tokens = QwenBPECounter.load().count(json.dumps(COMPACT_SCHEMA, ensure_ascii=False))
    typed = sum(
        QwenBPECounter.load().count(json.dumps(schema, ensure_ascii=False))
        for schema in repository_tool_schemas(ToolForm.TYPED)
    )
    assert tokens <= MAX_COMPACT_SCHEMA_TOKENS < typed // 5


@pytest.mark.parametrize(
    ("setting", "names"),
    [
        ("on", ["report_finding", "repo"]),
        (
            "typed",
            ["report_finding", "read_file", "search_code", "find_definition", "list_directory"],
        ),
        ("off", ["report_finding"]),
    ],
)
def test_the_tools_setting_picks_the_form_a_review_offers(setting: str, names: list[str]) -> None:
    options = review_options(Settings(tools=setting))
    assert [s["function"]["name"] for s in offered_tools(options, with_repository=True)] == names


def test_an_unknown_tools_setting_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="typed"):
        Settings(tools="compact")
