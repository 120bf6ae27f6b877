"""Settings, built once per process and passed explicitly (never read from globals).

Precedence, lowest first: defaults < TOML file (``--config`` or ``$REVIEWBOT_CONFIG``, else
``~/.config/reviewbot/config.toml`` if present) < environment ``REVIEWBOT_*`` < command-line flags.
A repository may carry ``.reviewbot.toml`` with review-policy keys only (``REPO_KEYS``).
Secrets (tokens, API keys) are excluded from ``repr`` and from ``describe()``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import platformdirs

from reviewbot.chunking import DEFAULT_SCOPE_CONTEXT_TOKENS
from reviewbot.findings import Category, Severity
from reviewbot.llm.backend import DEFAULT_MAX_REPAIR_ROUNDS, DEFAULT_PREFILL_TOKENS_PER_REVIEW
from reviewbot.redaction import hide_url_password

__all__ = ["REPO_KEYS", "ConfigError", "Settings", "apply_repo_overrides", "load_settings"]

ENV_PREFIX = "REVIEWBOT_"
DEFAULT_LLM_BASE_URL = "http://127.0.0.1:8000/v1"
SECRET_FIELDS = frozenset({"gitlab_token", "llm_api_key", "webhook_secret"})
REPO_KEYS = frozenset(
    {"exclude", "min_severity", "categories", "language", "include_style", "max_inline"}
)
PUBLISH_MODES = ("discussions", "drafts")
HTTP_SCHEMES = ("http", "https")
DATABASE_SCHEMES = ("sqlite", "postgresql", "postgres")
# GitLab.com allows 300 note creations per minute per user; stay well below. Self-managed
# GitLab without that limit can raise it.
DEFAULT_GITLAB_NOTES_PER_MINUTE = 120
LLM_BACKEND_VLLM = "vllm"
LLM_BACKEND_OPENAI_COMPATIBLE = "openai-compatible"
LLM_BACKENDS = (LLM_BACKEND_VLLM, LLM_BACKEND_OPENAI_COMPATIBLE)


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names it and what is expected."""


def _default_database_url() -> str:
    path = Path(platformdirs.user_data_dir("reviewbot")) / "reviewbot.db"
    return f"sqlite:///{path}"


@dataclass(frozen=True)
class Settings:
    gitlab_url: str | None = None
    gitlab_token: str | None = field(default=None, repr=False)
    llm_base_url: str = DEFAULT_LLM_BASE_URL
    llm_api_key: str | None = field(default=None, repr=False)
    llm_model: str | None = None
    # "vllm", or "openai-compatible" for servers without vLLM's extras (Ollama, llama.cpp)
    llm_backend: str = LLM_BACKEND_VLLM
    database_url: str = field(default_factory=_default_database_url)
    max_model_len: int | None = None  # None: ask the server (/v1/models)
    max_output_tokens: int = 4096
    concurrency: int = 8
    # Requests in flight to the model across all workers sharing the database (None:
    # `concurrency`); see reviewbot.slots.
    llm_total_concurrency: int | None = None
    # Prompt tokens of one review waiting for their first token at once (0: no limit), so a
    # review of large chunks does not hold other merge requests' first tokens back; see
    # reviewbot.llm.prefill.
    llm_prefill_tokens_per_review: int = DEFAULT_PREFILL_TOKENS_PER_REVIEW
    # Repair turns for a model answer with unreadable tool calls (bad JSON, a missing or
    # mistyped field): the reasons go back to the model, which may resend those calls; then the
    # chunk is asked again from the start (0: no repair turn). Each turn is one model call.
    llm_max_repair_rounds: int = DEFAULT_MAX_REPAIR_ROUNDS
    request_timeout_s: float = 300.0
    enable_thinking: bool | None = None
    context_lines: int = 3
    # Enclosing function/class shown above each hunk, at most this many tokens (0: off)
    scope_context_tokens: int = DEFAULT_SCOPE_CONTEXT_TOKENS
    exclude: tuple[str, ...] = ()
    min_severity: str = Severity.MINOR.value
    categories: tuple[str, ...] = ()  # empty: all categories
    language: str = "English"
    include_style: bool = False
    max_inline: int = 30
    publish_mode: str = "discussions"
    # Notes this process creates per minute on one GitLab (after a burst of 20), all jobs
    # together: one GitLab client per URL per process (reviewbot.app).
    gitlab_notes_per_minute: int = DEFAULT_GITLAB_NOTES_PER_MINUTE
    gitlab_timeout_s: float = 30.0  # per GitLab request; a write whose answer is late is
    # looked for on the MR before it is sent again
    mr_lock_seconds: float = 60.0  # per-MR lease; renewed while a run is alive
    # Webhook listener (`reviewbot serve`)
    webhook_secret: str | None = field(default=None, repr=False)
    bot_username: str | None = None  # None: ask GitLab whom the token belongs to
    review_drafts: bool = False
    webhook_max_body_bytes: int = 1_000_000

    def __post_init__(self) -> None:
        _check_choice("min_severity", self.min_severity, [s.value for s in Severity])
        for category in self.categories:
            _check_choice("categories", category, [c.value for c in Category])
        _check_choice("publish_mode", self.publish_mode, PUBLISH_MODES)
        _check_choice("llm_backend", self.llm_backend, LLM_BACKENDS)
        for name in ("max_output_tokens", "concurrency", "max_inline", "gitlab_notes_per_minute"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in (
            "context_lines",
            "scope_context_tokens",
            "llm_prefill_tokens_per_review",
            "llm_max_repair_rounds",
        ):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be 0 or more, got {getattr(self, name)}")
        for name in ("llm_total_concurrency", "max_model_len", "webhook_max_body_bytes"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"{name} must be at least 1, got {value}")
        for name in ("request_timeout_s", "mr_lock_seconds", "gitlab_timeout_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise ConfigError(f"{name} must be a positive number of seconds, got {value}")
        _check_http_url("gitlab_url", self.gitlab_url)
        _check_http_url("llm_base_url", self.llm_base_url)
        _check_database_url(self.database_url)

    def describe(self) -> dict[str, Any]:
        """Settings as a dict with secrets masked, for logs and diagnostics."""
        out = dataclasses.asdict(self)
        for name in SECRET_FIELDS:
            out[name] = "***" if out[name] else None
        return out


def _check_http_url(name: str, url: str | None) -> None:
    """An http(s) URL with a host; the message never shows a password it may hold."""
    if url is None:
        return
    parts = urlsplit(url)
    if parts.scheme not in HTTP_SCHEMES or not parts.hostname:
        raise ConfigError(f"{name}: {hide_url_password(url)!r} is not an http:// or https:// URL")


def _check_database_url(url: str) -> None:
    scheme = urlsplit(url).scheme.split("+", 1)[0]
    if scheme not in DATABASE_SCHEMES:
        raise ConfigError(
            f"database_url: {hide_url_password(url)!r} is not supported: use sqlite:///PATH "
            "or postgresql://USER@HOST/DATABASE"
        )


def _check_choice(name: str, value: str, choices: Any) -> None:
    if value not in choices:
        raise ConfigError(f"{name}: {value!r} is not one of {', '.join(choices)}")


def _coerce(name: str, raw: Any, annotation: str) -> Any:
    """Convert a TOML or environment value to the field's type, or raise ConfigError."""
    if raw is None:
        return None
    try:
        if "tuple" in annotation:
            if isinstance(raw, str):
                return tuple(item.strip() for item in raw.split(",") if item.strip())
            if isinstance(raw, list) and all(isinstance(item, str) for item in raw):
                return tuple(raw)
            raise TypeError
        if "bool" in annotation:
            if isinstance(raw, bool):
                return raw
            lowered = str(raw).strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            if lowered in ("", "auto", "server") and "None" in annotation:
                return None
            raise TypeError
        if "int" in annotation:
            if isinstance(raw, bool):
                raise TypeError
            return int(raw)
        if "float" in annotation:
            return float(raw)
        if not isinstance(raw, str):
            raise TypeError
        return raw
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: cannot use {raw!r} (expected {annotation})") from None


def _from_mapping(values: Mapping[str, Any], source: str) -> dict[str, Any]:
    known = {f.name: str(f.type) for f in fields(Settings)}
    out: dict[str, Any] = {}
    for key, raw in values.items():
        name = key.replace("-", "_")
        if name not in known:
            raise ConfigError(f"{source}: unknown setting {key!r}")
        out[name] = _coerce(name, raw, known[name])
    return out


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    known = {f.name: str(f.type) for f in fields(Settings)}
    out: dict[str, Any] = {}
    for name, annotation in known.items():
        raw = env.get(ENV_PREFIX + name.upper())
        if raw is not None and raw != "":
            out[name] = _coerce(ENV_PREFIX + name.upper(), raw, annotation)
    return out


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"config file {path} is not UTF-8 text (byte {error.start}): save it as UTF-8"
        ) from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {path} is not valid TOML: {error}") from None
    return data.get("reviewbot", data)


def load_settings(
    *,
    env: Mapping[str, str] | None = None,
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the settings from defaults, a TOML file, the environment and explicit overrides."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    path = config_file or env.get("REVIEWBOT_CONFIG")
    if path:
        values.update(_from_mapping(_read_toml(Path(path)), str(path)))
    else:
        default = Path(platformdirs.user_config_dir("reviewbot")) / "config.toml"
        if default.is_file():
            values.update(_from_mapping(_read_toml(default), str(default)))
    values.update(_from_env(env))
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return Settings(**values)


def apply_repo_overrides(
    settings: Settings, toml_text: str, source: str = ".reviewbot.toml"
) -> Settings:
    """Apply a repository's ``.reviewbot.toml`` (review-policy keys only; secrets are refused)."""
    try:
        data = tomllib.loads(toml_text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{source} is not valid TOML: {error}") from None
    data = data.get("reviewbot", data)
    not_allowed = sorted(set(data) - REPO_KEYS)
    if not_allowed:
        raise ConfigError(
            f"{source}: {', '.join(not_allowed)} cannot be set from the repository "
            f"(allowed: {', '.join(sorted(REPO_KEYS))})"
        )
    values = _from_mapping(data, source)
    if "exclude" in values:
        values["exclude"] = settings.exclude + values["exclude"]
    return dataclasses.replace(settings, **values)
