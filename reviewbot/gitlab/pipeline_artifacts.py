"""Reading the reports a pipeline's jobs produced, through GitLab's API.

* ``GET /projects/:id/pipelines?sha=SHA&order_by=id&sort=desc&per_page=1``: the latest
  pipeline of a commit (https://docs.gitlab.com/api/pipelines/#list-project-pipelines);
* ``GET /projects/:id/pipelines/:pipeline_id/jobs``: its jobs, every page (``id``, ``name``,
  ``status``; retried jobs are left out by GitLab unless ``include_retried`` is asked;
  https://docs.gitlab.com/api/jobs/#list-pipeline-jobs);
* ``GET /projects/:id/jobs/:job_id/artifacts/*artifact_path``: one file of a job's artifacts,
  its bytes; 404 when the job, its artifacts or the file are not there (expired, never kept)
  (https://docs.gitlab.com/api/job_artifacts/#download-a-single-artifact-file-by-job-id).

Owns: :class:`PipelineArtifactReader` and those three calls. Must not: read a report's format
(``reviewbot.analyzers``) or decide which jobs to ask.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from gitlab.exceptions import GitlabHttpError

from reviewbot.gitlab.connection import HTTP_NOT_FOUND, GitLabConnection

__all__ = ["PipelineArtifactReader"]

SHORT_SHA = 12


class PipelineArtifactReader(GitLabConnection):
    """A commit's latest pipeline, its jobs, and one file of a job's artifacts."""

    def latest_pipeline(self, project_id: int | str, sha: str) -> dict[str, Any] | None:
        """The newest pipeline of ``sha`` (``id``, ``sha``, ``status``), or None."""
        url = f"/projects/{quote(str(project_id), safe='')}/pipelines"
        with self._translated(f"listing the pipelines of {sha[:SHORT_SHA]}"):
            pipelines = self._list(url, sha=sha, order_by="id", sort="desc", per_page=1, page=1)
        return pipelines[0] if pipelines else None

    def pipeline_jobs(self, project_id: int | str, pipeline_id: int) -> list[dict[str, Any]]:
        """Every job of the pipeline (all pages)."""
        url = f"/projects/{quote(str(project_id), safe='')}/pipelines/{pipeline_id}/jobs"
        missing = f"pipeline {pipeline_id} not found"
        with self._translated(f"listing the jobs of pipeline {pipeline_id}", not_found=missing):
            return self._list(url)

    def job_artifact(
        self, project_id: int | str, job_id: int, path: str, *, max_bytes: int
    ) -> bytes | None:
        """The file ``path`` of job ``job_id``'s artifacts (at most ``max_bytes + 1`` bytes:
        more means a larger file), or None when GitLab has none there."""
        project = quote(str(project_id), safe="")
        url = f"/projects/{project}/jobs/{job_id}/artifacts/{quote(path.lstrip('/'), safe='/')}"
        with self._translated(f"reading {path} of job {job_id}'s artifacts"):
            try:
                return self._raw(url, max_bytes=max_bytes)
            except GitlabHttpError as error:
                if error.response_code == HTTP_NOT_FOUND:
                    return None
                raise
