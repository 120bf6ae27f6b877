"""Fake HTTP servers (GitLab, vLLM) that tests start on 127.0.0.1."""
