"""Which function, class or block encloses a line of a source file.

A hunk deep inside a function is hard to judge from three lines of context: the guard, the
signature or the class it belongs to may be far above. :class:`SourceOutline` answers "what
encloses line N?" for one file's head text:

* with a real parser for the languages whose tree-sitter grammars ship compiled inside their
  PyPI wheels (Python, JavaScript, TypeScript and TSX, Go, Java, C, C++, Rust, Ruby), chosen by
  file extension; nothing is downloaded at run time, and a grammar is imported only when a file
  of its language is outlined;
* with an indentation heuristic for every other text file, and for a line whose parse tree is
  broken around it (an ``ERROR`` node), a grammar that cannot be loaded, or a file too large to
  parse.

It never raises for bad input: the worst answer is "nothing encloses this line". Pure: text in,
line numbers out (1-based, the new side of a diff).

Owns: what encloses a line (tree-sitter where a shipped grammar parses the file, else indentation),
and loading each grammar on first use. Must not: raise for bad input, download a grammar, or decide
how much scope is shown (that budget is `reviewbot.chunking`'s and `reviewbot.diffview`'s).
"""

from __future__ import annotations

import importlib
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tree_sitter

__all__ = [
    "GRAMMARS",
    "HEURISTIC",
    "SIGNATURE",
    "Enclosing",
    "Grammar",
    "Scope",
    "SourceOutline",
    "language_of",
    "load_language",
]

HEURISTIC = "heuristic"
# A line that opens a function, class or similar in most languages (the heuristic's "scope").
SIGNATURE = re.compile(
    r"^\s*(?:(?:export|public|private|protected|static|async|pub(?:\(crate\))?|final|abstract)\s+)*"
    r"(?:def|class|func|fun|fn|function|interface|struct|impl|trait|module|enum|sub|proc)\b"
)
# Larger files are outlined by the heuristic: parsing is linear, but a multi-megabyte file in a
# review is generated or vendored, and its structure is not worth the time.
MAX_PARSE_BYTES = 2_000_000
HEURISTIC_SCAN_LINES = 2000  # how far above a line the heuristic looks for its openers
TAB_WIDTH = 8
# Lines the heuristic never takes for a block opener: only closing brackets, or a comment.
CLOSER_ONLY = re.compile(r"^[\]\)\}]+[;,]?$")
COMMENT_PREFIXES = ("#", "//", "/*", "*", "--", ";")
# Parse-tree nodes that only hold statements (a function's body, a class body, an argument
# list): their first line is just the first statement inside, not an opener worth showing.
CONTAINER_SUFFIXES = ("block", "_body", "_list", "body_statement", "compound_statement")


@dataclass(frozen=True, slots=True)
class Grammar:
    """Where a tree-sitter grammar lives in its wheel, and which of its nodes are scopes."""

    module: str
    function: str
    scopes: frozenset[str]
    wrappers: frozenset[str] = frozenset()  # nodes whose first line belongs to the scope's


_JS_SCOPES = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "function_expression",
        "generator_function",
        "arrow_function",
        "method_definition",
        "class_declaration",
        "class",
    }
)
_TS_SCOPES = _JS_SCOPES | {
    "abstract_class_declaration",
    "interface_declaration",
    "enum_declaration",
    "internal_module",
    "module",
}
_C_SCOPES = frozenset(
    {"function_definition", "struct_specifier", "union_specifier", "enum_specifier"}
)
_EXPORT = frozenset({"export_statement"})

GRAMMARS: dict[str, Grammar] = {
    "python": Grammar(
        "tree_sitter_python",
        "language",
        frozenset({"function_definition", "class_definition"}),
        frozenset({"decorated_definition"}),
    ),
    "javascript": Grammar("tree_sitter_javascript", "language", _JS_SCOPES, _EXPORT),
    "typescript": Grammar("tree_sitter_typescript", "language_typescript", _TS_SCOPES, _EXPORT),
    "tsx": Grammar("tree_sitter_typescript", "language_tsx", _TS_SCOPES, _EXPORT),
    "go": Grammar(
        "tree_sitter_go",
        "language",
        frozenset(
            {"function_declaration", "method_declaration", "func_literal", "type_declaration"}
        ),
    ),
    "java": Grammar(
        "tree_sitter_java",
        "language",
        frozenset(
            {
                "class_declaration",
                "interface_declaration",
                "enum_declaration",
                "record_declaration",
                "annotation_type_declaration",
                "method_declaration",
                "constructor_declaration",
                "compact_constructor_declaration",
                "lambda_expression",
            }
        ),
    ),
    "c": Grammar("tree_sitter_c", "language", _C_SCOPES),
    "cpp": Grammar(
        "tree_sitter_cpp",
        "language",
        _C_SCOPES | {"class_specifier", "namespace_definition", "lambda_expression"},
        frozenset({"template_declaration"}),
    ),
    "rust": Grammar(
        "tree_sitter_rust",
        "language",
        frozenset(
            {
                "function_item",
                "impl_item",
                "trait_item",
                "struct_item",
                "enum_item",
                "mod_item",
                "closure_expression",
                "macro_definition",
            }
        ),
    ),
    "ruby": Grammar(
        "tree_sitter_ruby",
        "language",
        frozenset({"method", "singleton_method", "class", "singleton_class", "module", "do_block"}),
    ),
}

EXTENSIONS = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".jsx": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".java": "java",
    ".c": "c",
    ".h": "cpp",  # C++ headers use .h too, and the C++ grammar reads C declarations
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".c++": "cpp",
    ".hh": "cpp",
    ".hpp": "cpp",
    ".hxx": "cpp",
    ".ipp": "cpp",
    ".inl": "cpp",
    ".rs": "rust",
    ".rb": "ruby",
    ".rake": "ruby",
    ".gemspec": "ruby",
}
FILENAMES = {"Rakefile": "ruby", "Gemfile": "ruby", "Guardfile": "ruby"}


@dataclass(frozen=True, slots=True)
class Scope:
    """A definition (or, for the heuristic, a block) that encloses a line; 1-based lines."""

    first: int  # first line, decorators and templates included
    signature_last: int  # last line of its signature (== first for a one-line signature)
    kind: str  # the parser's node type, or "block" for the heuristic


@dataclass(frozen=True, slots=True)
class Enclosing:
    """What encloses one line.

    ``scopes`` are the enclosing definitions, outermost first. ``openers`` are the first lines
    of the statements between the innermost scope's signature and the line (an ``if``, a
    ``for``...), outermost first. ``method`` says who found them: ``tree-sitter:<language>`` or
    ``heuristic``.
    """

    scopes: tuple[Scope, ...]
    openers: tuple[int, ...]
    method: str

    @property
    def innermost(self) -> Scope | None:
        return self.scopes[-1] if self.scopes else None


def language_of(path: str) -> str | None:
    """The tree-sitter language for ``path`` by its extension (or name), or None."""
    name = posixpath.basename(path)
    if name in FILENAMES:
        return FILENAMES[name]
    _, extension = posixpath.splitext(name)
    return EXTENSIONS.get(extension.lower())


def _language(name: str) -> tree_sitter.Language | None:
    return load_language(GRAMMARS[name])


@cache
def load_language(grammar: Grammar) -> tree_sitter.Language | None:
    """The compiled grammar from its wheel, imported on first use; None if it cannot load."""
    try:
        import tree_sitter

        module = importlib.import_module(grammar.module)
        return tree_sitter.Language(getattr(module, grammar.function)())
    except (ImportError, AttributeError, ValueError, TypeError):
        # not installed, or built for another tree-sitter ABI: the heuristic takes over
        return None


def _error_before(node: tree_sitter.Node) -> bool:
    """True when a sibling before ``node`` is an ``ERROR`` node."""
    sibling = node.prev_sibling
    while sibling is not None:
        if sibling.is_error:
            return True
        sibling = sibling.prev_sibling
    return False


def _indent(text: str) -> int:
    expanded = text.expandtabs(TAB_WIDTH)
    return len(expanded) - len(expanded.lstrip())


def _leading_bytes(text: str) -> int:
    """Byte column of the first non-blank character (leading blanks are ASCII)."""
    return len(text) - len(text.lstrip(" \t"))


class SourceOutline:
    """One file's head text, parsed on the first question and asked "what encloses line N?".

    ``lines`` are the file's lines split on ``\\n`` (as git numbers them), without line ends.
    """

    def __init__(self, path: str, lines: Sequence[str]) -> None:
        self.path = path
        self.lines = lines
        self.language = language_of(path)
        self._tree: tree_sitter.Tree | None = None
        self._parsed = False

    # --- tree-sitter -----------------------------------------------------------------------

    def _parse(self) -> tree_sitter.Tree | None:
        if self._parsed:
            return self._tree
        self._parsed = True
        language = _language(self.language) if self.language else None
        if language is None:
            return None
        source = "\n".join(self.lines).encode("utf-8", errors="replace")
        if len(source) > MAX_PARSE_BYTES:
            return None
        import tree_sitter

        # A parser per file: parsers hold state and reviews may plan on several threads.
        self._tree = tree_sitter.Parser(language).parse(source)
        return self._tree

    @property
    def parser_name(self) -> str:
        """``tree-sitter:<language>`` when this file is parsed, else ``heuristic``."""
        return f"tree-sitter:{self.language}" if self._parse() is not None else HEURISTIC

    def release(self) -> None:
        """Free the parse tree (several times the file's size); the next question reparses."""
        self._tree = None
        self._parsed = False

    def enclosing(self, line: int) -> Enclosing:
        """What encloses ``line`` (1-based): by the parse tree, else by indentation."""
        if not 1 <= line <= len(self.lines):
            return Enclosing((), (), HEURISTIC)
        tree = self._parse()
        if tree is not None:
            found = self._enclosing_in_tree(tree, line)
            if found is not None:
                return found
        return self._enclosing_by_indentation(line)

    def _enclosing_in_tree(self, tree: tree_sitter.Tree, line: int) -> Enclosing | None:
        """None when the tree is broken around ``line`` (the heuristic answers instead).

        Broken: the line is inside an ``ERROR`` node, or an ``ERROR`` node comes before it at
        some level of its ancestry (unparsed text there may have swallowed an opener).
        """
        assert self.language is not None
        grammar = GRAMMARS[self.language]
        row = line - 1
        point = (row, _leading_bytes(self.lines[row]))
        node: tree_sitter.Node | None = tree.root_node.named_descendant_for_point_range(
            point, point
        )
        ancestors: list[tree_sitter.Node] = []
        while node is not None:
            if node.is_error or _error_before(node):
                return None
            ancestors.append(node)
            node = node.parent
        scopes: list[Scope] = []
        openers: list[int] = []
        for node in ancestors:  # innermost first
            if node.start_point.row >= row or node.parent is None:
                continue  # starts on the line itself (it does not enclose it), or the root
            if node.type in grammar.scopes:
                scopes.append(self._scope(node, grammar))
            elif not scopes and self._is_opener(node):
                openers.append(node.start_point.row + 1)
        if scopes:
            signature_last = scopes[0].signature_last
            openers = [number for number in openers if number > signature_last]
        return Enclosing(
            tuple(reversed(scopes)),
            tuple(sorted(set(openers))),
            f"tree-sitter:{self.language}",
        )

    def _is_opener(self, node: tree_sitter.Node) -> bool:
        """A statement that starts its line (``if``, ``for``, a call), not a container."""
        if node.type.endswith(CONTAINER_SUFFIXES):
            return False
        row, column = node.start_point
        return column == _leading_bytes(self.lines[row])

    def _scope(self, node: tree_sitter.Node, grammar: Grammar) -> Scope:
        start = node.start_point.row
        first = start
        if node.parent is not None and node.parent.type in grammar.wrappers:
            first = min(first, node.parent.start_point.row)
        body = node.child_by_field_name("body")
        signature_last = start
        if body is not None:
            body_row, body_column = body.start_point
            # "{" after the signature ends it on that line; a body on its own line starts below
            opens_inline = body_column > _leading_bytes(self.lines[body_row])
            signature_last = max(start, body_row if opens_inline else body_row - 1)
        return Scope(first + 1, signature_last + 1, node.type)

    # --- indentation heuristic ------------------------------------------------------------

    def _enclosing_by_indentation(self, line: int) -> Enclosing:
        """Openers by indentation: each nearest line above that is less indented than the last.

        The innermost opener that looks like a definition (``SIGNATURE``) is the innermost
        scope; openers inside it are ``openers``; when none looks like a definition, every
        opener is a scope (a YAML key, a block of another language).
        """
        level = self._level_at(line)
        found: list[int] = []  # nearest first
        lowest = max(1, line - HEURISTIC_SCAN_LINES)
        for number in range(line - 1, lowest - 1, -1):
            if level == 0:
                break
            text = self.lines[number - 1]
            stripped = text.strip()
            if not stripped or CLOSER_ONLY.match(stripped):
                continue
            if stripped.startswith(COMMENT_PREFIXES):
                continue
            indent = _indent(text)
            if indent < level:
                found.append(number)
                level = indent
        definitions = [n for n in found if SIGNATURE.match(self.lines[n - 1])]
        if not definitions:
            scopes = tuple(Scope(n, n, "block") for n in reversed(found))
            return Enclosing(scopes, (), HEURISTIC)
        innermost = definitions[0]
        openers = tuple(sorted(n for n in found if n > innermost))
        scopes = tuple(Scope(n, n, "block") for n in reversed(found) if n <= innermost)
        return Enclosing(scopes, openers, HEURISTIC)

    def _level_at(self, line: int) -> int:
        """Indentation of ``line``, or of the next non-blank line when it is blank."""
        for number in range(line, len(self.lines) + 1):
            if self.lines[number - 1].strip():
                return _indent(self.lines[number - 1])
        return 0
