"""Token overhead and parse time of enclosing-scope context on a ~2,000-line merge request.

Run: ``.venv/bin/python -m tests.bench.bench_scope [--files 40 --lines 2000 --seed 7]``.

The merge request is made from real code: this repository's own Python files (``reviewbot/``
and ``tests/``, sorted, so a commit always gives the same input) are edited at seeded random
places inside their functions: blocks of lines rewritten, lines inserted, lines deleted, each
edit kept only if the file still parses. The diff comes from ``difflib`` with git's three lines
of context; the edited text is the head. The benchmark plans it with the default 64K budget
three times: no head contents, head contents with enclosing-scope context off (3 context
lines), and on (the default), and prints what the context costs in tokens, what it did (whole
files, hunks with their scope), and the time spent parsing with tree-sitter.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from reviewbot.chunking import Budget, Plan, PlanOptions, plan
from reviewbot.diff import FileDiff, parse_git_diff
from reviewbot.diffview import head_lines
from reviewbot.scope import SourceOutline
from reviewbot.tokens import TokenCounter, local_counter

__all__ = ["EditedSource", "edit_sources", "main"]

DEFAULT_FILES = 40
DEFAULT_LINES = 2000
DEFAULT_SEED = 7
ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIRECTORIES = ("reviewbot", "tests")
MIN_SOURCE_LINES = 150  # files smaller than this have too few places to edit
EDIT_MIN_LINES = 2
EDIT_MAX_LINES = 14
DELETE_SHARE = 0.15
INSERT_SHARE = 0.35
MAX_EDIT_ATTEMPTS = 400  # per file; an edit that breaks the syntax is dropped, another tried


@dataclass
class EditedSource:
    """A unified diff of edited real files, and the edited (head) text of each."""

    diff: str
    contents: dict[str, str]
    changed_lines: int


def _sources(count: int) -> list[Path]:
    paths = sorted(
        path
        for directory in SOURCE_DIRECTORIES
        for path in (ROOT / directory).rglob("*.py")
        if len(path.read_text(encoding="utf-8").splitlines()) >= MIN_SOURCE_LINES
    )
    return paths[:count]


def _parses(lines: list[str]) -> bool:
    try:
        ast.parse("\n".join(lines))
    except SyntaxError:
        return False
    return True


def _edit(rng: random.Random, lines: list[str], budget: int) -> list[str]:
    """``lines`` with about ``budget`` changed lines, in blocks at indented (function) lines."""
    out = list(lines)
    spent = 0
    for _ in range(MAX_EDIT_ATTEMPTS):
        indented = [i for i, line in enumerate(out) if line.startswith("        ") and line.strip()]
        if spent >= budget or not indented:
            break
        at = rng.choice(indented)
        size = min(rng.randint(EDIT_MIN_LINES, EDIT_MAX_LINES), budget - spent, len(out) - at)
        indent = out[at][: len(out[at]) - len(out[at].lstrip())]
        draw = rng.random()
        edited = list(out)
        if draw < DELETE_SHARE:
            del edited[at : at + size]
        elif draw < DELETE_SHARE + INSERT_SHARE:
            edited[at:at] = [f"{indent}checked_{at}_{i} = limit_{i} - offset" for i in range(size)]
        else:
            edited[at : at + size] = [f"{line.rstrip()}  # edited" for line in out[at : at + size]]
        if _parses(edited):  # a merge request's code compiles
            out = edited
            spent += size * (2 if draw >= DELETE_SHARE + INSERT_SHARE else 1)
    return out


def edit_sources(
    files: int = DEFAULT_FILES, lines: int = DEFAULT_LINES, seed: int = DEFAULT_SEED
) -> EditedSource:
    """About ``lines`` changed lines over ``files`` of this repository's Python files."""
    rng = random.Random(seed)
    paths = _sources(files)
    per_file = max(1, lines // max(1, len(paths)))
    parts: list[str] = []
    contents: dict[str, str] = {}
    for path in paths:
        name = path.relative_to(ROOT).as_posix()
        old = path.read_text(encoding="utf-8").splitlines()
        new = _edit(rng, old, per_file)
        parts += [f"diff --git a/{name} b/{name}\n"]
        parts += [
            line if line.endswith("\n") else line + "\n"
            for line in difflib.unified_diff(old, new, f"a/{name}", f"b/{name}", lineterm="")
        ]
        contents[name] = "\n".join(new) + "\n"
    diff = "".join(parts)
    changed = sum(f.changed_count for f in parse_git_diff(diff))
    return EditedSource(diff, contents, changed)


def _timed_plan(
    files: list[FileDiff], counter: TokenCounter, contents: dict[str, str] | None, scope: int
) -> tuple[Plan, float]:
    started = time.perf_counter()
    result = plan(
        files,
        Budget(headroom=counter.headroom),
        counter,
        contents=contents,
        options=PlanOptions(scope_tokens=scope),
    )
    return result, time.perf_counter() - started


def _parse_seconds(contents: dict[str, str]) -> tuple[float, int]:
    """Seconds to parse every head file with tree-sitter (grammar load included), and bytes."""
    started = time.perf_counter()
    for path, text in contents.items():
        SourceOutline(path, head_lines(text)).parser_name  # noqa: B018 - parses the file
    return time.perf_counter() - started, sum(len(text.encode()) for text in contents.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=DEFAULT_FILES)
    parser.add_argument("--lines", type=int, default=DEFAULT_LINES)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)

    edited = edit_sources(args.files, args.lines, args.seed)
    counter = local_counter()
    files = parse_git_diff(edited.diff)
    hunks = sum(len(f.hunks) for f in files)
    print(
        f"input               {len(files)} files of this repository, {hunks} hunks, "
        f"{edited.changed_lines} changed lines (seed {args.seed})"
    )
    parse_seconds, parsed_bytes = _parse_seconds(edited.contents)
    print(
        f"tree-sitter parse   {parse_seconds * 1000:.1f} ms for {len(edited.contents)} files, "
        f"{parsed_bytes / 1024:.0f} KB ({parsed_bytes / 1024 / 1024 / parse_seconds:.1f} MB/s)"
    )
    bare, bare_seconds = _timed_plan(files, counter, None, 0)
    lines_only, lines_seconds = _timed_plan(files, counter, edited.contents, 0)
    scoped, scoped_seconds = _timed_plan(
        files, counter, edited.contents, PlanOptions().scope_tokens
    )
    totals = scoped.totals()
    base = lines_only.totals()["tokens"]
    print(f"budget              {scoped.budget.available} tokens per chunk")
    for label, result, seconds in (
        ("diff only", bare, bare_seconds),
        ("+ 3 context lines", lines_only, lines_seconds),
        (f"+ scope ({PlanOptions().scope_tokens}/hunk)", scoped, scoped_seconds),
    ):
        print(
            f"{label:<20}{result.totals()['tokens']:>7} tokens in {len(result.chunks)} chunk(s), "
            f"planned in {seconds * 1000:.0f} ms"
        )
    print(
        f"context overhead    {totals['context_tokens']} tokens = "
        f"{100 * totals['context_tokens'] / base:.0f}% over the diff with 3 context lines; "
        f"{totals['whole_files']} whole files, {totals['scoped_hunks']} of {hunks} hunks with "
        f"their enclosing scope; parsers {totals['parsers']}"
    )
    complete = all(
        r.coverage.changed_lines_covered == r.coverage.changed_lines_total
        for r in (bare, lines_only, scoped)
    )
    same_chunks = len(scoped.chunks) == len(lines_only.chunks)
    print(f"coverage complete   {complete}; chunks unchanged by context: {same_chunks}")
    return 0 if complete and same_chunks else 1


if __name__ == "__main__":
    sys.exit(main())
