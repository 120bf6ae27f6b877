"""The fake GitLab's pipelines, their jobs and the jobs' artifact files, as the API serves them.

* ``GET /projects/:id/pipelines`` (``sha``, ``ref``, ``status``; ``order_by=id`` and
  ``sort=desc`` are GitLab's defaults; offset pages): pipeline objects with ``id``, ``iid``,
  ``project_id``, ``sha``, ``ref``, ``status``, ``source``, ``created_at``, ``updated_at``,
  ``web_url`` (https://docs.gitlab.com/api/pipelines/#list-project-pipelines);
* ``GET /projects/:id/pipelines/:pipeline_id/jobs`` (offset pages; 404 ``Pipeline Not
  Found``): job objects with ``id``, ``name``, ``stage``, ``status``, ``ref``, ``pipeline``
  (``id``, ``project_id``, ``ref``, ``sha``, ``status``), ``artifacts`` (``file_type``,
  ``size``, ``filename``, ``file_format``), ``artifacts_expire_at``, ``web_url``
  (https://docs.gitlab.com/api/jobs/#list-pipeline-jobs);
* ``GET /projects/:id/jobs/:job_id/artifacts/*artifact_path``: the file's bytes as
  ``application/octet-stream`` with ``Content-Disposition: attachment``; 404 ``Job Not
  Found`` for an unknown job (lib/api/helpers.rb ``find_job!``) and 404 ``Not found`` for a job
  without artifacts or without that file (lib/api/ci/job_artifacts.rb)
  (https://docs.gitlab.com/api/job_artifacts/#download-a-single-artifact-file-by-job-id).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

PIPELINE_NOT_FOUND = {"message": "404 Pipeline Not Found"}
JOB_NOT_FOUND = {"message": "404 Job Not Found"}
ARTIFACT_NOT_FOUND = {"message": "404 Not found"}
ARCHIVE_NAME = "artifacts.zip"


class PipelineMissing(Exception):
    """GitLab's 404 for a pipeline, job or file: its body."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(body)
        self.status = HTTPStatus.NOT_FOUND
        self.body = body


@dataclass
class Pipelines:
    """One project's pipelines (newest last), their jobs, and each job's artifact files."""

    pipelines: list[dict[str, Any]] = field(default_factory=list)
    jobs: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # by pipeline id
    files: dict[int, dict[str, bytes]] = field(default_factory=dict)  # by job id

    def add(
        self,
        pipeline: dict[str, Any],
        jobs: Mapping[str, Mapping[str, bytes] | None],
        job_ids: list[int],
        web_url: str,
    ) -> None:
        """``jobs``: name -> its artifact files (None: a job that kept no artifacts)."""
        self.pipelines.append(pipeline)
        listed = []
        for (name, files), job_id in zip(jobs.items(), job_ids, strict=True):
            artifacts = (
                [
                    {
                        "file_type": "archive",
                        "size": sum(map(len, files.values())),
                        "filename": ARCHIVE_NAME,
                        "file_format": "zip",
                    }
                ]
                if files is not None
                else []
            )
            listed.append(
                {
                    "id": job_id,
                    "name": name,
                    "stage": "test",
                    "status": "success",
                    "ref": pipeline["ref"],
                    "created_at": pipeline["created_at"],
                    "pipeline": {
                        key: pipeline[key] for key in ("id", "project_id", "ref", "sha", "status")
                    },
                    "artifacts": artifacts,
                    "artifacts_expire_at": None,
                    "web_url": f"{web_url}/-/jobs/{job_id}",
                }
            )
            if files is not None:
                self.files[job_id] = dict(files)
        self.jobs[pipeline["id"]] = listed

    def listed(self, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        found = [
            p
            for p in self.pipelines
            if all(not params.get(k) or p[k] == params[k] for k in ("sha", "ref", "status"))
        ]
        descending = str(params.get("sort", "desc")) != "asc"
        return sorted(found, key=lambda p: p["id"], reverse=descending)

    def jobs_of(self, pipeline_id: int) -> list[dict[str, Any]]:
        if pipeline_id not in self.jobs:
            raise PipelineMissing(PIPELINE_NOT_FOUND)
        return list(self.jobs[pipeline_id])

    def artifact(self, job_id: int, path: str) -> bytes:
        if not any(job["id"] == job_id for jobs in self.jobs.values() for job in jobs):
            raise PipelineMissing(JOB_NOT_FOUND)
        files = self.files.get(job_id)
        if files is None or path not in files:
            raise PipelineMissing(ARTIFACT_NOT_FOUND)
        return files[path]
