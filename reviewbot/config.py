"""Settings, built once per process and passed explicitly (never read from globals).

Precedence, lowest first: defaults < TOML file (``--config`` or ``$REVIEWBOT_CONFIG``, else
``~/.config/reviewbot/config.toml`` if present) < environment ``REVIEWBOT_*`` < command-line flags.
A repository may carry ``.reviewbot.toml`` with review-policy keys only (``REPO_KEYS``).
Secrets (tokens, API keys) are excluded from ``repr`` and from ``describe()``.

Part of the core, with one door to the process: everything here takes values and returns values
(the ``Settings`` fields; the parsing and checking of given TOML text, mappings and
``REVIEWBOT_*`` strings; :func:`apply_repo_overrides`, :func:`settings_values` and
:func:`with_values` for the configurations ``reviewbot eval --compare`` is given), except
:func:`load_settings`, the one function of the core that reads the process's environment
(``os.environ``, unless an ``env`` mapping is handed in) and a settings file (through
:mod:`reviewbot.input_files`). Whoever starts a process calls it once (``App.from_config``,
``reviewbot.ci``, the ``plan``, ``review`` and ``doctor`` commands) and passes the ``Settings``
on. The default ``database_url`` is a file in the user data folder (platformdirs finds it from
the environment); nothing here opens it. tests/test_layers.py checks that no other function of
the core reads the environment.

Owns: every setting (default, bounds, help and choices, declared once), turning given values
into ``Settings`` or a one-line ``ConfigError``, and the keys a repository may set. Must not:
be read as a global, touch the network or the database, or read the environment or a file
outside :func:`load_settings` (the default database path aside).
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import platformdirs

from reviewbot.analyzer_settings import AnalyzerSettings
from reviewbot.check_settings import CheckSettings
from reviewbot.findings import Category, Severity
from reviewbot.gitlab_budget_settings import GitLabBudgetSettings
from reviewbot.group_config import GroupConfig, group_project_problem
from reviewbot.input_files import InputFileRefused, read_input_file
from reviewbot.mr_overview_settings import OVERVIEW_CHOICES, OverviewSettings
from reviewbot.setting_fields import (
    ACCEPTS_KEY,
    BOUNDS_KEY,
    CHOICES_KEY,
    DEFAULT_TEXT_KEY,
    HELP_KEY,
    HTTP_URL_WORDS,
    SECRET_KEY,
    Bounds,
    SettingDoc,
    database_url_problem,
    http_url_problem,
    setting,
    shown,
)

__all__ = [
    "DEFAULT_LEARNINGS_TOKENS",
    "DEFAULT_MAX_REPAIR_ROUNDS",
    "DEFAULT_PREFILL_TOKENS_PER_REVIEW",
    "DEFAULT_PROPOSAL_THRESHOLD",
    "DEFAULT_RULES_TOKENS",
    "DEFAULT_SCOPE_CONTEXT_TOKENS",
    "DEFAULT_SESSION_HEADER",
    "DEFAULT_TOOL_ROUNDS",
    "DEFAULT_TOOL_TOKENS",
    "MAX_CONFIG_FILE_BYTES",
    "MAX_PROPOSAL_THRESHOLD",
    "REPO_KEYS",
    "TOOLS_OFF",
    "TOOLS_ON",
    "TOOLS_TYPED",
    "VERIFY_ON",
    "Bounds",
    "ConfigError",
    "SettingDoc",
    "Settings",
    "apply_repo_overrides",
    "database_url_problem",
    "http_url_problem",
    "load_settings",
    "setting",
    "setting_bounds",
    "setting_docs",
    "settings_values",
    "with_values",
]

# Defaults of settings the core's modules also use (they import them from here).
# Enclosing-scope context per hunk, at most (tokens): about 50 lines of code.
DEFAULT_SCOPE_CONTEXT_TOKENS = 600
# Tokens of review rules per chunk (setting rules_tokens): a dozen rules of a few lines each.
DEFAULT_RULES_TOKENS = 1500
# Tokens of learnings per chunk (setting learnings_tokens): some 15 learnings of 60 tokens.
DEFAULT_LEARNINGS_TOKENS = 1000
# Negative outcomes of one kind of finding in a project before a learning is proposed.
DEFAULT_PROPOSAL_THRESHOLD = 3
MAX_PROPOSAL_THRESHOLD = 1_000  # a kind of finding thumbed down this often is noise anyway

ENV_PREFIX = "REVIEWBOT_"
DEFAULT_LLM_BASE_URL = "http://127.0.0.1:8000/v1"
REPO_KEYS = frozenset(
    {"exclude", "min_severity", "categories", "language", "include_style", "max_inline"}
)
REPO_RULES_KEY = "rules"
PUBLISH_MODES = ("discussions", "drafts")
# RFC 9110 section 5.6.2: a field name is a token.
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# GitLab.com allows 300 note creations per minute per user; stay well below. Self-managed
# GitLab without that limit can raise it.
DEFAULT_GITLAB_NOTES_PER_MINUTE = 120
# Answers in threads: five minutes, then an answer is stale; 30 per MR and 20 per user an hour
# keep a chatty thread (or a loop between two bots) from costing the model's capacity.
DEFAULT_REPLY_TIMEOUT_S = 300.0
DEFAULT_REPLY_MAX_PER_MR_PER_HOUR = 30
DEFAULT_REPLY_MAX_PER_USER_PER_HOUR = 20
MAX_REPLIES_PER_HOUR = 10_000
# Prompt tokens of one review allowed to wait for their first token at once: one 64K context,
# so another merge request's request queues behind at most one full-size chunk of this review
# (reviewbot.llm.prefill). 0 turns the limit off.
DEFAULT_PREFILL_TOKENS_PER_REVIEW = 65536
# Repair turns per answer with unreadable calls: the reasons go back to the model, which may
# resend those calls (reviewbot.llm.runner). 0 turns them off; each is one more model call.
DEFAULT_MAX_REPAIR_ROUNDS = 1
# The model's repository tools (reviewbot.repo.tools, docs/tools.md): on (one compact tool),
# typed (the four typed tools) or off, and per chunk at most this many tool rounds (each one
# more model call) and tokens of tool answers.
TOOLS_ON = "on"
TOOLS_TYPED = "typed"
TOOLS_OFF = "off"
TOOLS_CHOICES = (TOOLS_ON, TOOLS_TYPED, TOOLS_OFF)
VERIFY_ON, VERIFY_OFF = "on", "off"  # off by default until eval --compare measures it
VERIFY_CHOICES = (VERIFY_ON, VERIFY_OFF)
DEFAULT_TOOL_ROUNDS = 3
DEFAULT_TOOL_TOKENS = 8000
MAX_TOOL_ROUNDS = 16  # each is a model call of the chunk's whole conversation
LLM_BACKEND_VLLM = "vllm"
# vllm-router's consistent_hash policy hashes this header first (checked on 0.1.17:
# docs/several-boxes.md); NVIDIA Dynamo reads X-Dynamo-Session-ID, SGLang's gateway
# x-smg-routing-key.
DEFAULT_SESSION_HEADER = "X-Session-ID"
# Sent unless turned off: vLLM >= 0.10 accepts a priority whatever its policy (and only honours
# it with --scheduling-policy priority); an older one refuses it, and the client stops sending.
DEFAULT_PRIORITY_SCHEDULING = True
LLM_BACKEND_OPENAI_COMPATIBLE = "openai-compatible"
LLM_BACKENDS = (LLM_BACKEND_VLLM, LLM_BACKEND_OPENAI_COMPATIBLE)
# A settings file is a few hundred bytes; a larger one is not a settings file (or a device
# such as /dev/zero, which is refused before reading anyway).
MAX_CONFIG_FILE_BYTES = 1_048_576
# Upper bounds of numeric settings: far above any real use, low enough that a typo (an extra
# digit, 1e400, 2**70) is refused where it is parsed instead of failing later as an overflow,
# a thread pool of a billion threads or a socket timeout the C library cannot hold.
MAX_TOKENS = 16_777_216  # 16M tokens: above the longest served context windows (10M)
MAX_CONCURRENCY = 4096
MAX_CONTEXT_LINES = 10_000
MAX_INLINE_COMMENTS = 10_000
MAX_NOTES_PER_MINUTE = 1_000_000
MAX_WEBHOOK_BODY_BYTES = 1_073_741_824  # 1 GiB
MAX_TIMEOUT_S = 86_400.0  # a day
MAX_REPAIR_ROUNDS = 16  # each is a model call of the chunk's whole conversation
MAX_CACHE_BYTES = 2**50  # 1 PiB
GIB = 2**30
DEFAULT_REPO_CACHE_MAX_BYTES = 10 * GIB
DEFAULT_REPO_FETCH_TIMEOUT_S = 120.0
SEVERITIES = tuple(severity.value for severity in Severity)
CATEGORIES = tuple(category.value for category in Category)


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names it and what is expected."""


def setting_docs() -> list[SettingDoc]:
    """Every setting, in the order of its field, as the reference shows it."""
    docs = []
    for item in fields(Settings):
        annotation = str(item.type)
        default = None if item.default is dataclasses.MISSING else item.default
        docs.append(
            SettingDoc(
                name=item.name,
                env=ENV_PREFIX + item.name.upper(),
                kind=item.metadata.get(ACCEPTS_KEY) or _expected(annotation),
                optional="None" in annotation,
                default=default,
                default_text=item.metadata.get(DEFAULT_TEXT_KEY, ""),
                bounds=item.metadata.get(BOUNDS_KEY),
                choices=item.metadata.get(CHOICES_KEY, ()),
                help=item.metadata.get(HELP_KEY, ""),
                secret=item.name in SECRET_FIELDS,
                repository=item.name in REPO_KEYS,
            )
        )
    return docs


def setting_bounds(name: str) -> Bounds | None:
    """The bounds of setting ``name`` (for option types that accept the same values)."""
    for item in fields(Settings):
        if item.name == name:
            bounds = item.metadata.get(BOUNDS_KEY)
            return bounds if isinstance(bounds, Bounds) else None
    raise KeyError(name)


def _default_repo_cache_dir() -> str:
    return str(Path(platformdirs.user_cache_dir("reviewbot")) / "repos")


def _default_database_url() -> str:
    path = Path(platformdirs.user_data_dir("reviewbot")) / "reviewbot.db"
    return f"sqlite:///{path}"


@dataclass(frozen=True)
class Settings(
    GroupConfig, CheckSettings, AnalyzerSettings, OverviewSettings, GitLabBudgetSettings
):
    """Every setting, its default and its help text (docs/configuration.md is generated from
    these fields by ``python -m reviewbot.commands.docs``); a feature's own group of settings
    is a base class in its own module (``GroupConfig``, ``CheckSettings``,
    ``AnalyzerSettings``)."""

    gitlab_url: str | None = setting(
        None,
        accepts=HTTP_URL_WORDS,
        default_text="not set: needed by every command that talks to GitLab",
        help="The GitLab instance root, e.g. `https://gitlab.example.com` (not `…/api/v4`, not "
        "a project page). `reviewbot ci` takes it from `CI_API_V4_URL` when it is not set.",
    )
    gitlab_token: str | None = setting(
        None,
        secret=True,
        default_text="not set",
        help="A GitLab token with the `api` scope: a project (or group) access token with the "
        "Developer role (resolving stale threads needs it), whose bot user becomes the "
        "reviewer. `CI_JOB_TOKEN` cannot post notes.",
    )
    llm_base_url: str = setting(
        DEFAULT_LLM_BASE_URL,
        accepts=HTTP_URL_WORDS,
        help="The model server's OpenAI-compatible endpoint, ending in `/v1` "
        "([model-server.md](model-server.md)).",
    )
    llm_api_key: str | None = setting(
        None,
        secret=True,
        default_text="not set: no key is sent",
        help="Sent as `Authorization: Bearer <key>`: the key of a vLLM started with one "
        "([model-server.md](model-server.md#from-an-empty-gpu-box-to-a-service), step 7).",
    )
    llm_model: str | None = setting(
        None,
        default_text="the server's first model (`/v1/models`)",
        help="The served model name, for a server that serves more than one.",
    )
    llm_backend: str = setting(
        LLM_BACKEND_VLLM,
        choices=LLM_BACKENDS,
        help="`vllm`, or `openai-compatible` for a server without vLLM's `/tokenize`, "
        "`tool_choice` and prefix-cache figures (Ollama, llama.cpp): "
        "[other model servers](model-server.md#other-model-servers-ollama-llamacpp).",
    )
    llm_session_header: str = setting(
        DEFAULT_SESSION_HEADER,
        accepts="an HTTP header name, or empty",
        help="The header every model request of one review carries with "
        "`<gitlab host>/<project id>/<mr iid>` (also sent as the OpenAI `user` field), so a "
        "router in front of several model servers keeps an MR on one box and its prefix cache "
        "([several-boxes.md](several-boxes.md)); empty: neither is sent.",
    )
    priority_scheduling: bool = setting(
        DEFAULT_PRIORITY_SCHEDULING,
        help="Send each model request a vLLM `priority` by what it is for: thread answers "
        "first, then first reviews, incremental reviews, evals, load tests. vLLM honours it "
        "when started with `--scheduling-policy priority` (the deploy profiles are); a vLLM "
        "that refuses the field gets requests without it, never a failed review "
        "([model-server.md](model-server.md#interactive-work-first)). Off: all requests equal.",
    )
    database_url: str = setting(
        default_factory=_default_database_url,
        accepts="`sqlite:///PATH` or `postgresql://USER@HOST/DATABASE`",
        default_text="`sqlite:///…/reviewbot.db` in the user data directory "
        "(on Linux `~/.local/share/reviewbot/`)",
        help="Where reviews, model calls, findings, feedback and the job queue are recorded: "
        "`sqlite:///PATH`, or `postgresql://USER@HOST/DATABASE` for more than one worker and, "
        "in CI, for incremental reviews and accuracy tracking ([ci.md](ci.md)).",
    )
    max_model_len: int | None = setting(
        None,
        bounds=Bounds(1, MAX_TOKENS),
        default_text="the server's `max_model_len` (`/v1/models`); 65,536 offline",
        help="The context length prompts are cut for: a chunk gets this minus "
        "`max_output_tokens`, the prompt's fixed parts and a margin "
        "([how a review works](how-a-review-works.md)).",
    )
    max_output_tokens: int = setting(
        4096,
        bounds=Bounds(1, MAX_TOKENS),
        help="Tokens kept for the model's answer in every prompt.",
    )
    concurrency: int = setting(
        8,
        bounds=Bounds(1, MAX_CONCURRENCY),
        help="Chunks of one review sent to the model at once (vLLM's `--max-num-seqs`).",
    )
    llm_total_concurrency: int | None = setting(
        None,
        bounds=Bounds(1, MAX_CONCURRENCY),
        default_text="`concurrency`",
        help="Requests in flight to the model across all workers sharing the database: set it "
        "to vLLM's `--max-num-seqs` ([webhook.md](webhook.md#the-workers-and-the-queue); "
        "`reviewbot.slots`).",
    )
    llm_prefill_tokens_per_review: int = setting(
        DEFAULT_PREFILL_TOKENS_PER_REVIEW,
        bounds=Bounds(0, MAX_TOKENS),
        help="Prompt tokens of one review waiting for their first token at once, so a review "
        "of large chunks never holds another MR's first token behind all of them (a larger "
        "chunk goes alone; prefilled chunks still decode together); 0: no limit. See "
        "[sharing the model between reviews](model-server.md#sharing-the-model-between-reviews).",
    )
    llm_max_repair_rounds: int = setting(
        DEFAULT_MAX_REPAIR_ROUNDS,
        bounds=Bounds(0, MAX_REPAIR_ROUNDS),
        help="Repair turns for an answer whose tool calls cannot be read (bad JSON, a missing "
        "or mistyped field): the reasons go back to the model, which resends those calls; then "
        "the chunk is asked again from the start. Each turn is one model call; 0: none "
        "([model-answers.md](model-answers.md)).",
    )
    request_timeout_s: float = setting(
        300.0,
        bounds=Bounds(0, MAX_TIMEOUT_S, above_low=True, unit="seconds"),
        help="Seconds one model request may take.",
    )
    enable_thinking: bool | None = setting(
        None,
        default_text="the server's choice",
        help="`true` or `false`: Qwen3.5's thinking, sent as `chat_template_kwargs`; `auto` "
        "(or `server`) leaves it to the server.",
    )
    context_lines: int = setting(
        3,
        bounds=Bounds(0, MAX_CONTEXT_LINES),
        help="Lines of the head file shown around each hunk.",
    )
    scope_context_tokens: int = setting(
        DEFAULT_SCOPE_CONTEXT_TOKENS,
        bounds=Bounds(0, MAX_TOKENS),
        help="At most this many tokens per hunk of its enclosing function or class (signature, "
        "then the body up to the hunk), added only where a chunk has room left; a changed file "
        "whose whole text costs no more than its hunks' share is shown whole; 0 turns both off "
        "([how a review works](how-a-review-works.md)).",
    )
    tools: str = setting(
        TOOLS_ON,
        choices=TOOLS_CHOICES,
        help="`on`: the model may read the repository at the head (read a file, search the "
        "code, find a definition, list a directory) through one compact tool whose argument "
        "reads like a read-only shell command (`cat`, `grep`, `ls`, `def NAME`), within "
        "`tool_rounds` and `tool_tokens` per chunk; `typed`: the same reads as four typed "
        "tools (336 prompt tokens a call instead of 61); `off`: every chunk is one "
        "call with `report_finding` only ([tools.md](tools.md)).",
    )
    tool_rounds: int = setting(
        DEFAULT_TOOL_ROUNDS,
        bounds=Bounds(0, MAX_TOOL_ROUNDS),
        help="Tool rounds per chunk: each is one more model call with the tools' answers "
        "appended; after the last one the model is asked for its findings ([tools.md](tools.md)).",
    )
    tool_tokens: int = setting(
        DEFAULT_TOOL_TOKENS,
        bounds=Bounds(0, MAX_TOKENS),
        help="At most this many tokens of tool answers per chunk, all rounds together, and "
        "never more than the context leaves; not reserved when chunks are planned, so a "
        "review calling no tool has the chunks of `tools` off ([tools.md](tools.md)).",
    )
    verify: str = setting(
        VERIFY_OFF,
        choices=VERIFY_CHOICES,
        help="`on`: one more call per chunk asks the model to keep or drop each finding at or "
        "above `verify_min_severity`; dropped ones are stored, never posted "
        "([verification.md](verification.md)).",
    )
    verify_min_severity: str = setting(
        Severity.MINOR.value, choices=SEVERITIES, help="Findings verified: this severity and up."
    )
    verify_min_confidence: float = setting(
        0.7, bounds=Bounds(0.0, 1.0), help="A drop counts from this confidence (0 to 1) up."
    )
    exclude: tuple[str, ...] = setting(
        (),
        help="Globs of files not to review, on top of the built-in ones (lock files, minified, "
        "vendored, generated and binary files); comma-separated in the environment. A "
        "repository's `.reviewbot.toml` adds to them.",
    )
    min_severity: str = setting(
        Severity.MINOR.value,
        choices=SEVERITIES,
        help="Findings below this severity are dropped (most severe first).",
    )
    categories: tuple[str, ...] = setting(
        (),
        choices=CATEGORIES,
        default_text="all categories",
        help='Only findings of these categories, e.g. `["bug", "security"]` (comma-separated '
        "in the environment).",
    )
    rules_file: str | None = setting(
        None,
        default_text="none",
        help="The instance's review rules: a YAML file in the format of a repository's "
        "`.reviewbot/rules.yaml`, applied to every project below the repository's own rules "
        "([review rules](rules.md)).",
    )
    rules_context_files: tuple[str, ...] = setting(
        (),
        help="Sections of the repository's documents given to the model as rules, e.g. "
        '`["CONTRIBUTING.md#Review checklist", "AGENTS.md"]` (without `#Section`: the whole '
        "file), read from the target branch and cut to 8,000 characters each "
        "([review rules](rules.md)).",
    )
    rules_tokens: int = setting(
        DEFAULT_RULES_TOKENS,
        bounds=Bounds(0, MAX_TOKENS),
        help="At most this many tokens of review rules per chunk (only the rules whose paths "
        "match the chunk's files); rules that do not fit are dropped and named in the summary, "
        "never a changed line; 0 turns rules off ([review rules](rules.md)).",
    )
    learnings_tokens: int = setting(
        DEFAULT_LEARNINGS_TOKENS,
        bounds=Bounds(0, MAX_TOKENS),
        help="Tokens of team learnings per chunk, as rules_tokens ([learnings](learnings.md)).",
    )
    learning_proposal_threshold: int = setting(
        DEFAULT_PROPOSAL_THRESHOLD,
        bounds=Bounds(1, MAX_PROPOSAL_THRESHOLD),
        help="👎 or unchanged resolutions of one kind of finding that propose a learning.",
    )
    learning_proposal_notes: bool = setting(
        True,
        help="`feedback sync` posts each proposed learning once in the thread of a finding it "
        "was made from; a 👍 there from a Developer accepts it ([learnings](learnings.md)).",
    )
    language: str = setting("English", help="The language the comments are written in.")
    include_style: bool = setting(False, help="Also report style issues (as `info`).")
    max_inline: int = setting(
        30,
        bounds=Bounds(1, MAX_INLINE_COMMENTS),
        help="Inline comments per review; the rest go to the summary note.",
    )
    publish_mode: str = setting(
        "discussions",
        choices=PUBLISH_MODES,
        help="`discussions`, or `drafts`: draft notes and one `bulk_publish`, so the author "
        "gets one notification per review. The bulk-publish endpoint exists on recent GitLab "
        "only (it was added in 2023, GitLab 16.x — the exact release could not be checked "
        "here); on older GitLab keep `discussions`. After publishing, reviewbot checks which "
        "drafts really became threads and lists any GitLab dropped in the summary.",
    )
    gitlab_notes_per_minute: int = setting(
        DEFAULT_GITLAB_NOTES_PER_MINUTE,
        bounds=Bounds(1, MAX_NOTES_PER_MINUTE),
        help="Notes one process creates per minute on one GitLab, all its jobs together (after "
        "a burst of 20; one GitLab client per URL per process). GitLab.com allows 300 per "
        "user; self-managed GitLab may allow more.",
    )
    gitlab_timeout_s: float = setting(
        30.0,
        bounds=Bounds(0, MAX_TIMEOUT_S, above_low=True, unit="seconds"),
        help="Seconds per GitLab request. A write whose answer is lost or late (a 5xx or a "
        "timeout after GitLab stored it) is looked for on the MR by its hidden marker before it "
        "is sent again.",
    )
    mr_lock_seconds: float = setting(
        60.0,
        bounds=Bounds(0, MAX_TIMEOUT_S, above_low=True, unit="seconds"),
        help="The per-MR lease on SQLite that keeps two runs from posting at once: renewed while "
        "a run is alive, so a crashed run frees the MR after this long (on PostgreSQL the lock "
        "ends with the process: [locking.md](locking.md)).",
    )
    webhook_secret: str | None = setting(
        None,
        secret=True,
        default_text="not set: `reviewbot serve` does not start without `--insecure-no-secret`",
        help="The webhook's secret token, sent by GitLab as `X-Gitlab-Token` "
        "([webhook.md](webhook.md)).",
    )
    bot_username: str | None = setting(
        None,
        default_text="the token's user",
        help="The bot's GitLab username, to recognise its own notes.",
    )
    review_drafts: bool = setting(
        False, help="Also review draft merge requests when a webhook event announces them."
    )
    webhook_max_body_bytes: int = setting(
        1_000_000,
        bounds=Bounds(1, MAX_WEBHOOK_BODY_BYTES),
        help="Larger webhook bodies are refused with 413.",
    )
    # -- answers in the bot's threads (issue 21, docs/conversation.md) ----------------------
    reply_timeout_s: float = setting(
        DEFAULT_REPLY_TIMEOUT_S,
        bounds=Bounds(0, MAX_TIMEOUT_S, above_low=True, unit="seconds"),
        help="An answer in a thread not ready this many seconds after the human's note is "
        "dropped with a log line, not posted late: one answer takes the model seconds, so one "
        "this late waited behind reviews or outages, and the thread has likely moved on "
        "([conversation.md](conversation.md)).",
    )
    reply_max_per_mr_per_hour: int = setting(
        DEFAULT_REPLY_MAX_PER_MR_PER_HOUR,
        bounds=Bounds(1, MAX_REPLIES_PER_HOUR),
        help="Answers in the bot's threads per merge request per hour; notes beyond are "
        "recorded as dropped (rate limited) and not answered.",
    )
    reply_max_per_user_per_hour: int = setting(
        DEFAULT_REPLY_MAX_PER_USER_PER_HOUR,
        bounds=Bounds(1, MAX_REPLIES_PER_HOUR),
        help="Answers to one user per project per hour; notes beyond are recorded as dropped "
        "(rate limited) and not answered.",
    )
    repo_cache_dir: str = setting(
        default_factory=_default_repo_cache_dir,
        default_text="`repos` in the user cache directory (on Linux `~/.cache/reviewbot/repos`)",
        help="The host's repository cache: one bare clone per GitLab project, fetched by head "
        "SHA with `git` and the GitLab token, shared by every reviewbot process of the host "
        "(`run`, the workers); the model's repository tools and the scope context read it "
        "([repository.md](repository.md)).",
    )
    repo_cache_max_bytes: int = setting(
        DEFAULT_REPO_CACHE_MAX_BYTES,
        bounds=Bounds(0, MAX_CACHE_BYTES, unit="bytes"),
        help="The cache's size cap: after a fetch, the least recently used clones of other "
        "projects are removed until the cache fits. 0 turns the cache off (files are read "
        "through GitLab's API, one request per file).",
    )
    repo_fetch_timeout_s: float = setting(
        DEFAULT_REPO_FETCH_TIMEOUT_S,
        bounds=Bounds(0, MAX_TIMEOUT_S, above_low=True, unit="seconds"),
        help="Seconds one `git fetch` into the cache may take; a slower or failed fetch is "
        "warned about in the summary and the files are read through GitLab's API instead.",
    )
    weights_state_file: str = setting(
        "/var/lib/reviewbot-vllm/weights-verify.json",  # the vLLM unit's StateDirectory
        help="Where the weights check records its last result; `reviewbot doctor` reports it "
        "and `doctor --verify-weights` runs it again ([weights](weights.md)).",
    )

    def __post_init__(self) -> None:
        _check_choice("min_severity", self.min_severity, SEVERITIES)
        for category in self.categories:
            _check_choice("categories", category, CATEGORIES)
        _check_choice("publish_mode", self.publish_mode, PUBLISH_MODES)
        _check_choice("llm_backend", self.llm_backend, LLM_BACKENDS)
        _check_choice("tools", self.tools, TOOLS_CHOICES)
        _check_choice("verify", self.verify, VERIFY_CHOICES)
        _check_choice("verify_min_severity", self.verify_min_severity, SEVERITIES)
        for name, choices in OVERVIEW_CHOICES:
            _check_choice(name, getattr(self, name), choices)
        for item in fields(self):
            bounds = item.metadata.get(BOUNDS_KEY)
            if isinstance(bounds, Bounds):
                _check_bounds(item.name, getattr(self, item.name), bounds, str(item.type))
        _check_http_url("gitlab_url", self.gitlab_url)
        _check_http_url("llm_base_url", self.llm_base_url)
        if problem := group_project_problem(self.group_settings_project):
            raise ConfigError(f"group_settings_project {problem}")
        if self.llm_session_header and not HEADER_NAME.fullmatch(self.llm_session_header):
            raise ConfigError(
                f"llm_session_header is no HTTP header name: {shown(self.llm_session_header)}"
            )
        _check_database_url(self.database_url)
        if problem := self.check_settings_problem() or self.analyzer_settings_problem():
            raise ConfigError(problem)

    def describe(self) -> dict[str, Any]:
        """Settings as a dict with secrets masked, for logs and diagnostics."""
        out = dataclasses.asdict(self)
        for name in SECRET_FIELDS:
            out[name] = "***" if out[name] else None
        return out


SECRET_FIELDS = frozenset(item.name for item in fields(Settings) if item.metadata.get(SECRET_KEY))


def _check_bounds(name: str, value: Any, bounds: Bounds, annotation: str) -> None:
    if value is None and "None" in annotation:
        return
    whole = "int" in annotation
    if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
        kind = "a whole number" if whole else "a number"
        raise ConfigError(f"{name} must be {kind}, got {shown(value)}")
    problem = bounds.problem(value)
    if problem is not None:
        raise ConfigError(f"{name} {problem}")


def _check_http_url(name: str, url: str | None) -> None:
    problem = None if url is None else http_url_problem(url)
    if problem:
        raise ConfigError(f"{name}: {problem}")


def _check_database_url(url: str) -> None:
    problem = database_url_problem(url)
    if problem:
        raise ConfigError(f"database_url: {problem}")


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
            # A TOML float (1e400 is inf, 3.5 is not a count) is refused, not truncated.
            if isinstance(raw, bool | float):
                raise TypeError
            return int(raw)
        if "float" in annotation:
            if isinstance(raw, bool):
                raise TypeError
            return float(raw)
        if not isinstance(raw, str):
            raise TypeError
        return raw
    except (TypeError, ValueError):
        raise ConfigError(
            f"{name}: cannot use {shown(raw)} (expected {_expected(annotation)})"
        ) from None


def _expected(annotation: str) -> str:
    """A field's type in words, for an error message."""
    for kind, words in (
        ("tuple", "a list of strings"),
        ("bool", "true or false"),
        ("int", "a whole number"),
        ("float", "a number"),
    ):
        if kind in annotation:
            return words
    return "a string"


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


def _parse_toml(text: str, source: str) -> dict[str, Any]:
    """A settings file's TOML, or ConfigError: not TOML, larger than a settings file is, or
    nested deeper than Python's parser can go (tomllib recurses: a 50,000-deep array is a
    RecursionError, not a TOMLDecodeError)."""
    if len(text) > MAX_CONFIG_FILE_BYTES:
        raise ConfigError(f"{source} is larger than {MAX_CONFIG_FILE_BYTES:,} characters")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{source} is not valid TOML: {error}") from None
    except RecursionError:
        raise ConfigError(
            f"{source} is not a settings file: its values are nested too deep"
        ) from None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        text = read_input_file(path, MAX_CONFIG_FILE_BYTES).decode("utf-8")
    except InputFileRefused as refused:
        raise ConfigError(f"config file {path} {refused}: not a settings file") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {path} is not a regular file (a directory)") from None
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"config file {path} is not UTF-8 text (byte {error.start}): save it as UTF-8"
        ) from None
    return _settings_table(_parse_toml(text, f"config file {path}"), str(path))


def _settings_table(data: dict[str, Any], source: str) -> dict[str, Any]:
    """The ``[reviewbot]`` table, or the top level when there is none."""
    table = data.get("reviewbot", data)
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: reviewbot must be a table ([reviewbot]), got {shown(table)}")
    return table


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


def settings_values(
    toml_text: str, source: str, *, extra_keys: frozenset[str] = frozenset()
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The settings a TOML text sets, read as a config file is (a ``[reviewbot]`` table or the
    top level; each value coerced to its setting's type; an unknown key is a ConfigError naming
    ``source``), and the values of ``extra_keys`` it may hold besides, at the top level or in
    the table (they are not settings: ``eval --compare`` reads a configuration's ``name``)."""
    top = _parse_toml(toml_text, source)
    table = dict(_settings_table(top, source))
    extras = {key: top[key] for key in extra_keys if key in top}
    extras |= {key: table.pop(key) for key in extra_keys if key in table}
    try:
        return _from_mapping(table, source), extras
    except ConfigError as error:  # a value that cannot be coerced names the setting only
        message = str(error)
        raise ConfigError(message if source in message else f"{source}: {message}") from None


def with_values(settings: Settings, values: Mapping[str, Any], source: str) -> Settings:
    """``settings`` with ``values`` (from :func:`settings_values`) applied, checked as every
    Settings are: a value out of bounds or not among its choices is a ConfigError naming
    ``source``."""
    try:
        return dataclasses.replace(settings, **values)
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None


def apply_repo_overrides(
    settings: Settings, toml_text: str, source: str = ".reviewbot.toml"
) -> Settings:
    """Apply a repository's ``.reviewbot.toml`` (review-policy keys only; secrets are refused)."""
    data = _settings_table(_parse_toml(toml_text, source), source)
    # [[rules]] are review rules, read by reviewbot.rules.ruleset, not settings
    not_allowed = sorted(set(data) - REPO_KEYS - {REPO_RULES_KEY})
    if not_allowed:
        raise ConfigError(
            f"{source}: {', '.join(not_allowed)} cannot be set from the repository "
            f"(allowed: {', '.join(sorted(REPO_KEYS))})"
        )
    values = _from_mapping({k: v for k, v in data.items() if k != REPO_RULES_KEY}, source)
    if "exclude" in values:
        values["exclude"] = settings.exclude + values["exclude"]
    return dataclasses.replace(settings, **values)
