"""Running the installed ``reviewbot`` as a user does, for the command tests (``test_commands_*``).

Every command is the console script ``pip install`` made (``Installed.script``), started as a
subprocess from a directory outside the checkout, with the environment of
``tests.installed.artifacts.clean_env`` less anything the machine running the tests sets for
reviewbot, GitLab CI or GitLab (``REVIEWBOT_*``, ``CI_*``, ``GITLAB_*``), its user folders
(settings, data, cache) under the test's own directory and no settings file: only the settings
a test names reach the command. Each call is bounded by a timeout; a service (``serve``,
``worker``) runs until the test stops it with SIGTERM.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.installed.artifacts import Installed, clean_env
from tests.mr_world import FAST_NOTES_PER_MINUTE, World
from tests.test_end_to_end import SECRET

# A command against the fakes takes seconds; this bounds one that hangs on a loaded machine.
COMMAND_TIMEOUT_S = 180
# How long a started service is given to answer, and to stop after SIGTERM.
SERVICE_START_S = 60.0
SERVICE_STOP_S = 60.0
POLL_S = 0.1
NOT_THE_USERS = ("REVIEWBOT_", "CI_", "GITLAB_")


def user_env(home: Path, **settings: str) -> dict[str, str]:
    """The environment of a user's shell: nothing of the test run's reviewbot, CI or GitLab
    variables, user folders under ``home``, no settings file; then ``settings``."""
    env = {k: v for k, v in clean_env().items() if not k.startswith(NOT_THE_USERS)}
    for folder in ("CONFIG", "DATA", "CACHE"):
        env[f"XDG_{folder}_HOME"] = str(home / f"xdg-{folder.lower()}")
    env["REVIEWBOT_CONFIG"] = ""
    env.update(settings)
    return env


def world_env(world: World, home: Path, **settings: str) -> dict[str, str]:
    """A user's environment pointed at ``world``'s fake GitLab, fake vLLM and database, the
    webhook secret of ``tests/test_end_to_end``'s deliveries, every finding shown (``info``) and
    no pause between notes."""
    return user_env(
        home,
        **world.command_env(SECRET),
        REVIEWBOT_MIN_SEVERITY="info",
        REVIEWBOT_GITLAB_NOTES_PER_MINUTE=str(FAST_NOTES_PER_MINUTE),
        **settings,
    )


def reviewbot(
    installed: Installed,
    cwd: Path,
    env: dict[str, str],
    *args: str | Path,
    timeout: float = COMMAND_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """``reviewbot ARGS`` as typed in ``cwd``: the installed console script, bounded."""
    return subprocess.run(
        [str(installed.script), *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def succeeded(done: subprocess.CompletedProcess[str]) -> str:
    """The standard output of a command that must exit 0 (its output in the failure if not)."""
    assert done.returncode == 0, (
        f"{' '.join(done.args)} exited {done.returncode}\nstdout:\n{done.stdout[-4000:]}\n"
        f"stderr:\n{done.stderr[-4000:]}"
    )
    return done.stdout


def wait_for(condition: Callable[[], Any], timeout_s: float, what: str | Callable[[], str]) -> Any:
    """Poll ``condition`` until it returns something true, or fail naming ``what`` (a callable
    is asked when giving up, so it can show the state of then)."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            described = what() if callable(what) else what
            raise AssertionError(f"gave up after {timeout_s:.0f} s waiting for {described}")
        time.sleep(POLL_S)


def free_port() -> int:
    """A port of 127.0.0.1 the kernel has just handed out, for a service that takes a port
    number (``reviewbot serve --port``): the caller retries when another process took it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Service:
    """A long-running command (``serve``, ``worker``) of the installed script, its output in
    a file (a full pipe would block it). As a context manager it is stopped on the way out
    when the test has not stopped it (a failure before the end of the test)."""

    name: str
    process: subprocess.Popen[bytes]
    output: Path

    @classmethod
    def start(cls, installed: Installed, cwd: Path, env: dict[str, str], *args: str) -> Service:
        output = cwd / f"{args[0]}-{time.monotonic_ns()}.log"
        with output.open("wb") as sink:
            process = subprocess.Popen(
                [str(installed.script), *args],
                cwd=cwd,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        return cls(args[0], process, output)

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> int:
        """SIGTERM, as systemd stops the unit; the exit status (killed if it hangs)."""
        if self.running():
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=SERVICE_STOP_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(
                f"{self.name} did not stop within {SERVICE_STOP_S:.0f} s of SIGTERM:\n"
                f"{self.text()[-4000:]}"
            ) from None

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.running():
            self.process.kill()
            self.process.wait()
