"""Team learnings (pure): a short instruction to the reviewer with a scope, how its text is
made safe, which paths and findings it is for, and which findings it suppresses.

A learning belongs to one project (``project_id``) or to a group (``group_path``, no project:
every project under that group, subgroups included). Its ``path_globs`` use the glob
semantics of review rules (``reviewbot.rules.ruleset``: whole path from the repository root, ``*``
in one segment, ``**`` across segments, ``!`` excludes; none: every path), its optional
``category`` is a finding category (``reviewbot.findings.Category``).

Every active learning whose globs match one of a chunk's paths goes into the prompt as an
instruction. A learning *explicitly excludes* a finding (the finding is dropped before
posting, stored as ``suppressed_by_learning``) only when all three hold:

- the learning names a category, and it is the finding's category;
- the finding's path matches the learning's globs;
- its text says not to flag something: it holds "don't flag", "do not flag", "never flag",
  "stop flagging", "no need to flag" (or "report"/"comment on"/"mention" for "flag"),
  case-insensitive (:data:`EXCLUSION_WORDS`).

So "we use `assert` for invariants in tests; don't flag it" with category ``style`` and glob
``tests/**`` suppresses style findings under tests/; "prefer pathlib" only instructs.

Text is sanitised like findings (``reviewbot.markdown``: no quick actions, no mentions, no
HTML), folded onto one line and capped at :data:`MAX_LEARNING_CHARS`.

Owns: :class:`Learning`, the text sanitiser, the scope checks, :func:`learning_applies`,
:func:`learning_excludes` and the caps. Must not: read or write the database
(``reviewbot.store.learning_queries``), talk to GitLab, or decide who may teach.
"""

from __future__ import annotations

import difflib
import hashlib
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from reviewbot.findings import NEAR_IDENTICAL_TITLE_RATIO, Category, normalize_title
from reviewbot.markdown import printable_text, sanitize_markdown
from reviewbot.namespaces import group_path_problem
from reviewbot.rules.pathglob import glob_matches, glob_problem
from reviewbot.rules.ruleset import Rule, RuleSet, RuleSource

__all__ = [
    "EVIDENCE_UNREADABLE",
    "EXCLUSION_WORDS",
    "MAX_LEARNINGS_PER_PROJECT",
    "MAX_LEARNING_CHARS",
    "MAX_LEARNING_GLOBS",
    "Learning",
    "LearningError",
    "LearningLimitError",
    "LearningSource",
    "LearningStatus",
    "Proposal",
    "ProposalEvidence",
    "TurnedDown",
    "ancestor_groups",
    "checked_category",
    "checked_globs",
    "checked_group",
    "checked_text",
    "learning_applies",
    "learning_excludes",
    "learning_rules",
    "learnings_for_paths",
    "proposal_evidence",
    "proposals",
    "sanitised_learning_text",
    "similar_titles",
]

# A learning is a sentence or two ("we use assert in tests; don't flag it"): 500 characters
# leave room for a reason and an example, and keep 30 learnings within ~4,000 prompt tokens.
MAX_LEARNING_CHARS = 500
# Learnings in force or proposed per project (and per group): a team that needs more is
# writing review rules (reviewbot.rules.ruleset), which live in the repository.
MAX_LEARNINGS_PER_PROJECT = 100
MAX_LEARNING_GLOBS = 20
LEARNING_RULE_PREFIX = "learning "
PROPOSAL_KEY_PREFIX = "learning-proposal:"
PROPOSAL_KEY_HEX_CHARS = 40
ROOT_FILES_GLOB = "*"  # the files at the repository root, none below
MAX_PROPOSAL_TITLE_CHARS = 120
MAX_EVIDENCE_FINDINGS = 20  # a proposal lists this many of the findings it was made from
MAX_SHOWN_CHARS = 60
# What the report and the log say of a proposal whose stored evidence is not the object
# Proposal.evidence writes (a JSON list, a string, a count that is no whole number).
EVIDENCE_UNREADABLE = "evidence unreadable"
# The prompt wraps each learning in <learning> tags (prompts/learnings.j2). The Markdown
# sanitiser writes "<" as "&lt;" outside code but keeps it in code spans, where GitLab does
# not decode entities; there it becomes this look-alike, so no learning can close its tag.
PROMPT_TAG_OPEN = "<"
PROMPT_TAG_OPEN_LOOKALIKE = "\u2039"  # SINGLE LEFT-POINTING ANGLE QUOTATION MARK
WHITESPACE_RUN = re.compile(r"\s+")
EXCLUSION_WORDS = re.compile(
    r"\b(?:do\s*n[o']?t|never|stop|no\s+need\s+to)\s+"
    r"(?:flag|report|comment\s+on|mention)(?:ging|ing|s)?\b",
    re.IGNORECASE,
)


class LearningStatus(StrEnum):
    """Life cycle of a team learning."""

    PROPOSED = "proposed"  # suggested from repeated 👎: applied only once a human accepts it
    ACTIVE = "active"
    REJECTED = "rejected"
    REMOVED = "removed"


class LearningSource(StrEnum):
    """Where a learning came from."""

    THREAD = "thread"  # `/reviewbot learn …` (or a confirmed intent) in a bot thread
    CLI = "cli"  # `reviewbot learnings add`
    PROPOSAL = "proposal"  # proposed from repeated negative feedback


class LearningError(ValueError):
    """A learning that cannot be made as given (empty text, a bad glob, an unknown category)."""


class LearningLimitError(LearningError):
    """A project (or group) already holds :data:`MAX_LEARNINGS_PER_PROJECT` learnings."""


@dataclass(frozen=True)
class Learning:
    """One learning as stored; ``id`` is None until it is."""

    text: str
    gitlab_url: str | None = None
    project_id: int | None = None  # None: a group's learning (group_path)
    project: str | None = None  # the project's path when it was made
    group_path: str | None = None
    path_globs: tuple[str, ...] = ()  # none: every path
    category: str | None = None
    status: LearningStatus = LearningStatus.ACTIVE
    source: LearningSource = LearningSource.CLI
    author: str | None = None
    author_id: int | None = None
    mr_iid: int | None = None
    discussion_id: str | None = None
    note_id: int | None = None  # the note it was made from
    created_at: datetime | None = None
    accepted_by: str | None = None
    accepted_at: datetime | None = None
    removed_at: datetime | None = None
    proposal_key: str | None = None
    # JSON as the database holds it: Proposal.evidence writes an object; read it through
    # :attr:`evidence`, which says when it is something else
    proposal_evidence: Any = None
    proposal_note_id: int | None = None
    id: int | None = None

    @property
    def excludes(self) -> bool:
        """Whether it suppresses the findings it matches (module notes), not only instructs."""
        return self.category is not None and EXCLUSION_WORDS.search(self.text) is not None

    @property
    def evidence(self) -> ProposalEvidence:
        """Its proposal evidence as read back (:func:`proposal_evidence`)."""
        return proposal_evidence(self.proposal_evidence)

    @property
    def scope(self) -> str:
        """Where it applies, in words: "project group/app" or "group group"."""
        if self.project_id is None:
            return f"group {self.group_path}"
        return f"project {self.project or self.project_id}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "scope": self.scope,
            "gitlab_url": self.gitlab_url,
            "project_id": self.project_id,
            "project": self.project,
            "group_path": self.group_path,
            "path_globs": list(self.path_globs),
            "category": self.category,
            "text": self.text,
            "excludes": self.excludes,
            "status": self.status.value,
            "source": self.source.value,
            "author": self.author,
            "mr_iid": self.mr_iid,
            "discussion_id": self.discussion_id,
            "note_id": self.note_id,
            "created_at": _iso(self.created_at),
            "accepted_by": self.accepted_by,
            "accepted_at": _iso(self.accepted_at),
            "removed_at": _iso(self.removed_at),
            "proposal_evidence": self.proposal_evidence,
            "proposal_note_id": self.proposal_note_id,
        }


@dataclass(frozen=True)
class ProposalEvidence:
    """A proposal's evidence as read back from the database: the first finding's title, how
    many findings were turned down, some of them (``id``, ``mr_iid``, ``discussion_id``, ...).
    ``readable`` is False when what is stored is not the object :meth:`Proposal.evidence`
    writes: then nothing of it is used, and what shows it says :data:`EVIDENCE_UNREADABLE`."""

    title: str | None = None
    count: int = 0
    findings: tuple[Mapping[str, Any], ...] = ()
    readable: bool = True


UNREADABLE = ProposalEvidence(readable=False)


def proposal_evidence(stored: object) -> ProposalEvidence:
    """``stored`` (a learning's ``proposal_evidence`` JSON; None: it has none) as evidence;
    :data:`UNREADABLE` when it is not an object with a text ``title``, a whole ``count`` and a
    list of objects as ``findings`` (each may be missing; no count: the findings listed)."""
    if stored is None:
        return ProposalEvidence()
    if not isinstance(stored, Mapping):
        return UNREADABLE
    title, count, findings = stored.get("title"), stored.get("count"), stored.get("findings")
    findings = [] if findings is None else findings
    if not isinstance(findings, list) or not all(isinstance(item, Mapping) for item in findings):
        return UNREADABLE
    count = len(findings) if count is None else count
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        return UNREADABLE
    if title is not None and not isinstance(title, str):
        return UNREADABLE
    return ProposalEvidence(title, count, tuple(findings))


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def sanitised_learning_text(text: str) -> str:
    """``text`` safe to store, show on GitLab and put in a prompt: printable, on one line,
    sanitised as findings are (no quick action, mention or HTML), without a "<" even in code
    (it could close the prompt's tag), at most :data:`MAX_LEARNING_CHARS` characters (cut with
    a marker)."""
    one_line = WHITESPACE_RUN.sub(" ", printable_text(text)).strip()
    # A line that opens a code fence comes back closed on a second line: fold it again.
    safe = sanitize_markdown(one_line, max_chars=MAX_LEARNING_CHARS)
    folded = WHITESPACE_RUN.sub(" ", safe).strip()
    return folded.replace(PROMPT_TAG_OPEN, PROMPT_TAG_OPEN_LOOKALIKE)


def checked_text(text: str) -> str:
    """The sanitised text of a new learning; LearningError when empty or over the cap."""
    one_line = WHITESPACE_RUN.sub(" ", printable_text(text)).strip()
    if not one_line:
        raise LearningError("the learning's text is empty: say what the reviewer should do")
    if len(one_line) > MAX_LEARNING_CHARS:
        raise LearningError(
            f"the learning's text is {len(one_line)} characters long; at most "
            f"{MAX_LEARNING_CHARS} are allowed (a sentence or two)"
        )
    return sanitised_learning_text(one_line)


def checked_globs(globs: Iterable[str]) -> tuple[str, ...]:
    """The globs of a new learning, stripped; LearningError for an unusable one or too many."""
    cleaned = tuple(glob.strip() for glob in globs)
    if len(cleaned) > MAX_LEARNING_GLOBS:
        raise LearningError(
            f"{len(cleaned)} path globs given; a learning takes at most {MAX_LEARNING_GLOBS}"
        )
    for glob in cleaned:
        problem = glob_problem(glob)
        if problem is not None:
            raise LearningError(f"path glob {_shown(glob)} {problem}")
    return cleaned


def checked_category(category: str | None) -> str | None:
    """A finding category (or None); LearningError naming the allowed ones otherwise."""
    if category is None:
        return None
    value = category.strip().lower()
    if value not in {choice.value for choice in Category}:
        allowed = ", ".join(choice.value for choice in Category)
        raise LearningError(f"category {_shown(category)} is not one of: {allowed}")
    return value


def checked_group(group: str) -> str:
    """The path of a group learning's group, stripped; LearningError when it is not a GitLab
    group path (``reviewbot.namespaces``, the rule the webhook checks project paths by: no
    ``..``, no leading ``/``, so it can match a project's groups)."""
    value = group.strip()
    problem = group_path_problem(value)
    if problem is not None:
        raise LearningError(f"group {_shown(value)} {problem}")
    return value


def _shown(text: str) -> str:
    printable = printable_text(text)
    if len(printable) > MAX_SHOWN_CHARS:
        printable = printable[: MAX_SHOWN_CHARS - 1] + "…"
    return repr(printable)


def ancestor_groups(project_path: str) -> tuple[str, ...]:
    """The groups a project is under, nearest first: "a/b/app" -> ("a/b", "a")."""
    parts = project_path.strip("/").split("/")[:-1]
    return tuple("/".join(parts[:count]) for count in range(len(parts), 0, -1))


def _path_matches(globs: Sequence[str], path: str) -> bool:
    includes = [glob for glob in globs if not glob.startswith("!")]
    excludes = [glob[1:] for glob in globs if glob.startswith("!")]
    included = not includes or any(glob_matches(glob, path) for glob in includes)
    return included and not any(glob_matches(glob, path) for glob in excludes)


def learning_applies(learning: Learning, path: str, category: str | None = None) -> bool:
    """Whether ``learning`` is for a finding (or a chunk's file) at ``path``: its globs match
    (review rules' semantics) and, when both name a category, the categories are the same."""
    if category is not None and learning.category is not None and category != learning.category:
        return False
    return _path_matches(learning.path_globs, path)


def learning_excludes(learning: Learning, path: str, category: str) -> bool:
    """Whether ``learning`` explicitly excludes a finding of ``category`` at ``path`` (module
    notes): an active "don't flag" learning of that very category whose globs match."""
    return (
        learning.status is LearningStatus.ACTIVE
        and learning.excludes
        and learning.category == category
        and _path_matches(learning.path_globs, path)
    )


def learnings_for_paths(
    learnings: Iterable[Learning], paths: Iterable[str]
) -> tuple[Learning, ...]:
    """The active learnings that apply to at least one of ``paths``, in the given order."""
    wanted = list(paths)
    return tuple(
        learning
        for learning in learnings
        if learning.status is LearningStatus.ACTIVE
        and any(learning_applies(learning, path) for path in wanted)
    )


def learning_rules(learnings: Iterable[Learning]) -> RuleSet:
    """The active learnings as prompt rules (named "learning <id>", in the given order): the
    review budgets and places them as it does review rules (``learnings_tokens``)."""
    return RuleSet(
        tuple(
            Rule(
                name=f"{LEARNING_RULE_PREFIX}{learning.id}",
                source=RuleSource.LEARNING,
                origin=learning.scope,
                instructions=learning.text,
                paths=learning.path_globs,
                category=Category(learning.category) if learning.category else None,
            )
            for learning in learnings
            if learning.status is LearningStatus.ACTIVE
        )
    )


# --- proposals -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnedDown:
    """A posted finding the team turned down: 👎 in force, or resolved with its line unchanged."""

    finding_id: int
    project_id: int
    project: str
    mr_iid: int | None
    path: str
    line: int | None
    category: str
    title: str
    outcome: str  # "thumbsdown" or "resolved unchanged"
    discussion_id: str | None = None  # the finding's thread, where a proposal can be posted


@dataclass(frozen=True)
class Proposal:
    """One kind of finding turned down often enough to propose not flagging it: the same
    project, category and folder, near-identical titles (as findings' duplicates are)."""

    gitlab_url: str
    project_id: int
    project: str
    category: str
    glob: str
    title: str  # the first finding's
    findings: tuple[TurnedDown, ...]

    @property
    def key(self) -> str:
        """The same for the same kind of finding, whenever it is proposed: proposed once."""
        parts = (self.gitlab_url, str(self.project_id), self.category, self.glob)
        text = "|".join((*parts, normalize_title(self.title)))
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:PROPOSAL_KEY_HEX_CHARS]
        return PROPOSAL_KEY_PREFIX + digest

    def learning(self) -> Learning:
        """The proposed learning ("don't flag …": it suppresses once accepted)."""
        where = "files at the repository root" if self.glob == ROOT_FILES_GLOB else self.glob
        title = self.title[:MAX_PROPOSAL_TITLE_CHARS]
        text = (
            f'Don\'t flag {self.category} findings like "{title}" in {where}: the team turned '
            f"down {len(self.findings)} of them"
        )
        return Learning(
            text=sanitised_learning_text(text),
            gitlab_url=self.gitlab_url,
            project_id=self.project_id,
            project=self.project,
            path_globs=(self.glob,),
            category=self.category,
            status=LearningStatus.PROPOSED,
            source=LearningSource.PROPOSAL,
            proposal_key=self.key,
            proposal_evidence=self.evidence(),
        )

    def evidence(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "category": self.category,
            "glob": self.glob,
            "count": len(self.findings),
            "findings": [
                {
                    "id": item.finding_id,
                    "mr_iid": item.mr_iid,
                    "discussion_id": item.discussion_id,
                    "path": item.path,
                    "line": item.line,
                    "outcome": item.outcome,
                }
                for item in self.findings[:MAX_EVIDENCE_FINDINGS]
            ],
        }


def folder_glob(path: str) -> str:
    """The glob of a finding's folder: "src/db/**" for src/db/q.py, "*" at the root."""
    folder = posixpath.dirname(path.strip("/"))
    return f"{folder}/**" if folder else ROOT_FILES_GLOB


def similar_titles(left: str, right: str) -> bool:
    """Near-identical finding titles, as findings' duplicates are (reviewbot.findings)."""
    a, b = normalize_title(left), normalize_title(right)
    return a == b or difflib.SequenceMatcher(None, a, b).ratio() >= NEAR_IDENTICAL_TITLE_RATIO


def proposals(gitlab_url: str, turned_down: Iterable[TurnedDown], threshold: int) -> list[Proposal]:
    """The kinds of finding turned down at least ``threshold`` times, oldest first; each
    finding counts once, in the first kind whose title is near-identical to its own."""
    groups: dict[tuple[int, str, str], list[list[TurnedDown]]] = {}
    seen: set[int] = set()
    for item in sorted(turned_down, key=lambda found: found.finding_id):
        if item.finding_id in seen:
            continue
        seen.add(item.finding_id)
        clusters = groups.setdefault((item.project_id, item.category, folder_glob(item.path)), [])
        home = next((c for c in clusters if similar_titles(c[0].title, item.title)), None)
        if home is None:
            clusters.append([item])
        else:
            home.append(item)
    found = [
        Proposal(
            gitlab_url.rstrip("/"),
            project_id,
            cluster[0].project,
            category,
            glob,
            cluster[0].title,
            tuple(cluster),
        )
        for (project_id, category, glob), clusters in groups.items()
        for cluster in clusters
        if len(cluster) >= threshold
    ]
    return sorted(found, key=lambda proposal: proposal.findings[0].finding_id)
