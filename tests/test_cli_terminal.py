"""What the commands print is data shown as written: rich markup, emoji codes and terminal
control sequences from the database, GitLab or a server are never obeyed (issue 17, D6).

Hostile strings (tests/hostile_text.py: rich markup such as ``[bold red]x[/]`` and
``[link=...]``, ``:smile:``, OSC 8 hyperlinks, ``\\x1b[2J``, C1 CSI, BEL, CR, and the HTML,
Markdown and Unicode families) are written through the Store and the job queue; ``reviews
list``, ``reviews show``, ``jobs list`` and ``jobs show`` run as a user runs them (click's
runner, output to a pipe, where rich itself writes no escape sequence). The output must show
every word of each string's visible form (`terminal.terminal_text`: what a terminal would act
on replaced by U+FFFD), so ``[bold]`` and ``:smile:`` appear literally, and hold no control
character but tab and line feed. The renderers of the other commands (doctor's checks, eval's
scores) and the one error line are held to the same rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from reviewbot.commands import main
from reviewbot.commands.render import print_eval
from reviewbot.commands.render import shown as shown_value
from reviewbot.commands.render_ops import print_checks
from reviewbot.commands.terminal import console, terminal_text
from reviewbot.ops.doctor import Check, Status
from reviewbot.queue import JobQueue
from reviewbot.store import Store
from reviewbot.store.models import Base
from tests.hostile_text import hostile_terminal_text, storable
from tests.hypothesis_profiles import examples
from tests.store_fixtures import migrated_store, store_url  # noqa: F401

pytestmark = pytest.mark.slow  # measured: see docs/development.md

# Anything a terminal acts on: every C0 control but tab and line feed (ESC, BEL, CR,
# backspace...), DEL and the C1 controls (U+009B is CSI, U+009D is OSC).
TERMINAL_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Short enough that no table is wider than a pipe's 200 columns: no cell wraps a word.
MAX_SHOWN_CELLS = 24
EXAMPLES = 20
DATABASE_EXAMPLES = 15  # each runs four commands
LEASE_S = 600.0

shown_text = hostile_terminal_text.filter(
    lambda text: cell_len(terminal_text(text)) <= MAX_SHOWN_CELLS
)


def assert_shown_as_written(output: str, texts: list[Any]) -> None:
    """Every word of each text's visible form is in ``output``; no control sequence is."""
    found = TERMINAL_CONTROL.search(output)
    assert found is None, f"{found.group()!a} in the output: {output!a}"
    for text in texts:
        for word in terminal_text(text).split():
            assert word in output, f"{word!a} (of {text!a}) is not shown: {output!a}"


@dataclass(frozen=True)
class Rows:
    review: dict[str, str]
    finding: dict[str, str]
    outcome: str
    job: dict[str, str]
    worker: str
    error: str


@st.composite
def hostile_rows(draw: st.DrawFn) -> Rows:
    def texts(*names: str) -> dict[str, str]:
        return {name: draw(shown_text) for name in names}

    return Rows(
        review=texts("project", "model", "prompt_version", "head_sha", "error", "gitlab_url"),
        finding=texts("path", "title", "severity", "category", "discussion_id"),
        outcome=draw(shown_text),
        job=texts("project", "head_sha", "dedupe_key"),
        worker=draw(shown_text),
        error=draw(shown_text),
    )


def _fit(store: Store, text: str, length: int) -> str:
    return storable(text, store.engine.dialect.name, length)


def _store_review(store: Store, rows: Rows) -> int:
    review = {name: _fit(store, text, 32) for name, text in rows.review.items()}
    review_id = store.start_review(
        project=review["project"],
        mr_iid=1,
        head_sha=review["head_sha"],
        base_sha=None,
        start_sha=None,
        trigger="cli",
        model=review["model"],
        prompt_version=review["prompt_version"],
    )
    call = {"chunk_index": 0, "mode": "tool_calls", "outcome": _fit(store, rows.outcome, 32)}
    store.record_llm_calls(review_id, [{**call, "started_at": datetime.now(UTC)}])
    finding = {name: _fit(store, text, 32) for name, text in rows.finding.items()}
    base = {"fingerprint": "fp", "side": "new", "line": 3, "body": "b", "anchor": "exact"}
    store.record_findings(review_id, [{**base, **finding, "state": "posted", "note_id": None}])
    store.finish_review(review_id, status="failed", error=review["error"])
    return review_id


def _store_jobs(store: Store, rows: Rows) -> None:
    queue = JobQueue(store)
    job = {name: _fit(store, text, 32) for name, text in rows.job.items()}
    queue.enqueue(mr_iid=1, trigger="webhook", **job)
    assert queue.claim(_fit(store, rows.worker, 32), LEASE_S) is not None
    second = queue.enqueue(project="group/app", mr_iid=2, head_sha=None, trigger="cli")
    assert queue.claim("worker-2", LEASE_S) is not None
    queue.fail(second.job_id, "worker-2", _fit(store, rows.error, 255), retryable=False)


def _wipe(store: Store) -> None:
    with store.engine.begin() as connection:
        for table in reversed(Base.metadata.sorted_tables):
            connection.execute(table.delete())


def _shown(store_url: str, *args: str) -> str:  # noqa: F811
    result = CliRunner().invoke(main, [*args, "--database-url", store_url])
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture
def store(migrated_store: Store) -> Iterator[Store]:  # noqa: F811
    yield migrated_store


def test_hostile_text_from_the_database_is_shown_as_written(
    store: Store,
    store_url: str,  # noqa: F811
) -> None:
    @settings(
        max_examples=examples(DATABASE_EXAMPLES),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(rows=hostile_rows())
    def check(rows: Rows) -> None:
        try:
            review_id = _store_review(store, rows)
            _store_jobs(store, rows)
            review = store.review(review_id)
            [finding] = store.findings(review_id)
            [call] = store.llm_calls(review_id)
            [first, second] = sorted(JobQueue(store).list(), key=lambda job: job.id)
            listed = [review["project"], review["model"], review["head_sha"][:8]]
            assert_shown_as_written(_shown(store_url, "reviews", "list"), listed)
            # strings as written; None, floats and times as `reviews show` formats them
            fields = [shown_value(value) for value in review.values()]
            shown = [*fields, call["outcome"], *(finding[n] for n in rows.finding)]
            assert_shown_as_written(_shown(store_url, "reviews", "show", str(review_id)), shown)
            jobs = [first.project, (first.head_sha or "")[:12], first.lease_owner]
            jobs += [(second.error or "-").splitlines()[0]]
            assert_shown_as_written(_shown(store_url, "jobs", "list"), jobs)
            one = [first.project, first.head_sha, first.lease_owner, first.dedupe_key]
            assert_shown_as_written(_shown(store_url, "jobs", "show", str(first.id)), one)
            failed = [second.error]
            assert_shown_as_written(_shown(store_url, "jobs", "show", str(second.id)), failed)
        finally:
            _wipe(store)

    check()


def test_markup_in_a_project_path_is_printed_not_obeyed(
    store: Store,
    store_url: str,  # noqa: F811
) -> None:
    """The audit's example, one by one: each was styled, linked, turned into an emoji or
    sent to the terminal as a control sequence."""
    path = "[bold red]x[/] [link=https://e.example]L[/link] :smile: \x1b]8;;https://e\x07Z"
    path += " \x1b[2J a\rb \x07 \x9b31m"
    store.start_review(
        project=path,
        mr_iid=1,
        head_sha="a" * 40,
        base_sha=None,
        start_sha=None,
        trigger="cli",
        model="qwen",
        prompt_version="v1",
    )
    output = _shown(store_url, "reviews", "list")
    assert "[bold red]x[/]" in output and "[link=https://e.example]L[/link]" in output
    assert ":smile:" in output and "\N{SMILING FACE WITH OPEN MOUTH AND SMILING EYES}" not in output
    assert "\ufffd]8;;https://e\ufffdZ" in output and "\ufffd[2J" in output
    assert "a\ufffdb" in output and "\ufffd31m" in output
    assert TERMINAL_CONTROL.search(output) is None


@settings(max_examples=examples(EXAMPLES), deadline=None)
@given(name=shown_text, detail=hostile_terminal_text, fix=hostile_terminal_text)
@example(name="x", detail="x", fix="\t0")  # CI found it: a tab pushed '0' out of the fix cell
def test_doctor_shows_what_a_server_answered_as_written(name: str, detail: str, fix: str) -> None:
    """A check's finding quotes servers (a model name, an error text): `print_checks`."""
    checks = [Check(name, status, detail, fix) for status in Status]
    out = console(tables=True)
    with out.capture() as captured:
        print_checks(checks, out)
    assert_shown_as_written(captured.get(), [name, detail, fix])


@settings(max_examples=examples(EXAMPLES), deadline=None)
@given(item=shown_text, category=shown_text, model=hostile_terminal_text)
def test_eval_shows_item_names_and_models_as_written(item: str, category: str, model: str) -> None:
    scores = {"tp": 1, "fp": 0, "fn": 0, "precision": 1.0, "recall": 1.0, "f1": 1.0}
    document = {
        "items": [{"item": item, **scores}],
        "total": scores,
        "mean": scores,
        "categories": [{"category": category, "tp": 1, "fp": 0, "precision": 1.0}],
        "model": model,
        "prompt_version": "v1",
        "tolerance": 3,
        "run_id": 1,
    }
    out = console(tables=True)
    with out.capture() as captured:
        print_eval(document, out)
    assert_shown_as_written(captured.get(), [item, category, model])


@settings(max_examples=examples(EXAMPLES), deadline=None)
@given(message=hostile_terminal_text)
def test_an_error_line_quoting_data_is_one_line_of_text(message: str) -> None:
    """`fail` (every command's one error line) quotes GitLab's and the database's errors."""
    import click

    from reviewbot.commands.common import fail

    result = CliRunner().invoke(click.command("x")(lambda: fail(message.replace("\n", " "), 1)))
    assert result.exit_code == 1
    assert_shown_as_written(result.stderr, [message.replace("\n", " ")])
    assert result.stderr.count("\n") == 1
