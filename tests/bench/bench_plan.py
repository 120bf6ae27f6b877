"""Time and memory of ``parse_git_diff`` + ``chunking.plan`` on a large synthetic merge request.

Run: ``.venv/bin/python -m tests.bench.bench_plan [--files 1000 --lines 60000 --seed 7]``.

The generator builds a git diff that looks like a real, very large MR: several languages, small
and large files, several hunks per file, a few single hunks of 3,000+ lines, lock files and
binaries (which the planner skips), and code lines with identifiers and numbers. Each file's head
(new-side) text is built together with its diff, so the ``contents=`` run widens hunks with real
head lines and adds enclosing scopes (default ``scope_tokens``) exactly as the pipeline would.
The random lines parse badly, so ``tests.bench.bench_scope`` measures scopes on real code.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import random
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from reviewbot.chunking import Budget, Plan, plan
from reviewbot.diff import FileDiff, parse_git_diff
from reviewbot.tokens import TokenCounter, local_counter

__all__ = ["RunFigures", "SyntheticDiff", "generate_diff", "main", "run_plan"]

DEFAULT_FILES = 1000
DEFAULT_LINES = 60_000
DEFAULT_SEED = 7
TARGET_SECONDS = 3.0
TARGET_MEGABYTES = 400
BYTES_PER_MEGABYTE = 1024 * 1024
KILOBYTES_PER_MEGABYTE = 1024  # ru_maxrss is in kilobytes on Linux

HUGE_HUNK_MIN_LINES = 3000
HUGE_HUNK_MAX_LINES = 4500
HUGE_HUNK_SHARE = 1 / 5  # of all changed lines, spread over a few huge single-hunk files
LOCK_FILE_SHARE = 1 / 20
BINARY_FILE_SHARE = 1 / 100
NEW_FILE_SHARE = 1 / 10
DELETED_FILE_SHARE = 1 / 50
MIN_LINES_PER_LOCK_FILE = 50
FILE_SIZE_MU = 3.0  # lognormal changed lines per ordinary file: median ~20, long tail
FILE_SIZE_SIGMA = 1.2
MAX_HUNKS_PER_FILE = 8
LINES_PER_HUNK_FOR_SPLIT = 12  # a file with N changed lines gets about N / this many hunks
CONTEXT_LINES = 3
MAX_GAP_LINES = 120
MAX_TAIL_LINES = 60
REMOVED_SHARE = 0.3
CHANGE_BLOCK_MAX = 15  # changed lines in a row before an interleaved context line

LANGUAGES = ("py", "js", "ts", "go", "rs", "c", "java", "yaml", "md")
DIRECTORIES = (
    "src",
    "lib",
    "app",
    "pkg",
    "internal",
    "services/api",
    "services/web",
    "tests",
    "docs",
    "config",
    "tools/scripts",
    "cmd/server",
)
WORDS = (
    "user",
    "order",
    "item",
    "cache",
    "request",
    "response",
    "config",
    "buffer",
    "index",
    "token",
    "session",
    "count",
    "limit",
    "offset",
    "value",
    "result",
    "error",
    "path",
    "payload",
    "retry",
    "timeout",
    "batch",
    "queue",
    "worker",
    "handler",
    "node",
    "key",
    "price",
    "total",
    "status",
    "message",
    "record",
    "schema",
    "stream",
    "chunk",
    "ctx",
)


def _name(rng: random.Random, parts: int = 2) -> str:
    return "_".join(rng.choice(WORDS) for _ in range(parts))


def _camel(rng: random.Random) -> str:
    first, second = rng.choice(WORDS), rng.choice(WORDS)
    return first + second.capitalize()


def _number(rng: random.Random) -> str:
    return str(
        rng.choice(
            (0, 1, 2, 8, 10, 16, 32, 64, 100, 255, 1000, 4096, 65536, rng.randint(0, 99_999))
        )
    )


def _python_line(rng: random.Random) -> str:
    indent = "    " * rng.randint(0, 3)
    templates = (
        lambda: f"def {_name(rng)}({_name(rng, 1)}, {_name(rng, 1)}={_number(rng)}):",
        lambda: f"{_name(rng)} = {_name(rng, 1)}.get({_name(rng, 1)!r}, {_number(rng)})",
        lambda: f"if {_name(rng)} > {_number(rng)} and not {_name(rng, 1)}:",
        lambda: f"return [{_name(rng, 1)} for {_name(rng, 1)} in {_name(rng)} if x % 3]",
        lambda: f"# TODO({_name(rng, 1)}): handle {_name(rng)} above {_number(rng)} bytes",
        lambda: f'raise ValueError(f"bad {_name(rng, 1)}: {{{_name(rng, 1)}!r}}")',
        lambda: f"self.{_name(rng)} += {_number(rng)} * len({_name(rng, 1)})",
    )
    return indent + rng.choice(templates)()


def _curly_line(rng: random.Random, declare: str, func: str) -> str:
    indent = "\t" * rng.randint(0, 3) if declare == "var" else "  " * rng.randint(0, 4)
    templates = (
        lambda: f"{func} {_camel(rng)}({_camel(rng)}, {_camel(rng)}) {{",
        lambda: f"{declare} {_camel(rng)} = {_camel(rng)}.{_camel(rng)}({_number(rng)});",
        lambda: f"if ({_camel(rng)} >= {_number(rng)} && {_camel(rng)} != null) {{",
        lambda: f"for (let i = 0; i < {_camel(rng)}.length; i += {_number(rng)}) {{",
        lambda: f"return {_camel(rng)}[{_number(rng)}] + 0x{rng.randint(0, 0xFFFF):04x};",
        lambda: f"// {_name(rng).replace('_', ' ')}: see issue #{_number(rng)}",
        lambda: "}",
    )
    return indent + rng.choice(templates)()


def _yaml_line(rng: random.Random) -> str:
    indent = "  " * rng.randint(0, 4)
    templates = (
        lambda: f"{_name(rng)}: {_number(rng)}",
        lambda: f"- name: {_name(rng)}-{_number(rng)}",
        lambda: f'{_name(rng, 1)}: "{_camel(rng)}/{_name(rng, 1)}:v{rng.randint(1, 9)}"',
    )
    return indent + rng.choice(templates)()


def _markdown_line(rng: random.Random) -> str:
    templates = (
        lambda: f"## {_name(rng).replace('_', ' ').title()}",
        lambda: f"The `{_name(rng)}` option limits {_name(rng, 1)} to {_number(rng)} entries.",
        lambda: f"- set `{_camel(rng)}` before calling `{_name(rng)}()` (since v{_number(rng)})",
        lambda: "",
    )
    return rng.choice(templates)()


LINE_MAKERS: Mapping[str, Callable[[random.Random], str]] = {
    "py": _python_line,
    "js": lambda rng: _curly_line(rng, "const", "function"),
    "ts": lambda rng: _curly_line(rng, "let", "export function"),
    "go": lambda rng: _curly_line(rng, "var", "func"),
    "rs": lambda rng: _curly_line(rng, "let", "pub fn"),
    "c": lambda rng: _curly_line(rng, "int", "static int"),
    "java": lambda rng: _curly_line(rng, "final var", "public void"),
    "yaml": _yaml_line,
    "md": _markdown_line,
}


@dataclass
class SyntheticDiff:
    """A git diff and the head text of every file it touches (``contents`` for ``plan``)."""

    text: str
    contents: dict[str, str] = field(default_factory=dict)
    changed_lines: int = 0


@dataclass
class _FileWriter:
    """Builds one file's diff and head text together, so their line numbers agree."""

    rng: random.Random
    make_line: Callable[[random.Random], str]
    head: list[str] = field(default_factory=list)
    diff: list[str] = field(default_factory=list)
    old_no: int = 0  # lines of the old file written so far

    def unchanged(self, count: int) -> list[str]:
        lines = [self.make_line(self.rng) for _ in range(count)]
        self.head += lines
        self.old_no += count
        return lines

    def hunk(self, changed: int) -> None:
        old_start, new_start = self.old_no + 1, len(self.head) + 1
        body = [" " + line for line in self.unchanged(CONTEXT_LINES)]
        left = changed
        while left > 0:
            block = min(left, self.rng.randint(1, CHANGE_BLOCK_MAX))
            removed = sum(1 for _ in range(block) if self.rng.random() < REMOVED_SHARE)
            body += ["-" + self.make_line(self.rng) for _ in range(removed)]
            self.old_no += removed
            added = [self.make_line(self.rng) for _ in range(block - removed)]
            self.head += added
            body += ["+" + line for line in added]
            left -= block
            body += [" " + line for line in self.unchanged(1 if left else CONTEXT_LINES)]
        old_count = sum(1 for line in body if line[0] in " -")
        new_count = sum(1 for line in body if line[0] in " +")
        self.diff.append(f"@@ -{old_start},{old_count} +{new_start},{new_count} @@")
        self.diff += body


def _modified_file(rng: random.Random, path: str, changed: int, hunks: int) -> tuple[str, str]:
    writer = _FileWriter(rng, LINE_MAKERS[path.rsplit(".", 1)[-1]])
    header = [
        f"diff --git a/{path} b/{path}",
        "index 3f2a1b0..9c8d7e6 100644",
        f"--- a/{path}",
        f"+++ b/{path}",
    ]
    sizes = _split(rng, changed, hunks)
    for size in sizes:
        writer.unchanged(rng.randint(0, MAX_GAP_LINES))
        writer.hunk(size)
    writer.unchanged(rng.randint(0, MAX_TAIL_LINES))
    return "\n".join(header + writer.diff), "\n".join(writer.head) + "\n"


def _new_file(rng: random.Random, path: str, changed: int) -> tuple[str, str]:
    make_line = LINE_MAKERS[path.rsplit(".", 1)[-1]]
    lines = [make_line(rng) for _ in range(changed)]
    header = [
        f"diff --git a/{path} b/{path}",
        "new file mode 100644",
        "index 0000000..4b5c6d7",
        "--- /dev/null",
        f"+++ b/{path}",
        f"@@ -0,0 +1,{changed} @@",
    ]
    return "\n".join(header + ["+" + line for line in lines]), "\n".join(lines) + "\n"


def _deleted_file(rng: random.Random, path: str, changed: int) -> str:
    make_line = LINE_MAKERS[path.rsplit(".", 1)[-1]]
    header = [
        f"diff --git a/{path} b/{path}",
        "deleted file mode 100644",
        "index 4b5c6d7..0000000",
        f"--- a/{path}",
        "+++ /dev/null",
        f"@@ -1,{changed} +0,0 @@",
    ]
    return "\n".join(header + ["-" + make_line(rng) for _ in range(changed)])


def _lock_file(rng: random.Random, path: str, changed: int) -> str:
    lines = [
        f'    "{_name(rng)}-{index}": "{rng.randint(0, 9)}.{rng.randint(0, 40)}.'
        f'{rng.randint(0, 99)}",'
        for index in range(changed)
    ]
    header = [
        f"diff --git a/{path} b/{path}",
        "index 1111111..2222222 100644",
        f"--- a/{path}",
        f"+++ b/{path}",
        f"@@ -1,0 +1,{changed} @@",
    ]
    return "\n".join(header + ["+" + line for line in lines])


def _binary_file(path: str) -> str:
    return "\n".join(
        [
            f"diff --git a/{path} b/{path}",
            "index 5555555..6666666 100644",
            f"Binary files a/{path} and b/{path} differ",
        ]
    )


def _split(rng: random.Random, total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` positive random sizes (fewer parts if total is small)."""
    parts = max(1, min(parts, total))
    cuts = sorted(rng.sample(range(1, total), parts - 1)) if parts > 1 else []
    bounds = [0, *cuts, total]
    return [b - a for a, b in itertools.pairwise(bounds)]


def _scaled_sizes(rng: random.Random, count: int, total: int) -> list[int]:
    weights = [rng.lognormvariate(FILE_SIZE_MU, FILE_SIZE_SIGMA) for _ in range(count)]
    scale = total / sum(weights)
    return [max(1, round(weight * scale)) for weight in weights]


def generate_diff(
    files: int = DEFAULT_FILES, lines: int = DEFAULT_LINES, seed: int = DEFAULT_SEED
) -> SyntheticDiff:
    """A deterministic git diff of about ``files`` files and ``lines`` changed lines."""
    rng = random.Random(seed)
    huge = min(max(1, round(lines * HUGE_HUNK_SHARE / HUGE_HUNK_MIN_LINES)), files // 4)
    huge_sizes = [rng.randint(HUGE_HUNK_MIN_LINES, HUGE_HUNK_MAX_LINES) for _ in range(huge)]
    huge_sizes = [min(size, max(1, lines // 4)) for size in huge_sizes]  # tiny runs stay tiny
    locks = max(1, round(files * LOCK_FILE_SHARE))
    lock_sizes = [max(MIN_LINES_PER_LOCK_FILE, round(lines * LOCK_FILE_SHARE / locks))] * locks
    binaries = max(1, round(files * BINARY_FILE_SHARE))
    ordinary = max(1, files - huge - locks - binaries)
    rest = max(ordinary, lines - sum(huge_sizes) - sum(lock_sizes))
    out = SyntheticDiff(text="")
    parts: list[str] = []
    for index, size in enumerate(huge_sizes):
        path = f"src/generated_tables/{_name(rng)}_{index}.{rng.choice(LANGUAGES[:7])}"
        text, head = _modified_file(rng, path, size, 1)
        parts.append(text)
        out.contents[path] = head
    for index, size in enumerate(lock_sizes):
        parts.append(_lock_file(rng, f"{rng.choice(DIRECTORIES)}/deps{index}/Cargo.lock", size))
    for index in range(binaries):
        parts.append(_binary_file(f"assets/{_name(rng)}_{index}.png"))
    for index, size in enumerate(_scaled_sizes(rng, ordinary, rest)):
        language = rng.choice(LANGUAGES)
        path = f"{rng.choice(DIRECTORIES)}/{_name(rng)}_{index}.{language}"
        draw = rng.random()
        if draw < DELETED_FILE_SHARE:
            parts.append(_deleted_file(rng, path, size))
            continue
        if draw < DELETED_FILE_SHARE + NEW_FILE_SHARE:
            text, head = _new_file(rng, path, size)
        else:
            hunks = rng.randint(1, min(MAX_HUNKS_PER_FILE, 1 + size // LINES_PER_HUNK_FOR_SPLIT))
            text, head = _modified_file(rng, path, size, hunks)
        parts.append(text)
        out.contents[path] = head
    out.text = "\n".join(parts) + "\n"
    out.changed_lines = sum(huge_sizes) + sum(lock_sizes) + rest
    return out


# --- measuring ---------------------------------------------------------------------------------


@dataclass
class RunFigures:
    parse_seconds: float
    plan_seconds: float
    files: list[FileDiff]
    result: Plan

    @property
    def total_seconds(self) -> float:
        return self.parse_seconds + self.plan_seconds


def run_plan(
    diff: str, counter: TokenCounter, contents: Mapping[str, str] | None = None
) -> RunFigures:
    """Parse ``diff`` and plan it with the default 64K budget; time both steps separately."""
    started = time.perf_counter()
    files = parse_git_diff(diff)
    parsed = time.perf_counter()
    result = plan(files, Budget(headroom=counter.headroom), counter, contents=contents)
    planned = time.perf_counter()
    return RunFigures(parsed - started, planned - parsed, files, result)


def _rss_megabytes() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / KILOBYTES_PER_MEGABYTE


def _traced_peak_megabytes(
    diff: str, counter: TokenCounter, contents: Mapping[str, str] | None
) -> float:
    """Peak Python allocation of one run under tracemalloc (slow, so timed runs stay untraced)."""
    gc.collect()
    tracemalloc.start()
    run_plan(diff, counter, contents)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / BYTES_PER_MEGABYTE


def _report(label: str, figures: RunFigures, rss_delta: float, traced: float) -> bool:
    coverage = figures.result.coverage
    skipped = sum(s.changed_lines for s in coverage.skipped)
    complete = coverage.changed_lines_covered + skipped == coverage.changed_lines_total
    met = figures.total_seconds < TARGET_SECONDS and max(rss_delta, traced) < TARGET_MEGABYTES
    print(f"\n[{label}]")
    print(
        f"  files parsed        {len(figures.files)} ({coverage.files_reviewed} reviewed, "
        f"{len(coverage.skipped)} skipped)"
    )
    print(
        f"  changed lines       {coverage.changed_lines_total} (covered "
        f"{coverage.changed_lines_covered} + skipped {skipped}; complete={complete})"
    )
    print(
        f"  chunks              {len(figures.result.chunks)} "
        f"(budget {figures.result.budget.available} tokens each)"
    )
    print(f"  token counter       {figures.result.counter}")
    totals = figures.result.totals()
    print(
        f"  context             {totals['context_tokens']} tokens of {totals['tokens']} "
        f"({totals['whole_files']} whole files, {totals['scoped_hunks']} hunks with scope)"
    )
    print(f"  parse               {figures.parse_seconds:.3f} s")
    print(f"  plan                {figures.plan_seconds:.3f} s")
    print(f"  total               {figures.total_seconds:.3f} s")
    print(f"  peak RSS delta      {rss_delta:.1f} MB (ru_maxrss)")
    print(f"  tracemalloc peak    {traced:.1f} MB")
    print(
        f"  target              < {TARGET_SECONDS} s and < {TARGET_MEGABYTES} MB: "
        f"{'met' if met else 'MISSED'}"
    )
    return met and complete


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=DEFAULT_FILES)
    parser.add_argument("--lines", type=int, default=DEFAULT_LINES)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    synthetic = generate_diff(args.files, args.lines, args.seed)
    generated = time.perf_counter()
    counter = local_counter()
    loaded = time.perf_counter()
    size = len(synthetic.text.encode())
    print(
        f"input               {size / BYTES_PER_MEGABYTE:.1f} MB diff, "
        f"{synthetic.text.count(chr(10))} lines, ~{synthetic.changed_lines} changed "
        f"(generated in {generated - started:.2f} s, seed {args.seed})"
    )
    print(f"token counter load  {loaded - generated:.2f} s ({counter.name}; not in the totals)")

    all_met = True
    for label, contents in (
        ("diff only", None),
        ("with head contents: 3 context lines + enclosing scopes", synthetic.contents),
    ):
        gc.collect()
        rss_before = _rss_megabytes()
        figures = run_plan(synthetic.text, counter, contents)
        rss_delta = _rss_megabytes() - rss_before
        traced = _traced_peak_megabytes(synthetic.text, counter, contents)
        all_met = _report(label, figures, rss_delta, traced) and all_met
    return 0 if all_met else 1


if __name__ == "__main__":
    sys.exit(main())
