"""``python -m reviewbot.commands.docs``: the generated parts of the docs, from the code.

Owns: rendering the configuration reference from `Settings`' fields (each field's default, help
text, bounds and choices live once, in `reviewbot.config`) as Markdown, and writing it between
the generated-section markers of its page; ``--check`` names each stale page and writes
nothing (tests/test_docs.py runs the same comparison).

Must not: hold a fact of its own about a setting (a wrong or missing line is fixed in the code
it documents, then regenerated), or touch anything outside the marked sections.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from reviewbot.commands.common import InputDir, fail
from reviewbot.config import SettingDoc, setting_docs
from reviewbot.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK

__all__ = ["GENERATED_PAGES", "REGENERATE", "GeneratedPage", "render_settings", "updated_text"]

REGENERATE = "python -m reviewbot.commands.docs"
# The repository this module is part of (an editable install or a checkout).
REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
BEGIN = "<!-- BEGIN GENERATED {section}: edit the code, then run `" + REGENERATE + "` -->"
END = "<!-- END GENERATED {section} -->"


class MarkersMissing(ValueError):
    """A page lacks the markers of its generated section (or has them out of order)."""


@dataclass(frozen=True)
class GeneratedPage:
    """A page of docs/ with one generated section."""

    path: str  # relative to the repository root
    section: str
    render: Callable[[], str]


# --- the configuration reference -------------------------------------------------------------


def toml_value(value: Any) -> str:
    """``value`` as it is written in the settings file."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, tuple | list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    return repr(value)


def default_words(doc: SettingDoc) -> str:
    return doc.default_text or f"`{toml_value(doc.default)}`"


def accepted_words(doc: SettingDoc) -> str:
    """The value in words: its kind, and its bounds or choices where it has them."""
    kind = doc.kind.removeprefix("a ")
    if doc.bounds is not None:
        kind = f"{kind}, {doc.bounds.describe()}"
    if doc.choices:
        listed = ", ".join(f"`{choice}`" for choice in doc.choices)
        kind = f"{kind}, each one of {listed}" if "list" in kind else f"one of {listed}"
    return kind


def render_settings() -> str:
    """The summary table of every setting, then one entry per setting."""
    docs = setting_docs()
    lines = [
        "| setting | environment | default | accepts | |",
        "|---|---|---|---|---|",
    ]
    for doc in docs:
        marks = ", ".join(
            mark for mark, on in (("secret", doc.secret), ("repository", doc.repository)) if on
        )
        lines.append(
            f"| [`{doc.name}`](#{doc.name}) | `{doc.env}` | {default_words(doc)} | "
            f"{accepted_words(doc)} | {marks} |"
        )
    for doc in docs:
        lines += ["", f"### `{doc.name}`", "", doc.help, ""]
        lines.append(f"`{doc.env}` · {accepted_words(doc)} · default {default_words(doc)}")
        if doc.secret:
            lines += ["", "A secret: never shown in logs, messages, `repr` or the database."]
        if doc.repository:
            lines += ["", "A repository's `.reviewbot.toml` may set it."]
    return "\n".join(lines)


# --- pages -----------------------------------------------------------------------------------

GENERATED_PAGES = (GeneratedPage("docs/configuration.md", "settings", render_settings),)


def updated_text(text: str, section: str, body: str) -> str:
    """``text`` with the content between the markers of ``section`` replaced by ``body``."""
    begin, end = BEGIN.format(section=section), END.format(section=section)
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise MarkersMissing(f"no generated section {section!r}: expected {begin} ... {end}")
    return text[: start + len(begin)] + "\n" + body.strip("\n") + "\n" + text[stop:]


def page_states(root: Path) -> list[tuple[Path, str, str]]:
    """Each generated page: its path, its text now, and the text it should have."""
    states = []
    for page in GENERATED_PAGES:
        path = root / page.path
        text = path.read_text(encoding="utf-8")
        states.append((path, text, updated_text(text, page.section, page.render())))
    return states


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--check", is_flag=True, help="Write nothing; exit 1 naming each page that is stale.")
@click.option(
    "--root",
    type=InputDir(),
    default=REPOSITORY_ROOT,
    show_default="this checkout",
    help="The repository whose docs/ to update.",
)
def docs_command(check: bool, root: Path) -> None:
    """Regenerate the generated sections of docs/ from the code."""
    try:
        states = page_states(root)
    except (OSError, MarkersMissing) as error:
        fail(str(error), EXIT_BAD_INPUT)
    stale = [path for path, text, wanted in states if text != wanted]
    for path, text, wanted in states:
        if text != wanted and not check:
            path.write_text(wanted, encoding="utf-8")
    for path in stale:
        shown = path.relative_to(root) if path.is_relative_to(root) else path
        click.echo(f"{shown} is stale" + (f": run `{REGENERATE}`" if check else ": rewritten"))
    sys.exit(EXIT_FAILURE if check and stale else EXIT_OK)


def main() -> None:
    """Run the command; a bad option is one line, exit 2."""
    try:
        docs_command.main(standalone_mode=False)
    except click.UsageError as error:
        fail(error.format_message(), EXIT_BAD_INPUT)


if __name__ == "__main__":
    main()
