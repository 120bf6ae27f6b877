"""The patterns ``search_code`` accepts, and the bounded scan for them (pure).

A model's pattern is untrusted: a regular expression such as ``(a+)+$`` can make a
backtracking engine run for hours on one line. ``search_code`` therefore takes a fixed string by
default, and a regular expression only from a safe subset (:func:`check_pattern`):

- at most ``MAX_PATTERN_CHARS`` characters, at most ``MAX_UNBOUNDED`` unbounded quantifiers
  (``*``, ``+``, ``{n,}``) and ``{m,n}`` counts up to ``MAX_REPEAT``;
- no quantifier on a group (``(ab)*``: the nested repetition catastrophic patterns need), no
  quantifier on a quantifier (``a**``; the lazy ``*?`` and possessive ``*+`` forms are fine);
- no back-reference (``\\1``, ``(?P=name)``, ``\\k<name>``), no look-around, no inline flags or
  other ``(?...)`` group but ``(?:...)``.

The scan is bounded whatever the pattern (:class:`SearchLimits`): files touched and bytes read
(a file skipped as binary or too large counts too: through the API each one is a download),
hits kept, the characters of one hit's line, and a deadline for the whole search, reading
included; a regular expression runs in the ``regex`` module with a time limit on top, so even a
pattern the subset lets through cannot hold a review (the answer then says the search stopped).
Every bound reached, and every file skipped with its reason, is said in the answer.

Owns: which patterns are accepted, and finding them in given texts within the bounds. Must not:
read a repository (the tools hand it the texts) or run a pattern outside the subset.
"""

from __future__ import annotations

import bisect
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import regex

__all__ = [
    "MAX_PATTERN_CHARS",
    "Hit",
    "PatternProblem",
    "SearchLimits",
    "SearchResult",
    "Unread",
    "check_pattern",
    "search_texts",
]

MAX_PATTERN_CHARS = 200
MAX_UNBOUNDED = 3
MAX_REPEAT = 100
# The `regex` module's time limit for one search_code call, summed over its files: a backstop
# only (the subset above already refuses the patterns known to explode).
REGEX_SECONDS = 0.5
MIN_TIMEOUT_S = 0.001  # the regex module reads 0 as "no limit"
QUANTIFIERS = "*+?{"
ESCAPED_BACKREFERENCE = "123456789gk"  # \1.. \9, \g<name>, \k<name>


@dataclass(frozen=True)
class PatternProblem:
    reason: str


@dataclass(frozen=True)
class SearchLimits:
    max_files: int = 2000  # files touched: searched or skipped
    max_bytes: int = 8_000_000  # bytes read, of searched and skipped files alike
    max_hits: int = 50
    max_line_chars: int = 200
    max_seconds: float = 20.0  # the whole search, reading included


@dataclass(frozen=True)
class Unread:
    """A file the scan touched but did not search: why in a word or two, counted ("binary",
    "larger than 1,000,000 bytes"), why in a sentence (a tool's refusal), and the bytes reading
    it cost."""

    reason: str
    message: str
    bytes_read: int = 0


@dataclass(frozen=True)
class Hit:
    path: str
    line: int
    text: str

    def describe(self) -> str:
        return f"{self.path}:{self.line}: {self.text}"


@dataclass
class SearchResult:
    hits: list[Hit] = field(default_factory=list)
    files_scanned: int = 0  # searched
    bytes_scanned: int = 0  # read, skipped files included
    skipped: Counter[str] = field(default_factory=Counter)  # files touched, not searched
    stopped: str | None = None  # which bound ended the scan before every file was read

    @property
    def files_touched(self) -> int:
        return self.files_scanned + self.skipped.total()

    def skipped_text(self) -> str:
        """``skipped 2,950 binary, 3 larger than 1,000,000 bytes`` (empty when none)."""
        if not self.skipped:
            return ""
        parts = [f"{count:,} {reason}" for reason, count in self.skipped.most_common()]
        return "skipped " + ", ".join(parts)


def check_pattern(pattern: object, is_regex: bool) -> regex.Pattern[str] | str | PatternProblem:
    """The compiled pattern (a regular expression), the fixed string, or why it is refused."""
    if not isinstance(pattern, str) or not pattern:
        return PatternProblem("the pattern must be a non-empty string")
    if len(pattern) > MAX_PATTERN_CHARS:
        return PatternProblem(f"the pattern is longer than {MAX_PATTERN_CHARS} characters")
    if "\x00" in pattern or "\n" in pattern:
        return PatternProblem("the pattern holds a NUL or a line break")
    if not is_regex:
        return pattern
    problem = _unsafe(pattern)
    if problem is not None:
        return PatternProblem(problem)
    try:
        return regex.compile(pattern, regex.MULTILINE | regex.VERSION0)
    except (regex.error, OverflowError, RecursionError) as error:
        return PatternProblem(f"not a valid regular expression: {error}")


def _unsafe(pattern: str) -> str | None:
    """Why ``pattern`` is outside the safe subset, or None."""
    unbounded = 0
    last = ""  # what the previous item was: "atom", "group" (a closed group), "quantifier"
    index = 0
    in_class = False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            if index + 1 < len(pattern) and pattern[index + 1] in ESCAPED_BACKREFERENCE:
                return "back-references are refused"
            index += 2
            last = "atom"
            continue
        if in_class:
            in_class = char != "]"
            index += 1
            continue
        if char == "[":
            in_class, last = True, "atom"
            index += 1
            if index < len(pattern) and pattern[index] in "^]":
                index += 1
            continue
        if char == "(":
            if pattern.startswith("(?", index) and not pattern.startswith("(?:", index):
                return "only (?:...) groups are accepted: no look-around, flags or named groups"
            last = "open"
        elif char == ")":
            last = "group"
        elif char in QUANTIFIERS:
            quantifier, index = _quantifier(pattern, index)
            if quantifier is None:
                last = "atom"  # a "{" that is no count is a literal
                continue
            if last == "group":
                return "a quantifier on a group is refused (nested repetition)"
            if last in ("quantifier", "open", ""):
                return "a quantifier must follow a character, a class or an escape"
            _low, high = quantifier
            if high is None:
                unbounded += 1
            elif high > MAX_REPEAT:
                return f"a repetition count above {MAX_REPEAT} is refused"
            last = "quantifier"
            if index < len(pattern) and pattern[index] in "?+":
                index += 1  # lazy or possessive: still one quantifier
            continue
        else:
            last = "atom"
        index += 1
    if unbounded > MAX_UNBOUNDED:
        return f"more than {MAX_UNBOUNDED} unbounded repetitions (*, +) are refused"
    return None


def _quantifier(pattern: str, index: int) -> tuple[tuple[int, int | None] | None, int]:
    """The quantifier at ``index`` as (low, high or None for unbounded), and the index after
    it; (None, index + 1) for a "{" that does not open a count."""
    char = pattern[index]
    if char == "*":
        return (0, None), index + 1
    if char == "+":
        return (1, None), index + 1
    if char == "?":
        return (0, 1), index + 1
    end = pattern.find("}", index)
    body = pattern[index + 1 : end] if end != -1 else ""
    low, comma, high = body.partition(",")
    if end == -1 or not low.isdigit() or (high and not high.isdigit()):
        return None, index + 1
    return (int(low), (int(high) if high else None) if comma else int(low)), end + 1


def search_texts(
    compiled: regex.Pattern[str] | str,
    texts: Iterable[tuple[str, Callable[[], str | Unread]]],
    limits: SearchLimits,
    clock: Callable[[], float] = time.monotonic,
) -> SearchResult:
    """Hits of ``compiled`` in ``texts`` ((path, a reader of its text or of why it is not
    searched), in order) within ``limits``; ``clock`` measures the search's deadline."""
    result = SearchResult()
    started = clock()
    deadline = time.monotonic() + REGEX_SECONDS
    for path, read in texts:
        stop = _bound_reached(result, limits, clock() - started)
        if stop:
            result.stopped = stop
            break
        text = read()
        if isinstance(text, Unread):
            result.skipped[text.reason] += 1
            result.bytes_scanned += text.bytes_read
            continue
        result.files_scanned += 1
        result.bytes_scanned += len(text)
        try:
            starts = list(_match_lines(compiled, text, deadline))
        except TimeoutError:
            result.stopped = "the regular expression took too long"
            break
        for number, line in starts:
            result.hits.append(Hit(path, number, _cut(line.strip(), limits.max_line_chars)))
            if len(result.hits) >= limits.max_hits:
                result.stopped = f"found {limits.max_hits} hits"
                return result
    return result


def _bound_reached(result: SearchResult, limits: SearchLimits, elapsed_s: float) -> str | None:
    """Which bound stops the scan before the next file, or None."""
    if result.files_touched >= limits.max_files:
        return f"touched the first {limits.max_files:,} files"
    if result.bytes_scanned >= limits.max_bytes:
        return f"read {limits.max_bytes:,} bytes"
    if elapsed_s >= limits.max_seconds:
        return f"searched for {limits.max_seconds:g} s"
    return None


def _match_lines(
    compiled: regex.Pattern[str] | str, text: str, deadline: float
) -> Iterable[tuple[int, str]]:
    """(line number, line) of each line where a match starts, once per line."""
    lines = text.split("\n")
    if isinstance(compiled, str):
        for number, line in enumerate(lines, 1):
            if compiled in line:
                yield number, line
        return
    ends = []
    offset = 0
    for line in lines:
        offset += len(line) + 1
        ends.append(offset)
    seen = -1
    remaining = max(MIN_TIMEOUT_S, deadline - time.monotonic())
    for match in compiled.finditer(text, timeout=remaining):
        row = bisect.bisect_right(ends, match.start())
        if row != seen and row < len(lines):
            seen = row
            yield row + 1, lines[row]


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
