"""Answers in the bot's threads: what a reply job does (issue 21, docs/conversation.md).

A human's note in a thread reviewbot started (a mention, ``/reviewbot explain|fix|ignore``)
is queued by the webhook as a reply job (``JobKind.REPLY``, one per triggering note). The
worker runs :func:`run_reply`:

1. the reply's row says it is settled already: nothing to do;
2. exactly once: the bot's answer to this note (its hidden marker, :func:`reply_marker`) is
   already in the thread (an earlier attempt died after posting): recorded, not posted again;
3. later than ``reply_timeout_s`` after the note arrived: dropped with a log line;
4. the thread is read again from GitLab: its first note must be the bot's (never answer in a
   thread the bot did not start), the triggering note must still be there, and its author must
   not be a bot (``GET /users/:id``); the command is the one that note holds
   (``parse_reply_command`` of its body as GitLab has it, with its author), never the
   delivery's: a forged or stale delivery does nothing to a note that holds no command;
5. a command that changes state (``reviewbot.permission.COMMAND_CHANGES``: ``ignore``,
   ``learn``) from an author (the note's, as GitLab has it) below the Developer role is
   **refused**: answered with the reason (``reviewbot.permission.refusal``, the one check),
   recorded ``refused`` with it, nothing changed;
6. ``ignore``: the thread is resolved and negative feedback recorded (no model call);
   ``learn [text]``: a learning is made, or the one the thread proposed confirmed
   (``reviewbot.replies.teach``), said in the answer; a mention that asks not to flag
   something (``reviewbot.replies.intent``), from a Developer, is answered with a proposed
   learning to confirm (``reviewbot.replies.teach.propose``); otherwise
   the model answers, seeing the finding, the code around its line at the MR's head (and
   whether the line changed since), the thread so far, and the review rules and learnings
   in force for the finding's path and category (:func:`read_guidance`,
   ``reviewbot.replies.guidance``); ``fix`` adds a GitLab suggestion
   block only when the thread's line is on the MR's current diff version;
7. the answer, sanitised like findings (``reviewbot.markdown``), is posted in the thread with
   its marker (a write whose answer is lost is found by it, not posted twice; a refusal also
   carries :data:`REFUSAL_MARKER`, so one found again is recorded as a refusal) and recorded.

Owns: deciding and writing the answer to one note. Must not: write SQL (``reviewbot.store``
does), parse webhooks, or decide queue policy (``reviewbot.queue``).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from reviewbot.app import App
from reviewbot.comments import line_text_hash, parse_marker
from reviewbot.config import Settings
from reviewbot.diff import Side
from reviewbot.gitlab import GitLabClient
from reviewbot.group_settings import GroupSettings
from reviewbot.guidance import NO_GROUPS, read_team_guidance
from reviewbot.llm.runner import ChunkRunner
from reviewbot.markdown import sanitize_markdown, suggestion_block
from reviewbot.mergerequest import MergeRequestSnapshot
from reviewbot.model import request_priority, session_key
from reviewbot.permission import COMMAND_CHANGES, refusal
from reviewbot.positions import position_for
from reviewbot.queue import Job
from reviewbot.redaction import mask_secrets
from reviewbot.replies.guidance import Guidance, guidance_for
from reviewbot.replies.intent import teaching_intent
from reviewbot.replies.teach import learn, propose
from reviewbot.replies.thread import Thread
from reviewbot.repo.api_view import ApiView
from reviewbot.repo.files import RepoFiles
from reviewbot.repo.tree import SHORT_SHA
from reviewbot.repo.view import TreeUnavailable
from reviewbot.states import FeedbackKind, ReplyCommand, ReplyStatus, Workload
from reviewbot.store import LearningBook, MergeRequestKey, Store
from reviewbot.store.reply_queries import ReplyRecord, ReplyStore, ThreadFinding
from reviewbot.store.store import utc_now
from reviewbot.tokens import local_counter
from reviewbot.webhook.payloads import parse_reply_command

__all__ = ["REPLY_PROMPT_TAG", "reply_marker", "run_reply"]

log = logging.getLogger(__name__)

# The system message of every reply prompt starts with this tag (the fake vLLM knows it).
REPLY_PROMPT_TAG = "<reviewbot-reply"
MAX_ANSWER_CHARS = 6000  # GitLab allows 1,000,000; a reply stays a short answer
REPLY_MAX_TOKENS = 1024
MASKED_NOTE = "_(What looked like a secret, a token or a key, was masked as `***`.)_"
CODE_CONTEXT_LINES = 8  # lines shown either side of the finding's line
THREAD_NOTES_SHOWN = 20  # the newest notes of the thread given to the model
NOTE_CHARS_SHOWN = 2000  # each note cut to this many characters in the prompt
MS_PER_S = 1000.0
SUGGESTION_IN_ANSWER = re.compile(r"^(`{3,})suggestion[^\n]*\n(.*?)^\1[ \t]*$", re.M | re.S)
REFUSAL_PREFIX = "Not done: "
REFUSAL_MARKER = "<!-- reviewbot:refused -->"  # with the reply marker: a refusal, found again
IGNORED_VALUE = "ignore_command"  # feedback value of `/reviewbot ignore`
LEARN_HINT = (
    "To have reviewbot stop flagging this kind of code, reply with "
    "`/reviewbot learn <what to allow>` (Developer role or above)."
)


def reply_marker(note_id: int) -> str:
    """The hidden marker of the bot's answer to note ``note_id``: one per triggering note."""
    return f"<!-- reviewbot:reply note={note_id} -->"


@dataclass(frozen=True)
class CodeAtHead:
    """The code around the finding's line at the MR's head."""

    excerpt: str  # numbered lines, "" when the file or line is gone
    line_changed: bool  # the line's text differs from when the finding was posted (or is gone)
    suggestable: bool  # the thread's line is on the MR's current diff version


@dataclass
class _Answer:
    body: str
    model: str | None = None
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    proposal_id: int | None = None  # the learning this answer proposes
    refused: str | None = None  # why the change asked for was not made (reviewbot.permission)


FINISH_LENGTH = "length"  # the OpenAI finish_reason of an answer cut at max_tokens


class AnswerCutOff(Exception):
    """The model's answer ended at the token limit: only part of an answer, never posted."""


@dataclass(frozen=True)
class Answering:
    """What answering a note works with: the App's adapters and books, handed down instead of
    the App."""

    gitlab: GitLabClient
    learnings: LearningBook
    store: Store
    settings: Settings
    model: Callable[[], ChunkRunner]  # made on first use: ignore and learn never ask the model
    # the settings layers of a project's groups, by its path (None: none are read)
    group_settings: Callable[[str], GroupSettings] | None = None


def run_reply(app: App, job: Job) -> None:
    """Answer the note of reply job ``job`` once (see the module notes)."""
    replies = app.replies()
    record = replies.by_id(int(job.payload["reply_id"]))
    if record is None or record.status != ReplyStatus.QUEUED.value:
        return
    started = time.monotonic()
    gitlab = app.gitlab()
    project: int | str = job.project_id if job.project_id is not None else job.project
    marker = reply_marker(record.trigger_note_id)
    discussion = gitlab.discussion(project, job.mr_iid, record.discussion_id)
    found = _bot_note_with(discussion, gitlab.bot_username(), marker)
    if found is not None:
        _record_found(replies, record, found)
        return
    timeout_s = app.settings.reply_timeout_s
    if _too_late(record.created_at, timeout_s):
        _drop(replies, record, f"not answered within reply_timeout_s ({timeout_s:g} s)")
        return
    now = _thread_now(gitlab, discussion, record)
    if isinstance(now, str):
        _drop(replies, record, now)
        return
    discussion, note = now
    record = _as_the_note_says(replies, record, note, gitlab.bot_username())
    if record is None:
        return
    finding = replies.thread_finding(record.discussion_id)
    if finding is None:
        _drop(replies, record, "the thread's finding is no longer in the store")
        return
    thread = Thread(project, job, record, finding, discussion, note)
    desk = Answering(
        gitlab,
        app.learnings(),
        app.store,
        app.settings,
        app.model,
        lambda project_path: app.group_settings(gitlab, project_path),
    )
    try:
        answer = _answer(desk, thread)
    except AnswerCutOff as cut:
        _drop(replies, record, str(cut))
        return
    if _too_late(record.created_at, timeout_s):
        _drop(replies, record, f"answer ready after reply_timeout_s ({timeout_s:g} s)")
        return
    ending = f"{REFUSAL_MARKER}\n{marker}" if answer.refused is not None else marker
    note_id = gitlab.reply_in_thread(
        project, job.mr_iid, record.discussion_id, f"{answer.body}\n\n{ending}", marker
    )
    replies.finish(
        record.id,
        ReplyStatus.POSTED.value if answer.refused is None else ReplyStatus.REFUSED.value,
        reply_note_id=note_id,
        reason=answer.refused,
        model=answer.model,
        model_calls=answer.model_calls,
        prompt_tokens=answer.prompt_tokens,
        completion_tokens=answer.completion_tokens,
        cached_tokens=answer.cached_tokens,
        latency_ms=(time.monotonic() - started) * MS_PER_S,
    )
    if answer.proposal_id is not None:  # a 👍 on it, like one on any proposal note
        desk.learnings.set_proposal_note(answer.proposal_id, note_id)
    log.info("reply %d: %s answered in note %d", record.id, record.command, note_id)


def _too_late(created_at: datetime, timeout_s: float) -> bool:
    arrived = created_at if created_at.tzinfo else created_at.replace(tzinfo=utc_now().tzinfo)
    return (utc_now() - arrived).total_seconds() > timeout_s


def _drop(replies: ReplyStore, record: ReplyRecord, reason: str) -> None:
    replies.finish(record.id, ReplyStatus.DROPPED.value, reason=reason)
    log.warning("reply %d to note %d dropped: %s", record.id, record.trigger_note_id, reason)


def _bot_note_with(discussion: dict[str, Any], bot: str, marker: str) -> dict[str, Any] | None:
    """The bot's note in the thread that holds ``marker``, or None."""
    for note in discussion.get("notes") or []:
        if (note.get("author") or {}).get("username") == bot and marker in str(
            note.get("body") or ""
        ):
            return note
    return None


def _record_found(replies: ReplyStore, record: ReplyRecord, found: dict[str, Any]) -> None:
    """An earlier attempt posted the answer and died before recording it: record it now, as
    what it was (a refusal keeps its reason: the answer's first paragraph)."""
    body = str(found.get("body") or "")
    if REFUSAL_MARKER in body:
        reason = body.split("\n\n", 1)[0].removeprefix(REFUSAL_PREFIX).rstrip(".")
        replies.finish(
            record.id, ReplyStatus.REFUSED.value, reply_note_id=int(found["id"]), reason=reason
        )
    else:
        replies.finish(record.id, ReplyStatus.POSTED.value, reply_note_id=int(found["id"]))
    log.info("reply %d: already in the thread (note %d), not posted again", record.id, found["id"])


def _as_the_note_says(
    replies: ReplyStore, record: ReplyRecord, note: dict[str, Any], bot: str
) -> ReplyRecord | None:
    """The reply with the command the note holds as GitLab has it (and its author), never the
    delivery's; None (dropped) when the note holds none."""
    command = parse_reply_command(str(note.get("body") or ""), bot)
    if command is None:
        _drop(replies, record, "the note, as GitLab has it, holds no command for reviewbot")
        return None
    author = (note.get("author") or {}).get("username")
    author = author if isinstance(author, str) else record.author
    if (command, author) != (record.command, record.author):
        log.warning(
            "reply %d: the delivery said %s by @%s, the note holds %s by @%s: doing what the "
            "note holds",
            record.id,
            record.command,
            record.author,
            command,
            author,
        )
        replies.restate(record.id, command=command, author=author)
        record = replace(record, command=command, author=author)
    return record


def _thread_now(
    gitlab: GitLabClient, discussion: dict[str, Any], record: ReplyRecord
) -> tuple[dict[str, Any], dict[str, Any]] | str:
    """The thread and its triggering note, read from GitLab now; else why the note gets no
    answer."""
    notes = discussion.get("notes") or []
    first_author = (notes[0].get("author") or {}).get("username") if notes else None
    if first_author != gitlab.bot_username():
        return "not a thread reviewbot started"
    trigger = next((n for n in notes if n.get("id") == record.trigger_note_id), None)
    if trigger is None:
        return "the note was deleted"
    author_id = (trigger.get("author") or {}).get("id")
    if isinstance(author_id, int) and gitlab.user_is_bot(author_id):
        return "the note was written by a bot user"
    return discussion, trigger


# -- the answer ---------------------------------------------------------------------------


def _answer(desk: Answering, thread: Thread) -> _Answer:
    """The answer to post: a refusal when the note asks for a change its author may not make
    (reviewbot.permission, the one check for every command that changes state)."""
    gitlab, record, finding = desk.gitlab, thread.record, thread.finding
    command = ReplyCommand(record.command)
    change = COMMAND_CHANGES[command]
    if change is not None:
        refused = refusal(gitlab, thread.project, thread.author.get("id"), change)
        if refused is not None:
            body = f"{REFUSAL_PREFIX}{refused}.\n\nNothing was changed."
            return _Answer(body=body, refused=refused)
    if command is ReplyCommand.IGNORE:
        return _ignore(desk, thread)
    if command is ReplyCommand.LEARN:
        return _Answer(learn(desk.learnings, gitlab, thread).body)
    intent = (
        teaching_intent(str(thread.note.get("body") or ""), gitlab.bot_username())
        if command is ReplyCommand.ASK
        else None
    )
    lesson = None
    if intent is not None:
        lesson = propose(desk.learnings, gitlab, thread, intent)
    if lesson is not None:  # a proposed learning; from anyone who may not teach: an answer
        return _Answer(lesson.body, proposal_id=lesson.proposal_id)
    snapshot = gitlab.snapshot(thread.project, thread.mr_iid)
    files = RepoFiles(lambda sha: ApiView(gitlab, snapshot.project_id, sha))
    code = code_at_head(files, snapshot, finding, thread.discussion)
    guidance = read_guidance(desk, files, snapshot, finding)
    messages = reply_messages(record, finding, code, thread.notes, guidance)
    # the MR's key, as its reviews send it: a router answers on the box that knows the MR
    project_id = thread.job.project_id
    session = session_key(gitlab.url, project_id, thread.mr_iid) if project_id is not None else None
    # a human waits in the thread: the answer goes before any review's requests
    priority = request_priority(Workload.THREAD_ANSWER)
    answer = desk.model().chat(messages, REPLY_MAX_TOKENS, session, priority)
    if answer.finish_reason == FINISH_LENGTH:
        raise AnswerCutOff(f"the model's answer was cut at {REPLY_MAX_TOKENS} tokens")
    text, suggestion = split_suggestion(answer.content or "")
    text, masked = mask_secrets(text.strip())
    if suggestion is not None and mask_secrets(suggestion)[1]:
        suggestion, masked = None, True  # a committable change would write the secret again
    body = sanitize_markdown(text, max_chars=MAX_ANSWER_CHARS)
    if masked:
        body += f"\n\n{MASKED_NOTE}"
    if command is ReplyCommand.FIX:
        body = _with_suggestion(body, suggestion, finding, code)
    return _Answer(
        body=body or "_(the model gave no answer)_",
        model=desk.settings.llm_model,
        model_calls=1,
        prompt_tokens=answer.prompt_tokens,
        completion_tokens=answer.completion_tokens,
        cached_tokens=answer.cached_tokens or 0,
    )


def _with_suggestion(
    body: str, suggestion: str | None, finding: ThreadFinding, code: CodeAtHead
) -> str:
    if not code.suggestable:
        return (
            f"{body}\n\n_No suggestion: the line changed since this comment was posted "
            "(a suggestion could not be applied to it)._"
        )
    if suggestion is None:
        return f"{body}\n\n_No suggestion: the model proposed no replacement for the lines._"
    below = (finding.end_line - finding.line) if finding.end_line and finding.line else 0
    return f"{body}\n\n{suggestion_block(suggestion, lines_above=0, lines_below=max(0, below))}"


def _ignore(desk: Answering, thread: Thread) -> _Answer:
    """Resolve the thread and record that the finding was not wanted, by the note's author
    as GitLab has it."""
    record, job = thread.record, thread.job
    desk.gitlab.resolve_discussion(thread.project, job.mr_iid, record.discussion_id)
    desk.store.record_feedback(
        finding_id=thread.finding.finding_id,
        reply_id=record.id,
        project=job.project,
        mr_iid=job.mr_iid,
        gitlab_url=desk.gitlab.url,
        project_id=job.project_id,
        note_id=record.trigger_note_id,
        kind=FeedbackKind.IGNORED.value,
        value=IGNORED_VALUE,
        username=thread.author.get("username") or record.author,
        event_key=f"reply-ignore:{record.reply_key}",
    )
    return _Answer(body=f"Resolved: this finding is recorded as not useful.\n\n{LEARN_HINT}")


def split_suggestion(text: str) -> tuple[str, str | None]:
    """The model's answer without its first suggestion block, and that block's content."""
    match = SUGGESTION_IN_ANSWER.search(text)
    if match is None:
        return text, None
    return text[: match.start()] + text[match.end() :], match.group(2)


def code_at_head(
    files: RepoFiles,
    snapshot: MergeRequestSnapshot,
    finding: ThreadFinding,
    discussion: dict[str, Any],
) -> CodeAtHead:
    """The finding's lines at the MR's head (``snapshot``: the MR as just read), whether they
    changed, whether a suggestion fits."""
    head = snapshot.diff_refs.head_sha
    first = (discussion.get("notes") or [{}])[0]
    position = first.get("position") or {}
    marker_hash = _marker_hash(str(first.get("body") or ""))
    if finding.side != Side.NEW.value or finding.line is None:
        return CodeAtHead("", line_changed=True, suggestable=False)
    text = _head_text(files, head, finding.path)
    if text is None:
        return CodeAtHead("", line_changed=True, suggestable=False)
    lines = text.splitlines()
    line = finding.line
    now = lines[line - 1] if 0 < line <= len(lines) else None
    changed = now is None or (bool(marker_hash) and line_text_hash(now) != marker_hash)
    file = snapshot.file(finding.path)
    on_diff = file is not None and position_for(file, Side.NEW, line) is not None
    suggestable = not changed and on_diff and position.get("head_sha") == head
    low, high = max(1, line - CODE_CONTEXT_LINES), min(len(lines), line + CODE_CONTEXT_LINES)
    excerpt = "\n".join(f"{n:>5} | {lines[n - 1]}" for n in range(low, high + 1))
    return CodeAtHead(excerpt, line_changed=changed, suggestable=suggestable)


def _head_text(files: RepoFiles, head: str, path: str) -> str | None:
    """The file's text at the head; None when it is not there, not text, or the head's tree
    cannot be listed (the answer then shows no code, as for a file that is gone)."""
    try:
        return files.read(head, [path]).get(path)
    except TreeUnavailable as unlisted:
        log.warning("reply: %s not read at %s: %s", path, head[:SHORT_SHA], unlisted)
        return None


def read_guidance(
    desk: Answering, files: RepoFiles, snapshot: MergeRequestSnapshot, finding: ThreadFinding
) -> Guidance:
    """The review rules and the project's learnings in force (reviewbot.guidance, as a review
    of the MR reads them) that apply to the finding (reviewbot.replies.guidance)."""
    key = MergeRequestKey(desk.gitlab.url, snapshot.project_id, snapshot.iid)
    team = read_team_guidance(
        desk.settings,
        files,
        snapshot.diff_refs.start_sha,
        desk.learnings,
        key,
        snapshot.project_path,
        groups=desk.group_settings(snapshot.project_path) if desk.group_settings else NO_GROUPS,
    )
    settings = team.settings
    guidance = guidance_for(
        finding.path,
        finding.category,
        team.rules,
        team.learnings,
        local_counter(settings.llm_model),
        rules_tokens=settings.rules_tokens,
        learnings_tokens=settings.learnings_tokens,
    )
    for warning in team.warnings:
        log.info("reply on %s!%d: %s", snapshot.project_path, snapshot.iid, warning)
    if guidance.left_out:
        log.info("reply: no room for %s", ", ".join(guidance.left_out))
    return guidance


def _marker_hash(body: str) -> str:
    marker = parse_marker(body)
    return marker.text_hash if marker is not None else ""


def reply_messages(
    record: ReplyRecord,
    finding: ThreadFinding,
    code: CodeAtHead,
    notes: list[dict[str, Any]],
    guidance: Guidance | None = None,
) -> list[dict[str, str]]:
    """The chat prompt of one answer (plain text; ``fix`` asks for a suggestion block), with
    the team's rules and learnings for the finding (``guidance``) before the finding."""
    ask = {
        ReplyCommand.FIX.value: (
            "Propose a fix for the finding's line(s): a short explanation, then the "
            "replacement lines in a ```suggestion block (only the lines from line "
            f"{finding.line} to line {finding.end_line or finding.line})."
        ),
        ReplyCommand.EXPLAIN.value: "Explain the finding: why it matters, and how to fix it.",
        ReplyCommand.ASK.value: "Answer the human's last message in the thread.",
    }.get(record.command, "Answer the human's last message in the thread.")
    system = (
        f'{REPLY_PROMPT_TAG} command="{record.command}">\n'
        "You are reviewbot, a code reviewer answering in a thread you started on a merge "
        "request. Answer briefly in Markdown, for the human who asked. Never use GitLab quick "
        "actions (lines starting with /) or mention people. If you are not sure, say so. "
        "Where the team's review rules or learnings below bear on the question, follow them.\n"
        f"{ask}"
    )
    thread = "\n\n".join(
        f"@{(note.get('author') or {}).get('username', '?')}: "
        f"{str(note.get('body') or '')[:NOTE_CHARS_SHOWN]}"
        for note in notes[-THREAD_NOTES_SHOWN:]
    )
    changed = "yes" if code.line_changed else "no"
    blocks = guidance.blocks() if guidance is not None else ""
    user = (
        (f"{blocks}\n\n" if blocks else "")
        + f'<finding path="{finding.path}" line="{finding.line}" severity="{finding.severity}" '
        f'category="{finding.category}">\n{finding.title}\n\n{finding.body}\n</finding>\n\n'
        f'<code_at_head path="{finding.path}" line_changed_since="{changed}">\n'
        f"{code.excerpt}\n</code_at_head>\n\n<thread>\n{thread}\n</thread>"
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
