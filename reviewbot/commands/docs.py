"""``python -m reviewbot.commands.docs``: the generated parts of the docs, from the code.

Owns: rendering two references as Markdown and writing each between the generated-section
markers of its page: the configuration reference from `Settings`' fields (each field's
default, help text, bounds and choices live once, in `reviewbot.config`) and the command-line
reference from the click tree of ``reviewbot`` (every command and group, its help, usage,
arguments and options with their type, default and the bounds the type knows). ``--check``
names each stale page and writes nothing (tests/test_docs.py runs the same comparison).

Must not: hold a fact of its own about a setting or a command (a wrong or missing line is
fixed in the code it documents, then regenerated), run a command, or touch anything outside
the marked sections.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from reviewbot.commands import main as reviewbot_main
from reviewbot.commands.common import InputDir, InputFile, Integer, Number, fail
from reviewbot.config import SettingDoc, setting_docs
from reviewbot.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK

__all__ = [
    "GENERATED_PAGES",
    "REGENERATE",
    "GeneratedPage",
    "command_tree",
    "plain_text",
    "render_commands",
    "render_settings",
    "updated_text",
]

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


# --- the command-line reference --------------------------------------------------------------

# Characters that would be Markdown in click's plain help text (a `*.diff` glob, `<ISO week>`,
# `&amp;`, a `|` in a table cell); text between backticks is code already and keeps them.
MARKDOWN_SPECIAL = re.compile(r"([\\*_<>\[\]|&])")
CODE_SPAN = re.compile(r"(`[^`]*`)")
BLOCK_START = re.compile(r"^(\s*|\s*[0-9]+)([#>+~=-]|(?<=[0-9])[.)])")
SHORT_HELP_CHARS = 1_000  # the first sentence, whole
HEADING_LEVEL = 3


def plain_text(text: str, *, cell: bool = False) -> str:
    """Click's help text as Markdown that shows it as written; ``cell``: inside a table
    cell, where a ``|`` ends the cell even in code."""
    parts = CODE_SPAN.split(text)
    escaped = "".join(
        (part.replace("|", "\\|") if cell else part)
        if index % 2
        else MARKDOWN_SPECIAL.sub(r"\\\1", part)
        for index, part in enumerate(parts)
    )
    # what would open a block at the start of a paragraph: a heading, list, quote or fence
    return BLOCK_START.sub(r"\1\\\2", escaped, count=1)


def help_paragraphs(text: str | None) -> list[str]:
    """A command's help as paragraphs, each one line (click's ``\\f`` ends the help)."""
    cleaned = inspect.cleandoc(text or "").split("\f", 1)[0]
    return [
        plain_text(" ".join(line.strip() for line in block.splitlines()))
        for block in re.split(r"\n\s*\n", cleaned.strip())
        if block
    ]


def command_tree(
    command: click.Command = reviewbot_main, parent: click.Context | None = None
) -> Iterator[tuple[click.Context, click.Command]]:
    """``reviewbot`` and every command and group below it, depth first, each with its context
    (``ctx.command_path`` is ``reviewbot jobs list``)."""
    name = "reviewbot" if parent is None else command.name
    ctx = click.Context(command, info_name=name, parent=parent)
    yield ctx, command
    if isinstance(command, click.Group):
        for sub_name in command.list_commands(ctx):
            sub = command.get_command(ctx, sub_name)
            if sub is not None and not sub.hidden:
                yield from command_tree(sub, ctx)


def value_words(param: click.Parameter) -> str:
    """What a parameter takes, with the bounds its type knows."""
    kind = param.type
    if isinstance(param, click.Option) and param.is_flag:
        words = "flag"
    elif isinstance(kind, Integer):
        words = f"whole number, {kind.condition}"
    elif isinstance(kind, Number):
        words = kind.condition if kind.condition.startswith("a ") else f"number, {kind.condition}"
    elif isinstance(kind, click.Choice):
        words = "one of " + ", ".join(f"`{choice}`" for choice in kind.choices)
    elif isinstance(kind, InputFile):
        words = f"file of at most {kind.max_bytes:,} bytes" + (
            "; `-`: stdin" if kind.allow_stdin else ""
        )
    else:
        words = kind.name.replace("_", " ")
    if param.multiple:
        words += "; may be repeated"
    return words


def option_names(ctx: click.Context, option: click.Option) -> str:
    names = ", ".join(f"`{name}`" for name in option.opts)
    if option.secondary_opts:
        names += " / " + ", ".join(f"`{name}`" for name in option.secondary_opts)
    if not option.is_flag and not isinstance(option.type, click.Choice):
        names = names[:-1] + f" {option.make_metavar(ctx)}`"
    return names


def option_row(ctx: click.Context, option: click.Option) -> str:
    extra = option.get_help_extra(ctx)
    default = f"`{extra['default']}`" if extra.get("default") else ""
    notes = [plain_text(option.help or "", cell=True)]
    if option.required:
        notes.append("Required.")
    if isinstance(option.envvar, str):
        notes.append(f"Environment: `{option.envvar}`.")
    help_text = " ".join(note for note in notes if note)
    return f"| {option_names(ctx, option)} | {value_words(option)} | {default} | {help_text} |"


def render_command(ctx: click.Context, command: click.Command) -> list[str]:
    # below the page's "## Every command": reviewbot and its commands ###, sub-commands ####
    level = HEADING_LEVEL + max(ctx.command_path.count(" ") - 1, 0)
    lines = [f"{'#' * level} `{ctx.command_path}`", ""]
    for paragraph in help_paragraphs(command.help):
        lines += [paragraph, ""]
    usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
    lines += ["```text", usage, "```", ""]
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    options = [p for p in command.params if isinstance(p, click.Option) and not p.hidden]
    if arguments:
        lines += ["| argument | takes |", "|---|---|"]
        for argument in arguments:
            required = "" if argument.required else " (optional)"
            lines.append(f"| `{argument.make_metavar(ctx)}` | {value_words(argument)}{required} |")
        lines.append("")
    if options:
        lines += ["| option | takes | default | |", "|---|---|---|---|"]
        lines += [option_row(ctx, option) for option in options]
        lines.append("")
    if isinstance(command, click.Group):
        subs = [f"`{name}`" for name in command.list_commands(ctx)]
        lines += ["Commands: " + ", ".join(subs) + ".", ""]
    if command.epilog:
        lines += [*help_paragraphs(command.epilog), ""]
    return lines


def render_commands() -> str:
    """An index of the commands, then one section per command and group."""
    tree = list(command_tree())
    lines = ["| command | what it does |", "|---|---|"]
    for ctx, command in tree[1:]:
        anchor = ctx.command_path.replace(" ", "-")
        short = plain_text(command.get_short_help_str(limit=SHORT_HELP_CHARS), cell=True)
        lines.append(f"| [`{ctx.command_path}`](#{anchor}) | {short} |")
    lines.append("")
    for ctx, command in tree:
        lines += render_command(ctx, command)
    return "\n".join(lines)


# --- pages -----------------------------------------------------------------------------------

GENERATED_PAGES = (
    GeneratedPage("docs/configuration.md", "settings", render_settings),
    GeneratedPage("docs/cli.md", "commands", render_commands),
)


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
