"""GitLab webhook payloads into typed events (pure: headers, bytes and dicts in, values out).

GitLab rules relied on (doc/user/project/integrations/webhook_events.md and
app/services/web_hook_service.rb in gitlabhq/gitlabhq):

* Headers: ``X-Gitlab-Event`` names the hook ("Merge Request Hook", "Note Hook",
  "Emoji Hook"); ``X-Gitlab-Token`` carries the secret; ``Idempotency-Key`` (GitLab >= 17.4)
  is kept across retries of one event; ``X-Gitlab-Event-UUID`` (recursion detection) is shared
  by the hooks of one event, hence combined here with a hash of the body.
* Every hook carries ``project.path_with_namespace`` and ``project.id``.
* Merge request actions: open, close, reopen, update, approved, unapproved, approval,
  unapproval, merge. ``object_attributes.oldrev`` is present only when code changed (a push,
  an applied suggestion); ``changes.draft`` = {previous, current} when the draft flag flips.
* Note hooks: ``object_attributes.noteable_type`` is MergeRequest, Issue, Commit or Snippet;
  ``object_attributes.action`` is create or update (GitLab >= 16.11; absent before).
  ``object_attributes.id`` is the note's id, ``object_attributes.discussion_id`` its thread
  (40 hex digits) and ``user.id`` its author (the hook has no ``bot`` flag: the worker asks
  ``GET /users/:id``; access-token bots are also known by their username,
  ``project_<id>_bot_<hex>`` / ``group_<id>_bot_<hex>``).
  ``/reviewbot`` is not one of GitLab's quick actions, and GitLab only strips the commands it
  knows (lib/gitlab/quick_actions/extractor.rb), so the line reaches us unchanged.
* Emoji hooks: ``object_attributes`` has name, awardable_type ("Note" for a comment),
  awardable_id (the note id) and action (award or revoke).

Values that reach the database are checked against what GitLab can send, so a forged or broken
payload is refused here with its field's name (`ValueOutOfLimits`, 422) instead of being
refused by the database (503) or breaking the encoder (500):

* iids are GitLab's per-project numbers, from 1 to 2**31 - 1 (PostgreSQL ``integer`` columns,
  in GitLab and in our tables); note and project ids are positive ``bigint``.
* Project paths and usernames have GitLab's formats (lib/gitlab/path_regex.rb): checked by
  the one rule in ``reviewbot.namespaces``, which the command line's ``--project`` and
  ``--group`` share (no ``.`` or ``..`` segment, no leading ``/``, ASCII only); a project path
  is at most 512 characters (our ``project`` columns), a username at most 255.
* Commit SHAs are 40 (SHA-1) or 64 (SHA-256 repositories) lowercase hex digits.

Owns: reading a delivery's headers and body into a typed event, the checks above, the command on a
note's first line and the delivery's key. Must not: do I/O, or decide what an event does
(`reviewbot.webhook.handlers` does).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from reviewbot.namespaces import MAX_PATH_CHARS, MAX_USERNAME_CHARS, PROJECT_PATH, USERNAME

__all__ = [
    "EMOJI_HOOK",
    "HOOK_KINDS",
    "MERGE_REQUEST_HOOK",
    "NOTE_HOOK",
    "Command",
    "EmojiEvent",
    "Event",
    "MergeRequestEvent",
    "MergeRequestRef",
    "NoteEvent",
    "PayloadError",
    "ValueOutOfLimits",
    "delivery_key",
    "parse_command",
    "parse_event",
    "parse_reply_command",
    "shown",
]

MERGE_REQUEST_HOOK = "Merge Request Hook"
NOTE_HOOK = "Note Hook"
EMOJI_HOOK = "Emoji Hook"
# X-Gitlab-Event -> the payload's object_kind
HOOK_KINDS = {MERGE_REQUEST_HOOK: "merge_request", NOTE_HOOK: "note", EMOJI_HOOK: "emoji"}

COMMAND_PREFIX = "/reviewbot"
NOTE_CREATED = "create"
MERGE_REQUEST_NOTEABLE = "MergeRequest"
# Header values used as keys are bounded: longer ones are replaced by their SHA-256.
MAX_KEY_VALUE_CHARS = 128
# Payload text quoted back in an answer is cut to this many characters.
MAX_SHOWN_CHARS = 64

MIN_IID = 1
MAX_IID = 2**31 - 1  # PostgreSQL integer
MIN_ID = 1
MAX_ID = 2**63 - 1  # PostgreSQL bigint
COMMIT_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
DISCUSSION_ID = re.compile(r"[0-9a-f]{1,64}")
MAX_DISCUSSION_ID_CHARS = 64  # = reviewbot.store.models.SHA_LENGTH
# The users GitLab makes for project and group access tokens (and service accounts' default).
ACCESS_TOKEN_BOT = re.compile(r"(?:project|group)_\d+_bot(?:_[0-9a-f]+|\d*)", re.IGNORECASE)
# `/reviewbot explain|fix|ignore` on the first line: a reply in one of the bot's threads.
REPLY_COMMANDS = ("explain", "fix", "ignore", "learn")


class PayloadError(ValueError):
    """The JSON body lacks a field the event needs, or has it with the wrong type."""


class ValueOutOfLimits(PayloadError):
    """A field has the right type but a value GitLab never sends (see the module docstring)."""


class Command(StrEnum):
    REVIEW = "review"
    FULL_REVIEW = "review --full"  # every hunk, even those reviewed before unchanged
    HELP = "help"


FULL_REVIEW_FLAGS = frozenset({"--full", "--force"})


@dataclass(frozen=True)
class MergeRequestEvent:
    """A Merge Request Hook."""

    project: str  # path_with_namespace, e.g. "group/subgroup/project"
    project_id: int | None  # GitLab's id of the project (every current GitLab sends it)
    iid: int
    action: str | None
    state: str | None
    draft: bool
    code_changed: bool  # `oldrev` present: a push or an applied suggestion
    marked_ready: bool  # `changes.draft` went from true to false
    head_sha: str | None


@dataclass(frozen=True)
class MergeRequestRef:
    """The merge request a comment was made on."""

    iid: int
    state: str | None
    head_sha: str | None


@dataclass(frozen=True)
class NoteEvent:
    """A Note Hook (a comment)."""

    project: str  # path_with_namespace, e.g. "group/subgroup/project"
    project_id: int | None  # GitLab's id of the project (every current GitLab sends it)
    author: str
    noteable_type: str
    system: bool
    action: str  # create or update ("create" when GitLab < 16.11 sends none)
    note: str
    merge_request: MergeRequestRef | None  # set when noteable_type is MergeRequest
    note_id: int | None = None  # object_attributes.id
    discussion_id: str | None = None  # the thread the note is in
    author_id: int | None = None  # user.id
    author_is_bot: bool = False  # an access-token bot's username (GitLab sends no flag)


@dataclass(frozen=True)
class EmojiEvent:
    """An Emoji Hook (an award emoji given or revoked)."""

    project: str  # path_with_namespace, e.g. "group/subgroup/project"
    project_id: int | None  # GitLab's id of the project (every current GitLab sends it)
    username: str
    name: str
    awardable_type: str
    awardable_id: int
    action: str | None
    mr_iid: int | None


Event = MergeRequestEvent | NoteEvent | EmojiEvent


# -- headers and note text ----------------------------------------------------------------


def delivery_key(headers: Mapping[str, str], body: bytes) -> str:
    """The key that identifies one event across GitLab's retries and manual redeliveries.

    ``Idempotency-Key`` when GitLab sends it (>= 17.4), else ``X-Gitlab-Event-UUID`` with a
    hash of the body (the UUID alone is shared by every hook of one event), else the hash.
    """
    idempotency_key = headers.get("idempotency-key", "").strip()
    if idempotency_key:
        return f"idempotency:{_bounded(idempotency_key)}"
    body_hash = hashlib.sha256(body).hexdigest()
    event_uuid = headers.get("x-gitlab-event-uuid", "").strip()
    if event_uuid:
        return f"event:{_bounded(event_uuid)}:{body_hash}"
    return f"body:{body_hash}"


def _bounded(value: str) -> str:
    """Short printable ASCII values as they are, anything else as its SHA-256."""
    if len(value) <= MAX_KEY_VALUE_CHARS and value.isascii() and value.isprintable():
        return value
    return hashlib.sha256(value.encode(errors="surrogatepass")).hexdigest()


def shown(value: str | None) -> str:
    """`value` quoted for an answer or a log line: ASCII only, at most MAX_SHOWN_CHARS long."""
    if value is None:
        return "None"
    cut = value if len(value) <= MAX_SHOWN_CHARS else value[:MAX_SHOWN_CHARS] + "..."
    return ascii(cut)


def parse_command(note: str, bot_username: str) -> Command | None:
    """The command on the note's first line: ``/reviewbot review`` or ``@<bot> review``
    (with ``--full`` or ``--force``: a full review, not an incremental one).

    A first line addressed to reviewbot without a known command (``/reviewbot``,
    ``@bot what?``) asks for help. Anything else is not for us: None.
    """
    lines = note.strip().splitlines()
    words = lines[0].split() if lines else []
    if not words or words[0].casefold() not in {COMMAND_PREFIX, f"@{bot_username}".casefold()}:
        return None
    if len(words) > 1 and words[1].casefold() == Command.REVIEW.value:
        flags = {word.casefold() for word in words[2:]}
        return Command.FULL_REVIEW if flags & FULL_REVIEW_FLAGS else Command.REVIEW
    return Command.HELP


def parse_reply_command(note: str, bot_username: str) -> str | None:
    """What a note in one of the bot's threads asks of it: ``explain``, ``fix``, ``ignore`` or
    ``learn``
    (``/reviewbot <command>`` or ``@<bot> <command>`` on the first line), ``ask`` (the bot
    mentioned anywhere, or addressed without one of those commands), or None (not for us).

    ``review`` and ``help`` keep their meaning everywhere (:func:`parse_command`)."""
    command = parse_command(note, bot_username)
    if command in (Command.REVIEW, Command.FULL_REVIEW):
        return None
    lines = note.strip().splitlines()
    words = lines[0].split() if lines else []
    if command is Command.HELP:
        asked = words[1].casefold() if len(words) > 1 else ""
        if asked in REPLY_COMMANDS:
            return asked
        if asked == Command.HELP.value or (words[0].casefold() == COMMAND_PREFIX and not asked):
            return None  # `/reviewbot`, `/reviewbot help`, `@bot help`: the help answer
        return "ask"
    mention = re.compile(rf"(?<![\w.@-])@{re.escape(bot_username)}(?![\w.-])", re.IGNORECASE)
    return "ask" if mention.search(note) else None


# -- payloads -----------------------------------------------------------------------------


def parse_event(hook: str, payload: Mapping[str, Any]) -> Event:
    """The typed event of a ``hook`` (an X-Gitlab-Event in HOOK_KINDS); PayloadError if bad."""
    kind = HOOK_KINDS.get(hook)
    if kind is None:
        raise ValueError(f"not a hook reviewbot handles: {hook!r}")
    object_kind = _str_at(payload, "object_kind")
    if object_kind != kind:
        raise PayloadError(
            f"object_kind {shown(object_kind)} does not match X-Gitlab-Event {shown(hook)}"
        )
    return _PARSERS[hook](payload)


def _parse_merge_request(payload: Mapping[str, Any]) -> MergeRequestEvent:
    attributes = _object_at(payload, "object_attributes")
    changes = payload.get("changes")
    draft_change = changes.get("draft") if isinstance(changes, Mapping) else None
    marked_ready = (
        isinstance(draft_change, Mapping)
        and draft_change.get("previous") is True
        and draft_change.get("current") is False
    )
    return MergeRequestEvent(
        project=_project_path_at(payload, "project", "path_with_namespace"),
        project_id=_optional_id_at(payload, "project", "id"),
        iid=_iid_at(payload, "object_attributes", "iid"),
        action=_optional_str_at(payload, "object_attributes", "action"),
        state=_optional_str_at(payload, "object_attributes", "state"),
        # `work_in_progress` is the pre-14.x name of `draft`; GitLab still sends both.
        draft=bool(attributes.get("draft") or attributes.get("work_in_progress")),
        code_changed=bool(attributes.get("oldrev")),
        marked_ready=marked_ready,
        head_sha=_optional_sha_at(payload, "object_attributes", "last_commit", "id"),
    )


def _parse_note(payload: Mapping[str, Any]) -> NoteEvent:
    attributes = _object_at(payload, "object_attributes")
    noteable_type = _str_at(payload, "object_attributes", "noteable_type")
    merge_request = None
    if noteable_type == MERGE_REQUEST_NOTEABLE:
        merge_request = MergeRequestRef(
            iid=_iid_at(payload, "merge_request", "iid"),
            state=_optional_str_at(payload, "merge_request", "state"),
            head_sha=_optional_sha_at(payload, "merge_request", "last_commit", "id"),
        )
    return NoteEvent(
        project=_project_path_at(payload, "project", "path_with_namespace"),
        project_id=_optional_id_at(payload, "project", "id"),
        author=_username_at(payload, "user", "username"),
        noteable_type=noteable_type,
        system=bool(attributes.get("system")),
        action=_optional_str_at(payload, "object_attributes", "action") or NOTE_CREATED,
        note=_optional_str_at(payload, "object_attributes", "note") or "",
        merge_request=merge_request,
        note_id=_optional_id_at(payload, "object_attributes", "id"),
        discussion_id=_optional_discussion_id(payload, "object_attributes", "discussion_id"),
        author_id=_optional_id_at(payload, "user", "id"),
        author_is_bot=bool(ACCESS_TOKEN_BOT.fullmatch(_username_at(payload, "user", "username"))),
    )


def _parse_emoji(payload: Mapping[str, Any]) -> EmojiEvent:
    return EmojiEvent(
        project=_project_path_at(payload, "project", "path_with_namespace"),
        project_id=_optional_id_at(payload, "project", "id"),
        username=_username_at(payload, "user", "username"),
        name=_str_at(payload, "object_attributes", "name"),
        awardable_type=_str_at(payload, "object_attributes", "awardable_type"),
        awardable_id=_id_at(payload, "object_attributes", "awardable_id"),
        action=_optional_str_at(payload, "object_attributes", "action"),
        mr_iid=_optional_iid_at(payload, "merge_request", "iid"),
    )


_PARSERS: dict[str, Callable[[Mapping[str, Any]], Event]] = {
    MERGE_REQUEST_HOOK: _parse_merge_request,
    NOTE_HOOK: _parse_note,
    EMOJI_HOOK: _parse_emoji,
}


# -- typed field access -------------------------------------------------------------------


def _walk(payload: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value at `path`; None when it or an object on the way is absent or null."""
    value: Any = payload
    for depth, name in enumerate(path):
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise PayloadError(f"{'.'.join(path[:depth])} must be an object")
        value = value.get(name)
    return value


def _required(payload: Mapping[str, Any], *path: str) -> Any:
    value = _walk(payload, path)
    if value is None:
        raise PayloadError(f"{'.'.join(path)} is missing")
    return value


def _str_at(payload: Mapping[str, Any], *path: str) -> str:
    value = _required(payload, *path)
    if not isinstance(value, str) or not value:
        raise PayloadError(f"{'.'.join(path)} must be a non-empty string")
    return value


def _optional_str_at(payload: Mapping[str, Any], *path: str) -> str | None:
    value = _walk(payload, path)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise PayloadError(f"{'.'.join(path)} must be a string")
    return value


def _int_at(payload: Mapping[str, Any], *path: str) -> int:
    value = _required(payload, *path)
    if isinstance(value, bool) or not isinstance(value, int):
        raise PayloadError(f"{'.'.join(path)} must be an integer")
    return value


def _int_between(payload: Mapping[str, Any], path: tuple[str, ...], low: int, high: int) -> int:
    value = _int_at(payload, *path)
    if not low <= value <= high:
        raise ValueOutOfLimits(f"{'.'.join(path)} must be between {low} and {high}")
    return value


def _iid_at(payload: Mapping[str, Any], *path: str) -> int:
    return _int_between(payload, path, MIN_IID, MAX_IID)


def _optional_iid_at(payload: Mapping[str, Any], *path: str) -> int | None:
    return None if _walk(payload, path) is None else _iid_at(payload, *path)


def _id_at(payload: Mapping[str, Any], *path: str) -> int:
    return _int_between(payload, path, MIN_ID, MAX_ID)


def _optional_id_at(payload: Mapping[str, Any], *path: str) -> int | None:
    return None if _walk(payload, path) is None else _id_at(payload, *path)


def _matching(
    value: str, pattern: re.Pattern[str], max_chars: int, path: tuple[str, ...], what: str
) -> str:
    if len(value) > max_chars:
        raise ValueOutOfLimits(f"{'.'.join(path)} is longer than {max_chars} characters")
    if pattern.fullmatch(value) is None:
        raise ValueOutOfLimits(f"{'.'.join(path)} {shown(value)} is not {what}")
    return value


def _project_path_at(payload: Mapping[str, Any], *path: str) -> str:
    return _matching(
        _str_at(payload, *path), PROJECT_PATH, MAX_PATH_CHARS, path, "a GitLab project path"
    )


def _username_at(payload: Mapping[str, Any], *path: str) -> str:
    return _matching(
        _str_at(payload, *path), USERNAME, MAX_USERNAME_CHARS, path, "a GitLab username"
    )


def _optional_sha_at(payload: Mapping[str, Any], *path: str) -> str | None:
    value = _optional_str_at(payload, *path)
    if value is None:
        return None
    return _matching(value, COMMIT_SHA, len(value), path, "a commit SHA (40 or 64 hex digits)")


def _optional_discussion_id(payload: Mapping[str, Any], *path: str) -> str | None:
    value = _optional_str_at(payload, *path)
    if value is None:
        return None
    return _matching(value, DISCUSSION_ID, MAX_DISCUSSION_ID_CHARS, path, "a discussion id")


def _object_at(payload: Mapping[str, Any], *path: str) -> Mapping[str, Any]:
    value = _required(payload, *path)
    if not isinstance(value, Mapping):
        raise PayloadError(f"{'.'.join(path)} must be an object")
    return value
