"""`reviewbot serve`: the webhook listener.

Owns: the command's options; it builds the App and the ASGI app
(`reviewbot.webhook.app_from_settings`) and runs it with uvicorn.

Must not: handle a delivery or touch the database itself (`reviewbot.webhook` does).
"""

from __future__ import annotations

import logging
import signal
from types import FrameType

import click

from reviewbot.commands.common import (
    Host,
    Integer,
    config_option,
    database_url_option,
    one_line_errors,
)

__all__ = ["serve_command"]

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
MAX_PORT = 65535


@click.command("serve")
@click.option(
    "--host", type=Host(), default=DEFAULT_HOST, show_default=True, help="Address to listen on."
)
@click.option(
    "--port",
    default=DEFAULT_PORT,
    show_default=True,
    type=Integer(1, MAX_PORT),
    help="Port.",
)
@click.option(
    "--insecure-no-secret",
    is_flag=True,
    help="Accept deliveries without X-Gitlab-Token (only behind a trusted proxy).",
)
@config_option
@database_url_option
def serve_command(
    host: str,
    port: int,
    insecure_no_secret: bool,
    config_file: str | None,
    database_url: str | None,
) -> None:
    """Listen for GitLab webhooks on POST /webhook/gitlab and queue reviews."""
    import uvicorn

    from reviewbot.app import App
    from reviewbot.webhook import app_from_settings

    @one_line_errors
    def build() -> tuple[App, object]:
        app = App.from_config(config_file, {"database_url": database_url})
        return app, app_from_settings(app.settings, insecure_no_secret=insecure_no_secret, app=app)

    app, asgi = build()
    if insecure_no_secret:
        log.warning("accepting webhook deliveries without a secret token")
    with app:
        signal.signal(signal.SIGTERM, _exit_zero)
        uvicorn.run(asgi, host=host, port=port, log_level="info")


def _exit_zero(signum: int, frame: FrameType | None) -> None:
    """uvicorn shuts down gracefully on SIGTERM, then raises the signal again under the handler
    that was there before it started: this one, so the App is closed and the listener exits 0
    after a clean stop (``systemctl stop``, ``docker compose down``), as a worker does."""
    raise SystemExit(0)
