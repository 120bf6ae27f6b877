"""Build what users install, once per test run: the wheel, the sdist and a venv with the wheel.

Every xdist worker of one run shares one build (a lock file in the run's shared directory, the
state in a JSON file beside it), like the real-vLLM tier shares its server. The venv gets the
wheel **without extras**: what a user gets from ``pip install reviewbot``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.run_lock import built_once

ROOT = Path(__file__).resolve().parents[2]
# pip and the wheel build can be slow on a loaded machine with a cold cache.
BUILD_TIMEOUT_S = 900


@dataclass(frozen=True)
class Installed:
    """The built artifacts and the venv the wheel was installed into."""

    wheel: Path
    sdist: Path
    venv: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def script(self) -> Path:
        """The console script ``pip install`` made: what a user types."""
        return self.venv / "bin" / "reviewbot"


def run_checked(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run a build step; a failure raises with the step's own output."""
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout[-4000:]}\n"
            f"{done.stderr[-4000:]}"
        )
    return done.stdout


def clean_env() -> dict[str, str]:
    """The environment without anything that would let the source tree leak in."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env["PYTHONNOUSERSITE"] = "1"
    return env


def copy_checkout(target: Path) -> Path:
    """The repository's files as a fresh clone has them (tracked and new, never ignored)."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def build_sdist_and_wheel(out: Path) -> tuple[Path, Path]:
    """``python -m build`` in a fresh copy of the checkout (a build folder left in the working
    tree once hid a missing package): the sdist, and the wheel built from the tree."""
    source = copy_checkout(out.parent / "source")
    run_checked(
        [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(source)],
        cwd=out.parent,
        env=clean_env(),
    )
    [wheel] = out.glob("reviewbot-*.whl")
    [sdist] = out.glob("reviewbot-*.tar.gz")
    return wheel, sdist


def wheel_from_sdist(sdist: Path, out: Path) -> Path:
    """The wheel pip builds from the sdist, as a user installing from the sdist gets it."""
    out.mkdir(parents=True, exist_ok=True)
    run_checked(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(sdist)],
        cwd=out,
        env=clean_env(),
    )
    [wheel] = out.glob("reviewbot-*.whl")
    return wheel


def install_into_fresh_venv(wheel: Path, venv: Path) -> None:
    """A fresh venv (no system site packages) with the wheel and its runtime dependencies."""
    run_checked([sys.executable, "-m", "venv", str(venv)], cwd=venv.parent, env=clean_env())
    run_checked(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        cwd=venv.parent,
        env=clean_env(),
    )


def shared_installed(run_dir: Path) -> Installed:
    """The run's wheel, sdist and venv."""

    def build() -> dict[str, str]:
        wheel, sdist = build_sdist_and_wheel(run_dir / "dist")
        install_into_fresh_venv(wheel, run_dir / "venv")
        return {"wheel": str(wheel), "sdist": str(sdist), "venv": str(run_dir / "venv")}

    state = built_once(run_dir, "installed", build)
    return Installed(Path(state["wheel"]), Path(state["sdist"]), Path(state["venv"]))
