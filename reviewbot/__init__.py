"""reviewbot: a self-hosted reviewer for GitLab merge requests, backed by a local vLLM server."""

__version__ = "0.1.0"
