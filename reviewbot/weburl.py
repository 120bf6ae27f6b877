"""Web addresses that are safe to make a link of: ``http`` and ``https`` only.

A value read from the database (a GitLab URL, a project path) must not become a
``javascript:``, ``data:`` or ``vbscript:`` link, nor break out of the Markdown or HTML that
holds it. :func:`web_url` reads an address the way a browser does before it looks at the
scheme (surrounding spaces and control characters dropped, tabs and line breaks inside deleted,
the scheme in any case) and answers the address to link to, or None when it must stay text.
The answer is percent-encoded where a character could end a Markdown link destination or a
table cell (spaces, quotes, brackets, ``|``, ``\\``, ``<``, ``>``, ``` ` ```), so one value
serves both renderers. Pure: strings in, strings out.

Owns: whether an address may become a link, and its encoding when it may. Must not: write the
Markdown or HTML around it (the renderers do) or do I/O.
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

__all__ = ["WEB_SCHEMES", "web_url"]

WEB_SCHEMES = frozenset({"http", "https"})
# What the URL standard strips from both ends (C0 controls and space) and deletes inside
# (tab, line feed, carriage return) before it parses an address.
SURROUNDING = "".join(chr(code) for code in range(0x21))
DELETED_INSIDE = re.compile(r"[\t\n\r]")
# Left as they are: RFC 3986 unreserved and reserved characters, and "%" so an address that is
# already percent-encoded stays the same. Everything else ("(", ")", "[", "]", "'", quotes,
# spaces, "|", "\\", "<", ">", "`", controls, non-ASCII) is percent-encoded.
KEPT_AS_IS = ":/?#@!$&*+,;=-._~%"


def web_url(url: str | None) -> str | None:
    """``url`` ready to link to when it is an ``http(s)`` address with a host, else None."""
    if not url:
        return None
    cleaned = DELETED_INSIDE.sub("", url.strip(SURROUNDING))
    try:
        encoded = quote(cleaned, safe=KEPT_AS_IS)
        parts = urlsplit(encoded)
    except ValueError:  # a lone surrogate (no UTF-8 for it), an unbalanced "[" in the host
        return None
    if parts.scheme.lower() not in WEB_SCHEMES or not parts.hostname:
        return None
    return encoded
