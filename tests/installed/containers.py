"""Podman on these machines, and the reviewbot image built as a release would build it.

There is no Docker engine and no reachable image registry here (``shared/containers.md``): podman
runs as root with vfs storage, runc with the cgroupfs manager, host networking and no default
ulimits. ``python:3.12-slim`` cannot be pulled, so a stand-in is built once per machine from
Debian's own mirror (``python-base.Containerfile``) and kept in podman's storage between runs.

The reviewbot image itself is built by running the jobs of ``ci/reviewbot-image.gitlab-ci.yml``
as a runner would (``tests.gitlab_ci``): the wheel job in a copy of the checkout, then the Buildah
job with the stand-in base and the wheels of the dependencies beside the reviewbot wheel
(``--no-index``: the build reads nothing from the network).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.gitlab_ci import template_jobs
from tests.installed.artifacts import ROOT, clean_env, copy_checkout, run_checked

DEBIAN_IMAGE = "localhost/reviewbot-ci/debian:bookworm"
PYTHON_BASE_IMAGE = "localhost/reviewbot-ci/python:bookworm"
# One name, rebuilt by every run; the previous run's image is pruned once it has no name.
TIER_IMAGE = "localhost/reviewbot:installed-tier"
IMAGE_TEMPLATE = ROOT / "ci" / "reviewbot-image.gitlab-ci.yml"
RELEASE_TAG = "v0.1.0"
APT_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
SUITE = "bookworm"
# Kept between runs: a debootstrap takes a minute, the base image build a few seconds more.
ROOTFS_CACHE = Path(os.environ.get("REVIEWBOT_TEST_ROOTFS_CACHE", "/var/cache/reviewbot-ci"))
RUN_TIMEOUT_S = 600


@dataclass(frozen=True)
class Podman:
    """The podman command line that works here, with its configuration file."""

    conf: Path

    @classmethod
    def configured(cls, folder: Path) -> Podman:
        folder.mkdir(parents=True, exist_ok=True)
        conf = folder / "containers.conf"
        conf.write_text("[containers]\ndefault_ulimits = []\n")
        return cls(conf)

    @property
    def env(self) -> dict[str, str]:
        return {**clean_env(), "CONTAINERS_CONF": str(self.conf), "STORAGE_DRIVER": "vfs"}

    def argv(self, *args: str) -> list[str]:
        runc = shutil.which("runc") or "runc"
        return [
            "podman",
            "--storage-driver=vfs",
            "--runtime",
            runc,
            "--cgroup-manager=cgroupfs",
            *args,
        ]

    def run(self, *args: str, timeout: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args), env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def checked(self, *args: str, timeout: float = RUN_TIMEOUT_S) -> str:
        done = self.run(*args, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(
                f"podman {' '.join(args)} exited {done.returncode}:\n{done.stderr[-4000:]}"
            )
        return done.stdout

    def has_image(self, name: str) -> bool:
        return self.run("image", "exists", name).returncode == 0


def debian_mirror() -> str:
    """The Debian mirror this machine's apt uses (the only one reachable here)."""
    if APT_SOURCES.exists():
        for line in APT_SOURCES.read_text().splitlines():
            if line.startswith("URIs:"):
                return line.split()[1]
    return DEFAULT_MIRROR


def ensure_python_base(podman: Podman) -> str:
    """The stand-in for python:3.12-slim, built when this machine does not have it yet."""
    if podman.has_image(PYTHON_BASE_IMAGE):
        return PYTHON_BASE_IMAGE
    if not podman.has_image(DEBIAN_IMAGE):
        rootfs = ROOTFS_CACHE / f"{SUITE}-minbase"
        if not (rootfs / "usr" / "bin" / "apt-get").exists():
            shutil.rmtree(rootfs, ignore_errors=True)
            rootfs.parent.mkdir(parents=True, exist_ok=True)
            run_checked(
                ["debootstrap", "--variant=minbase", SUITE, str(rootfs), debian_mirror()],
                cwd=rootfs.parent,
            )
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            podman.argv("import", "-", DEBIAN_IMAGE),
            stdin=tar.stdout,
            env=podman.env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
        )
        tar.wait()
        if imported.returncode != 0:
            raise RuntimeError(f"podman import failed: {imported.stderr[-4000:]}")
    here = Path(__file__).parent
    podman.checked(
        "build",
        "--isolation=chroot",
        "--network=host",
        "--file",
        str(here / "python-base.Containerfile"),
        "--tag",
        PYTHON_BASE_IMAGE,
        str(here),
    )
    return PYTHON_BASE_IMAGE


def run_job_script(script: str, cwd: Path, env: dict[str, str]) -> str:
    """A job's script in a POSIX shell on this machine, as the runner runs it in its image."""
    return run_checked(["sh", "-c", script], cwd=cwd, env=env)


def add_dependency_wheels(dist: Path) -> None:
    """The wheels of the reviewbot wheel's runtime dependencies, beside it (for --no-index)."""
    [wheel] = dist.glob("reviewbot-*.whl")
    download = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:"]
    run_checked(
        [*download, "-d", str(dist), str(wheel)],
        cwd=dist,
        env=clean_env(),
    )


def build_release_image(podman: Podman, workdir: Path, image: str) -> str:
    """The reviewbot image, built by the jobs of the image template on a tag pipeline."""
    base = ensure_python_base(podman)
    checkout = copy_checkout(workdir / "checkout")
    jobs = template_jobs(
        IMAGE_TEMPLATE,
        {
            "base": base,
            "destination": f"containers-storage:{image}",
            "build_args": "--build-arg PIP_INSTALL_OPTIONS=--no-index",
        },
    )
    pipeline = {
        "CI_PIPELINE_SOURCE": "push",
        "CI_COMMIT_TAG": RELEASE_TAG,
        "CI_PROJECT_DIR": str(checkout),
        "CI_PROJECT_URL": "https://gitlab.example.com/tools/reviewbot",
    }
    wheel_job, image_job = jobs["reviewbot-wheel"], jobs["reviewbot-image"]
    assert wheel_job.runs_in(pipeline) and image_job.runs_in(pipeline)
    # The wheel job's `python` is this interpreter (the runner's is the python image's).
    python_first = {**podman.env, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    run_job_script(
        wheel_job.shell_script(), checkout, wheel_job.environment(python_first | pipeline)
    )
    add_dependency_wheels(checkout / "dist")
    run_job_script(image_job.shell_script(), checkout, image_job.environment(podman.env | pipeline))
    return image
