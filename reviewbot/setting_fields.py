"""How a setting is declared: its bounds and the metadata of its field (help, choices, what its
default means, whether it is a secret), read back by :mod:`reviewbot.config` and the generated
configuration reference.

Owns: :class:`Bounds`, :func:`setting`, the metadata keys, :class:`SettingDoc` (what the
reference shows of a field) and what a URL setting may be (:func:`http_url_problem`,
:func:`database_url_problem`). Must not: know any setting (they
are :class:`reviewbot.config.Settings`' fields).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from reviewbot.redaction import hide_url_password, scrub_secrets

# A raw value shown in an error is cut to this many characters (5,000 digits are not shown).
MAX_SHOWN_VALUE = 40
BOUNDS_KEY = "reviewbot.bounds"
HELP_KEY = "reviewbot.help"
CHOICES_KEY = "reviewbot.choices"
DEFAULT_TEXT_KEY = "reviewbot.default_text"
ACCEPTS_KEY = "reviewbot.accepts"
HTTP_URL_WORDS = "an `http://` or `https://` URL with a host"
SECRET_KEY = "reviewbot.secret"
HTTP_SCHEMES = ("http", "https")
DATABASE_SCHEMES = ("sqlite", "postgresql", "postgres")


@dataclass(frozen=True)
class Bounds:
    """The values a numeric setting may take: ``low`` to ``high`` inclusive (``low`` itself
    excluded when ``above_low``), always finite. Declared next to the field's default."""

    low: float
    high: float
    above_low: bool = False
    unit: str = ""

    def problem(self, value: float) -> str | None:
        """Why ``value`` is out of bounds, or None when it is fine."""
        if not math.isfinite(value):
            of_unit = f" of {self.unit}" if self.unit else ""
            return f"must be a finite number{of_unit}, got {shown(value)}"
        if self.above_low and value <= self.low:
            return f"must be more than {_number(self.low)}{self._in_unit()}, got {shown(value)}"
        if value < self.low:
            at_least = "0 or more" if self.low == 0 else f"at least {_number(self.low)}"
            return f"must be {at_least}, got {shown(value)}"
        if value > self.high:
            return f"must be at most {_number(self.high)}{self._in_unit()}, got {shown(value)}"
        return None

    def describe(self) -> str:
        """The allowed range in words, as docs/configuration.md shows it."""
        low = f"more than {_number(self.low)}" if self.above_low else _number(self.low)
        return f"{low} to {_number(self.high)}{self._in_unit()}"

    def _in_unit(self) -> str:
        return f" {self.unit}" if self.unit else ""


def setting(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    bounds: Bounds | None = None,
    choices: tuple[str, ...] = (),
    default_text: str = "",
    accepts: str = "",
    default_factory: Callable[[], Any] | Any = dataclasses.MISSING,
    secret: bool = False,
) -> Any:
    """A field of Settings with everything said about it, once: its default; its help text
    (Markdown, shown in docs/configuration.md, links relative to docs/); the bounds of a number
    (checked whenever Settings are built); the values it may take (``choices``: each item of
    a list); what the default means in words where it is None or computed (``default_text``);
    the values a text takes, in words, where ``__post_init__`` checks them (``accepts``); and
    whether it is a secret (never in ``repr``, ``describe()`` or a message)."""
    metadata = {
        HELP_KEY: help,
        CHOICES_KEY: choices,
        DEFAULT_TEXT_KEY: default_text,
        ACCEPTS_KEY: accepts,
    }
    if bounds is not None:
        metadata[BOUNDS_KEY] = bounds
    if secret:
        metadata[SECRET_KEY] = True
    return field(
        default=default, default_factory=default_factory, repr=not secret, metadata=metadata
    )


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def shown(value: Any) -> str:
    """``value`` as an error message shows it: its repr, cut to MAX_SHOWN_VALUE characters."""
    text = repr(value)
    return text if len(text) <= MAX_SHOWN_VALUE else text[: MAX_SHOWN_VALUE - 3] + "..."


@dataclass(frozen=True)
class SettingDoc:
    """What the configuration reference says about one setting, read from its field."""

    name: str
    env: str
    kind: str  # the value in words: "a whole number", "a list of strings", an accepts text
    optional: bool  # may be left unset (None)
    default: Any  # None when unset or computed: then default_text says what it means
    default_text: str
    bounds: Bounds | None
    choices: tuple[str, ...]
    help: str
    secret: bool
    repository: bool  # a repository's .reviewbot.toml may set it


def http_url_problem(url: str) -> str | None:
    """Why ``url`` is not an http(s) URL with a host and a valid port, or None when it is one;
    the words never show a password. The settings and the command-line options both ask it."""
    why = ""
    try:
        parts = urlsplit(url)
        usable = parts.scheme in HTTP_SCHEMES and bool(parts.hostname)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as error:
        usable, why = False, f" ({scrub_secrets(str(error))})"
    if usable:
        return None
    return f"{hide_url_password(url)!r} is not an http:// or https:// URL{why}"


def database_url_problem(url: str) -> str | None:
    """Why ``url`` is not a database reviewbot supports, or None when it is one."""
    try:
        scheme = urlsplit(url).scheme.split("+", 1)[0]
    except ValueError:
        scheme = ""
    if scheme in DATABASE_SCHEMES:
        return None
    return (
        f"{hide_url_password(url)!r} is not supported: use sqlite:///PATH "
        "or postgresql://USER@HOST/DATABASE"
    )
