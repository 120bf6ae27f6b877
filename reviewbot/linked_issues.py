"""The issues linked to a merge request, as context for its review (docs/linked-issues.md).

GitLab tells which issues an MR closes (``closes_issues``) and, on versions that have the
endpoint, which issues it relates to (``related_issues``); :mod:`reviewbot.gitlab` reads them
into :class:`LinkedIssue` values. Here they are chosen and cut to the prompt's budget: the
issues the MR closes first, then the related ones; each one's title, labels and description,
the description shortened first. The rendered block goes into the MR part of the prompt (the
part every chunk shares), as data between the prompt's own tags.

Confidential issues are only ever what the bot's token could read (GitLab leaves the others
out of its answers); they are used in the prompt and never named by more than ``#iid`` in
anything the bot posts (:func:`public_name`).

Owns: :class:`LinkedIssue`, :class:`LinkedIssues` (what was read and what could not be),
the budget and the text the prompt shows. Must not: read GitLab, or write into an issue.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

# An estimate is enough for a budget of context: about four characters of English a token.
CHARS_PER_TOKEN = 4
MIN_DESCRIPTION_CHARS = 200  # below this a description is left out rather than cut
MAX_TITLE_CHARS = 200
MAX_LABELS = 10
TRUNCATED = "… (truncated)"


class Link(StrEnum):
    """How an issue is linked to the MR."""

    CLOSES = "closes"  # merging the MR closes the issue
    RELATED = "related"  # the MR mentions the issue


@dataclass(frozen=True)
class LinkedIssue:
    iid: int
    title: str
    description: str = ""
    labels: tuple[str, ...] = ()
    confidential: bool = False
    state: str = "opened"
    web_url: str = ""
    link: Link = Link.CLOSES


@dataclass(frozen=True)
class LinkedIssues:
    """What the review read of the MR's linked issues; ``unavailable``: what GitLab could not
    answer, in words, for the run details (said once, never a failure)."""

    issues: tuple[LinkedIssue, ...] = ()
    unavailable: tuple[str, ...] = field(default=())


def merged(closes: Sequence[LinkedIssue], related: Sequence[LinkedIssue]) -> list[LinkedIssue]:
    """The issues the MR closes, then the related ones it does not close; each iid once."""
    seen: set[int] = set()
    out = []
    for issue in (*closes, *related):
        if issue.iid not in seen:
            seen.add(issue.iid)
            out.append(issue)
    return out


def public_name(issue: LinkedIssue) -> str:
    """How a posted note may name ``issue``: ``#iid``, with its title unless confidential."""
    if issue.confidential:
        return f"#{issue.iid}"
    return f"#{issue.iid} {issue.title}"


def within_budget(issues: Sequence[LinkedIssue], tokens: int) -> tuple[list[LinkedIssue], int]:
    """The issues shown in the prompt, within ``tokens`` (estimated), and how many were left
    out. Each issue's title and labels first; descriptions cut to what is left, in order."""
    budget = tokens * CHARS_PER_TOKEN
    shown: list[LinkedIssue] = []
    for issue in issues:
        head = _header(issue)
        if len(head) > budget:
            break
        budget -= len(head)
        description = issue.description.strip()
        if len(description) > budget:
            cut = budget - len(TRUNCATED)
            description = description[:cut] + TRUNCATED if cut >= MIN_DESCRIPTION_CHARS else ""
        budget -= len(description)
        shown.append(
            LinkedIssue(
                iid=issue.iid,
                title=issue.title[:MAX_TITLE_CHARS],
                description=description,
                labels=issue.labels[:MAX_LABELS],
                confidential=issue.confidential,
                state=issue.state,
                web_url=issue.web_url,
                link=issue.link,
            )
        )
    return shown, len(issues) - len(shown)


def _header(issue: LinkedIssue) -> str:
    labels = ", ".join(issue.labels[:MAX_LABELS])
    return f"#{issue.iid} {issue.link.value} {issue.state} {issue.title[:MAX_TITLE_CHARS]} {labels}"


def run_detail(linked: LinkedIssues, shown: int, left_out: int) -> str:
    """One line for the run details: what the review read of the linked issues."""
    confidential = sum(1 for issue in linked.issues if issue.confidential)
    words = f"linked issues: {len(linked.issues)} read, {shown} in the prompt"
    if left_out:
        words += f", {left_out} left out by the budget"
    if confidential:
        words += f" ({confidential} confidential, never quoted)"
    for reason in linked.unavailable:
        words += f"; {reason}"
    return words
