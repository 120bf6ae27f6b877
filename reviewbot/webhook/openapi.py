"""The listener's paths and their OpenAPI 3.1 description (served at `/openapi.json`).

Owns: the paths' names (the server routes them) and the OpenAPI document. Must not: serve or
handle a request (`reviewbot.webhook.server` does).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "HEALTH_PATH",
    "METRICS_PATH",
    "OPENAPI_PATH",
    "WEBHOOK_PATH",
    "openapi_spec",
]

WEBHOOK_PATH = "/webhook/gitlab"
HEALTH_PATH = "/healthz"
METRICS_PATH = "/metrics"
OPENAPI_PATH = "/openapi.json"


def _json_response(description: str) -> dict[str, Any]:
    schema = {"type": "object", "additionalProperties": True}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def openapi_spec() -> dict[str, Any]:
    """The OpenAPI 3.1 description of the listener's endpoints."""
    headers = [
        ("X-Gitlab-Token", True, "The webhook's secret token."),
        ("X-Gitlab-Event", True, "Merge Request Hook, Note Hook or Emoji Hook; others get 204."),
        ("Idempotency-Key", False, "Same value on every retry of one event (GitLab >= 17.4)."),
        ("X-Gitlab-Event-UUID", False, "Identifies the event (used with a body hash)."),
    ]
    parameters = [
        {
            "name": name,
            "in": "header",
            "required": required,
            "description": description,
            "schema": {"type": "string"},
        }
        for name, required, description in headers
    ]
    webhook = {
        "summary": "Receive a GitLab webhook",
        "parameters": parameters,
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object"}}},
        },
        "responses": {
            "200": _json_response("Valid event that needs no action (reason given)."),
            "202": _json_response("Review queued, jobs cancelled, feedback recorded, help sent."),
            "204": {"description": "Event type not handled."},
            "400": _json_response("Missing header, invalid JSON or missing field (reason given)."),
            "401": _json_response("Wrong or missing X-Gitlab-Token."),
            "413": _json_response("Body over the size limit."),
            "422": _json_response(
                "A value GitLab never sends: out of range, too long, or not "
                "a project path, username or commit SHA (field named)."
            ),
            "503": _json_response("Database unavailable: GitLab should retry."),
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "reviewbot webhook listener", "version": "1"},
        "paths": {
            WEBHOOK_PATH: {"post": webhook},
            HEALTH_PATH: {
                "get": {
                    "summary": "Process and database health",
                    "responses": {
                        "200": _json_response("Healthy."),
                        "503": _json_response("Database unreachable."),
                    },
                }
            },
            METRICS_PATH: {
                "get": {
                    "summary": "Prometheus metrics",
                    "responses": {
                        "200": {
                            "description": "Prometheus text exposition format.",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        },
                        "503": {"description": "Database unavailable."},
                    },
                }
            },
            OPENAPI_PATH: {
                "get": {
                    "summary": "This document",
                    "responses": {"200": _json_response("OpenAPI 3.1 document.")},
                }
            },
        },
    }
