"""The reviewbot image, built by the image template's jobs, run as users run it.

Every test runs the image with podman against the fakes on 127.0.0.1 (host networking), as
``docs/container.md`` tells users to run it against their GitLab and model server: the
version and the image's shape, a review of a diff mounted into the container, and ``serve`` +
``worker`` containers, with the commands and health checks of ``deploy/compose.yaml``, taking one
webhook delivery to a review posted on the fake GitLab, on PostgreSQL. The figures (image size,
start time) are printed, never asserted.
"""

from __future__ import annotations

import importlib.metadata
import json
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.vllm_server import FakeVLLM
from tests.installed.containers import Podman
from tests.installed.tier import INSTALLED
from tests.mr_world import BOT_TOKEN, PROJECT, World, git, make_repo
from tests.store_fixtures import postgres_url  # noqa: F401
from tests.test_compose import duration_s, service_command, service_health_check, services
from tests.test_end_to_end import open_event

pytestmark = INSTALLED

SECRET = "container-webhook-secret"
IMAGE_UID = 10001
START_RUNS = 5
WAIT_S = 120.0
POLL_S = 0.25
COMPOSE_PORT = "8080"  # serve's port in deploy/compose.yaml; the test picks a free one
COMPOSE_STOP_GRACE = "10s"  # compose's stop_grace_period when a service sets none
WEBHOOK_PATH = "/webhook/gitlab"


def container_env(world: World, **extra: str) -> list[str]:
    """``-e NAME=value`` for the settings of a world (no host paths: the container has its own
    cache folder)."""
    env = {k: v for k, v in world.command_env(SECRET).items() if k != "REVIEWBOT_REPO_CACHE_DIR"}
    env.update(REVIEWBOT_GITLAB_NOTES_PER_MINUTE="60000", REVIEWBOT_MIN_SEVERITY="info", **extra)
    return [arg for name, value in env.items() for arg in ("-e", f"{name}={value}")]


def test_the_image_runs_reviewbot_as_a_non_root_user_with_git_and_no_build_tools(
    podman: Podman, image: str
) -> None:
    version = importlib.metadata.version("reviewbot")
    assert podman.checked("run", "--rm", image, "--version").strip().endswith(version)
    inspected = json.loads(podman.checked("image", "inspect", image))[0]
    labels = inspected["Config"]["Labels"]
    assert labels["org.opencontainers.image.version"] == version
    assert labels["org.opencontainers.image.source"].startswith("https://")
    assert inspected["Config"]["Entrypoint"] == ["reviewbot"]
    probe = (
        "id -u; command -v git; for tool in gcc cc make pip; do command -v $tool || true; done; "
        "python - <<'EOF'\n"
        "import importlib.util, time, subprocess\n"
        "for name in ('pytest', 'hypothesis', 'ruff', 'responses'):\n"
        "    print('found', name) if importlib.util.find_spec(name) else None\n"
        "times = []\n"
        f"for _ in range({START_RUNS}):\n"
        "    start = time.perf_counter()\n"
        "    subprocess.run(['reviewbot', '--version'], check=True, capture_output=True)\n"
        "    times.append(time.perf_counter() - start)\n"
        "print('start', min(times), sorted(times)[len(times) // 2])\n"
        "EOF"
    )
    lines = podman.checked("run", "--rm", "--entrypoint", "sh", image, "-c", probe).splitlines()
    assert lines[0] == str(IMAGE_UID)
    assert lines[1] == "/usr/bin/git"
    assert lines[2].startswith("start"), f"build tools or test packages in the image: {lines}"
    fastest, median = (float(x) for x in lines[2].split()[1:])
    size_mb = inspected["Size"] / 1e6
    print(
        f"\nimage {image}: {size_mb:.0f} MB; `reviewbot --version` in the container: "
        f"fastest {fastest * 1000:.0f} ms, median {median * 1000:.0f} ms of {START_RUNS}"
    )


def test_review_of_a_diff_mounted_into_the_container(
    podman: Podman, image: str, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    diff = tmp_path / "change.diff"
    diff.write_text(git(repo, "diff", "main..feature") + "\n")
    with FakeVLLM() as vllm:
        out = podman.checked(
            "run", "--rm", "--network", "host",
            "-e", f"REVIEWBOT_LLM_BASE_URL={vllm.base_url}",
            "-e", "REVIEWBOT_ENABLE_THINKING=false",
            "-v", f"{diff}:/data/change.diff:ro",
            image, "review", "--diff", "/data/change.diff", "--min-severity", "info",
        )  # fmt: skip
        assert vllm.requests, "the model server was never asked"
    assert "app.py" in out
    for expected in ("eval", "None", "except"):
        assert expected in out, out


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def postgres_world(tmp_path: Path, postgres_url: str) -> Iterator[World]:  # noqa: F811
    repo = make_repo(tmp_path / "repo")
    with FakeGitLab() as gitlab, FakeVLLM() as vllm:
        gitlab.add_user("reviewbot", token=BOT_TOKEN, bot=True)
        gitlab.add_project(PROJECT, project_id=7)
        gitlab.add_mr_from_git(PROJECT, repo, "main", "feature", iid=1, title="Add parsing")
        yield World(repo, gitlab, vllm, postgres_url, tmp_path / "unused-cache")


class Containers:
    """Detached containers of one test, stopped (SIGTERM) and removed at the end."""

    def __init__(self, podman: Podman) -> None:
        self.podman = podman
        self.names: list[str] = []

    def start(self, image: str, *args: str, env: list[str]) -> str:
        name = f"reviewbot-test-{uuid.uuid4().hex[:12]}"
        self.podman.checked("run", "-d", "--name", name, "--network", "host", *env, image, *args)
        self.names.append(name)
        return name

    def stop(self, name: str, grace_s: float) -> int:
        """SIGTERM, as ``docker compose down`` sends it, then SIGKILL after the service's
        ``stop_grace_period``; the exit code."""
        self.podman.checked("stop", "--time", str(int(grace_s)), name)
        state = json.loads(self.podman.checked("inspect", name))[0]["State"]
        return int(state["ExitCode"])

    def healthy(self, name: str, check: list[str]) -> bool:
        """The compose health check, run in the container as the engine runs it."""
        return self.podman.run("exec", name, *check).returncode == 0

    def logs(self, name: str) -> str:
        done = self.podman.run("logs", name)
        return done.stdout + done.stderr

    def remove_all(self) -> None:
        for name in self.names:
            self.podman.run("rm", "--force", "--time", "1", name)


def wait_for(condition: Callable[[], bool], what: str, logs: Callable[[], str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {WAIT_S:.0f} s; logs:\n{logs()}")
        time.sleep(POLL_S)


def test_serve_and_worker_containers_take_a_delivery_to_a_posted_review(
    podman: Podman, image: str, postgres_world: World
) -> None:
    world = postgres_world
    port = str(free_port())
    env = container_env(world)
    serve_command = [port if word == COMPOSE_PORT else word for word in service_command("serve")]
    serve_check = [
        w.replace(f":{COMPOSE_PORT}/", f":{port}/") for w in service_health_check("serve")
    ]
    running = Containers(podman)
    try:
        migrate = service_command("migrate")
        podman.checked("run", "--rm", "--network", "host", *env, image, *migrate)
        serve = running.start(image, *serve_command, env=env)
        worker = running.start(image, *service_command("worker"), env=env)
        base = f"http://127.0.0.1:{port}"
        wait_for(
            lambda: running.healthy(serve, serve_check),
            "serve passed its compose health check",
            lambda: running.logs(serve),
        )
        answer = httpx.post(
            f"{base}{WEBHOOK_PATH}",
            content=json.dumps(open_event(world)),
            headers={
                "X-Gitlab-Token": SECRET,
                "X-Gitlab-Event": "Merge Request Hook",
                "X-Gitlab-Event-UUID": str(uuid.uuid4()),
                "Content-Type": "application/json",
            },
            timeout=10,
        )
        assert answer.status_code in (200, 202), answer.text

        def reviewed() -> bool:
            notes = world.gitlab.notes(PROJECT, 1)
            return any("<!-- reviewbot:summary -->" in note["body"] for note in notes)

        wait_for(reviewed, "the review was posted", lambda: running.logs(worker))
        diff_notes = [
            d["notes"][0]
            for d in world.gitlab.discussions(PROJECT, 1)
            if d["notes"][0]["type"] == "DiffNote"
        ]
        assert {n["position"]["new_path"] for n in diff_notes} == {"app.py"}
        assert len(diff_notes) == 3, [n["body"][:80] for n in diff_notes]
        assert running.healthy(worker, service_health_check("worker")), running.logs(worker)
        for name, container in (("worker", worker), ("serve", serve)):
            grace_s = duration_s(services()[name].get("stop_grace_period", COMPOSE_STOP_GRACE))
            assert running.stop(container, grace_s) == 0, running.logs(container)
    finally:
        running.remove_all()
