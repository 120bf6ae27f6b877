"""Render the review prompt for one chunk, and the tool the model reports findings with.

Layout for vLLM's prefix cache: the tools, the system prompt and the merge-request context are
byte-identical for every chunk of one MR and come first; the chunk's diff comes last. The tool
schema therefore does not enumerate the chunk's paths (that would make the tools, which the chat
template renders first, differ per chunk); paths are listed in the chunk message and checked by
``findings.anchor``.

One tool call per finding, with flat scalar parameters: Qwen3-coder's XML tool-call format
(``<parameter=line>12</parameter>``) carries scalars natively and vLLM's ``qwen3_coder`` parser
converts them by the schema's types, while an array of finding objects would have to be JSON
inside one parameter, a second format the model must get right in one go.

Templates live in the top-level ``prompts/`` folder (installed as ``reviewbot.templates``) and
render with ``StrictUndefined``. ``PROMPT_VERSION`` changes whenever a template or the tool
schema changes, and is recorded with every review.

Owns: rendering the templates (one chunk's messages, or the shared part alone for budgets), the tool
schema the model is shown, and ``PROMPT_VERSION``. Must not: decide what goes in a chunk
(`reviewbot.chunking`), call the model, or read anything but its own packaged templates.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from reviewbot.chunking import Chunk
from reviewbot.diff import FileDiff
from reviewbot.findings import REPORT_FINDING_TOOL, report_finding_parameters
from reviewbot.linked_issues import LinkedIssue

if TYPE_CHECKING:  # the rules are the rules wing's noun; a prompt only renders them
    from reviewbot.rules.ruleset import Rule

__all__ = [
    "PROMPT_VERSION",
    "FileSummary",
    "ReviewContext",
    "file_summaries",
    "prompt_version",
    "render_analyzer_digest",
    "render_learnings",
    "render_messages",
    "render_rules",
    "tool_schemas",
]

PROMPT_SERIES = "v1"
TEMPLATE_NAMES = (
    "system.j2",
    "context.j2",
    "rules.j2",
    "learnings.j2",
    "analyzers.j2",
    "chunk.j2",
)
# The prompt's own tags (context.j2, rules.j2, diffview's <file>): MR and repository text must
# not open or close them.
PROMPT_TAG = re.compile(
    r"<(\s*/?\s*(?:description|file|rules?|learnings?|issues?|analyzers?)\b)", re.IGNORECASE
)
MAX_DESCRIPTION_CHARS = 2000
MAX_LISTED_FILES = 300
MAX_TITLE_CHARS = 300
VERSION_HASH_CHARS = 8


@dataclass(frozen=True)
class FileSummary:
    path: str
    status: str
    added: int
    removed: int
    note: str = ""  # e.g. "not reviewed: lock file"


@dataclass(frozen=True)
class ReviewContext:
    """What every chunk of one MR shares: identical text, so the server's prefix cache hits."""

    title: str
    description: str = ""
    files: tuple[FileSummary, ...] = ()
    language: str = "English"
    include_style: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    # the MR's linked issues as the prompt shows them, already within their budget
    # (reviewbot.linked_issues.within_budget)
    issues: tuple[LinkedIssue, ...] = ()


def _template_dir() -> Path:
    """``reviewbot/templates`` in an installed package, else ``prompts/`` of the checkout."""
    installed = Path(__file__).resolve().parent / "templates"
    source_tree = Path(__file__).resolve().parent.parent / "prompts"
    return installed if (installed / "system.j2").is_file() else source_tree


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(_template_dir()),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # plain text for a model, not HTML
        keep_trailing_newline=True,
        trim_blocks=False,
    )


def tool_schemas() -> list[dict[str, Any]]:
    """The OpenAI tool list: one function, ``report_finding``, with typed parameters."""
    return [
        {
            "type": "function",
            "function": {
                "name": REPORT_FINDING_TOOL,
                "description": (
                    "Report one problem in the diff. Call once per distinct problem; do not call "
                    "when there is nothing to report."
                ),
                "parameters": report_finding_parameters(),
            },
        }
    ]


@cache
def prompt_version() -> str:
    """``v1+<hash>``: the hash covers every template and the tool schema."""
    digest = hashlib.sha256()
    for name in TEMPLATE_NAMES:
        digest.update((_template_dir() / name).read_bytes())
    digest.update(json.dumps(tool_schemas(), sort_keys=True).encode())
    return f"{PROMPT_SERIES}+{digest.hexdigest()[:VERSION_HASH_CHARS]}"


PROMPT_VERSION = prompt_version()


def file_summaries(
    files: Sequence[FileDiff], skipped: dict[str, str] | None = None
) -> tuple[FileSummary, ...]:
    skipped = skipped or {}
    return tuple(
        FileSummary(
            path=f.path,
            status=f.status.value,
            added=f.added_count,
            removed=f.removed_count,
            note=f"not reviewed: {skipped[f.path]}" if f.path in skipped else "",
        )
        for f in files
    )


def neutralise_delimiters(text: str) -> str:
    """MR text placed inside the prompt's own tags cannot open or close one of them
    (``</description>`` in a description would end the data block early)."""
    return PROMPT_TAG.sub(lambda match: "&lt;" + match.group(1), text)


def _one_line(text: str) -> str:
    """A path or title on one line: line breaks (git allows them in paths) written as escapes."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _shared_text(context: ReviewContext) -> tuple[str, str]:
    env = _environment()
    system = env.get_template("system.j2").render(
        language=context.language, include_style=context.include_style
    )
    description = context.description.strip()
    if len(description) > MAX_DESCRIPTION_CHARS:
        description = description[:MAX_DESCRIPTION_CHARS] + "… (description truncated)"
    listed = [
        dataclasses.replace(summary, path=neutralise_delimiters(_one_line(summary.path)))
        for summary in context.files[:MAX_LISTED_FILES]
    ]
    mr = env.get_template("context.j2").render(
        title=neutralise_delimiters(" ".join(context.title.split())[:MAX_TITLE_CHARS]),
        description=neutralise_delimiters(description),
        files=listed,
        files_omitted=len(context.files) - len(context.files[:MAX_LISTED_FILES]),
        issues=[_shown_issue(issue) for issue in context.issues],
    )
    return system, mr


def _shown_issue(issue: LinkedIssue) -> dict[str, Any]:
    """An issue's text as the prompt shows it: issue text cannot open or close the prompt's
    tags, nor end an attribute."""
    return {
        "iid": issue.iid,
        "link": issue.link.value,
        "state": _attribute(issue.state),
        "labels": [_attribute(label) for label in issue.labels],
        "title": neutralise_delimiters(" ".join(issue.title.split())),
        "description": neutralise_delimiters(issue.description.strip()),
    }


def _attribute(text: str) -> str:
    return neutralise_delimiters(_one_line(text)).replace('"', "'")


def render_rules(rules: Sequence[Rule]) -> str:
    """The rules block of a chunk ("" without rules): after the MR context, before the diff, so
    chunks with the same rules share that prefix too. Names and instructions are repository
    text: they cannot open or close the prompt's tags."""
    if not rules:
        return ""
    shown = [
        {
            "name": neutralise_delimiters(_one_line(rule.name)).replace('"', "'"),
            "severity": rule.severity.value if rule.severity else "",
            "category": rule.category.value if rule.category else "",
            "instructions": neutralise_delimiters(rule.instructions),
        }
        for rule in rules
    ]
    return _environment().get_template("rules.j2").render(rules=shown)


def render_learnings(learnings: Sequence[Rule]) -> str:
    """The team's learnings for a chunk ("" without any), as prompt rules
    (``reviewbot.learnings.learning_rules``): after the rules block, before the diff, so
    chunks with the same learnings share that prefix. Their text was sanitised when made."""
    if not learnings:
        return ""
    shown = [
        {
            "name": neutralise_delimiters(_one_line(learning.name)).replace('"', "'"),
            "category": learning.category.value if learning.category else "",
            "instructions": neutralise_delimiters(learning.instructions),
        }
        for learning in learnings
    ]
    return _environment().get_template("learnings.j2").render(learnings=shown)


def render_analyzer_digest(digest: str) -> str:
    """The analyzers' digest of a chunk (reviewbot.analyzer_digest) as its prompt block ("" for
    none): after the learnings, before the diff, so every request of the chunk (tool rounds,
    verification) shares it as prefix. Tools' messages quote code and paths: they cannot open
    or close the prompt's tags."""
    if not digest:
        return ""
    return _environment().get_template("analyzers.j2").render(digest=neutralise_delimiters(digest))


def render_messages(
    context: ReviewContext,
    chunk: Chunk | None,
    *,
    part: int = 1,
    parts: int = 1,
    rules: Sequence[Rule] = (),
    learnings: Sequence[Rule] = (),
    analyzers: str = "",
) -> list[dict[str, str]]:
    """Chat messages for one chunk; ``chunk=None`` renders the shared part only (for budgets).
    ``rules``: the review rules of the chunk's files, placed between the MR context (identical
    for every chunk) and the chunk's diff; ``learnings`` (the team's) right after them, then
    ``analyzers``: the digest of the analyzers' findings on the chunk's files."""
    system, mr = _shared_text(context)
    blocks = (render_rules(rules), render_learnings(learnings), render_analyzer_digest(analyzers))
    for block in blocks:
        if block:
            mr = mr + "\n" + block
    if chunk is None:
        body = (
            _environment()
            .get_template("chunk.j2")
            .render(part=part, parts=parts, paths=[], diff="")
        )
    else:
        body = (
            _environment()
            .get_template("chunk.j2")
            .render(
                part=part,
                parts=parts,
                paths=list(dict.fromkeys(s.path for s in chunk.segments)),
                diff=chunk.text,
            )
        )
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": mr + "\n" + body},
    ]
