"""reviewbot.gitlab against the fake GitLab (tests/fakes/gitlab_server.py) over real HTTP.

API references: https://docs.gitlab.com/api/merge_requests/ (MR, versions, diffs, changes),
https://docs.gitlab.com/api/discussions/ (positions, resolving), https://docs.gitlab.com/api/notes/,
https://docs.gitlab.com/api/draft_notes/ (bulk publish).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from reviewbot.comments import MarkerKind, finding_body, parse_marker
from reviewbot.diff import FileDiff, FileStatus, LineKind, Side, parse_git_diff
from reviewbot.findings import Category, Finding, RawFinding, Severity, anchor
from reviewbot.gitlab import (
    GitLabAuthError,
    GitLabClient,
    GitLabNotFoundError,
    GitLabSettings,
    GitLabUnavailableError,
    PositionRefusedError,
)
from reviewbot.mergerequest import MergeRequestSnapshot
from reviewbot.positions import diff_link, line_code, line_code_for, position_for
from tests.fakes.gitlab_server import FakeGitLab

TOKEN = "bot-secret-token"
PROJECT = "group/app"
PROJECT_ID = 7
IID = 1
SMALL_PAGE = 2
TOO_LARGE_BYTES = 2_000
BIG_FILE_LINES = 400
FAST_NOTES_PER_MINUTE = 60_000
OLD_GITLAB = "15.6.0"
EMPTY_DIFF_REFS_GETS = 3
APP_LINES = 30


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def _write(repo: Path, name: str, text: str) -> None:
    path = repo / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """main → feature: modified, new, deleted, renamed, big (too large), extra small files."""
    path = tmp_path_factory.mktemp("repo")
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.email", "dev@example.com")
    _git(path, "config", "user.name", "Dev")
    app = [f"value_{n} = {n}" for n in range(1, APP_LINES + 1)]
    _write(path, "app.py", "\n".join(app) + "\n")
    _write(path, "old.txt", "to be deleted\n")
    _write(path, "docs/guide.md", "# Guide\n\nsome text that stays the same\n" * 3)
    _write(path, "big.txt", "".join(f"big line {n}\n" for n in range(BIG_FILE_LINES)))
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "initial")
    _git(path, "checkout", "-q", "-b", "feature")
    app[4] = "value_5 = 'five'"  # modified line 5
    del app[14]  # removed line 15
    app.insert(20, "extra = compute(value_20)")  # added
    _write(path, "app.py", "\n".join(app) + "\n")
    _write(path, "new_module.py", "def added():\n    return 1\n")
    (path / "old.txt").unlink()
    _git(path, "mv", "docs/guide.md", "docs/manual.md")
    _write(path, "big.txt", "".join(f"BIG line {n}\n" for n in range(BIG_FILE_LINES)))
    for n in range(3):
        _write(path, f"pkg/mod{n}.py", f"X = {n}\n")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "feature work")
    return path


@pytest.fixture
def fake(repo: Path) -> Iterator[FakeGitLab]:
    with FakeGitLab() as server:
        server.add_user("reviewbot", token=TOKEN, bot=True)
        server.add_user("alice", token="alice-token")
        server.add_project(PROJECT, project_id=PROJECT_ID)
        server.add_mr_from_git(PROJECT, repo, "main", "feature", iid=IID, title="Feature")
        server.too_large_bytes = TOO_LARGE_BYTES
        yield server


def _client(fake: FakeGitLab, **overrides: object) -> GitLabClient:
    settings = {
        "url": fake.url,
        "token": TOKEN,
        "per_page": SMALL_PAGE,
        "max_retries": 2,
        "notes_per_minute": FAST_NOTES_PER_MINUTE,
        **overrides,
    }
    return GitLabClient(GitLabSettings(**settings))  # type: ignore[arg-type]


@pytest.fixture
def client(fake: FakeGitLab) -> GitLabClient:
    return _client(fake)


@pytest.fixture
def snapshot(client: GitLabClient) -> MergeRequestSnapshot:
    return client.snapshot(PROJECT, IID)


def _git_files(repo: Path) -> dict[str, FileDiff]:
    files = parse_git_diff(_git(repo, "diff", "-M", "main...feature") + "\n")
    return {f.path: f for f in files}


def _finding(
    snapshot: MergeRequestSnapshot,
    path: str,
    kind: LineKind,
    *,
    title: str = "Check this",
    end_offset: int = 0,
    suggestion: str | None = None,
) -> Finding:
    """A realistic Finding on the first line of ``kind`` in ``path``, via findings.anchor."""
    file = snapshot.file(path)
    assert file is not None
    line = next(line for line in file.lines() if line.kind is kind)
    raw = RawFinding(
        path=path,
        line=line.number,
        side=line.side,
        end_line=line.number + end_offset if end_offset else None,
        severity=Severity.MAJOR,
        category=Category.BUG,
        title=f"{title} ({kind})",
        body="Body text.",
        suggestion=suggestion,
        chunk_index=0,
    )
    result = anchor(raw, {f.path: f for f in snapshot.files})
    assert isinstance(result, Finding)
    return result


# ---------------------------------------------------------------------------------- snapshot


def test_snapshot_matches_git(snapshot: MergeRequestSnapshot, repo: Path, fake: FakeGitLab) -> None:
    assert snapshot.diff_refs.head_sha == _git(repo, "rev-parse", "feature")
    assert snapshot.diff_refs.start_sha == _git(repo, "rev-parse", "main")
    assert snapshot.diff_refs.base_sha == _git(repo, "merge-base", "main", "feature")
    assert snapshot.project_id == PROJECT_ID
    assert snapshot.project_path == PROJECT
    expected = _git_files(repo)
    assert {f.path for f in snapshot.files} == set(expected)
    statuses = {f.path: f.status for f in snapshot.files}
    assert statuses["new_module.py"] is FileStatus.ADDED
    assert statuses["old.txt"] is FileStatus.DELETED
    assert statuses["docs/manual.md"] is FileStatus.RENAMED
    diffs_requests = [p for m, p in fake.requests if p.endswith("/diffs")]
    assert len(diffs_requests) > 1, "diffs must be read across several pages"


def test_too_large_file_is_rebuilt_from_raw_files(
    snapshot: MergeRequestSnapshot, repo: Path
) -> None:
    big = snapshot.file("big.txt")
    assert big is not None
    assert any("rebuilt" in warning for warning in big.warnings)
    expected = _git_files(repo)["big.txt"]
    assert big.added_count == expected.added_count
    assert big.removed_count == expected.removed_count


@pytest.mark.slow
def test_snapshot_waits_for_diff_refs(fake: FakeGitLab, client: GitLabClient, repo: Path) -> None:
    fake.set_empty_diff_refs(PROJECT, IID, EMPTY_DIFF_REFS_GETS)
    snapshot = client.snapshot(PROJECT, IID)
    assert snapshot.diff_refs.head_sha == _git(repo, "rev-parse", "feature")


def test_old_gitlab_falls_back_to_changes(fake: FakeGitLab, repo: Path) -> None:
    fake.version = OLD_GITLAB
    snapshot = _client(fake).snapshot(PROJECT, IID)
    assert {f.path for f in snapshot.files} == set(_git_files(repo))
    assert any(p.endswith("/changes") for _, p in fake.requests)


def test_file_contents_skips_missing(client: GitLabClient, repo: Path) -> None:
    head = _git(repo, "rev-parse", "feature")
    contents = client.file_contents(PROJECT_ID, head, ["app.py", "old.txt", "pkg/mod1.py"])
    assert set(contents) == {"app.py", "pkg/mod1.py"}
    assert contents["pkg/mod1.py"] == (repo / "pkg/mod1.py").read_text()


# ---------------------------------------------------------------------------------- posting


@pytest.mark.parametrize("kind", list(LineKind))
def test_post_finding_on_each_kind_of_line(
    client: GitLabClient, snapshot: MergeRequestSnapshot, fake: FakeGitLab, kind: LineKind
) -> None:
    finding = _finding(snapshot, "app.py", kind)
    discussion_id, note_id = client.post_finding(snapshot, finding, finding_body(finding))
    assert fake.line_code_of(PROJECT, IID, note_id) is not None
    threads = client.bot_threads(PROJECT_ID, IID)
    assert [t.discussion_id for t in threads] == [discussion_id]
    assert threads[0].marker.fingerprint == finding.fingerprint
    file = snapshot.file(finding.path)
    assert file is not None and finding.line is not None
    point = position_for(file, finding.side, finding.line)
    assert point is not None
    assert (threads[0].old_line, threads[0].new_line) == (point.old_line, point.new_line)
    if kind is LineKind.CONTEXT:
        assert finding.side is Side.NEW and None not in (point.old_line, point.new_line)


def test_multi_line_finding_with_suggestion(
    client: GitLabClient, snapshot: MergeRequestSnapshot, fake: FakeGitLab
) -> None:
    finding = _finding(snapshot, "pkg/mod0.py", LineKind.ADDED, suggestion="X = 0  # fixed\n")
    single = client.post_finding(snapshot, finding, finding_body(finding))
    assert fake.line_code_of(PROJECT, IID, single[1]) is not None
    ranged = _finding(snapshot, "new_module.py", LineKind.ADDED, end_offset=1)
    assert ranged.end_line is not None
    _, note_id = client.post_finding(snapshot, ranged, finding_body(ranged))
    note = next(n for n in fake.notes(PROJECT, IID) if n["id"] == note_id)
    assert note["position"]["line_range"]["end"]["type"] == Side.NEW


def test_wrong_line_is_refused(client: GitLabClient, snapshot: MergeRequestSnapshot) -> None:
    finding = _finding(snapshot, "app.py", LineKind.ADDED)
    wrong = Finding(
        **{
            **{name: getattr(finding, name) for name in Finding.__slots__},
            "line": APP_LINES * 10,
        }
    )
    with pytest.raises(PositionRefusedError, match="line_code"):
        client.post_finding(snapshot, wrong, finding_body(wrong))


def test_bot_threads_across_pages_ignore_other_authors(
    client: GitLabClient, snapshot: MergeRequestSnapshot, fake: FakeGitLab
) -> None:
    posted = set()
    for path in ("pkg/mod0.py", "pkg/mod1.py", "pkg/mod2.py", "new_module.py"):
        finding = _finding(snapshot, path, LineKind.ADDED)
        client.post_finding(snapshot, finding, finding_body(finding))
        posted.add(finding.fingerprint)
    human = _client(fake, token="alice-token")
    finding = _finding(snapshot, "app.py", LineKind.ADDED, title="Not the bot")
    human.post_finding(snapshot, finding, finding_body(finding))
    threads = client.bot_threads(PROJECT_ID, IID)
    assert {t.marker.fingerprint for t in threads} == posted
    assert all(t.marker.kind is MarkerKind.FINDING for t in threads)


def test_resolve_thread(
    client: GitLabClient, snapshot: MergeRequestSnapshot, fake: FakeGitLab
) -> None:
    finding = _finding(snapshot, "app.py", LineKind.ADDED)
    discussion_id, _ = client.post_finding(snapshot, finding, finding_body(finding))
    client.resolve_thread(PROJECT_ID, IID, discussion_id, "Fixed in the latest push.")
    (thread,) = client.bot_threads(PROJECT_ID, IID)
    assert thread.resolved
    (discussion,) = fake.discussions(PROJECT, IID)
    assert [n["body"] for n in discussion["notes"]][-1] == "Fixed in the latest push."


def test_upsert_summary_edits_in_place(client: GitLabClient, fake: FakeGitLab) -> None:
    marker = "\n\n<!-- reviewbot:summary -->"
    first = client.upsert_summary(PROJECT_ID, IID, "first" + marker)
    second = client.upsert_summary(PROJECT_ID, IID, "second" + marker)
    assert first == second
    summaries = [n for n in fake.notes(PROJECT, IID) if parse_marker(n["body"])]
    assert [n["body"].split("\n")[0] for n in summaries] == ["second"]


def test_drafts_are_published_and_verified(
    client: GitLabClient, snapshot: MergeRequestSnapshot, fake: FakeGitLab
) -> None:
    good = _finding(snapshot, "app.py", LineKind.ADDED)
    fields = {name: getattr(good, name) for name in Finding.__slots__}
    bad = Finding(**{**fields, "line": APP_LINES * 10, "fingerprint": "f" * 20})
    report = client.publish_drafts(snapshot, [(good, finding_body(good)), (bad, finding_body(bad))])
    assert set(report.published) == {good.fingerprint}
    assert report.missing == [bad]
    assert len(fake.dropped_drafts) == 1


# ---------------------------------------------------------------------------------- errors


def test_rejected_token(fake: FakeGitLab) -> None:
    client = _client(fake, token="wrong-token")
    with pytest.raises(GitLabAuthError) as caught:
        client.snapshot(PROJECT, IID)
    assert fake.url in str(caught.value)
    assert "wrong-token" not in str(caught.value) + repr(client)


def test_unknown_merge_request(client: GitLabClient) -> None:
    with pytest.raises(GitLabNotFoundError, match=r"!42 not found in group/app"):
        client.snapshot(PROJECT, 42)


@pytest.mark.slow
def test_rate_limit_is_retried(client: GitLabClient, fake: FakeGitLab) -> None:
    fake.add_faults("429")
    assert client.bot_username() == "reviewbot"
    assert [p for _, p in fake.requests].count("/api/v4/user") == 2


def test_server_errors_become_unavailable(fake: FakeGitLab) -> None:
    client = _client(fake, max_retries=1)
    fake.add_faults("502", "502")
    with pytest.raises(GitLabUnavailableError, match="502"):
        client.bot_username()


def test_connection_refused_names_the_url() -> None:
    with FakeGitLab() as server:
        url = server.url
    client = GitLabClient(GitLabSettings(url=url, token=TOKEN, max_retries=0))
    with pytest.raises(GitLabUnavailableError, match=url):
        client.bot_username()


def test_note_creation_is_paced(fake: FakeGitLab, snapshot: MergeRequestSnapshot) -> None:
    notes_per_minute = 30
    waits: list[float] = []
    settings = GitLabSettings(
        url=fake.url, token=TOKEN, notes_per_minute=notes_per_minute, note_burst=2
    )
    client = GitLabClient(settings, sleep=waits.append, clock=lambda: 100.0)
    for path in ("pkg/mod0.py", "pkg/mod1.py", "pkg/mod0.py", "pkg/mod1.py"):
        finding = _finding(snapshot, path, LineKind.ADDED)
        client.post_finding(snapshot, finding, finding_body(finding))
    # a burst of two goes at once; then one note per 60/30 = 2 s (the clock stands still here)
    assert waits == [pytest.approx(2.0), pytest.approx(4.0)]


# ---------------------------------------------------------------------------------- line codes

LINE_CODE_PATH = "src/my file.py"
LINE_CODE_DIFF = """\
diff --git a/src/my file.py b/src/my file.py
--- a/src/my file.py
+++ b/src/my file.py
@@ -1,5 +1,6 @@
 first = 1
-old = 2
+new = 2
+added = 3
 keep = 4
 more = 5
 last = 6
"""


def test_line_code_follows_gitlab_counters() -> None:
    (file,) = parse_git_diff(LINE_CODE_DIFF)
    # added "new = 2" is the first + line: old counter is already past the removed line 2
    added = next(line for line in file.lines() if line.kind is LineKind.ADDED)
    assert line_code_for(file, Side.NEW, added.number) == line_code(LINE_CODE_PATH, 3, 2)
    assert line_code_for(file, Side.OLD, 2) == line_code(LINE_CODE_PATH, 2, 2)
    assert line_code_for(file, Side.NEW, 99) is None


def test_diff_link_points_at_the_line_code(snapshot: MergeRequestSnapshot) -> None:
    finding = _finding(snapshot, "app.py", LineKind.ADDED)
    file = snapshot.file("app.py")
    assert file is not None and finding.line is not None
    code = line_code_for(file, finding.side, finding.line)
    assert diff_link(snapshot.web_url, file, finding) == f"{snapshot.web_url}/diffs#{code}"
    file_level = Finding(**{**{n: getattr(finding, n) for n in Finding.__slots__}, "line": None})
    assert diff_link(snapshot.web_url, file, file_level) is None
