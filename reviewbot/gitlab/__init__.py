"""The GitLab adapter: read a merge request, post findings, keep the summary note up to date.

Built on python-gitlab 8.x's low-level ``http_*`` calls so every request carries our retry
budget. I/O only: positions and line codes are built by ``reviewbot.positions``, waits by
``reviewbot.retry``, diffs parsed by ``reviewbot.diff``; what to post is ``reviewbot.publish``'s
decision. One module per thing it talks to GitLab about:

- ``connection``: :class:`GitLabConnection`, the session, retries, error translation, pacing;
- ``merge_requests``: :class:`MergeRequestReader`, the snapshot, raw files, the bot's threads;
- ``notes``: :class:`NoteWriter`, every write on an MR, each exactly once;
- ``descriptions``: :class:`DescriptionWriter`, the walkthrough's block in the description;
- ``accuracy``: :class:`AccuracyReader`, feedback sync's reads and the report issue;
- ``account``: :class:`AccountReader`, what ``reviewbot doctor`` asks about the token;
- ``repository``: :class:`RepositoryReader`, a project's tree and raw files at a commit;
- ``statuses``: :class:`CommitStatusWriter`, the review's commit status on the head commit;
- ``pipeline_artifacts``: :class:`PipelineArtifactReader`, a pipeline's jobs' report files.

:class:`GitLabClient` is all of them on one connection: the App holds one per GitLab URL, so
every caller shares its session pool, its note pace (GitLab's limit is per user) and the
token's cached username. A caller that needs less declares a Protocol for its part
(``reviewbot.feedback.FeedbackGitLab``, ``reviewbot.report.document``'s issue client).

Owns: :class:`GitLabClient`, the readers and the writer of this package on one connection, and the
package's public names. Must not: decide what to post, build a position or a wait, or parse a diff
itself (the modules named above do).
"""

from __future__ import annotations

from reviewbot.gitlab.account import AccountReader
from reviewbot.gitlab.accuracy import AccuracyReader
from reviewbot.gitlab.connection import (
    RETRY_AFTER_CAP_S,
    RETRY_BACKOFF_BASE_S,
    GitLabAuthError,
    GitLabBadAnswerError,
    GitLabConnection,
    GitLabError,
    GitLabGarbledAnswerError,
    GitLabNotAPIError,
    GitLabNotFoundError,
    GitLabSettings,
    GitLabUnavailableError,
    PositionRefusedError,
    RequestCounter,
)
from reviewbot.gitlab.descriptions import DescriptionWriter
from reviewbot.gitlab.merge_requests import MergeRequestReader
from reviewbot.gitlab.notes import DraftPublishReport, NoteWriter, write_marker
from reviewbot.gitlab.pipeline_artifacts import PipelineArtifactReader
from reviewbot.gitlab.repository import RepositoryReader
from reviewbot.gitlab.statuses import CommitStatusWriter

__all__ = [
    "RETRY_AFTER_CAP_S",
    "RETRY_BACKOFF_BASE_S",
    "AccountReader",
    "AccuracyReader",
    "CommitStatusWriter",
    "DescriptionWriter",
    "DraftPublishReport",
    "GitLabAuthError",
    "GitLabBadAnswerError",
    "GitLabClient",
    "GitLabConnection",
    "GitLabError",
    "GitLabGarbledAnswerError",
    "GitLabNotAPIError",
    "GitLabNotFoundError",
    "GitLabSettings",
    "GitLabUnavailableError",
    "MergeRequestReader",
    "NoteWriter",
    "PipelineArtifactReader",
    "PositionRefusedError",
    "RepositoryReader",
    "RequestCounter",
    "write_marker",
]


class GitLabClient(
    NoteWriter,
    DescriptionWriter,
    AccuracyReader,
    AccountReader,
    RepositoryReader,
    CommitStatusWriter,
    PipelineArtifactReader,
):
    """One GitLab server, one token: every read and write reviewbot makes there."""
