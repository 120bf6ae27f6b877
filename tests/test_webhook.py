"""The webhook listener over HTTP: Starlette's TestClient, and once through a real uvicorn server.

Payload fixtures in tests/fixtures/webhooks follow GitLab's documented examples
(doc/user/project/integrations/webhook_events.md in gitlabhq/gitlabhq): Merge Request Hook
(action, oldrev, changes.draft), Note Hook (noteable_type, note, merge_request.iid) and Emoji
Hook (object_attributes.name/awardable_type/awardable_id/action). Every test runs on SQLite and,
when REVIEWBOT_TEST_POSTGRES_URL is set, on PostgreSQL.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from reviewbot import namespaces
from reviewbot.commands.serve import serve_command
from reviewbot.config import ConfigError, Settings
from reviewbot.gitlab import GitLabClient, GitLabSettings
from reviewbot.queue import JobQueue
from reviewbot.store import Store
from reviewbot.store.models import NAME_LENGTH, PROJECT_LENGTH, SHA_LENGTH
from reviewbot.webhook import (
    WEBHOOK_PATH,
    Command,
    app_from_settings,
    create_app,
    delivery_key,
    help_text,
    parse_command,
    payloads,
)
from reviewbot.webhook.metrics import ListenerCollector, listener_registry, render
from tests.fakes.gitlab_server import FakeGitLab
from tests.hypothesis_profiles import examples
from tests.store_fixtures import (  # noqa: F401
    migrated_sqlite_url,
    store_url,
    terminate_other_sessions,
)

FIXTURES = Path(__file__).parent / "fixtures" / "webhooks"
SECRET = "s3cret-token"
BOT = "reviewbot"
PROJECT = "acme/payments"
PROJECT_ID = 14
IID = 7
GITLAB_URL = "http://gitlab.example.com"
HEAD = "9f2c1d7e4b8a6f3c5d0e1a2b3c4d5e6f7a8b9c0d"
NEW_HEAD = "0123456789abcdef0123456789abcdef01234567"
BOT_NOTE_ID = 1300
SMALL_BODY_LIMIT = 64 * 1024
REDELIVERIES = 5
SERVER_START_TIMEOUT_S = 10.0
# httpx's default 5 s: a loaded CI machine answered /healthz on PostgreSQL later than that
LOADED_MACHINE_TIMEOUT_S = 60.0
POLL_INTERVAL_S = 0.01
METRIC_LINE = re.compile(
    r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*",?)*\})? '
    r"(-?[0-9.e+-]+|\+Inf|-Inf|NaN)$"
)


def load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


class RecordingPoster:
    """Stands in for GitLab when only the call matters (the real API is tested below)."""

    def __init__(self) -> None:
        self.notes: list[tuple[str, int, str]] = []

    def post_note(self, project: str, iid: int, body: str) -> int:
        self.notes.append((project, iid, body))
        return len(self.notes)


class Listener:
    def __init__(self, url: str, *, max_body_bytes: int = SMALL_BODY_LIMIT) -> None:
        """A listener on the migrated database at ``url``."""
        self.store = Store.from_url(url)
        self.queue = JobQueue(self.store)
        self.poster = RecordingPoster()
        self.app = create_app(
            Settings(database_url=url, gitlab_url=GITLAB_URL),
            self.store,
            self.queue,
            secret=SECRET,
            bot_username=BOT,
            max_body_bytes=max_body_bytes,
            note_poster=self.poster,
        )
        self.client = TestClient(self.app)

    def post(
        self,
        event: str,
        payload: Any,
        *,
        token: str | None = SECRET,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        all_headers = {"X-Gitlab-Event": event, "Content-Type": "application/json"}
        if token is not None:
            all_headers["X-Gitlab-Token"] = token
        all_headers.update(headers or {})
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return self.client.post(WEBHOOK_PATH, content=body, headers=all_headers)

    def jobs(self) -> list[Any]:
        return self.queue.list(limit=100)


@pytest.fixture
def listener(store_url: str) -> Iterator[Listener]:  # noqa: F811
    running = Listener(store_url)
    yield running
    running.client.close()
    running.store.close()


def mr_note(text: str, *, iid: int = IID) -> dict[str, Any]:
    payload = load("note_merge_request_review")
    payload["object_attributes"]["note"] = text
    payload["merge_request"]["iid"] = iid
    return payload


def mr_event(name: str, **attributes: Any) -> dict[str, Any]:
    payload = load(name)
    payload["object_attributes"].update(attributes)
    return payload


# ---------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize("token", [None, "wrong", SECRET + "x", ""])
def test_wrong_or_missing_secret_is_401(listener: Listener, token: str | None) -> None:
    response = listener.post("Merge Request Hook", load("merge_request_open"), token=token)
    assert response.status_code == 401
    assert "X-Gitlab-Token" in response.json()["error"]
    assert listener.jobs() == []


def test_missing_event_header_is_400(listener: Listener) -> None:
    response = listener.client.post(
        WEBHOOK_PATH, json=load("merge_request_open"), headers={"X-Gitlab-Token": SECRET}
    )
    assert response.status_code == 400
    assert "X-Gitlab-Event" in response.json()["error"]


@pytest.mark.parametrize("body", [b"{not json", b"\xff\xfe", b"", b"[1, 2]", b'"text"'])
def test_body_that_is_not_a_json_object_is_400(listener: Listener, body: bytes) -> None:
    response = listener.post("Merge Request Hook", body)
    assert response.status_code == 400
    assert "JSON" in response.json()["error"]


def test_deeply_nested_json_is_400_not_500(listener: Listener) -> None:
    depth = 100_000
    response = listener.post("Note Hook", b"[" * depth + b"]" * depth)
    assert response.status_code in (400, 413)


def test_missing_field_is_400_with_its_name(listener: Listener) -> None:
    payload = load("merge_request_open")
    del payload["object_attributes"]["iid"]
    response = listener.post("Merge Request Hook", payload)
    assert response.status_code == 400
    assert "object_attributes.iid" in response.json()["error"]


def test_wrong_field_type_is_400(listener: Listener) -> None:
    payload = load("merge_request_open")
    payload["project"] = "acme/payments"
    response = listener.post("Merge Request Hook", payload)
    assert response.status_code == 400
    assert "project" in response.json()["error"]


def test_object_kind_must_match_the_event_header(listener: Listener) -> None:
    response = listener.post("Note Hook", load("merge_request_open"))
    assert response.status_code == 400
    assert "object_kind" in response.json()["error"]


def test_huge_body_is_413(listener: Listener) -> None:
    payload = load("merge_request_open")
    payload["object_attributes"]["description"] = "x" * (SMALL_BODY_LIMIT + 1)
    response = listener.post("Merge Request Hook", payload)
    assert response.status_code == 413
    assert listener.jobs() == []


# Values GitLab never sends, each past a limit of GitLab or of our columns (see payloads.py).
OUT_OF_LIMITS = [
    ("Merge Request Hook", "merge_request_open", "object_attributes.iid", 2**31),
    ("Merge Request Hook", "merge_request_open", "object_attributes.iid", 0),
    ("Merge Request Hook", "merge_request_open", "object_attributes.iid", -3),
    ("Merge Request Hook", "merge_request_open", "object_attributes.last_commit.id", "a" * 65),
    ("Merge Request Hook", "merge_request_open", "object_attributes.last_commit.id", "a\x00" * 20),
    ("Merge Request Hook", "merge_request_open", "project.path_with_namespace", "a/" + "b" * 511),
    ("Merge Request Hook", "merge_request_open", "project.path_with_namespace", "acme/pay\x00"),
    ("Merge Request Hook", "merge_request_open", "project.path_with_namespace", "acme/\ud800"),
    ("Merge Request Hook", "merge_request_open", "project.id", 2**70),
    # paths GitLab never allows (lib/gitlab/path_regex.rb; issue 17 item 3)
    ("Merge Request Hook", "merge_request_open", "project.path_with_namespace", "../../etc/passwd"),
    ("Merge Request Hook", "merge_request_open", "project.path_with_namespace", ".."),
    ("Merge Request Hook", "merge_request_open", "project.path_with_namespace", "acme/.."),
    ("Merge Request Hook", "merge_request_open", "project.path_with_namespace", "acme/."),
    ("Merge Request Hook", "merge_request_open", "project.path_with_namespace", "payments"),
    ("Merge Request Hook", "merge_request_open", "project.path_with_namespace", "acme//payments"),
    ("Merge Request Hook", "merge_request_open", "project.path_with_namespace", "/acme/payments"),
    ("Merge Request Hook", "merge_request_open", "project.path_with_namespace", "acme/payments/"),
    ("Merge Request Hook", "merge_request_open", "project.path_with_namespace", "acme/pay ments"),
    ("Merge Request Hook", "merge_request_open", "project.path_with_namespace", "acme/-payments"),
    ("Merge Request Hook", "merge_request_open", "project.path_with_namespace", "acme./payments"),
    ("Merge Request Hook", "merge_request_open", "project.path_with_namespace", "-acme/payments"),
    (
        "Merge Request Hook",
        "merge_request_open",
        "project.path_with_namespace",
        "acme/payments.git",
    ),
    (
        "Merge Request Hook",
        "merge_request_open",
        "project.path_with_namespace",
        "acme/payments.atom",
    ),
    ("Merge Request Hook", "merge_request_open", "project.path_with_namespace", "acme/pay\nments"),
    ("Merge Request Hook", "merge_request_open", "project.path_with_namespace", "acme\\payments"),
    ("Note Hook", "note_merge_request_review", "project.path_with_namespace", "../../etc/passwd"),
    ("Emoji Hook", "emoji_note_thumbsup", "project.path_with_namespace", "acme/.."),
    ("Note Hook", "note_merge_request_review", "user.username", "bob."),
    ("Note Hook", "note_merge_request_review", "user.username", ".."),
    ("Note Hook", "note_merge_request_review", "merge_request.iid", 2**31),
    ("Note Hook", "note_merge_request_review", "user.username", "bo\x00b"),
    ("Note Hook", "note_merge_request_review", "user.username", "b" * 256),
    ("Emoji Hook", "emoji_note_thumbsup", "object_attributes.awardable_id", 2**70),
    ("Emoji Hook", "emoji_note_thumbsup", "object_attributes.awardable_id", 0),
    ("Emoji Hook", "emoji_note_thumbsup", "merge_request.iid", 2**31),
    ("Emoji Hook", "emoji_note_thumbsup", "user.username", "\ud800"),
]


def _with_value(payload: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    *parents, name = dotted.split(".")
    target = payload
    for parent in parents:
        target = target[parent]
    target[name] = value
    return payload


@pytest.mark.slow
@pytest.mark.parametrize(
    ("hook", "fixture", "field", "value"),
    OUT_OF_LIMITS,
    ids=[
        f"{hook.split()[0]}-{field}={str(value)[:12]!a}" for hook, _, field, value in OUT_OF_LIMITS
    ],
)
def test_values_past_gitlabs_limits_are_422_and_reach_no_table(
    listener: Listener, hook: str, fixture: str, field: str, value: Any
) -> None:
    _bot_finding(listener.store, note_id=BOT_NOTE_ID)
    payload = _with_value(load(fixture), field, value)
    response = listener.post(hook, payload)
    assert response.status_code == 422, response.text
    assert field in response.json()["error"]
    assert listener.jobs() == []
    assert listener.store.feedback(project=PROJECT) == []


def test_values_at_gitlabs_limits_are_accepted(listener: Listener) -> None:
    sha256_head = "0123456789abcdef" * 4
    long_path = "group.name/sub_group-1/" + "p" * (PROJECT_LENGTH - len("group.name/sub_group-1/"))
    payload = load("merge_request_open")
    _with_value(payload, "object_attributes.iid", 2**31 - 1)
    _with_value(payload, "object_attributes.last_commit.id", sha256_head)
    _with_value(payload, "project.path_with_namespace", long_path)
    _with_value(payload, "project.id", 2**63 - 1)
    assert listener.post("Merge Request Hook", payload).status_code == 202
    (job,) = listener.jobs()
    assert (job.project, job.mr_iid, job.head_sha) == (long_path, 2**31 - 1, sha256_head)
    emoji = load("emoji_note_thumbsup")
    _with_value(emoji, "object_attributes.awardable_id", 2**63 - 1)
    _with_value(emoji, "user.username", "first.last_2-x")
    assert listener.post("Emoji Hook", emoji).status_code == 200  # not a bot note


def test_payload_limits_match_the_columns() -> None:
    assert namespaces.MAX_PATH_CHARS == PROJECT_LENGTH  # project and group_path columns
    assert namespaces.MAX_USERNAME_CHARS == NAME_LENGTH
    assert payloads.COMMIT_SHA.fullmatch("f" * SHA_LENGTH)


def test_odd_text_in_an_ignored_event_is_echoed_safely(listener: Listener) -> None:
    payload = mr_event("merge_request_open", action="\ud800" + "x" * 10_000)
    response = listener.post("Merge Request Hook", payload)
    assert response.status_code == 200
    assert response.content.isascii()
    assert len(response.json()["reason"]) < 200


# Arbitrary JSON, and GitLab-shaped payloads with arbitrary values in the fields read; values
# past a limit are drawn often, since most other changes stop a payload early with a 400.
HOSTILE_VALUES = st.sampled_from(
    [
        0,
        -1,
        2**31,
        2**63,
        2**70,
        "\x00",
        "acme/\ud800",
        "\ud800",
        "a" * 600,
        "a/b\x00c",
        [],
        {},
    ]
)
ANY_CHARACTER = st.characters(exclude_categories=[])  # NUL and lone surrogates included
JSON_LEAVES = (
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(ANY_CHARACTER, max_size=20)
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)
# Fields whose values reach the database (or the answer).
STORED_FIELDS = [
    "project.path_with_namespace",
    "project.id",
    "user.username",
    "object_attributes.iid",
    "object_attributes.last_commit.id",
    "object_attributes.awardable_id",
    "merge_request.iid",
    "merge_request.last_commit.id",
    "object_attributes.action",
    "object_attributes.name",
]
FIELDS_READ = [
    "object_kind",
    "project",
    "project.path_with_namespace",
    "project.id",
    "user",
    "user.username",
    "object_attributes",
    "object_attributes.iid",
    "object_attributes.action",
    "object_attributes.state",
    "object_attributes.draft",
    "object_attributes.oldrev",
    "object_attributes.last_commit",
    "object_attributes.last_commit.id",
    "object_attributes.noteable_type",
    "object_attributes.note",
    "object_attributes.system",
    "object_attributes.name",
    "object_attributes.awardable_type",
    "object_attributes.awardable_id",
    "merge_request",
    "merge_request.iid",
    "merge_request.state",
    "merge_request.last_commit",
    "changes",
    "changes.draft",
]
HOOKS_AND_FIXTURES = [
    ("Merge Request Hook", "merge_request_open"),
    ("Merge Request Hook", "merge_request_close"),
    ("Merge Request Hook", "merge_request_marked_ready"),
    ("Note Hook", "note_merge_request_help"),
    ("Note Hook", "note_merge_request_review"),
    ("Note Hook", "note_issue"),
    ("Emoji Hook", "emoji_note_thumbsup"),
]
PROPERTY_EXAMPLES = 300


def _set_path(payload: Any, dotted: str, value: Any) -> None:
    *parents, name = dotted.split(".")
    for parent in parents:
        if not isinstance(payload, dict):
            return
        payload = payload.setdefault(parent, {})
    if isinstance(payload, dict):
        payload[name] = value


@st.composite
def gitlab_shaped(draw: st.DrawFn) -> tuple[str, Any]:
    hook, fixture = draw(st.sampled_from(HOOKS_AND_FIXTURES))
    payload = load(fixture)
    if fixture.startswith("note"):
        payload["object_attributes"]["note"] = draw(
            st.sampled_from(["/reviewbot review", "/reviewbot help", "@reviewbot review", "hi"])
        )
    _set_path(payload, draw(st.sampled_from(STORED_FIELDS)), draw(HOSTILE_VALUES | JSON_VALUES))
    for field in draw(st.lists(st.sampled_from(FIELDS_READ), max_size=2)):
        _set_path(payload, field, draw(HOSTILE_VALUES | JSON_VALUES))
    return hook, payload


@pytest.fixture(scope="module")
def sqlite_listener(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listener]:
    running = Listener(
        migrated_sqlite_url(tmp_path_factory, tmp_path_factory.mktemp("property") / "db.sqlite")
    )
    running.client = TestClient(running.app, raise_server_exceptions=False)
    _bot_finding(running.store)
    yield running
    running.client.close()
    running.store.close()


@pytest.mark.slow
@settings(
    max_examples=examples(PROPERTY_EXAMPLES),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    delivery=gitlab_shaped()
    | st.tuples(st.sampled_from(["Merge Request Hook", "Note Hook", "Emoji Hook"]), JSON_VALUES)
)
def test_no_payload_gets_a_5xx(sqlite_listener: Listener, delivery: tuple[str, Any]) -> None:
    hook, payload = delivery
    response = sqlite_listener.post(hook, json.dumps(payload).encode())
    assert response.status_code < 500, (payload, response.text)
    assert response.status_code in {200, 202, 204, 400, 413, 422}


def test_unknown_event_is_204(listener: Listener) -> None:
    response = listener.post("Pipeline Hook", {"object_kind": "pipeline"})
    assert response.status_code == 204
    assert response.content == b""


def test_note_on_an_issue_is_ignored(listener: Listener) -> None:
    payload = load("note_issue")
    payload["object_attributes"]["note"] = "/reviewbot review"
    response = listener.post("Note Hook", payload)
    assert response.status_code == 200
    assert "Issue" in response.json()["reason"]
    assert listener.jobs() == []


def test_the_bots_own_note_is_ignored(listener: Listener) -> None:
    payload = load("note_merge_request_review")
    payload["user"]["username"] = BOT
    response = listener.post("Note Hook", payload)
    assert response.status_code == 200
    assert listener.jobs() == []


def test_edited_comment_runs_no_command(listener: Listener) -> None:
    payload = load("note_merge_request_review")
    payload["object_attributes"]["action"] = "update"
    assert listener.post("Note Hook", payload).status_code == 200
    assert listener.jobs() == []


# ---------------------------------------------------------------------------------------------
# Deduplication


@pytest.mark.parametrize(
    "headers",
    [
        {"Idempotency-Key": "3f0c2e7a-5b1d-4c9e-8a6f-2d4b7e9c1a3f"},
        {"X-Gitlab-Event-UUID": "b5e1f0a2-9c3d-4e8f-a7b6-1c2d3e4f5a6b"},
        {},
    ],
    ids=["idempotency-key", "event-uuid", "no-header"],
)
def test_same_delivery_five_times_makes_one_job(
    listener: Listener, headers: dict[str, str]
) -> None:
    payload = load("merge_request_open")
    statuses = [
        listener.post("Merge Request Hook", payload, headers=headers).json()["status"]
        for _ in range(REDELIVERIES)
    ]
    assert statuses == ["queued"] + ["duplicate"] * (REDELIVERIES - 1)
    assert len(listener.jobs()) == 1


def test_idempotency_key_wins_over_the_body() -> None:
    first = delivery_key({"idempotency-key": "k1"}, b'{"a": 1}')
    assert first == delivery_key({"idempotency-key": "k1"}, b'{"a": 2}')
    assert first != delivery_key({"idempotency-key": "k2"}, b'{"a": 1}')
    by_uuid = delivery_key({"x-gitlab-event-uuid": "u"}, b"{}")
    assert by_uuid != delivery_key({"x-gitlab-event-uuid": "u"}, b"{ }")
    assert len(delivery_key({"idempotency-key": "k" * 10_000}, b"{}")) < 255


# ---------------------------------------------------------------------------------------------
# Merge Request Hook


def test_opened_mr_queues_a_review_of_its_head(listener: Listener) -> None:
    response = listener.post("Merge Request Hook", load("merge_request_open"))
    assert response.status_code == 202
    (job,) = listener.jobs()
    assert (job.project, job.mr_iid, job.head_sha, job.trigger) == (PROJECT, IID, HEAD, "webhook")
    assert job.id == response.json()["job_id"]


def test_jobs_carry_the_gitlab_project_id(listener: Listener) -> None:
    listener.post("Merge Request Hook", load("merge_request_open"))
    listener.post("Note Hook", mr_note("/reviewbot review", iid=IID + 1))
    without_id = mr_event("merge_request_open", iid=IID + 2)
    del without_id["project"]["id"]
    listener.post("Merge Request Hook", without_id)
    ids = {job.mr_iid: job.payload["project_id"] for job in listener.jobs()}
    assert ids == {IID: PROJECT_ID, IID + 1: PROJECT_ID, IID + 2: None}


def test_push_queues_the_new_head_and_supersedes_the_old(listener: Listener) -> None:
    listener.post("Merge Request Hook", load("merge_request_open"))
    push = load("merge_request_update_push")
    push["object_attributes"]["last_commit"]["id"] = NEW_HEAD
    response = listener.post("Merge Request Hook", push)
    assert response.status_code == 202
    jobs = {job.head_sha: job for job in listener.jobs()}
    assert jobs[NEW_HEAD].status == "queued"
    assert jobs[HEAD].status == "superseded"
    assert response.json()["superseded"] == [jobs[HEAD].id]


def test_update_without_oldrev_is_ignored(listener: Listener) -> None:
    response = listener.post("Merge Request Hook", load("merge_request_update_labels"))
    assert response.status_code == 200
    assert listener.jobs() == []


def test_draft_is_skipped_until_marked_ready(listener: Listener) -> None:
    draft = listener.post("Merge Request Hook", load("merge_request_open_draft"))
    assert draft.status_code == 200
    assert "draft" in draft.json()["reason"]
    assert listener.jobs() == []
    ready = listener.post("Merge Request Hook", load("merge_request_marked_ready"))
    assert ready.status_code == 202
    assert [job.head_sha for job in listener.jobs()] == [HEAD]


def test_drafts_are_reviewed_when_the_setting_says_so(store_url: str) -> None:  # noqa: F811
    store = Store.from_url(store_url)
    queue = JobQueue(store)
    app = create_app(
        Settings(database_url=store_url, review_drafts=True),
        store,
        queue,
        secret=None,
        bot_username=BOT,
    )
    with TestClient(app) as client:
        response = client.post(
            WEBHOOK_PATH,
            json=load("merge_request_open_draft"),
            headers={"X-Gitlab-Event": "Merge Request Hook"},
        )
    store.close()
    assert response.status_code == 202


@pytest.mark.parametrize("closing", ["merge_request_close", "merge_request_merge"])
def test_close_and_merge_cancel_queued_jobs(listener: Listener, closing: str) -> None:
    listener.post("Merge Request Hook", load("merge_request_open"))
    response = listener.post("Merge Request Hook", load(closing))
    assert response.status_code == 202
    assert response.json()["cancelled"] == 1
    assert [job.status for job in listener.jobs()] == ["cancelled"]


def test_approval_is_ignored(listener: Listener) -> None:
    response = listener.post(
        "Merge Request Hook", mr_event("merge_request_open", action="approved")
    )
    assert response.status_code == 200
    assert listener.jobs() == []


# ---------------------------------------------------------------------------------------------
# Note Hook


@pytest.mark.parametrize(
    "text", ["/reviewbot review", f"@{BOT} review\nplease", "/ReviewBot Review"]
)
def test_review_command_queues_a_note_triggered_job(listener: Listener, text: str) -> None:
    payload = load("note_merge_request_review")
    payload["object_attributes"]["note"] = text
    response = listener.post("Note Hook", payload)
    assert response.status_code == 202
    (job,) = listener.jobs()
    assert (job.project, job.mr_iid, job.head_sha, job.trigger) == (PROJECT, IID, HEAD, "note")


def test_comment_without_command_is_ignored(listener: Listener) -> None:
    payload = load("note_merge_request_review")
    payload["object_attributes"]["note"] = "Looks good, but see\n/reviewbot review"
    assert listener.post("Note Hook", payload).status_code == 200
    assert listener.jobs() == []


def test_help_is_answered_once_per_delivery(listener: Listener) -> None:
    payload = load("note_merge_request_help")
    headers = {"Idempotency-Key": "c0ffee00-1111-2222-3333-444455556666"}
    for _ in range(REDELIVERIES):
        assert listener.post("Note Hook", payload, headers=headers).status_code == 202
    assert listener.poster.notes == [(PROJECT, IID, help_text(BOT))]
    assert listener.jobs() == []


HELP_FLOOD = 30


def test_thirty_help_comments_on_one_mr_get_one_answer(listener: Listener) -> None:
    answers = [
        listener.post(
            "Note Hook", mr_note("/reviewbot help"), headers={"Idempotency-Key": f"help-{n}"}
        )
        for n in range(HELP_FLOOD)
    ]
    assert [a.json()["status"] for a in answers] == ["help"] + ["ignored"] * (HELP_FLOOD - 1)
    assert {a.status_code for a in answers[1:]} == {200}
    assert "minutes" in answers[1].json()["reason"]
    other_mr = listener.post("Note Hook", mr_note("/reviewbot help", iid=IID + 1))
    assert other_mr.json()["status"] == "help"
    answer = help_text(BOT)
    assert listener.poster.notes == [(PROJECT, IID, answer), (PROJECT, IID + 1, answer)]


def test_help_is_rate_limited_across_listener_processes(store_url: str) -> None:  # noqa: F811
    first, second = Listener(store_url), Listener(store_url)
    try:
        statuses = [
            running.post(
                "Note Hook", mr_note("/reviewbot help"), headers={"Idempotency-Key": f"help-{n}"}
            ).json()["status"]
            for n, running in enumerate([first, second, first, second])
        ]
    finally:
        for running in (first, second):
            running.client.close()
            running.store.close()
    assert statuses == ["help", "ignored", "ignored", "ignored"]
    assert len(first.poster.notes) + len(second.poster.notes) == 1


def test_parse_command() -> None:
    assert parse_command("/reviewbot review", BOT) is Command.REVIEW
    assert parse_command("  @ReviewBot review now", BOT) is Command.REVIEW
    assert parse_command("/reviewbot help", BOT) is Command.HELP
    assert parse_command("/reviewbot", BOT) is Command.HELP
    assert parse_command("/reviewbot review --full", BOT) is Command.FULL_REVIEW
    assert parse_command("@reviewbot review --FORCE please", BOT) is Command.FULL_REVIEW
    assert parse_command("/reviewbot review --fully", BOT) is Command.REVIEW
    assert parse_command("/reviewbot dance", BOT) is Command.HELP
    assert parse_command("@reviewbot-other review", BOT) is None
    assert parse_command("/review", BOT) is None
    assert parse_command("", BOT) is None
    assert not any(line.startswith("/") for line in help_text(BOT).splitlines())


# ---------------------------------------------------------------------------------------------
# Emoji Hook


def _bot_finding(store: Store, note_id: int = BOT_NOTE_ID) -> int:
    review_id = store.start_review(
        project=PROJECT,
        mr_iid=IID,
        head_sha=HEAD,
        base_sha=None,
        start_sha=None,
        trigger="webhook",
        model="qwen",
        prompt_version="1",
    )
    (finding_id,) = store.record_findings(
        review_id,
        [
            {
                "fingerprint": "f" * 16,
                "path": "refunds.py",
                "side": "new",
                "line": 12,
                "severity": "minor",
                "category": "bug",
                "title": "Float rounding",
                "body": "Use Decimal",
                "anchor": "exact",
                "state": "posted",
                "discussion_id": "d" * 40,
                "note_id": note_id,
            }
        ],
    )
    return finding_id


def test_thumbs_on_a_bot_note_are_recorded_once(listener: Listener) -> None:
    finding_id = _bot_finding(listener.store)
    payload = load("emoji_note_thumbsup")
    statuses = [listener.post("Emoji Hook", payload).json()["status"] for _ in range(3)]
    assert statuses == ["feedback", "duplicate", "duplicate"]
    (feedback,) = listener.store.feedback(project=PROJECT)
    assert (feedback["finding_id"], feedback["value"], feedback["username"]) == (
        finding_id,
        "thumbsup",
        "bo",
    )
    assert (feedback["kind"], feedback["note_id"], feedback["mr_iid"]) == ("award", 1300, IID)
    # the MR's identity, as reviews and findings carry it: this GitLab + the project's id
    assert (feedback["gitlab_url"], feedback["project_id"]) == (GITLAB_URL, PROJECT_ID)


def test_revoked_thumbs_down_is_recorded_as_revoked(listener: Listener) -> None:
    _bot_finding(listener.store)
    payload = load("emoji_note_thumbsup")
    payload["event_type"] = "revoke"
    payload["object_attributes"].update(name="thumbsdown", action="revoke")
    assert listener.post("Emoji Hook", payload).status_code == 202
    assert [f["value"] for f in listener.store.feedback(project=PROJECT)] == ["thumbsdown:revoked"]


def test_optional_objects_may_be_absent_or_null(listener: Listener) -> None:
    """An award on an issue's comment has no merge_request; GitLab may send null objects."""
    emoji = load("emoji_note_thumbsup")
    emoji.pop("merge_request")
    assert listener.post("Emoji Hook", emoji).status_code == 200
    opened = load("merge_request_open")
    _with_value(opened, "object_attributes.last_commit", None)
    assert listener.post("Merge Request Hook", opened).status_code == 202
    assert listener.jobs()[0].head_sha is None


@pytest.mark.parametrize(
    "change",
    [{"awardable_id": 999_999}, {"name": "tada"}, {"awardable_type": "Issue"}],
    ids=["not-a-bot-note", "not-thumbs", "not-a-note"],
)
def test_other_reactions_are_ignored(listener: Listener, change: dict[str, Any]) -> None:
    _bot_finding(listener.store)
    payload = load("emoji_note_thumbsup")
    payload["object_attributes"].update(change)
    assert listener.post("Emoji Hook", payload).status_code == 200
    assert listener.store.feedback(project=PROJECT) == []


@pytest.mark.parametrize("username", [BOT, BOT.capitalize()])
def test_the_bots_own_thumbs_on_its_note_are_not_feedback(
    listener: Listener, username: str
) -> None:
    _bot_finding(listener.store)
    payload = load("emoji_note_thumbsup")
    payload["user"]["username"] = username  # GitLab usernames ignore case
    answer = listener.post("Emoji Hook", payload)
    assert answer.status_code == 200
    assert answer.json() == {"status": "ignored", "reason": "reaction by reviewbot itself"}
    assert listener.store.feedback(project=PROJECT) == []


# ---------------------------------------------------------------------------------------------
# Health, metrics, schema


def test_first_delivery_after_the_database_dropped_its_connections_is_accepted(
    listener: Listener,
    store_url: str,  # noqa: F811
) -> None:
    """A PostgreSQL restart (or a proxy cutting idle connections) leaves the pool holding dead
    connections: the next delivery must still be queued, not answered 503."""
    if not store_url.startswith("postgresql"):
        pytest.skip("PostgreSQL sessions only")
    assert listener.post("Merge Request Hook", load("merge_request_open")).status_code == 202
    assert listener.client.get("/healthz").status_code == 200
    terminate_other_sessions(store_url)
    response = listener.post("Merge Request Hook", mr_event("merge_request_open", iid=IID + 1))
    assert response.status_code == 202, response.text
    assert response.json()["status"] == "queued"
    terminate_other_sessions(store_url)
    assert listener.client.get("/healthz").status_code == 200


def test_healthz(listener: Listener) -> None:
    response = listener.client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok"}


def _metrics(text: str) -> dict[str, float]:
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.match(r"^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$", line), line
            continue
        assert METRIC_LINE.match(line), line
        series, value = line.rsplit(" ", 1)
        values[series] = float(value)
    return values


def _record_review(store: Store) -> None:
    started = datetime.now(UTC) - timedelta(seconds=42)
    review_id = store.start_review(
        project=PROJECT,
        mr_iid=IID,
        head_sha=HEAD,
        base_sha=None,
        start_sha=None,
        trigger="webhook",
        model="qwen",
        prompt_version="1",
    )
    store.record_llm_calls(
        review_id,
        [
            {
                "chunk_index": 0,
                "mode": "tool_calls",
                "outcome": "ok",
                "prompt_tokens": 1000,
                "completion_tokens": 200,
                "ttft_ms": 300.0,
                "latency_ms": 4000.0,
                "started_at": started,
            },
            {
                "chunk_index": 1,
                "mode": "tool_calls",
                "outcome": "ok",
                "prompt_tokens": 500,
                "completion_tokens": 50,
                "ttft_ms": 7000.0,
                "latency_ms": 90_000.0,
                "started_at": started,
            },
        ],
    )
    store.finish_review(review_id, status="succeeded")


def test_metrics_text_parses_and_counts(listener: Listener) -> None:
    listener.post("Merge Request Hook", load("merge_request_open"))
    listener.post("Merge Request Hook", load("merge_request_open"))
    listener.post("Merge Request Hook", load("merge_request_open"), token="wrong")
    _bot_finding(listener.store)
    _record_review(listener.store)
    response = listener.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    values = _metrics(response.text)
    assert values['reviewbot_jobs{status="queued"}'] == listener.queue.counts()["queued"]
    assert values['reviewbot_webhook_deliveries_total{outcome="queued"}'] == 1
    assert values['reviewbot_webhook_deliveries_total{outcome="duplicate"}'] == 1
    assert values['reviewbot_webhook_deliveries_total{outcome="unauthorized"}'] == 1
    assert values['reviewbot_llm_tokens_total{kind="prompt"}'] == 1500
    assert values['reviewbot_findings_total{severity="minor"}'] == 1
    assert values['reviewbot_llm_call_duration_seconds_bucket{le="5.0"}'] == 1
    assert values['reviewbot_llm_call_duration_seconds_bucket{le="+Inf"}'] == 2
    assert values["reviewbot_llm_call_duration_seconds_sum"] == pytest.approx(94.0)
    assert values['reviewbot_llm_time_to_first_token_seconds_bucket{le="0.5"}'] == 1
    # the review ran from start_review to finish_review: a few milliseconds here
    assert values['reviewbot_review_duration_seconds_bucket{le="5.0"}'] == 1
    assert values["reviewbot_review_duration_seconds_count"] == 1


def test_openapi_lists_the_endpoints(listener: Listener) -> None:
    spec = listener.client.get("/openapi.json").json()
    assert spec["openapi"].startswith("3.")
    assert {WEBHOOK_PATH, "/healthz", "/metrics", "/openapi.json"} <= set(spec["paths"])
    assert {"202", "204", "400", "401", "413", "422"} <= set(
        spec["paths"][WEBHOOK_PATH]["post"]["responses"]
    )


# ---------------------------------------------------------------------------------------------
# The help answer through the GitLab API (fake GitLab over HTTP)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _tiny_repo(path: Path) -> Path:
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.email", "dev@example.com")
    _git(path, "config", "user.name", "Dev")
    (path / "refunds.py").write_text("total = 1\n")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "initial")
    _git(path, "checkout", "-q", "-b", "fix-rounding")
    (path / "refunds.py").write_text("total = round(1.005, 2)\n")
    _git(path, "commit", "-q", "-am", "round")
    return path


def test_help_is_posted_on_the_merge_request(store_url: str, tmp_path: Path) -> None:  # noqa: F811
    store = Store.from_url(store_url)
    with FakeGitLab() as gitlab:
        gitlab.add_user(BOT, token="bot-token", bot=True)
        gitlab.add_project(PROJECT)
        gitlab.add_mr_from_git(PROJECT, _tiny_repo(tmp_path), "main", "fix-rounding", iid=IID)
        poster = GitLabClient(GitLabSettings(url=gitlab.url, token="bot-token"))
        app = create_app(
            Settings(database_url=store_url),
            store,
            JobQueue(store),
            secret=SECRET,
            bot_username=BOT,
            note_poster=poster,
        )
        with TestClient(app) as client:
            response = client.post(
                WEBHOOK_PATH,
                json=load("note_merge_request_help"),
                headers={"X-Gitlab-Event": "Note Hook", "X-Gitlab-Token": SECRET},
            )
        notes = gitlab.notes(PROJECT, IID)
    store.close()
    assert response.status_code == 202
    assert [
        (note["author"]["username"], note["body"].split("\n\n<!-- reviewbot:write")[0])
        for note in notes
    ] == [(BOT, help_text(BOT))]


def test_help_against_a_sign_in_page_logs_one_line(
    store_url: str,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """GitLab's URL answering a sign-in page (issue 17 item 3): the delivery is answered, the
    help note cannot be posted, and that is one log line, not a traceback."""
    store = Store.from_url(store_url)
    with FakeGitLab() as gitlab:
        gitlab.add_user(BOT, token="bot-token", bot=True)
        gitlab.add_project(PROJECT)
        gitlab.add_mr_from_git(PROJECT, _tiny_repo(tmp_path), "main", "fix-rounding", iid=IID)
        gitlab.answer_sign_in_page()
        poster = GitLabClient(GitLabSettings(url=gitlab.url, token="bot-token"))
        app = create_app(
            Settings(database_url=store_url),
            store,
            JobQueue(store),
            secret=SECRET,
            bot_username=BOT,
            note_poster=poster,
        )
        with caplog.at_level(logging.WARNING), TestClient(app) as client:
            response = client.post(
                WEBHOOK_PATH,
                json=load("note_merge_request_help"),
                headers={"X-Gitlab-Event": "Note Hook", "X-Gitlab-Token": SECRET},
            )
        gitlab.answer_sign_in_page(False)
        notes = gitlab.notes(PROJECT, IID)
    store.close()
    assert response.status_code == 202 and notes == []
    [record] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "could not answer /reviewbot help" in record.getMessage()
    assert "sign-in page?" in record.getMessage() and record.exc_info is None


# ---------------------------------------------------------------------------------------------
# A real server


class ServerThread:
    """uvicorn on 127.0.0.1, random port, in a thread; stopped cleanly."""

    def __init__(self, app: Any, *, log_to_root: bool = False) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.bind(("127.0.0.1", 0))
        self.address = self.socket.getsockname()
        self.url = f"http://127.0.0.1:{self.address[1]}"
        # log_to_root: uvicorn's own logging set-up is skipped, so its loggers (an exception in
        # the app is logged by "uvicorn.error") reach the root logger and pytest's caplog.
        logging_options: dict[str, Any] = {"log_config": None} if log_to_root else {}
        config = uvicorn.Config(app, log_level="warning", lifespan="off", **logging_options)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, name="uvicorn-test"
        )

    def __enter__(self) -> ServerThread:
        self.thread.start()
        started = threading.Event()
        while not self.server.started and self.thread.is_alive():
            started.wait(POLL_INTERVAL_S)
        assert self.server.started, "uvicorn did not start"
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(SERVER_START_TIMEOUT_S)
        self.socket.close()


@pytest.mark.slow
def test_through_a_real_uvicorn_server(listener: Listener) -> None:
    payload = json.dumps(load("merge_request_open")).encode()
    headers = {
        "X-Gitlab-Event": "Merge Request Hook",
        "X-Gitlab-Token": SECRET,
        "Idempotency-Key": "5d1c9a6e-0000-4000-8000-000000000001",
    }

    def chunked_huge_body() -> Iterator[bytes]:
        for _ in range(SMALL_BODY_LIMIT // 1024 + 2):
            yield b" " * 1024

    with (
        ServerThread(listener.app) as server,
        httpx.Client(base_url=server.url, timeout=LOADED_MACHINE_TIMEOUT_S) as http,
    ):
        answers = [
            http.post(WEBHOOK_PATH, content=payload, headers=headers).status_code
            for _ in range(REDELIVERIES)
        ]
        wrong = http.post(WEBHOOK_PATH, content=payload, headers={**headers, "X-Gitlab-Token": "x"})
        huge = http.post(WEBHOOK_PATH, content=chunked_huge_body(), headers=headers)
        health = http.get("/healthz")
        metrics = http.get("/metrics")
    assert answers == [202] * REDELIVERIES
    assert len(listener.jobs()) == 1
    assert (wrong.status_code, huge.status_code, health.status_code) == (401, 413, 200)
    assert _metrics(metrics.text)['reviewbot_webhook_deliveries_total{outcome="too_large"}'] == 1
    assert not server.thread.is_alive()


def _send_half_a_delivery(address: tuple[str, int], body: bytes) -> None:
    """Headers announcing ``body``'s length, half of it, then the connection closed: a
    delivery cut off mid-body (a proxy timing out, GitLab giving up)."""
    head = (
        f"POST {WEBHOOK_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"X-Gitlab-Event: Merge Request Hook\r\nX-Gitlab-Token: {SECRET}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(address, timeout=SERVER_START_TIMEOUT_S) as raw:
        raw.sendall(head + body[: len(body) // 2])
        raw.shutdown(socket.SHUT_WR)
        raw.recv(1)  # wait until the server has read what came and closed its side


@pytest.mark.slow
def test_a_delivery_cut_off_mid_body_is_one_log_line_and_queues_nothing(
    listener: Listener, caplog: pytest.LogCaptureFixture
) -> None:
    """Was a 45-line ClientDisconnect traceback per connection (issue 17 item 3)."""
    body = json.dumps(load("merge_request_open")).encode()
    with caplog.at_level(logging.INFO), ServerThread(listener.app, log_to_root=True) as server:
        for _ in range(3):
            _send_half_a_delivery(server.address, body)
        with httpx.Client(base_url=server.url) as http:
            metrics = http.get("/metrics")
    assert listener.jobs() == []
    records = [r for r in caplog.records if "cut off" in r.getMessage()]
    assert len(records) == 3, [r.getMessage() for r in caplog.records]
    assert all(r.exc_info is None and "\n" not in r.getMessage() for r in records)
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert _metrics(metrics.text)['reviewbot_webhook_deliveries_total{outcome="disconnected"}'] == 3


# ---------------------------------------------------------------------------------------------
# The command


def test_serve_refuses_to_start_without_a_secret(tmp_path: Path) -> None:
    env = {
        "REVIEWBOT_WEBHOOK_SECRET": "",
        "REVIEWBOT_CONFIG": "",
        "REVIEWBOT_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
        "REVIEWBOT_BOT_USERNAME": BOT,
    }
    result = CliRunner().invoke(serve_command, [], env=env)
    assert result.exit_code == 2
    assert "REVIEWBOT_WEBHOOK_SECRET" in result.output
    assert "--insecure-no-secret" in result.output


def test_serve_reads_config_file_and_database_url_options(tmp_path: Path) -> None:
    env = {
        "REVIEWBOT_WEBHOOK_SECRET": "",
        "REVIEWBOT_CONFIG": "",
        "REVIEWBOT_DATABASE_URL": "",
        "REVIEWBOT_BOT_USERNAME": BOT,
    }
    config = tmp_path / "reviewbot.toml"
    config.write_text('webhook_secrett = "typo"\n')
    bad_config = CliRunner().invoke(serve_command, ["--config", str(config)], env=env)
    assert bad_config.exit_code == 2
    assert "webhook_secrett" in bad_config.output
    unreachable = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1"
    no_database = CliRunner().invoke(
        serve_command, ["--insecure-no-secret", "--database-url", unreachable], env=env
    )
    assert no_database.exit_code == 1
    assert no_database.output.startswith(
        f"reviewbot: error: cannot open {unreachable}: connection failed"
    )
    assert len(no_database.output.splitlines()) == 1


@pytest.mark.slow
def test_app_from_settings_migrates_and_checks_the_secret(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    app = app_from_settings(Settings(database_url=url, webhook_secret=SECRET, bot_username=BOT))
    with TestClient(app) as client:
        unsigned = client.post(
            WEBHOOK_PATH,
            json=load("merge_request_open"),
            headers={"X-Gitlab-Event": "Merge Request Hook"},
        )
        health = client.get("/healthz")
    app.state.listener.store.close()
    assert (unsigned.status_code, health.status_code) == (401, 200)
    with pytest.raises(ConfigError, match="REVIEWBOT_BOT_USERNAME"):
        app_from_settings(Settings(database_url=url), insecure_no_secret=True)


def test_fixtures_are_valid_json_objects() -> None:
    for path in FIXTURES.glob("*.json"):
        payload = json.loads(path.read_text())
        assert payload["object_kind"] in {"merge_request", "note", "emoji"}, path
        assert payload["project"]["path_with_namespace"] == PROJECT


# ---------------------------------------------------------------------------------------------
# The Prometheus collector, rendered by prometheus_client


def test_metrics_escape_label_values_from_the_database(listener: Listener) -> None:
    review_id = listener.store.start_review(
        project=PROJECT,
        mr_iid=IID,
        head_sha=HEAD,
        base_sha=None,
        start_sha=None,
        trigger="webhook",
        model="qwen",
        prompt_version="1",
    )
    odd_severity = 'a"b\\c\nd'
    listener.store.record_findings(
        review_id,
        [
            {
                "fingerprint": "f" * 16,
                "path": "a.py",
                "side": "new",
                "line": 1,
                "severity": odd_severity,
                "category": "bug",
                "title": "t",
                "body": "b",
                "anchor": "exact",
                "state": "posted",
            }
        ],
    )
    registry = listener_registry(ListenerCollector(listener.store, listener.queue, dict))
    text = render(registry).decode()
    assert 'reviewbot_findings_total{severity="a\\"b\\\\c\\nd"} 1.0' in text
    assert all(METRIC_LINE.match(line) for line in text.splitlines() if not line.startswith("#"))


def test_metrics_histograms_are_cumulative_with_inf_sum_and_count(listener: Listener) -> None:
    _record_review(listener.store)
    text = render(listener_registry(ListenerCollector(listener.store, listener.queue, dict)))
    lines = text.decode().splitlines()
    assert "# TYPE reviewbot_llm_call_duration_seconds histogram" in lines
    buckets = [line for line in lines if line.startswith("reviewbot_llm_call_duration_seconds_")]
    assert buckets[0] == 'reviewbot_llm_call_duration_seconds_bucket{le="0.5"} 0.0'
    assert 'reviewbot_llm_call_duration_seconds_bucket{le="5.0"} 1.0' in buckets
    assert buckets[-3:] == [
        'reviewbot_llm_call_duration_seconds_bucket{le="+Inf"} 2.0',
        "reviewbot_llm_call_duration_seconds_count 2.0",
        "reviewbot_llm_call_duration_seconds_sum 94.0",
    ]


@pytest.mark.slow
def test_review_full_asks_the_job_for_a_full_review(listener: Listener) -> None:
    plain = listener.post("Note Hook", mr_note("/reviewbot review"))
    assert plain.status_code == 202
    [job] = listener.jobs()
    assert "full" not in job.payload
    # the same head is already queued: that job now reviews everything, no second job
    full = listener.post("Note Hook", mr_note("/reviewbot review --full"))
    assert full.status_code == 202 and full.json()["job_id"] == job.id
    [job] = listener.jobs()
    assert job.payload["full"] is True
