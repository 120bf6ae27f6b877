"""reviewbot.publish: the three publishers against the fake GitLab over HTTP, and the algorithm.

GitLab APIs involved: discussions (https://docs.gitlab.com/api/discussions/), draft notes and
bulk publish (https://docs.gitlab.com/api/draft_notes/), notes (https://docs.gitlab.com/api/notes/).
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from reviewbot.chunking import Coverage
from reviewbot.comments import parse_marker
from reviewbot.findings import Finding, FindingsOptions, Selection, Severity, process
from reviewbot.gitlab import GitLabClient, GitLabSettings
from reviewbot.mergerequest import MergeRequestSnapshot
from reviewbot.publish import (
    DROPPED_DRAFT,
    STALE_REPLY,
    DiscussionsPublisher,
    DraftsPublisher,
    DryRunPublisher,
    PublishResult,
    ReviewFacts,
    publish,
    publisher_for,
)
from tests.fakes.gitlab_server import FakeGitLab
from tests.mr_world import BOT_TOKEN, FEATURE_APP, PROJECT, commit_on_feature, make_repo

FAST_NOTES_PER_MINUTE = 60_000
NEEDLES = ("eval(", "== None", "except:")


@dataclass
class MergeRequest:
    repo: Path
    fake: FakeGitLab
    client: GitLabClient

    def snapshot(self) -> MergeRequestSnapshot:
        return self.client.snapshot(PROJECT, 1)

    def head(self, paths: list[str]) -> Mapping[str, str]:
        snapshot = self.snapshot()
        return self.client.file_contents(snapshot.project_id, snapshot.diff_refs.head_sha, paths)

    def diff_notes(self) -> list[dict]:
        return [
            d["notes"][0]
            for d in self.fake.discussions(PROJECT, 1)
            if d["notes"][0]["type"] == "DiffNote"
        ]

    def summaries(self) -> list[dict]:
        return [n for n in self.fake.notes(PROJECT, 1) if "reviewbot:summary" in n["body"]]


@pytest.fixture
def mr(tmp_path: Path) -> Iterator[MergeRequest]:
    repo = make_repo(tmp_path / "repo")
    with FakeGitLab() as fake:
        fake.add_user("reviewbot", token=BOT_TOKEN, bot=True)
        fake.add_project(PROJECT, project_id=7)
        fake.add_mr_from_git(PROJECT, repo, "main", "feature", iid=1, title="Add parsing")
        settings = GitLabSettings(
            url=fake.url, token=BOT_TOKEN, notes_per_minute=FAST_NOTES_PER_MINUTE
        )
        yield MergeRequest(repo, fake, GitLabClient(settings))


def findings_on(snapshot: MergeRequestSnapshot, needles: tuple[str, ...] = NEEDLES) -> list:
    """One finding per needle, on the added line of app.py that contains it."""
    file = snapshot.file("app.py")
    assert file is not None
    calls = []
    for needle in needles:
        line = next(line for line in file.lines() if needle in line.text and line.is_change)
        calls.append(
            (
                0,
                {
                    "path": "app.py",
                    "line": line.number,
                    "side": "new",
                    "severity": "major",
                    "category": "bug",
                    "title": f"Problem with {needle}",
                    "body": "Fix it.",
                },
            )
        )
    return process(calls, {0: {"app.py": file}}, FindingsOptions()).findings


def facts(findings: list[Finding]) -> ReviewFacts:
    counts = {severity: 0 for severity in Severity}
    for finding in findings:
        counts[finding.severity] += 1
    return ReviewFacts(
        model="qwen",
        prompt_version="v1+test",
        counts=counts,
        coverage=Coverage(2, 2, 16, 16, ()),
        chunks=1,
    )


def run_publish(
    mr: MergeRequest, publisher_of: type, findings: list[Finding], **kwargs: object
) -> PublishResult:
    snapshot = mr.snapshot()
    selection = Selection(inline=findings, summary_only=[], filtered=[])
    publisher = publisher_of(mr.client, snapshot, **kwargs)
    return publish(publisher, snapshot, selection, findings, facts(findings), mr.head)


# ---------------------------------------------------------------------------------------------
# discussions


def test_discussions_post_once_and_the_summary_is_edited_in_place(mr: MergeRequest) -> None:
    findings = findings_on(mr.snapshot())
    first = run_publish(mr, DiscussionsPublisher, findings)
    assert [f.fingerprint for f in first.posted] == [f.fingerprint for f in findings]
    assert set(first.threads) == {f.fingerprint for f in findings}
    notes = mr.diff_notes()
    assert {parse_marker(n["body"]).fingerprint for n in notes} == set(first.threads)  # type: ignore[union-attr]
    assert {n["id"] for n in notes} == {t.note_id for t in first.threads.values()}
    second = run_publish(mr, DiscussionsPublisher, findings)
    assert second.posted == [] and len(second.already_posted) == len(findings)
    assert second.threads == first.threads
    assert len(mr.diff_notes()) == len(findings)
    [summary] = mr.summaries()
    assert summary["id"] == first.summary_note_id == second.summary_note_id
    assert f"{len(findings)} finding(s), {len(findings)} posted inline" in summary["body"]


@pytest.mark.slow
def test_position_gitlab_refuses_is_listed_in_the_summary(mr: MergeRequest) -> None:
    [good] = findings_on(mr.snapshot(), ("eval(",))
    fields = {name: getattr(good, name) for name in Finding.__slots__}
    outside = Finding(**{**fields, "line": 999, "fingerprint": "f" * 20, "title": "Far away"})
    result = run_publish(mr, DiscussionsPublisher, [good, outside])
    assert result.posted == [good]
    [(refused, reason)] = result.refused
    assert refused is outside and "line_code" in reason
    assert result.inline_on_mr == 1
    [summary] = mr.summaries()
    assert "1 posted inline" in summary["body"] and "Far away" in summary["body"]


def test_threads_whose_line_changed_are_resolved(mr: MergeRequest) -> None:
    findings = findings_on(mr.snapshot())
    run_publish(mr, DiscussionsPublisher, findings)
    fixed = FEATURE_APP.replace("return eval(text)", "return json.loads(text)")
    head = commit_on_feature(mr.repo, {"app.py": fixed}, "fix eval")
    mr.fake.push(PROJECT, 1, head)
    remaining = findings_on(mr.snapshot(), ("== None", "except:"))
    result = run_publish(mr, DiscussionsPublisher, remaining)
    assert [t.marker.fingerprint for t in result.resolved] == [findings[0].fingerprint]
    assert result.posted == [] and len(result.already_posted) == 2
    resolved = [d for d in mr.fake.discussions(PROJECT, 1) if d["notes"][0].get("resolved")]
    assert len(resolved) == 1 and resolved[0]["notes"][-1]["body"] == STALE_REPLY


# ---------------------------------------------------------------------------------------------
# drafts


@pytest.mark.slow
def test_drafts_are_published_in_one_go_and_dropped_ones_reported(mr: MergeRequest) -> None:
    findings = findings_on(mr.snapshot())
    fields = {name: getattr(findings[0], name) for name in Finding.__slots__}
    unplaceable = Finding(**{**fields, "line": 999, "fingerprint": "e" * 20, "title": "Nope"})
    result = run_publish(mr, DraftsPublisher, [*findings, unplaceable])
    assert [f.fingerprint for f in result.posted] == [f.fingerprint for f in findings]
    assert result.refused == [(unplaceable, DROPPED_DRAFT)]
    assert len(mr.diff_notes()) == len(findings) and len(mr.fake.dropped_drafts) == 1
    again = run_publish(mr, DraftsPublisher, findings)
    assert again.posted == [] and len(again.already_posted) == len(findings)
    assert len(mr.diff_notes()) == len(findings)


# ---------------------------------------------------------------------------------------------
# dry run


def test_dry_run_writes_local_lines_reads_the_mr_and_posts_nothing(mr: MergeRequest) -> None:
    findings = findings_on(mr.snapshot())
    run_publish(mr, DiscussionsPublisher, findings[:1])  # one is already on the MR
    notes_before = mr.fake.notes(PROJECT, 1)
    out = io.StringIO()
    snapshot = mr.snapshot()
    publisher = DryRunPublisher(lambda: mr.client.bot_threads(snapshot.project_id, 1), out)
    selection = Selection(findings, [], [])
    result = publish(publisher, snapshot, selection, findings, facts(findings), mr.head)
    assert result.dry_run and result.summary_note_id is None
    assert [f.fingerprint for f in result.posted] == [f.fingerprint for f in findings[1:]]
    assert [f.fingerprint for f in result.already_posted] == [findings[0].fingerprint]
    assert out.getvalue().splitlines() == [
        f"app.py:{f.line}: [major] bug: {f.title}" for f in findings[1:]
    ]
    assert publisher.summary == result.summary_markdown and "reviewbot:summary" in publisher.summary
    assert mr.fake.notes(PROJECT, 1) == notes_before


def test_publisher_for_picks_by_mode(mr: MergeRequest) -> None:
    snapshot = mr.snapshot()
    assert isinstance(
        publisher_for("discussions", mr.client, snapshot, dry_run=False), DiscussionsPublisher
    )
    assert isinstance(publisher_for("drafts", mr.client, snapshot, dry_run=False), DraftsPublisher)
    assert isinstance(publisher_for("drafts", mr.client, snapshot, dry_run=True), DryRunPublisher)
