r"""How text reaches a terminal: the one kind of rich Console every command prints through, and
data (a string from the database, GitLab, the model server, a diff or a settings file) as text.

Data is shown as written and nothing in it is obeyed: not rich markup (``[bold red]x[/]``,
``[link=...]``), not emoji codes (``:smile:``), not terminal control sequences (``\x1b[2J``
clears the screen, ``\x1b]8;;URL\x07`` is an OSC 8 hyperlink, CSI and OSC also exist as the C1
characters U+009B and U+009D, BEL rings, a carriage return overwrites the line). So:

* :func:`console` has markup, emoji codes and highlighting off: a plain string prints as written
  (the commands' own styles are rich ``Text`` with a style, never markup);
* :func:`data` makes a data string a rich ``Text``: ``Text`` is never read as markup, in a table
  cell or anywhere else;
* :func:`terminal_text` replaces every character a terminal would act on with U+FFFD, the
  character `reviewbot.markdown.printable_text` uses (its C0, DEL, C1 and lone surrogates, and
  here the carriage return too; "\r\n" is a line end), so the reader still sees something was
  there. ``fail`` and the commands that ``click.echo`` data use it as well.

Owns: those three. Must not: lay out a table or a line (`render`, `render_ops`), or decide what a
command prints.
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.text import Text

from reviewbot.markdown import REPLACEMENT_CHARACTER, printable_text

__all__ = ["PIPED_TABLE_WIDTH", "cell", "console", "data", "table_width", "terminal_text"]

PIPED_TABLE_WIDTH = 200  # rich tables on a pipe (not a terminal) are not cut at 80 columns
CARRIAGE_RETURN = "\r"
TAB = "\t"
WINDOWS_LINE_END = "\r\n"


def terminal_text(value: object) -> str:
    """``str(value)`` with nothing a terminal acts on: tab and line feed stay, every other
    control character, a lone surrogate and a carriage return become U+FFFD."""
    text = printable_text(str(value).replace(WINDOWS_LINE_END, "\n"))
    return text.replace(CARRIAGE_RETURN, REPLACEMENT_CHARACTER)


def data(value: object, style: str = "") -> Text:
    """A data string as rich ``Text`` (optionally in the commands' own ``style``): shown as
    written, never read as markup or emoji codes, with nothing a terminal acts on."""
    return Text(terminal_text(value), style=style)


def cell(value: object) -> Text:
    """A data string for a table cell: as :func:`data`, with each tab one space (the table lays
    the cell out; a tab would take 8 columns of a narrow cell and push the words out of it)."""
    return data(terminal_text(value).replace(TAB, " "))


def table_width() -> int | None:
    """Rich's width for tables: the terminal's, or PIPED_TABLE_WIDTH on a pipe."""
    return None if sys.stdout.isatty() else PIPED_TABLE_WIDTH


def console(*, stderr: bool = False, tables: bool = False, soft_wrap: bool = False) -> Console:
    """The Console a command prints through: markup, emoji codes and highlighting off. On
    ``stderr`` for progress and messages; ``tables``: PIPED_TABLE_WIDTH wide on a pipe."""
    return Console(
        stderr=stderr,
        width=table_width() if tables else None,
        markup=False,
        emoji=False,
        highlight=False,
        soft_wrap=soft_wrap,
    )
