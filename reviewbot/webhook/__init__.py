"""The webhook listener: check, validate, enqueue, answer 202 in milliseconds.

`POST /webhook/gitlab` receives GitLab's Merge Request, Note and Emoji hooks. Nothing slow
happens while GitLab waits (it gives up after about 10 s and disables hooks that keep failing):
a review becomes a row in the jobs table (`reviewbot.queue`) that a worker runs later; a
thumbs up/down becomes a row in `feedback`; only the answer to `/reviewbot help` talks to
GitLab, in a background task after the response is sent.

Modules, along the seams of a delivery:

- `payloads`: headers, body and JSON into typed events (pure);
- `handlers`: what each event does, against small Protocols (job sink, store, note poster);
- `server`: the Starlette app and its endpoints (`reviewbot serve` runs it);
- `openapi`: the paths and their OpenAPI description.

Owns: the package's public names. Must not: handle a delivery or serve an endpoint itself (the
modules above do).
"""

from reviewbot.webhook import payloads
from reviewbot.webhook.handlers import NotePoster, Outcome, help_text
from reviewbot.webhook.openapi import WEBHOOK_PATH, openapi_spec
from reviewbot.webhook.payloads import Command, PayloadError, delivery_key, parse_command
from reviewbot.webhook.server import (
    DEFAULT_MAX_BODY_BYTES,
    DeliveryCounter,
    app_from_settings,
    create_app,
)

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "WEBHOOK_PATH",
    "Command",
    "DeliveryCounter",
    "NotePoster",
    "Outcome",
    "PayloadError",
    "app_from_settings",
    "create_app",
    "delivery_key",
    "help_text",
    "openapi_spec",
    "parse_command",
    "payloads",
]
