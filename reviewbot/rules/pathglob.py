"""Path globs, matched in time linear in the path's length (pure; issue 32).

A glob is matched on the whole path from the repository root, as GitLab Duo's
``fileFilters`` are (``*.rb`` is a file at the root; ``**/*.rb`` anywhere): ``*`` and ``?``
stay within one path segment, ``**/`` is any number of whole segments (none included), ``**``
elsewhere is any text (``/`` included), ``[abc]`` and ``[!abc]`` are one character of a class
(never ``/``; ``[`` with no ``]`` in its segment is a plain character), a leading ``/`` is
dropped and a trailing ``/`` means everything under that folder. Review rules, learnings and
the check that a rule's glob matches some file (``reviewbot.rules.ruleset``,
``reviewbot.learnings.learning``) all match with :func:`glob_matches`.

These were once translated into regular expressions, which Python's ``re`` matches by
backtracking: ``**/**/**/…/x`` or ``*a*a*a…ab`` over a long path took minutes, holding the
GIL of the worker that matched it. Now a glob is compiled into a small automaton of
:class:`PathGlob` nodes (one per character of the glob at most, two for a ``**/``) whose every
possible position is followed at once (Thompson's construction): each character of the path
moves every active node once, so a match costs at most ``len(path) × nodes`` steps
(:meth:`PathGlob.steps` counts them), whatever the glob. The sets of nodes met are remembered
per glob (a lazily built DFA, up to MAX_CACHED_MOVES moves), so an ordinary glob costs one
look-up per character; a path that lacks the glob's literal start or end is refused before.

A glob is usable (:func:`glob_problem`) when it is not empty, names a file, holds no NUL and no
``..`` segment, is at most MAX_GLOB_CHARS long with at most MAX_GLOB_STARS ``*``, and each of
its classes is a valid one.

Owns: :class:`PathGlob`, :func:`compiled_glob`, :func:`glob_matches`, :func:`glob_problem`.
Must not: read files, or know what a rule or a learning is.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

__all__ = [
    "MAX_GLOB_CHARS",
    "MAX_GLOB_STARS",
    "PathGlob",
    "compiled_glob",
    "glob_matches",
    "glob_problem",
]

MAX_GLOB_CHARS = 1024  # a deep file's whole path, with room (a glob names files, not texts)
MAX_GLOB_STARS = 16  # `src/**/tests/**/*_test.*` has 6
MAX_CACHED_MOVES = 4096  # remembered (active nodes, character) moves per glob
MAX_COMPILED_GLOBS = 4096
SLASH = "/"

Accepts = Callable[[str], bool]


def _any(char: str) -> bool:
    return True


def _not_slash(char: str) -> bool:
    return char != SLASH


def _slash(char: str) -> bool:
    return char == SLASH


def _nothing(char: str) -> bool:
    return False


@dataclass(frozen=True)
class _Node:
    """One position of the automaton: the moves on a character, and those on none."""

    moves: tuple[tuple[Accepts, int], ...] = ()
    skips: tuple[int, ...] = ()


@dataclass
class PathGlob:
    """A compiled glob (module notes): :meth:`matches` a path in linear time."""

    glob: str
    nodes: tuple[_Node, ...]
    prefix: str  # the literal text every match starts with
    suffix: str  # ... and ends with
    _start: int = 0
    _moves: dict[tuple[int, str], int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._start = self._closure(1)

    @property
    def accepting(self) -> int:
        return 1 << (len(self.nodes) - 1)

    def matches(self, path: str) -> bool:
        """Whether the whole of ``path`` matches the glob."""
        if not (path.startswith(self.prefix) and path.endswith(self.suffix)):
            return False
        active = self._start
        for char in path:
            key = (active, char)
            following = self._moves.get(key)
            if following is None:
                following = self._move(active, char)
                if len(self._moves) < MAX_CACHED_MOVES:
                    self._moves[key] = following
            active = following
            if not active:
                return False
        return bool(active & self.accepting)

    def steps(self, path: str) -> int:
        """The node moves a match of ``path`` takes without the remembered moves: at most
        ``len(path) × len(nodes)`` (module notes)."""
        count, active = 0, self._start
        for char in path:
            count += active.bit_count()
            active = self._move(active, char)
        return count

    def _move(self, active: int, char: str) -> int:
        """The nodes reached from the ``active`` ones by ``char`` (work: one per active node)."""
        reached = 0
        for index in _members(active):
            for accepts, target in self.nodes[index].moves:
                if accepts(char):
                    reached |= 1 << target
        return self._closure(reached)

    def _closure(self, active: int) -> int:
        """``active`` and every node reached from it without a character."""
        pending = _members(active)
        while pending:
            for target in self.nodes[pending.pop()].skips:
                if not active >> target & 1:
                    active |= 1 << target
                    pending.append(target)
        return active


def _members(active: int) -> list[int]:
    """The indexes of the nodes set in ``active``."""
    found = []
    while active:
        lowest = active & -active
        found.append(lowest.bit_length() - 1)
        active ^= lowest
    return found


def glob_problem(glob: str) -> str | None:
    """Why ``glob`` cannot be used (it cannot match any path, or is too long to match one
    cheaply), or None when it is a usable glob."""
    pattern = glob.strip().removeprefix("!")
    if not pattern:
        return "is empty"
    if pattern.startswith(SLASH) and pattern.strip(SLASH) == "":
        return "names no file"
    if "\0" in pattern:
        return "holds a NUL character"
    if any(part == ".." for part in pattern.split(SLASH)):
        return "leads out of the repository (..)"
    if len(pattern) > MAX_GLOB_CHARS:
        return f"is longer than {MAX_GLOB_CHARS} characters"
    if pattern.count("*") > MAX_GLOB_STARS:
        return f"has more than {MAX_GLOB_STARS} `*`"
    bad = next((body for body in _class_bodies(pattern) if _class_accepts(body) is _nothing), None)
    if bad is not None:
        return f"has a character class that is not valid ([{bad}])"
    return None


def glob_matches(glob: str, path: str) -> bool:
    """``path`` (from the repository root, "/"-separated) matches ``glob`` (module notes)."""
    return compiled_glob(glob.strip()).matches(path)


@lru_cache(maxsize=MAX_COMPILED_GLOBS)
def compiled_glob(glob: str) -> PathGlob:
    """``glob`` (stripped) compiled into its automaton."""
    pattern = glob.lstrip(SLASH)
    if pattern.endswith(SLASH):
        pattern += "**"
    return _automaton(glob, _tokens(pattern))


# A token: a character to accept (its test, and the literal when it is one), or one of these.
STAR, DOUBLE_STAR, SEGMENTS = "*", "**", "**/"
Token = str | tuple[Accepts, str | None]


def _tokens(glob: str) -> list[Token]:
    out: list[Token] = []
    index = 0
    while index < len(glob):
        if glob.startswith("**/", index):
            out.append(SEGMENTS)  # zero or more whole segments
            index += 3
        elif glob.startswith("/**", index) and index + 3 == len(glob):
            out += [(_slash, SLASH), DOUBLE_STAR]
            index += 3
        elif glob.startswith("**", index):
            out.append(DOUBLE_STAR)
            index += 2
        elif glob[index] == "*":
            out.append(STAR)
            index += 1
        elif glob[index] == "?":
            out.append((_not_slash, None))
            index += 1
        elif glob[index] == "[" and (end := _class_end(glob, index)) > 0:
            out.append((_class_accepts(glob[index + 1 : end]), None))
            index = end + 1
        else:
            literal = glob[index]
            out.append((literal.__eq__, literal))
            index += 1
    return out


def _automaton(glob: str, tokens: list[Token]) -> PathGlob:
    """Nodes 0..n-1 stand before each token, node n (the last) after all; a ``**/`` has a
    second node, within a segment, placed after them."""
    count = len(tokens)
    inside: dict[int, int] = {}
    for index, token in enumerate(tokens):
        if token == SEGMENTS:
            inside[index] = count + 1 + len(inside)
    nodes: list[_Node] = []
    for index, token in enumerate(tokens):
        after = index + 1
        if token == STAR:
            nodes.append(_Node(moves=((_not_slash, index),), skips=(after,)))
        elif token == DOUBLE_STAR:
            nodes.append(_Node(moves=((_any, index),), skips=(after,)))
        elif token == SEGMENTS:
            nodes.append(
                _Node(moves=((_slash, index), (_not_slash, inside[index])), skips=(after,))
            )
        else:
            accepts = token[0] if isinstance(token, tuple) else _nothing
            nodes.append(_Node(moves=((accepts, after),)))
    within = [
        _Node(moves=((_slash, index), (_not_slash, inside[index]))) for index in sorted(inside)
    ]
    # The accepting node must be the last: move it after the nodes within segments.
    order = [*range(count), *inside.values(), count]
    renumber = {old: new for new, old in enumerate(order)}
    every = [*nodes, _Node(), *within]
    renumbered = tuple(
        _Node(
            moves=tuple((accepts, renumber[target]) for accepts, target in every[old].moves),
            skips=tuple(renumber[target] for target in every[old].skips),
        )
        for old in order
    )
    return PathGlob(glob, renumbered, _literal(tokens), _literal(tokens[::-1])[::-1])


def _literal(tokens: list[Token]) -> str:
    """The literal characters ``tokens`` start with."""
    text = []
    for token in tokens:
        if not isinstance(token, tuple) or token[1] is None:
            break
        text.append(token[1])
    return "".join(text)


def _class_end(glob: str, start: int) -> int:
    """Where the class opened at ``start`` closes (-1: it does not, so "[" is a character)."""
    index = start + 1
    if index < len(glob) and glob[index] in "!^":
        index += 1
    if index < len(glob) and glob[index] == "]":
        index += 1
    end = glob.find("]", index)
    return -1 if end < 0 or SLASH in glob[start:end] else end


def _class_bodies(glob: str) -> list[str]:
    bodies, index = [], 0
    while index < len(glob):
        if glob[index] == "[" and (end := _class_end(glob, index)) > 0:
            bodies.append(glob[index + 1 : end])
            index = end + 1
        else:
            index += 1
    return bodies


def _class_accepts(body: str) -> Accepts:
    """The test of one character against the class ``[body]`` (``[!…]``/``[^…]``: not in
    it, never ``/``); a class Python cannot read (``[z-a]``) accepts nothing."""
    negated = body[:1] in ("!", "^")
    members = body[1:] if negated else body
    escaped = "".join("\\" + char if char in "\\^[]" else char for char in members)
    try:
        with warnings.catch_warnings():  # "possible set difference" ([--]): read as today
            warnings.simplefilter("ignore", FutureWarning)
            pattern = re.compile(f"[^/{escaped}]" if negated else f"[{escaped}]", re.DOTALL)
    except re.error:
        return _nothing
    return lambda char: pattern.fullmatch(char) is not None
