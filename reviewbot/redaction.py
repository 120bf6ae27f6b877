"""Secrets out of messages: passwords in URLs, bearer and GitLab tokens (pure).

Every place that shows an error, a URL or a stored error text uses these, so a password or a
token never reaches a log line, the terminal or the database.

Owns: what counts as a secret in a text (URL passwords, bearer and GitLab tokens) and how it is
masked, and a URL without its user information. Must not: log, print or store anything itself.
"""

from __future__ import annotations

import re

__all__ = ["hide_url_password", "scrub_secrets", "without_userinfo"]

REDACTED = "***"
URL_PASSWORD = re.compile(r"(://[^/\s:@]*:)[^@\s/]*@")  # scheme://user:password@host
# scheme://user:password@host: the authority runs to the first "/", "?" or "#", the user
# information to its last "@" (a password may hold one).
URL_USERINFO = re.compile(r"\A([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")
SECRET_PATTERNS = (
    (URL_PASSWORD, rf"\1{REDACTED}@"),
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"), rf"\1{REDACTED}"),
    (
        re.compile(r"(?i)((?:private|job)-token[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"),
        rf"\1{REDACTED}",
    ),
    (re.compile(r"\bglpat-[A-Za-z0-9_-]+"), f"glpat-{REDACTED}"),  # GitLab personal tokens
)


def hide_url_password(url: str) -> str:
    """``url`` with the password of ``user:password@`` replaced by ``***``."""
    return URL_PASSWORD.sub(rf"\1{REDACTED}@", url)


def without_userinfo(url: str) -> str:
    """``url`` without its ``user[:password]@``: the address alone, for whatever leaves the
    process (a model request's session key, git's command line, a message)."""
    return URL_USERINFO.sub(r"\1", url, count=1)


def scrub_secrets(text: str | None) -> str | None:
    """Hide passwords and tokens that error messages sometimes carry."""
    if text is None:
        return None
    for pattern, replacement in SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text
