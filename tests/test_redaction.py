"""Secrets never reach a message: passwords in URLs, bearer and GitLab tokens."""

from __future__ import annotations

import pytest

from reviewbot.redaction import hide_url_password, mask_secrets, scrub_secrets, without_userinfo


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://bot:hunter2@db:5432/rb", "postgresql://bot:***@db:5432/rb"),
        ("https://user:p%40ss@gitlab.example", "https://user:***@gitlab.example"),
        ("postgresql://bot@db/rb", "postgresql://bot@db/rb"),  # no password: unchanged
        ("sqlite:////var/lib/rb.db", "sqlite:////var/lib/rb.db"),
    ],
)
def test_hide_url_password(url: str, shown: str) -> None:
    assert hide_url_password(url) == shown


def test_scrub_secrets_hides_every_carrier_and_keeps_the_rest() -> None:
    text = (
        "connect postgresql://bot:hunter2@db/rb failed; Authorization: Bearer abc.DEF-123; "
        "PRIVATE-TOKEN: tok123 and job-token=jt456; token glpat-abcdefghij1234"
    )
    scrubbed = scrub_secrets(text)
    assert scrubbed is not None
    for secret in ("hunter2", "abc.DEF-123", "tok123", "jt456", "abcdefghij1234"):
        assert secret not in scrubbed
    assert scrubbed.startswith("connect postgresql://bot:***@db/rb failed")
    assert "glpat-***" in scrubbed


def test_scrub_secrets_passes_none_through() -> None:
    assert scrub_secrets(None) is None


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("http://user:pass@gitlab.example.com", "http://gitlab.example.com"),
        ("https://user:pa@ss@gitlab.example.com:8443/sub/", "https://gitlab.example.com:8443/sub/"),
        ("https://glpat-x@gitlab.example.com", "https://gitlab.example.com"),
        ("http://[::1]:8080/a@b", "http://[::1]:8080/a@b"),  # an "@" in the path stays
        ("https://gitlab.example.com/?q=a@b", "https://gitlab.example.com/?q=a@b"),
        ("gitlab.example.com", "gitlab.example.com"),
    ],
)
def test_without_userinfo_keeps_the_address_alone(url: str, address: str) -> None:
    assert without_userinfo(url) == address


@pytest.mark.parametrize(
    ("secret", "shown"),
    [
        ("glpat-Zx8v1Qk3mN5pR7tW9yB2", "glpat-***"),
        ("glrt-t1_Zx8v1Qk3mN5pR7tW9yB2", "glrt-***"),
        ("AKIAIOSFODNN7EXAMPL3", "AKIA***"),
        (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_access_key = ***",
        ),
        ("AIzaSyA-1234567890abcdefghijklmnopqrstu", "AIza***"),
        ("xoxb-123456789012-abcdefghij", "xoxb-***"),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
            "-----BEGIN RSA PRIVATE KEY----- *** -----END RSA PRIVATE KEY-----",
        ),
    ],
)
def test_a_secret_in_model_text_is_masked_and_said(secret: str, shown: str) -> None:
    masked, found = mask_secrets(f"config: {secret} (from secrets.env)")
    assert found and masked == f"config: {shown} (from secrets.env)"


@pytest.mark.parametrize(
    "text",
    [
        "password = request.form['password']",
        "key = os.environ['AWS_SECRET_ACCESS_KEY']",
        "glpat tokens start with glpat-",
        "BEGIN PRIVATE KEY handling in tls.py",
    ],
)
def test_code_that_only_names_a_secret_is_left_as_written(text: str) -> None:
    assert mask_secrets(text) == (text, False)
