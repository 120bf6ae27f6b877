"""Tests for the fake GitLab (tests/fakes/gitlab_server.py), driven by python-gitlab and httpx.

The expectations follow GitLab's REST API docs:
- https://docs.gitlab.com/api/merge_requests/ (MR, versions, diffs, changes)
- https://docs.gitlab.com/api/discussions/#create-a-new-thread-in-the-merge-request-diff
- https://docs.gitlab.com/api/draft_notes/ and https://docs.gitlab.com/api/rest/#pagination
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gitlab
import httpx
import pytest

from tests.fakes.gitlab_server import FakeGitLab, line_code

TOKEN = "bot-token"
PROJECT = "group/app"
PER_PAGE = 2
MODIFIED_LINES = 12
CHANGED_LINE = 6
BINARY_BYTES = bytes(range(256))
LINE_CODE_MESSAGE = '{:line_code=>["can\'t be blank", "must be a valid line code"]}'
FILES_IN_MR = 5  # modified, added, deleted, renamed, binary
DEVELOPER_ROLE = 30
DESCRIPTION_LIMIT = 1_048_576  # GitLab's limit on an MR description


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def _write(repo: Path, name: str, text: str) -> None:
    path = repo / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


@dataclass
class Repo:
    path: Path
    original: list[str]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    """main: app.py, old.txt, docs/guide.md; feature: modify, add, delete, rename, binary."""
    path = tmp_path_factory.mktemp("repo")
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.email", "dev@example.com")
    _git(path, "config", "user.name", "Dev")
    original = [f"line {n}" for n in range(1, MODIFIED_LINES + 1)]
    _write(path, "app.py", "\n".join(original) + "\n")
    _write(path, "old.txt", "to be deleted\n")
    _write(path, "docs/guide.md", "# Guide\n\nsome text that stays the same\n" * 3)
    _commit(path, "initial")
    _git(path, "checkout", "-q", "-b", "feature")
    changed = list(original)
    changed[CHANGED_LINE - 1] = "line six changed"
    _write(path, "app.py", "\n".join(changed) + "\n")
    _write(path, "new_module.py", "def added():\n    return 1\n")
    (path / "old.txt").unlink()
    _git(path, "mv", "docs/guide.md", "docs/manual.md")
    (path / "logo.png").write_bytes(BINARY_BYTES)
    _commit(path, "feature work")
    return Repo(path, original)


@pytest.fixture
def fake(repo: Repo) -> Iterator[FakeGitLab]:
    with FakeGitLab() as server:
        server.add_user("reviewbot", token=TOKEN, bot=True)
        server.add_project(PROJECT, project_id=7)
        server.add_mr_from_git(PROJECT, repo.path, "main", "feature", iid=1, title="Feature")
        yield server


@pytest.fixture
def gl(fake: FakeGitLab) -> gitlab.Gitlab:
    return gitlab.Gitlab(fake.url, private_token=TOKEN)


def _mr(gl: gitlab.Gitlab) -> Any:
    return gl.projects.get(PROJECT, lazy=True).mergerequests.get(1)


def _position(mr: Any, path: str, **lines: int) -> dict[str, Any]:
    refs = mr.diff_refs
    return {
        "position_type": "text",
        "base_sha": refs["base_sha"],
        "start_sha": refs["start_sha"],
        "head_sha": refs["head_sha"],
        "old_path": path,
        "new_path": path,
        **lines,
    }


@pytest.mark.slow
def test_merge_request_matches_the_git_repository(gl: gitlab.Gitlab, repo: Repo) -> None:
    mr = _mr(gl)
    head = _git(repo.path, "rev-parse", "feature")
    assert mr.sha == head
    assert mr.diff_refs["head_sha"] == head
    assert mr.diff_refs["start_sha"] == _git(repo.path, "rev-parse", "main")
    assert mr.diff_refs["base_sha"] == _git(repo.path, "merge-base", "main", "feature")
    assert mr.changes_count == str(FILES_IN_MR)
    assert mr.author["username"] == "alice"
    assert mr.source_branch == "feature" and mr.target_branch == "main"


def test_project_by_id_and_by_encoded_path(gl: gitlab.Gitlab) -> None:
    assert gl.projects.get(7).path_with_namespace == PROJECT
    assert gl.projects.get(PROJECT).id == 7
    gl.auth()
    assert gl.user is not None and gl.user.username == "reviewbot"
    assert gl.version()[0] == "17.5.0"


def test_diffs_paginate_and_describe_each_kind_of_change(
    fake: FakeGitLab, gl: gitlab.Gitlab
) -> None:
    path = "/projects/7/merge_requests/1/diffs"
    first = gl.http_list(path, per_page=PER_PAGE, iterator=True)
    pages = -(-FILES_IN_MR // PER_PAGE)
    assert first.total == FILES_IN_MR and first.total_pages == pages and first.next_page == 2
    files = gl.http_list(path, per_page=PER_PAGE, get_all=True)
    assert fake.requests.count(("GET", "/api/v4" + path)) == 1 + pages
    by_path = {f["new_path"]: f for f in files}
    assert len(files) == FILES_IN_MR
    assert by_path["logo.png"]["diff"].startswith("Binary files ")
    assert by_path["new_module.py"]["new_file"] and by_path["new_module.py"]["a_mode"] == "0"
    assert by_path["old.txt"]["deleted_file"] and by_path["old.txt"]["b_mode"] == "0"
    renamed = by_path["docs/manual.md"]
    assert renamed["renamed_file"] and renamed["old_path"] == "docs/guide.md"
    assert renamed["diff"] == ""
    modified = by_path["app.py"]
    assert modified["diff"].startswith("@@ ")
    assert "+line six changed" in modified["diff"] and "-line 6" in modified["diff"]


def test_diffs_endpoint_is_missing_before_15_7(repo: Repo) -> None:
    with FakeGitLab(version="15.6.0") as old:
        old.add_user("bot", token=TOKEN)
        old.add_project(PROJECT, project_id=7)
        old.add_mr_from_git(PROJECT, repo.path, "main", "feature", iid=1)
        gl = gitlab.Gitlab(old.url, private_token=TOKEN)
        with pytest.raises(gitlab.GitlabHttpError) as error:
            gl.http_list("/projects/7/merge_requests/1/diffs")
        assert error.value.response_code == 404
        changes = _mr(gl).changes()
        assert len(changes["changes"]) == FILES_IN_MR and changes["overflow"] is False


def test_large_diff_comes_back_too_large_and_empty(fake: FakeGitLab, gl: gitlab.Gitlab) -> None:
    fake.too_large_bytes = 10
    files = gl.http_list("/projects/7/merge_requests/1/diffs", get_all=True)
    app = next(f for f in files if f["new_path"] == "app.py")
    assert app["too_large"] is True and app["diff"] == ""


def test_raw_files_at_both_sides(gl: gitlab.Gitlab, repo: Repo) -> None:
    mr = _mr(gl)
    project = gl.projects.get(PROJECT, lazy=True)
    new = project.files.raw(file_path="app.py", ref=mr.diff_refs["head_sha"])
    old = project.files.raw(file_path="docs/guide.md", ref=mr.diff_refs["base_sha"])
    assert b"line six changed" in new
    assert old == (repo.path / "docs/manual.md").read_bytes()
    with pytest.raises(gitlab.GitlabGetError) as error:
        project.files.raw(file_path="old.txt", ref=mr.diff_refs["head_sha"])
    assert error.value.response_code == 404
    assert "404 File Not Found" in str(error.value)


def test_positions_accepted_on_added_removed_and_context_lines(
    fake: FakeGitLab, gl: gitlab.Gitlab
) -> None:
    mr = _mr(gl)
    added = _position(mr, "app.py", new_line=CHANGED_LINE)
    removed = _position(mr, "app.py", old_line=CHANGED_LINE)
    context = _position(mr, "app.py", old_line=CHANGED_LINE - 1, new_line=CHANGED_LINE - 1)
    new_file = _position(mr, "new_module.py", new_line=1)
    deleted_file = _position(mr, "old.txt", old_line=1)
    for position in (added, removed, context, new_file, deleted_file):
        discussion = mr.discussions.create({"body": "look", "position": position})
        note = discussion.attributes["notes"][0]
        assert note["type"] == "DiffNote"
        assert note["position"]["new_line"] == position.get("new_line")
        assert note["position"]["old_line"] == position.get("old_line")
        assert len(discussion.id) == 40
    assert len(fake.discussions(PROJECT, 1)) == 5
    stored = fake.notes(PROJECT, 1)[0]
    # GitLab's parser: the added line follows the removed one, so the old counter moved on.
    expected = line_code("app.py", CHANGED_LINE + 1, CHANGED_LINE)
    assert fake.line_code_of(PROJECT, 1, stored["id"]) == expected


@pytest.mark.parametrize(
    "lines",
    [
        {"new_line": CHANGED_LINE, "old_line": CHANGED_LINE},  # added line given both sides
        {"old_line": CHANGED_LINE + 1},  # context line given one side only
        {"new_line": MODIFIED_LINES + 50},  # past the end of the file
        {"new_line": 1},  # unchanged line outside every hunk
    ],
)
def test_wrong_line_is_refused_with_gitlabs_text(gl: gitlab.Gitlab, lines: dict[str, int]) -> None:
    mr = _mr(gl)
    with pytest.raises(gitlab.GitlabCreateError) as error:
        mr.discussions.create({"body": "x", "position": _position(mr, "app.py", **lines)})
    assert error.value.response_code == 400
    assert LINE_CODE_MESSAGE in str(error.value)


def test_stale_head_sha_is_refused(gl: gitlab.Gitlab, repo: Repo) -> None:
    mr = _mr(gl)
    position = _position(mr, "app.py", new_line=CHANGED_LINE)
    position["head_sha"] = mr.diff_refs["base_sha"]
    with pytest.raises(gitlab.GitlabCreateError) as error:
        mr.discussions.create({"body": "x", "position": position})
    assert error.value.response_code == 400
    assert "line_code" in str(error.value)


def test_form_encoded_position_and_multiline_range(fake: FakeGitLab) -> None:
    gl = gitlab.Gitlab(fake.url, private_token=TOKEN)
    refs = _mr(gl).diff_refs
    start = line_code("app.py", CHANGED_LINE - 1, CHANGED_LINE - 1)
    end = line_code("app.py", CHANGED_LINE + 1, CHANGED_LINE)
    form = {
        "body": "range",
        "position[position_type]": "text",
        "position[base_sha]": refs["base_sha"],
        "position[start_sha]": refs["start_sha"],
        "position[head_sha]": refs["head_sha"],
        "position[old_path]": "app.py",
        "position[new_path]": "app.py",
        "position[new_line]": str(CHANGED_LINE),
        "position[line_range][start][line_code]": start,
        "position[line_range][start][type]": "new",
        "position[line_range][end][line_code]": end,
        "position[line_range][end][type]": "new",
    }
    url = f"{fake.url}/api/v4/projects/7/merge_requests/1/discussions"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    created = httpx.post(url, data=form, headers=headers)
    assert created.status_code == 201
    position = created.json()["notes"][0]["position"]
    assert position["line_range"]["start"]["line_code"] == start
    form["position[line_range][end][line_code]"] = line_code("app.py", 99, 99)
    refused = httpx.post(url, data=form, headers=headers)
    assert refused.status_code == 400


def test_resolve_and_reply(fake: FakeGitLab, gl: gitlab.Gitlab) -> None:
    mr = _mr(gl)
    discussion = mr.discussions.create(
        {"body": "bug", "position": _position(mr, "app.py", new_line=CHANGED_LINE)}
    )
    discussion.notes.create({"body": "thanks"})
    discussion.resolved = True
    discussion.save()
    stored = fake.discussions(PROJECT, 1)[0]
    assert [n["resolved"] for n in stored["notes"]] == [True, True]
    assert stored["notes"][0]["resolved_by"]["username"] == "reviewbot"
    assert stored["notes"][1]["type"] == "DiffNote"


def test_notes_sorted_and_editable(fake: FakeGitLab, gl: gitlab.Gitlab) -> None:
    mr = _mr(gl)
    first = mr.notes.create({"body": "/approve summary"})
    second = mr.notes.create({"body": "second"})
    newest_first = [n.id for n in mr.notes.list(get_all=True)]
    assert newest_first == [second.id, first.id]
    assert [n.id for n in mr.notes.list(sort="asc", get_all=True)] == [first.id, second.id]
    first.body = "edited summary"
    first.save()
    assert mr.notes.get(first.id).body == "edited summary"
    assert fake.discussions(PROJECT, 1)[0]["individual_note"] is True
    fake.add_award_emoji(PROJECT, 1, first.id, "thumbsup", "carol")
    awards = mr.notes.get(first.id).awardemojis.list(get_all=True)
    assert [a.name for a in awards] == ["thumbsup"]


def test_server_stops_cleanly(repo: Repo) -> None:
    before = {t.ident for t in threading.enumerate()}
    with FakeGitLab() as server:
        server.add_user("bot", token=TOKEN)
        url = server.url
        assert httpx.get(f"{url}/api/v4/version", headers={"PRIVATE-TOKEN": TOKEN}).is_success
    assert {t.ident for t in threading.enumerate()} <= before
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/api/v4/version")


def test_bad_token_is_401(fake: FakeGitLab) -> None:
    gl = gitlab.Gitlab(fake.url, private_token="wrong")
    with pytest.raises(gitlab.GitlabAuthenticationError) as error:
        gl.projects.get(PROJECT)
    assert error.value.response_code == 401
    answer = httpx.get(f"{fake.url}/api/v4/user")
    assert answer.status_code == 401 and answer.json() == {"message": "401 Unauthorized"}


def test_unknown_project_and_mr_are_404(gl: gitlab.Gitlab) -> None:
    with pytest.raises(gitlab.GitlabGetError, match="404 Project Not Found"):
        gl.projects.get("group/missing")
    with pytest.raises(gitlab.GitlabGetError, match="404 Not found"):
        gl.projects.get(PROJECT, lazy=True).mergerequests.get(99)


def test_faults_are_consumed_in_order(fake: FakeGitLab) -> None:
    fake.add_faults("429", "502", "slow:0.01")
    headers = {"PRIVATE-TOKEN": TOKEN}
    url = f"{fake.url}/api/v4/version"
    limited = httpx.get(url, headers=headers)
    assert limited.status_code == 429 and limited.headers["Retry-After"] == "1"
    assert "Retry later" in limited.text
    gateway = httpx.get(url, headers=headers)
    assert gateway.status_code == 502 and "text/html" in gateway.headers["Content-Type"]
    assert httpx.get(url, headers=headers).status_code == 200
    assert httpx.get(url, headers=headers).status_code == 200


def test_python_gitlab_retries_transient_errors(fake: FakeGitLab) -> None:
    fake.add_faults("500")
    gl = gitlab.Gitlab(fake.url, private_token=TOKEN, retry_transient_errors=True)
    assert gl.projects.get(7).id == 7
    assert fake.requests.count(("GET", "/api/v4/projects/7")) == 2


def test_empty_diff_refs_for_the_first_gets(fake: FakeGitLab, gl: gitlab.Gitlab) -> None:
    fake.set_empty_diff_refs(PROJECT, 1, times=2)
    assert _mr(gl).diff_refs is None
    assert _mr(gl).diff_refs is None
    assert _mr(gl).diff_refs is not None


def test_draft_notes_publish_as_discussions(fake: FakeGitLab, gl: gitlab.Gitlab) -> None:
    mr = _mr(gl)
    good = _position(mr, "app.py", new_line=CHANGED_LINE)
    bad = _position(mr, "app.py", new_line=1)
    mr.draft_notes.create({"note": "inline", "position": good})
    mr.draft_notes.create({"note": "general"})
    mr.draft_notes.create({"note": "unanchorable", "position": bad})
    assert len(mr.draft_notes.list(get_all=True)) == 3
    assert fake.discussions(PROJECT, 1) == []
    mr.draft_notes.bulk_publish()
    published = fake.discussions(PROJECT, 1)
    assert [d["notes"][0]["type"] for d in published] == ["DiffNote", "DiscussionNote"]
    assert [d["note"] for d in fake.dropped_drafts] == ["unanchorable"]
    assert mr.draft_notes.list(get_all=True) == []


def test_push_makes_a_newer_version_first(fake: FakeGitLab, gl: gitlab.Gitlab, repo: Repo) -> None:
    old_head = _git(repo.path, "rev-parse", "feature")
    _git(repo.path, "checkout", "-q", "-b", "feature-v2", "feature")
    _write(repo.path, "new_module.py", "def added():\n    return 2\n")
    new_head = _commit(repo.path, "second push")
    _git(repo.path, "checkout", "-q", "feature")
    fake.push(PROJECT, 1, new_head)
    mr = _mr(gl)
    versions = mr.diffs.list(get_all=True)
    assert [v.head_commit_sha for v in versions] == [new_head, old_head]
    assert mr.sha == new_head
    detail = mr.diffs.get(versions[0].id)
    assert {d["new_path"] for d in detail.diffs} >= {"new_module.py", "app.py"}
    old_position = {
        "position_type": "text",
        "base_sha": versions[1].base_commit_sha,
        "start_sha": versions[1].start_commit_sha,
        "head_sha": old_head,
        "old_path": "app.py",
        "new_path": "app.py",
        "new_line": CHANGED_LINE,
    }
    assert mr.discussions.create({"body": "on v1", "position": old_position})


@pytest.mark.slow
def test_a_token_reads_its_own_record_and_a_members_role(fake: FakeGitLab) -> None:
    fake.add_user(
        "reader", token="read-token", bot=True, scopes=("read_api",), expires_at="2030-01-01"
    )
    fake.add_member(PROJECT, "reader", 20)
    headers = {"PRIVATE-TOKEN": "read-token"}
    token = httpx.get(f"{fake.url}/api/v4/personal_access_tokens/self", headers=headers).json()
    assert token["scopes"] == ["read_api"] and token["expires_at"] == "2030-01-01"
    assert token["active"] is True and "token" not in token  # the secret is never echoed
    user_id = httpx.get(f"{fake.url}/api/v4/user", headers=headers).json()["id"]
    member = httpx.get(f"{fake.url}/api/v4/projects/7/members/all/{user_id}", headers=headers)
    assert member.json()["access_level"] == 20 and member.json()["username"] == "reader"
    bot_id = httpx.get(f"{fake.url}/api/v4/user", headers={"PRIVATE-TOKEN": TOKEN}).json()["id"]
    missing = httpx.get(f"{fake.url}/api/v4/projects/7/members/all/{bot_id}", headers=headers)
    assert missing.status_code == 404 and missing.json() == {"message": "404 Not found"}


def test_a_read_api_token_cannot_write(fake: FakeGitLab) -> None:
    fake.add_user("reader", token="read-token", bot=True, scopes=("read_api",))
    notes = f"{fake.url}/api/v4/projects/7/merge_requests/1/notes"
    headers = {"PRIVATE-TOKEN": "read-token"}
    assert httpx.get(notes, headers=headers).status_code == 200
    refused = httpx.post(notes, headers=headers, json={"body": "hello"})
    assert refused.status_code == 403 and refused.json()["error"] == "insufficient_scope"


def test_answer_with_gives_any_status_type_and_body_to_the_requests_it_names(
    fake: FakeGitLab,
) -> None:
    """What stands in front of GitLab (issue 17 item 3): a canned answer for one method and
    path, a number of times, with or without a Content-Type; nothing reaches the API."""
    headers = {"PRIVATE-TOKEN": TOKEN}
    notes = f"{fake.url}/api/v4/projects/7/merge_requests/1/notes"
    fake.answer_with("Retry later", status=201, content_type=None, method="POST", times=1)
    fake.answer_with("OK\n", content_type="text/plain", path_pattern=r"^/user$")
    first = httpx.post(notes, headers=headers, json={"body": "hello"})
    assert (first.status_code, first.text) == (201, "Retry later")
    assert "Content-Type" not in first.headers
    assert fake.notes(PROJECT, 1) == []
    user = httpx.get(f"{fake.url}/api/v4/user", headers=headers)
    assert (user.headers["Content-Type"], user.text) == ("text/plain", "OK\n")
    assert httpx.get(f"{fake.url}/api/v4/version", headers=headers).json()["version"]
    assert httpx.post(notes, headers=headers, json={"body": "hello"}).status_code == 201
    assert [note["body"] for note in fake.notes(PROJECT, 1)] == ["hello"]
    fake.clear_answers()
    assert httpx.get(f"{fake.url}/api/v4/user", headers=headers).json()["username"]


@pytest.mark.slow
def test_a_sign_in_page_answers_every_api_path_with_html_and_status_200(
    fake: FakeGitLab, gl: gitlab.Gitlab
) -> None:
    """The fault of a URL that reaches a login instead of the API (issue 17 item 3): what
    python-gitlab then does is what reviewbot.gitlab has to cope with."""
    fake.answer_sign_in_page()
    try:
        for method, path in (("GET", "/user"), ("POST", "/projects/7/merge_requests/1/notes")):
            answer = httpx.request(
                method, f"{fake.url}/api/v4{path}", headers={"PRIVATE-TOKEN": TOKEN}
            )
            assert answer.status_code == 200
            assert answer.headers["Content-Type"] == "text/html; charset=utf-8"
            assert "<title>Sign in · GitLab</title>" in answer.text
        # python-gitlab hands a GET's HTML back as a Response and fails to parse a list
        assert not isinstance(gl.http_get("/user"), dict)
        with pytest.raises(gitlab.GitlabParsingError, match="Failed to parse the server message"):
            gl.http_list("/projects/7/merge_requests/1/notes", get_all=True)
    finally:
        fake.answer_sign_in_page(False)
    assert fake.notes(PROJECT, 1) == []  # nothing reached the API
    assert httpx.get(f"{fake.url}/api/v4/user", headers={"PRIVATE-TOKEN": TOKEN}).json()["username"]


@pytest.mark.slow
def test_a_user_is_read_with_its_bot_flag(fake: FakeGitLab) -> None:
    human = fake.add_user("carol")
    robot = fake.add_user("renovate", bot=True)
    headers = {"PRIVATE-TOKEN": TOKEN}
    for user, bot in ((human, False), (robot, True)):
        answer = httpx.get(f"{fake.url}/api/v4/users/{user['id']}", headers=headers)
        assert answer.json()["bot"] is bot and answer.json()["username"] == user["username"]
    assert httpx.get(f"{fake.url}/api/v4/users/999999", headers=headers).status_code == 404


def test_closes_issues_pages_and_hides_confidential_issues_from_guests(
    fake: FakeGitLab, gl: gitlab.Gitlab
) -> None:
    for number in range(1, 4):
        fake.add_issue(PROJECT, f"Issue {number}", f"Text {number}", labels=("bug",))
    fake.add_issue(PROJECT, "Hidden", "Secret", confidential=True)
    fake.edit_description(PROJECT, 1, "Closes #1, #2 and #3. Fixes #4. Mentions #9.")
    path = "/projects/7/merge_requests/1/closes_issues"
    first = gl.http_list(path, per_page=2, iterator=True)
    assert first.total == 3 and first.total_pages == 2 and first.next_page == 2
    issues = gl.http_list(path, per_page=2, get_all=True)
    assert [i["iid"] for i in issues] == [1, 2, 3]  # #4 confidential, #9 does not exist
    assert issues[0]["labels"] == ["bug"] and issues[0]["confidential"] is False
    assert {"iid", "title", "description", "state", "web_url"} <= set(issues[0])
    fake.add_member(PROJECT, "reviewbot", 20)
    assert [i["iid"] for i in gl.http_list(path, get_all=True)] == [1, 2, 3, 4]


def test_related_issues_are_every_mention_and_missing_before_17_1(repo: Repo) -> None:
    with FakeGitLab(version="17.0.0") as old:
        old.add_user("bot", token=TOKEN)
        old.add_project(PROJECT, project_id=7)
        old.add_mr_from_git(PROJECT, repo.path, "main", "feature", iid=1, description="See #1")
        old.add_issue(PROJECT, "One")
        gl = gitlab.Gitlab(old.url, private_token=TOKEN)
        path = "/projects/7/merge_requests/1/related_issues"
        with pytest.raises(gitlab.GitlabHttpError) as error:
            gl.http_list(path)
        assert error.value.response_code == 404
        assert error.value.error_message == "404 Not Found"
        old.version = "17.1.0"
        assert [i["iid"] for i in gl.http_list(path, get_all=True)] == [1]
        assert gl.http_list("/projects/7/merge_requests/1/closes_issues", get_all=True) == []


# https://docs.gitlab.com/api/merge_requests/#update-mr
def test_an_mr_update_needs_the_developer_role_a_parameter_and_a_short_description(
    fake: FakeGitLab,
) -> None:
    url = f"{fake.url}/api/v4/projects/7/merge_requests/1"
    headers = {"PRIVATE-TOKEN": TOKEN}

    refused = httpx.put(url, headers=headers, json={"description": "mine"})
    assert refused.status_code == 403 and refused.json() == {"message": "403 Forbidden"}

    fake.add_member(PROJECT, "reviewbot", DEVELOPER_ROLE)
    nothing = httpx.put(url, headers=headers, json={})
    assert nothing.status_code == 400 and "at least one parameter" in nothing.json()["error"]
    too_long = httpx.put(url, headers=headers, json={"description": "x" * (DESCRIPTION_LIMIT + 1)})
    assert too_long.status_code == 400
    assert too_long.json() == {
        "message": {"description": [f"is too long (maximum is {DESCRIPTION_LIMIT} characters)"]}
    }
    done = httpx.put(url, headers=headers, json={"description": "Edited by the bot."})
    assert done.status_code == 200 and done.json()["description"] == "Edited by the bot."
    assert fake.description(PROJECT, 1) == "Edited by the bot."
    assert fake.mr_updates == [(1, {"description": "Edited by the bot."})]
