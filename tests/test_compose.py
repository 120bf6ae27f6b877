"""deploy/compose.yaml, loaded as compose loads it: its services run real reviewbot commands in
the image with the settings of a real env file, with health checks that check what
docs/container.md says they check. (The installed tier runs the same commands and health checks
in the built image: tests/installed/test_container.py.)
"""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Any
from urllib.parse import urlsplit

import yaml

from reviewbot.config import Settings
from reviewbot.webhook.openapi import HEALTH_PATH
from tests.deploy_files import ROOT, check_reviewbot_args, read_env_file

COMPOSE = ROOT / "deploy" / "compose.yaml"
ENV_EXAMPLE = ROOT / "deploy" / "compose.env.example"
CONTAINERFILE = ROOT / "Containerfile"
DOCS = ROOT / "docs" / "container.md"
REVIEWBOT_SERVICES = {"migrate", "serve", "worker"}
SECONDS = {"s": 1, "m": 60}


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())  # merge keys (<<: *reviewbot) resolved


def services() -> dict[str, dict[str, Any]]:
    return compose()["services"]


def option_value(command: list[str], option: str) -> str:
    return command[command.index(option) + 1]


def duration_s(text: str) -> float:
    match = re.fullmatch(r"(\d+)([sm])", text)
    assert match, f"not a compose duration: {text}"
    return int(match.group(1)) * SECONDS[match.group(2)]


def image_env(name: str) -> str:
    """An ENV value of the Containerfile's final stage."""
    match = re.search(rf"\b{name}=(\S+)", CONTAINERFILE.read_text())
    assert match, f"the Containerfile sets no {name}"
    return match.group(1)


def test_the_services_are_postgres_a_migration_serve_and_workers() -> None:
    found = services()
    assert set(found) == {"postgres", *REVIEWBOT_SERVICES}
    images = {found[name]["image"] for name in REVIEWBOT_SERVICES}
    assert len(images) == 1 and images.pop().startswith("${REVIEWBOT_IMAGE:-")
    for name in REVIEWBOT_SERVICES:
        check_reviewbot_args(found[name]["command"], f"compose service {name}")
        assert found[name]["env_file"] == "compose.env"
        assert found[name]["depends_on"]["postgres"] == {"condition": "service_healthy"}
    for name in ("serve", "worker"):
        assert found[name]["restart"] == "unless-stopped"
        assert found[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"
        }
    assert found["migrate"]["command"] == ["db", "upgrade"]
    assert found["migrate"]["restart"] == "no"


def test_serve_listens_on_every_address_and_its_health_check_asks_healthz() -> None:
    serve = services()["serve"]
    command = serve["command"]
    assert option_value(command, "--host") == "0.0.0.0"  # every address of the container
    port = option_value(command, "--port")
    assert any(mapping.endswith(f":{port}") for mapping in serve["ports"])
    test = " ".join(serve["healthcheck"]["test"])
    assert f"http://127.0.0.1:{port}{HEALTH_PATH}" in test


def test_workers_reach_their_queue_and_get_their_grace_on_stop() -> None:
    worker = services()["worker"]
    test = worker["healthcheck"]["test"]
    assert test[:2] == ["CMD", "reviewbot"]
    check_reviewbot_args(test[2:], "the worker's health check")
    grace = float(option_value(worker["command"], "--grace-seconds"))
    assert duration_s(worker["stop_grace_period"]) > grace
    [volume] = worker["volumes"]
    assert volume.split(":", 1)[1] == image_env("REVIEWBOT_REPO_CACHE_DIR")
    assert volume.split(":", 1)[0] in compose()["volumes"]


def test_postgres_is_checked_and_keeps_its_data() -> None:
    postgres = services()["postgres"]
    assert postgres["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    assert any(v.endswith(":/var/lib/postgresql/data") for v in postgres["volumes"])


def test_the_env_example_names_real_settings_and_the_compose_database() -> None:
    values = read_env_file(ENV_EXAMPLE)
    known = {f"REVIEWBOT_{f.name.upper()}" for f in fields(Settings)}
    for line in ENV_EXAMPLE.read_text().splitlines():
        line = line.lstrip("# ").strip()
        if line.startswith("REVIEWBOT_") and "=" in line:
            assert line.split("=", 1)[0] in known, line
    url = urlsplit(values["REVIEWBOT_DATABASE_URL"])
    postgres = services()["postgres"]["environment"]
    assert (url.hostname, url.username, url.path) == (
        "postgres",
        postgres["POSTGRES_USER"],
        f"/{postgres['POSTGRES_DB']}",
    )
    assert url.password == values["POSTGRES_PASSWORD"]
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert "deploy/compose.env" in ignored  # the filled-in copy holds secrets


def test_the_docs_name_every_service_and_file() -> None:
    text = DOCS.read_text()
    for name in [*services(), "compose.env.example", "Containerfile", "healthz"]:
        assert name in text, f"docs/container.md does not mention {name}"
    assert "reviewbot-image.gitlab-ci.yml" in text


def service_command(name: str) -> list[str]:
    """What compose runs in a service's container (for the installed tier)."""
    return list(services()[name]["command"])


def service_health_check(name: str) -> list[str]:
    """A service's health check command, without compose's ``CMD`` (for the installed tier)."""
    test = services()[name]["healthcheck"]["test"]
    assert test[0] == "CMD"
    return list(test[1:])
