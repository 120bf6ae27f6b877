"""Where a symbol is defined in one file's text: tree-sitter, else a signature heuristic (pure).

``find_definition`` asks this module about each candidate file (one whose text holds the symbol
at all). With a grammar of :data:`reviewbot.scope.GRAMMARS` (the ones the enclosing-scope context
already ships and loads on first use), a definition is a node of the grammar's scope types
(functions, methods, classes, structs, ...) whose name is the symbol, plus the cheap ones: a
top-level assignment in Python (``TIMEOUT = 30``), a top-level ``const``/``let``/``var`` in
JavaScript and TypeScript, a Go ``type``. A dotted symbol (``Store.save``) names a definition
inside another (a method of a class). Without a grammar, or when the file is too large to parse,
a line that opens a definition (:data:`reviewbot.scope.SIGNATURE`) with the symbol as its name
counts, its end unknown.

Owns: finding a symbol's definitions in one text. Must not: read files (the caller hands the
text), or raise for bad input (the worst answer is "no definition").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reviewbot.scope import GRAMMARS, MAX_PARSE_BYTES, SIGNATURE, language_of, load_language

if TYPE_CHECKING:
    import tree_sitter

__all__ = ["MAX_SYMBOL_CHARS", "SYMBOL", "Definition", "definitions_in"]

MAX_SYMBOL_CHARS = 200
# An identifier, or identifiers joined by dots (Class.method).
SYMBOL = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)*")
MAX_NODES = 200_000  # nodes visited in one file: a bound, whatever the parser makes of it
# Definitions that are not scopes, and the parent types where they count (top level only).
TOP_LEVEL_DEFINITIONS = {
    "assignment": ("expression_statement",),  # python
    "variable_declarator": ("lexical_declaration", "variable_declaration"),  # js, ts
    "type_spec": ("type_declaration",),  # go
}
TOP_LEVEL_PARENTS = frozenset({"module", "program", "source_file", "export_statement"})
NAME_FIELDS = ("name", "left")
DECLARATOR = "declarator"  # C and C++: the name sits in a chain of declarators
NAME_TYPES = frozenset(
    {"identifier", "field_identifier", "type_identifier", "property_identifier", "constant"}
)
HEURISTIC_KIND = "definition (by its signature line)"


@dataclass(frozen=True)
class Definition:
    path: str
    first: int  # 1-based line of the definition's first line (decorators included)
    last: int | None  # its last line; None when unknown (the heuristic)
    kind: str


def definitions_in(path: str, text: str, symbol: str) -> list[Definition]:
    """The definitions of ``symbol`` in ``text`` (the file at ``path``), in line order."""
    parts = symbol.split(".")
    language = language_of(path)
    grammar = GRAMMARS.get(language) if language else None
    loaded = load_language(grammar) if grammar is not None else None
    source = text.encode("utf-8", errors="replace")
    if loaded is None or grammar is None or len(source) > MAX_PARSE_BYTES:
        return _by_signature(path, text, parts[-1])
    import tree_sitter

    tree = tree_sitter.Parser(loaded).parse(source)
    found = [
        Definition(path, _first_row(node, grammar.wrappers) + 1, node.end_point.row + 1, node.type)
        for node, names in _definitions(tree.root_node, grammar.scopes)
        if names[-len(parts) :] == parts
    ]
    return sorted(found, key=lambda definition: definition.first)


def _definitions(
    root: tree_sitter.Node, scopes: frozenset[str]
) -> Iterator[tuple[tree_sitter.Node, list[str]]]:
    """Each definition node with its qualified name (the names of the definitions around it)."""
    stack: list[tuple[tree_sitter.Node, list[str]]] = [(root, [])]
    visited = 0
    while stack and visited < MAX_NODES:
        node, outer = stack.pop()
        visited += 1
        names = outer
        if node.type in scopes or _top_level(node):
            name = _name_of(node)
            if name:
                names = [*outer, name]
                yield node, names
        stack.extend((child, names) for child in reversed(node.named_children))


def _top_level(node: tree_sitter.Node) -> bool:
    parents = TOP_LEVEL_DEFINITIONS.get(node.type)
    parent = node.parent
    if parents is None or parent is None or parent.type not in parents:
        return False
    above = parent.parent
    return above is not None and above.type in TOP_LEVEL_PARENTS


def _name_of(node: tree_sitter.Node) -> str | None:
    for field in NAME_FIELDS:
        named = node.child_by_field_name(field)
        if named is not None:
            return _text(named) if named.type in NAME_TYPES else None
    declarator = node.child_by_field_name(DECLARATOR)
    while declarator is not None:
        if declarator.type in NAME_TYPES:
            return _text(declarator)
        declarator = declarator.child_by_field_name(DECLARATOR)
    return None


def _text(node: tree_sitter.Node) -> str:
    return (node.text or b"").decode("utf-8", errors="replace")


def _first_row(node: tree_sitter.Node, wrappers: frozenset[str]) -> int:
    parent = node.parent
    if parent is not None and parent.type in wrappers:
        return parent.start_point.row
    return node.start_point.row


def _by_signature(path: str, text: str, name: str) -> list[Definition]:
    named = re.compile(
        r"\b(?:def|class|func|fun|fn|function|interface|struct|impl|trait|module|enum|sub|proc)"
        rf"\s+{re.escape(name)}\b"
    )
    return [
        Definition(path, number, None, HEURISTIC_KIND)
        for number, line in enumerate(text.split("\n"), 1)
        if SIGNATURE.match(line) and named.search(line)
    ]
