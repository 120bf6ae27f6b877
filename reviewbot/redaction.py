"""Secrets out of messages and posted text: passwords in URLs, tokens, keys (pure).

Every place that shows an error, a URL or a stored error text uses these, so a password or a
token never reaches a log line, the terminal or the database; and everything the model writes
that reviewbot posts (findings, thread answers) goes through :func:`mask_secrets`, so a key the
model read in the repository (a ``secrets.env`` through ``read_file``) is never posted.

The token shapes are the issuers' own: GitLab's prefixed tokens
(https://docs.gitlab.com/security/tokens/#token-prefixes), AWS access key ids (``AKIA``/``ASIA``
and 16 characters) and a secret access key assigned by name, Google API keys (``AIza`` and 35
characters), Slack tokens (``xox?-``), and PEM private key blocks.

Owns: what counts as a secret in a text and how it is masked, and a URL without its user
information. Must not: log, print or store anything itself.
"""

from __future__ import annotations

import re

__all__ = [
    "hide_url_password",
    "instance_url",
    "mask_secrets",
    "scrub_secrets",
    "without_userinfo",
]

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
    # GitLab's tokens: personal, OAuth, deploy, runner, CI build, trigger, feed, incoming mail,
    # agent, SCIM, feature flags client
    (
        re.compile(r"\b(gl(?:pat|oas|dt|rt|cbt|ptt|ft|imt|agent|soat|ffct)-)[A-Za-z0-9_.-]+"),
        rf"\1{REDACTED}",
    ),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), f"AKIA{REDACTED}"),  # AWS access key ids
    (
        re.compile(r"(?i)(aws_secret_access_key[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9/+=]{40}"),
        rf"\1{REDACTED}",
    ),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), f"AIza{REDACTED}"),  # Google API keys
    (re.compile(r"\b(xox[abposr]-)[A-Za-z0-9-]{10,}"), rf"\1{REDACTED}"),  # Slack tokens
    (
        re.compile(
            r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END \1PRIVATE KEY-----|\Z)",
            re.DOTALL,
        ),
        rf"-----BEGIN \1PRIVATE KEY----- {REDACTED} -----END \1PRIVATE KEY-----",
    ),
)


def hide_url_password(url: str) -> str:
    """``url`` with the password of ``user:password@`` replaced by ``***``."""
    return URL_PASSWORD.sub(rf"\1{REDACTED}@", url)


def without_userinfo(url: str) -> str:
    """``url`` without its ``user[:password]@``: the address alone, for whatever leaves the
    process (a model request's session key, git's command line, a message)."""
    return URL_USERINFO.sub(r"\1", url, count=1)


def instance_url(url: str) -> str:
    """The GitLab instance's address as the store identifies it: without userinfo (a password
    in the configured URL never reaches a database row) and without a trailing slash."""
    return without_userinfo(url).rstrip("/")


def mask_secrets(text: str) -> tuple[str, bool]:
    """``text`` with every secret masked, and whether there was one to mask."""
    masked = scrub_secrets(text) or ""
    return masked, masked != text


def scrub_secrets(text: str | None) -> str | None:
    """Hide passwords and tokens that error messages sometimes carry."""
    if text is None:
        return None
    for pattern, replacement in SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text
