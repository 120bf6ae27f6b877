"""What became of each posted finding: read from GitLab (`reviewbot feedback sync`), or seen by
the bot's own next review of the MR.

For every MR of the configured GitLab reviewed in the window, sync reads (the request count
per MR is printed):

1. the MR (state, merge time, head of the latest version): 1 request;
2. its discussions with their notes: 1 request per 100 discussions;
3. for findings whose review saw an older head, what changed from that head to the latest
   (the compare API): 1 request per older head;
4. the award emoji of each bot comment still on the MR: 1 request each (GitLab has no bulk
   award-emoji endpoint).

and records, per posted finding (:func:`outcome_events`, pure):

- ``award`` thumbsup/thumbsdown: a human's reaction on the finding's comment (the bot's own
  are ignored); a vote on record that is gone from GitLab is recorded as revoked;
- ``resolution``: the thread is resolved by someone other than the bot;
- ``reply``: one event per human reply in the thread (who and when, never the text);
- ``suggestion_applied``: GitLab reports the comment's suggestion as applied;
- ``addressed``: a later version changed the finding's line (or any line from ``line`` to
  ``end_line``), or deleted its file. New-side findings only: a finding on a removed line
  is marked addressed by the bot's own next review (:func:`record_next_review_outcomes`);
- ``deleted``: the bot's comment is gone from the MR;
- ``ignored``: the MR is merged with the thread unresolved and the line unchanged.

The bot's next review of an MR (:func:`record_next_review_outcomes`, deciding in the pure
:func:`next_review_outcomes`) records what its publishing saw: a thread it resolved because
the line changed is ``addressed`` (the finding ``outdated``), a comment on record but gone from
the MR is ``deleted``.

Event keys are the same whoever records an outcome (the bot's re-run, the webhook, a sync;
an outcome of a finding: :func:`outcome_key`), so a sync run twice adds nothing; every MR is
committed on its own, so an interrupted sync loses nothing and the next run carries on.

Owns: deciding outcomes from what GitLab says and what the store holds, and their event keys.
Must not: post anything on GitLab, or hold SQL (the store's queries do).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from reviewbot.diff import FileDiff, FileStatus, LineKind, Side
from reviewbot.findings import FindingState
from reviewbot.gitlab import GitLabNotFoundError, RequestCounter
from reviewbot.states import FeedbackKind, MergeRequestState
from reviewbot.store import MergeRequestKey

__all__ = [
    "FeedbackGitLab",
    "FeedbackStore",
    "MergeRequestFacts",
    "MergeRequestSync",
    "NextReviewOutcomes",
    "NextReviewStore",
    "SyncReport",
    "lines_changed",
    "next_review_outcomes",
    "outcome_events",
    "outcome_key",
    "record_next_review_outcomes",
    "recorded_as_posted",
    "sync_feedback",
]

VOTES = {"thumbsup": "thumbsup", "+1": "thumbsup", "thumbsdown": "thumbsdown", "-1": "thumbsdown"}
REVOKED = "revoked"


class FeedbackGitLab(Protocol):
    """The part of :class:`reviewbot.gitlab.GitLabClient` sync reads through."""

    @property
    def url(self) -> str: ...

    def bot_username(self) -> str: ...

    def counting_requests(self) -> AbstractContextManager[RequestCounter]: ...

    def merge_request(self, project_id: int | str, iid: int) -> dict[str, Any]: ...

    def discussions(self, project_id: int | str, iid: int) -> list[dict[str, Any]]: ...

    def note_awards(
        self, project_id: int | str, iid: int, note_id: int
    ) -> list[dict[str, Any]]: ...

    def compare(self, project_id: int, from_sha: str, to_sha: str) -> list[FileDiff]: ...


class FeedbackStore(Protocol):
    """The part of :class:`reviewbot.store.Store` sync reads and writes."""

    def reviewed_merge_requests(
        self, gitlab_url: str, since: datetime, project: str | None = None
    ) -> list[dict[str, Any]]: ...

    def posted_findings_with_heads(self, key: MergeRequestKey) -> list[dict[str, Any]]: ...

    def votes_in_force(self, finding_ids: Iterable[int]) -> set[tuple[int, str, str]]: ...

    def outcomes_on_record(self, finding_ids: Iterable[int]) -> dict[int, set[str]]: ...

    def record_merge_request_sync(
        self,
        key: MergeRequestKey,
        merge_request: Mapping[str, Any],
        feedback: Iterable[Mapping[str, Any]],
    ) -> int: ...


class NextReviewStore(Protocol):
    """The part of :class:`reviewbot.store.Store` the bot's next review records outcomes in."""

    def posted_findings(self, key: MergeRequestKey) -> dict[str, dict[str, Any]]: ...

    def update_finding(self, finding_id: int, **fields: Any) -> None: ...

    def record_feedback(self, **fields: Any) -> bool: ...


@dataclass(frozen=True)
class MergeRequestFacts:
    """What GitLab says about one MR, as far as the bot's findings are concerned."""

    state: str
    merged_at: datetime | None
    web_url: str | None
    latest_head_sha: str | None
    discussions: list[dict[str, Any]]
    awards: dict[int, list[dict[str, Any]]]  # bot note id -> its award emoji
    changes_since: dict[str, list[FileDiff]]  # older head -> what changed to the latest head


@dataclass(frozen=True)
class MergeRequestSync:
    """One MR's sync: how many requests it took and how many outcomes were new."""

    project: str
    iid: int
    requests: int
    findings: int
    recorded: int
    skipped: str | None = None  # why the MR was not read (e.g. deleted from GitLab)


@dataclass
class SyncReport:
    merge_requests: list[MergeRequestSync] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return sum(mr.requests for mr in self.merge_requests)

    @property
    def recorded(self) -> int:
        return sum(mr.recorded for mr in self.merge_requests)


# ---------------------------------------------------------------------------------------------
# Outcomes (pure)


def outcome_key(kind: FeedbackKind, key: MergeRequestKey, fingerprint: str) -> str:
    """The event key of outcome ``kind`` of the finding ``fingerprint`` on the MR: the same
    whoever records it (the bot's next review, a sync), so it is recorded once."""
    return f"{kind.value}:{key}:{fingerprint}"


def lines_changed(files: Sequence[FileDiff], path: str, first: int, last: int) -> bool:
    """True when the diff ``files`` deletes ``path`` or removes or rewrites any of its lines
    ``first`` to ``last`` (numbers of the older version)."""
    for file in files:
        if file.old_path != path:
            continue
        if file.status is FileStatus.DELETED:
            return True
        for line in file.lines():
            removed = line.kind is LineKind.REMOVED and line.old_no is not None
            if removed and first <= line.old_no <= last:
                return True
    return False


def _when(text: Any) -> datetime | None:
    """GitLab's ISO 8601 timestamps (``...Z``) as aware datetimes; None when absent."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text))
    except ValueError:
        return None


def _username(user: Any) -> str | None:
    return str(user["username"]) if isinstance(user, Mapping) and user.get("username") else None


def _thread_of(finding: Mapping[str, Any], discussions: Sequence[Mapping[str, Any]]) -> Any:
    for discussion in discussions:
        notes = discussion.get("notes") or []
        if notes and (
            notes[0].get("id") == finding["note_id"]
            or (finding["discussion_id"] and discussion.get("id") == finding["discussion_id"])
        ):
            return discussion
    return None


def _is_addressed_now(finding: Mapping[str, Any], facts: MergeRequestFacts) -> bool:
    if finding["side"] != Side.NEW.value or finding["line"] is None:
        return False
    changes = facts.changes_since.get(finding["head_sha"])
    if changes is None:
        return False
    last = finding["end_line"] if finding["end_line"] is not None else finding["line"]
    return lines_changed(changes, finding["path"], finding["line"], last)


def outcome_events(
    key: MergeRequestKey,
    findings: Sequence[Mapping[str, Any]],
    facts: MergeRequestFacts,
    *,
    bot_username: str,
    votes_in_force: set[tuple[int, str, str]],
    on_record: Mapping[int, set[str]],
    now: datetime,
) -> list[dict[str, Any]]:
    """Feedback events (Store.record_feedback fields) for the MR's posted ``findings``
    (rows of Store.posted_findings_with_heads), from what GitLab says (see the module notes).

    ``votes_in_force``/``on_record``: what the store already holds, so that a vote gone from
    GitLab is recorded as revoked once, and an outcome already recorded is not re-derived.
    """
    events: list[dict[str, Any]] = []
    bot = bot_username.casefold()
    for finding in findings:
        if finding["note_id"] is None:
            continue  # never reached GitLab as a thread we can find
        events += _finding_events(
            key, finding, facts, bot, on_record.get(finding["id"], set()), now
        )
        if _thread_of(finding, facts.discussions) is not None:
            events += _vote_events(finding, facts, key, bot, votes_in_force, now)
    return events


def _event(
    finding: Mapping[str, Any],
    kind: FeedbackKind,
    event_key: str,
    now: datetime,
    *,
    username: str | None = None,
    created_at: datetime | None = None,
) -> dict[str, Any]:
    return {
        "finding_id": finding["id"],
        "project": finding["project"],
        "note_id": finding["note_id"],
        "kind": kind.value,
        "value": kind.value,
        "username": username,
        "event_key": event_key,
        "created_at": created_at or now,
    }


def _finding_events(
    key: MergeRequestKey,
    finding: Mapping[str, Any],
    facts: MergeRequestFacts,
    bot: str,
    recorded: set[str],
    now: datetime,
) -> list[dict[str, Any]]:
    """Every outcome but votes, for one posted finding."""

    def keyed(kind: FeedbackKind) -> str:
        return outcome_key(kind, key, finding["fingerprint"])

    thread = _thread_of(finding, facts.discussions)
    if thread is None:
        if FeedbackKind.DELETED.value in recorded:
            return []
        return [_event(finding, FeedbackKind.DELETED, keyed(FeedbackKind.DELETED), now)]
    events = []
    notes = thread.get("notes") or []
    first = notes[0]
    resolver = _username(first.get("resolved_by"))
    resolved = bool(first.get("resolved"))
    if resolved and resolver is not None and resolver.casefold() != bot:
        resolved_at = _when(first.get("resolved_at"))
        events.append(
            _event(
                finding,
                FeedbackKind.RESOLUTION,
                keyed(FeedbackKind.RESOLUTION),
                now,
                username=resolver,
                created_at=resolved_at,
            )
        )
    for reply in notes[1:]:
        author = _username(reply.get("author"))
        if author is None or author.casefold() == bot or reply.get("system"):
            continue
        reply_key = f"{FeedbackKind.REPLY.value}:{key.gitlab_url.rstrip('/')}:{reply['id']}"
        events.append(
            _event(
                finding,
                FeedbackKind.REPLY,
                reply_key,
                now,
                username=author,
                created_at=_when(reply.get("created_at")),
            )
        )
    if any(bool(s.get("applied")) for s in first.get("suggestions") or []):
        kind = FeedbackKind.SUGGESTION_APPLIED
        events.append(_event(finding, kind, keyed(kind), now))
    addressed = FeedbackKind.ADDRESSED.value in recorded
    if not addressed and _is_addressed_now(finding, facts):
        addressed = True
        events.append(_event(finding, FeedbackKind.ADDRESSED, keyed(FeedbackKind.ADDRESSED), now))
    if facts.state == MergeRequestState.MERGED.value and not resolved and not addressed:
        events.append(
            _event(
                finding,
                FeedbackKind.IGNORED,
                keyed(FeedbackKind.IGNORED),
                now,
                created_at=facts.merged_at,
            )
        )
    return events


def _vote_events(
    finding: Mapping[str, Any],
    facts: MergeRequestFacts,
    key: MergeRequestKey,
    bot: str,
    votes_in_force: set[tuple[int, str, str]],
    now: datetime,
) -> Iterator[dict[str, Any]]:
    gitlab_url = key.gitlab_url.rstrip("/")
    common = {
        "finding_id": finding["id"],
        "project": finding["project"],
        "note_id": finding["note_id"],
        "kind": FeedbackKind.AWARD.value,
    }
    on_gitlab = set()
    for award in facts.awards.get(finding["note_id"], []):
        vote = VOTES.get(str(award.get("name")))
        username = _username(award.get("user"))
        if vote is None or username is None or username.casefold() == bot:
            continue
        on_gitlab.add((username, vote))
        yield {
            **common,
            "value": vote,
            "username": username,
            "event_key": f"award:{gitlab_url}:{award['id']}",
            "created_at": _when(award.get("created_at")) or now,
        }
    for finding_id, username, vote in sorted(votes_in_force):
        if finding_id == finding["id"] and (username, vote) not in on_gitlab:
            yield {
                **common,
                "value": f"{vote}:{REVOKED}",
                "username": username,
                "event_key": (
                    f"award-revoked:{gitlab_url}:{finding['note_id']}:{username}:{vote}:"
                    f"{now.isoformat()}"
                ),
                "created_at": now,
            }


# ---------------------------------------------------------------------------------------------
# Reading GitLab and recording (the sync)


def read_facts(
    gitlab: FeedbackGitLab, key: MergeRequestKey, findings: Sequence[Mapping[str, Any]]
) -> MergeRequestFacts:
    """Everything :func:`outcome_events` needs about one MR (see the module notes)."""
    mr = gitlab.merge_request(key.project_id, key.iid)
    refs = mr.get("diff_refs") or {}
    latest = refs.get("head_sha") or mr.get("sha")
    discussions = gitlab.discussions(key.project_id, key.iid)
    on_mr = {notes[0].get("id") for d in discussions if (notes := d.get("notes") or [])}
    awards = {
        int(finding["note_id"]): gitlab.note_awards(key.project_id, key.iid, finding["note_id"])
        for finding in findings
        if finding["note_id"] in on_mr
    }
    older_heads = sorted(
        {
            finding["head_sha"]
            for finding in findings
            if latest
            and finding["head_sha"] != latest
            and finding["side"] == Side.NEW.value
            and finding["note_id"] in on_mr
        }
    )
    changes = {head: gitlab.compare(key.project_id, head, str(latest)) for head in older_heads}
    return MergeRequestFacts(
        state=str(mr.get("state") or MergeRequestState.OPENED.value),
        merged_at=_when(mr.get("merged_at")),
        web_url=mr.get("web_url"),
        latest_head_sha=str(latest) if latest else None,
        discussions=discussions,
        awards=awards,
        changes_since=changes,
    )


def sync_merge_request(
    store: FeedbackStore,
    gitlab: FeedbackGitLab,
    key: MergeRequestKey,
    project: str,
    now: datetime,
) -> MergeRequestSync:
    """Read one MR and record what became of its findings, in one transaction."""
    findings = store.posted_findings_with_heads(key)
    ids = [finding["id"] for finding in findings]
    with gitlab.counting_requests() as counter:
        try:
            facts = read_facts(gitlab, key, findings)
        except GitLabNotFoundError as error:
            return MergeRequestSync(project, key.iid, counter.count, len(findings), 0, str(error))
    events = outcome_events(
        key,
        findings,
        facts,
        bot_username=gitlab.bot_username(),
        votes_in_force=store.votes_in_force(ids),
        on_record=store.outcomes_on_record(ids),
        now=now,
    )
    record = {
        "project": project,
        "state": facts.state,
        "web_url": facts.web_url,
        "merged_at": facts.merged_at,
        "latest_head_sha": facts.latest_head_sha,
    }
    added = store.record_merge_request_sync(key, record, events)
    return MergeRequestSync(project, key.iid, counter.count, len(findings), added)


def sync_feedback(
    store: FeedbackStore,
    gitlab: FeedbackGitLab,
    *,
    since: datetime,
    now: datetime,
    project: str | None = None,
    on_start: Callable[[int], None] | None = None,
    on_done: Callable[[MergeRequestSync], None] | None = None,
) -> SyncReport:
    """Sync every MR of ``gitlab`` reviewed since ``since`` (of ``project`` when given).

    ``on_start(total)`` is told how many MRs there are, ``on_done`` of each one as it is
    committed (a progress bar; the request count).
    """
    merge_requests = store.reviewed_merge_requests(gitlab.url, since, project)
    if on_start is not None:
        on_start(len(merge_requests))
    gitlab.bot_username()  # once, before the per-MR request counts
    report = SyncReport()
    for mr in merge_requests:
        key = MergeRequestKey(gitlab.url, mr["project_id"], mr["mr_iid"])
        done = sync_merge_request(store, gitlab, key, mr["project"], now)
        report.merge_requests.append(done)
        if on_done is not None:
            on_done(done)
    return report


# --- what the bot's own next review sees -----------------------------------------------------


@dataclass(frozen=True)
class NextReviewOutcomes:
    """What the next review saw became of earlier findings: the ids of those now ``outdated``
    and the feedback events to record (Store.record_feedback fields)."""

    outdated: list[int] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)


def recorded_as_posted(recorded: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """Fingerprints the database says the bot posted on the MR and has not seen resolved
    (``recorded``: Store.posted_findings)."""
    return {fp for fp, row in recorded.items() if row["state"] == FindingState.POSTED}


def next_review_outcomes(
    key: MergeRequestKey,
    recorded: Mapping[str, Mapping[str, Any]],
    *,
    resolved: Iterable[str],
    posted_now: Collection[str],
    on_mr: Collection[str],
) -> NextReviewOutcomes:
    """What became of the findings on record (``recorded``: Store.posted_findings, fingerprint
    -> row) as this review's publishing saw it: ``resolved``, the fingerprints of threads it
    resolved because their line changed (``addressed``); ``posted_now``, what it posted;
    ``on_mr``, the bot's threads it found on the MR. A finding recorded as posted that is in
    neither is gone from the MR: ``deleted`` (by a human)."""
    outcomes = NextReviewOutcomes()
    for fingerprint in resolved:
        row = recorded.get(fingerprint)
        if row is not None:
            outcomes.outdated.append(row["id"])
            outcomes.events.append(_next_review_event(key, row, FeedbackKind.ADDRESSED))
    for fingerprint, row in recorded.items():
        gone = fingerprint not in on_mr and fingerprint not in posted_now
        if gone and row["state"] == FindingState.POSTED:
            outcomes.events.append(_next_review_event(key, row, FeedbackKind.DELETED))
    return outcomes


def _next_review_event(
    key: MergeRequestKey, finding: Mapping[str, Any], kind: FeedbackKind
) -> dict[str, Any]:
    return {
        "finding_id": finding["id"],
        "project": finding["project"],
        "note_id": finding["note_id"],
        "kind": kind.value,
        "value": kind.value,
        "event_key": outcome_key(kind, key, finding["fingerprint"]),
        **key.columns(),
    }


def record_next_review_outcomes(
    store: NextReviewStore,
    key: MergeRequestKey,
    *,
    resolved: Iterable[str],
    posted_now: Collection[str],
    on_mr: Collection[str],
) -> NextReviewOutcomes:
    """Record :func:`next_review_outcomes` of the MR's findings on record in ``store``."""
    outcomes = next_review_outcomes(
        key, store.posted_findings(key), resolved=resolved, posted_now=posted_now, on_mr=on_mr
    )
    for finding_id in outcomes.outdated:
        store.update_finding(finding_id, state=FindingState.OUTDATED.value)
    for event in outcomes.events:
        store.record_feedback(**event)
    return outcomes
