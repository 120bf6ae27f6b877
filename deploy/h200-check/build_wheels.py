"""Build the wheel set that takes vLLM to a GPU machine with no network (issue 23).

Run here, where PyPI can be reached::

    python3 deploy/h200-check/build_wheels.py OUT_DIR

It downloads the CUDA build of vLLM (``VLLM_VERSION``) and, walking its requirements and
reviewbot's own (pyproject.toml: reviewbot runs there from the repository), every
package the GPU machine's image lacks (``device-packages.txt``: the names the image holds, read
off the device tool's KINDS.md), as CPython 3.12 manylinux x86-64 wheels, without their own
dependencies: pip's resolver picks the versions (a dry run for the device's platform, with
vLLM's requirements less the torch family, which the device has: resolving torch for that
platform pulls CUDA 12 libraries the device does not use).

Left out on purpose (``LEFT_OUT``): kernels this run does not use, each a large download
(FlashInfer, whose sampler and GDN prefill are turned off by ``VLLM_USE_FLASHINFER_SAMPLER=0``
and ``--gdn-prefill-backend triton``; TileLang, CUTLASS DSL, Quack, Humming, TokenSpeed MLA;
video decoders). The wheels are installed into ``OUT_DIR/site`` as the device's Python would
have them, and what this run does not use is cut out (``CUT``: vLLM's FlashAttention-2 kernels,
305 MB, since on Hopper vLLM runs FlashAttention 3; the optional Rust frontend; Blackwell
sources). On the device the kit is unpacked to /tmp/site and put first on PYTHONPATH.

Then it packs ``site`` into ``OUT_DIR/parts/kit.tar.xz.NN``, parts of at most ``PART_BYTES``
so that each travels in one device call with the repository.

Owns: the wheel set and its parts. Must not: know what runs on the device (run.sh does).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

VLLM_VERSION = "0.26.0"
PYTHON_VERSION = "3.12"
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in (39, 35, 34, 31, 28, 27, 24, 17)] + [
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
]
PART_BYTES = 56 * 1024 * 1024  # the repository (~4 MiB) travels too: 64 MiB a call
XZ_THREADS = 2
CUT = (
    "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so",  # FlashAttention 2: Hopper runs FA3
    "vllm/vllm-rs",  # the optional Rust frontend (VLLM_RUST_FRONTEND_PATH)
    "vllm/third_party/fmha_sm100",  # Blackwell attention kernels' sources
    "vllm/third_party/deep_gemm/_C.cpython-31[0134]-*.so",  # other Pythons than 3.12
)
LEFT_OUT = {
    canonicalize_name(name)
    for name in (
        "flashinfer-python",
        "flashinfer-cubin",
        "flashinfer-jit-cache",
        "tilelang",
        "nvidia-cutlass-dsl",
        "nvidia-cutlass-dsl-libs-base",
        "nvidia-cutlass-dsl-libs-core",
        "nvidia-cutlass-dsl-libs-cu12",
        "nvidia-cutlass-dsl-libs-cu13",
        "quack-kernels",
        "humming-kernels",
        "tokenspeed-mla",
        "pynvvideocodec",
        "torchcodec",
        "fastsafetensors",
        "psycopg",  # reviewbot's PostgreSQL driver: the run there uses SQLite
        "psycopg-binary",
    )
}
TORCH_FAMILY = {canonicalize_name(n) for n in ("torch", "torchaudio", "torchvision", "numba")}
CUDA_12 = re.compile(r"nvidia-.*-cu12$")  # the device's torch is built for CUDA 13
HERE = Path(__file__).resolve().parent
DEVICE_PACKAGES = HERE / "device-packages.txt"


def device_packages() -> set[str]:
    lines = DEVICE_PACKAGES.read_text().splitlines()
    return {canonicalize_name(line.strip()) for line in lines if line.strip()}


def marker_environment() -> dict[str, str]:
    env = dict(default_environment())
    env.update(
        python_version=PYTHON_VERSION,
        python_full_version=f"{PYTHON_VERSION}.3",
        platform_machine="x86_64",
        platform_system="Linux",
        sys_platform="linux",
        os_name="posix",
        implementation_name="cpython",
    )
    return env


def download(requirement: str, directory: Path) -> Path:
    """One wheel, no dependencies: the path pip saved."""
    before = set(directory.glob("*.whl"))
    argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    argv += ["--python-version", PYTHON_VERSION, "--implementation", "cp", "-d", str(directory)]
    for platform in PLATFORMS:
        argv += ["--platform", platform]
    subprocess.run([*argv, requirement], check=True)
    new = set(directory.glob("*.whl")) - before
    if new:
        return new.pop()
    name = canonicalize_name(Requirement(requirement).name)
    for wheel in directory.glob("*.whl"):
        if canonicalize_name(wheel.name.split("-")[0]) == name:
            return wheel
    raise RuntimeError(f"pip saved no wheel for {requirement}")


def vllm_requirements(wheel: Path) -> list[str]:
    """vLLM's own requirements for the device's Python, the torch family and LEFT_OUT removed
    (the device has torch; pip would otherwise resolve another torch and its CUDA libraries)."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(name).decode())
    env = {**marker_environment(), "extra": ""}
    wanted = []
    for line in metadata.get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate(env):
            continue
        if canonicalize_name(requirement.name) in TORCH_FAMILY | LEFT_OUT:
            continue
        wanted.append(str(requirement))
    return wanted


def reviewbot_requirements() -> list[Requirement]:
    """reviewbot's own dependencies, from pyproject.toml (it runs there from the source tree)."""
    project = tomllib.loads((HERE.parent.parent / "pyproject.toml").read_text())["project"]
    return [Requirement(line) for line in project["dependencies"]]


def resolve(requirements: list[str], directory: Path) -> list[str]:
    """``name==version`` of every package pip's resolver picks for them on the device's
    platform (a dry run: only metadata is fetched), less what the device has and LEFT_OUT."""
    report = directory / "resolved.json"
    argv = [sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--ignore-installed"]
    argv += ["--report", str(report), "--only-binary=:all:", "--target", str(directory / "x")]
    argv += ["--python-version", PYTHON_VERSION, "--implementation", "cp"]
    for platform in PLATFORMS:
        argv += ["--platform", platform]
    environment = {**os.environ, "PIP_CONSTRAINT": ""}  # a machine-wide cap must not apply
    subprocess.run([*argv, *requirements], check=True, env=environment)
    present = device_packages()
    picked = []
    for item in json.loads(report.read_text())["install"]:
        name = canonicalize_name(item["metadata"]["name"])
        if name in present or name in LEFT_OUT or name in TORCH_FAMILY or CUDA_12.match(name):
            continue
        picked.append(f"{name}=={item['metadata']['version']}")
    return sorted(picked)


def walk(directory: Path) -> list[Path]:
    vllm = download(f"vllm=={VLLM_VERSION}", directory)
    requirements = vllm_requirements(vllm) + [str(r) for r in reviewbot_requirements()]
    wheels = [vllm]
    for pinned in resolve(requirements, directory):
        print(f"wheel: {pinned}", file=sys.stderr)
        wheels.append(download(pinned, directory))
    return sorted(set(wheels))


def stage(wheels: list[Path], out: Path) -> Path:
    """Every wheel installed into ``out/site`` as the device's Python 3.12 would have it (pip
    --target, no dependencies), then the parts this run does not use cut out (CUT)."""
    site = out / "site"
    if site.exists():
        shutil.rmtree(site)
    argv = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index"]
    argv += ["--no-compile", "--only-binary=:all:", "--python-version", PYTHON_VERSION]
    argv += ["--implementation", "cp", "--target", str(site)]
    for platform in PLATFORMS:
        argv += ["--platform", platform]
    subprocess.run([*argv, *map(str, wheels)], check=True)
    for pattern in CUT:
        for path in site.glob(pattern):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
    return site


def pack(site: Path, out: Path) -> list[Path]:
    """``site`` as tar.xz (xz -9, the archive's contents uncompressed, so xz sees the raw
    kernels), cut into parts of PART_BYTES."""
    parts_dir = out / "parts"
    parts_dir.mkdir(exist_ok=True)
    for old in parts_dir.glob("kit.tar.xz.*"):
        old.unlink()
    archive = out / "kit.tar.xz"
    subprocess.run(
        [
            "tar",
            "-C",
            str(site.parent),
            "-I",
            f"xz -9 -T{XZ_THREADS}",
            "-cf",
            str(archive),
            site.name,
        ],
        check=True,
    )
    parts = []
    with archive.open("rb") as whole:
        index = 0
        while chunk := whole.read(PART_BYTES):
            part = parts_dir / f"kit.tar.xz.{index:02d}"
            part.write_bytes(chunk)
            parts.append(part)
            index += 1
    archive.unlink()
    return parts


def main() -> None:
    out = Path(sys.argv[1]).resolve()
    wheels_dir = out / "wheels"
    wheels_dir.mkdir(parents=True, exist_ok=True)
    wheels = walk(wheels_dir)
    total = sum(w.stat().st_size for w in wheels)
    print(f"{len(wheels)} wheels, {total / 2**20:.0f} MiB", file=sys.stderr)
    site = stage(wheels, out)
    parts = pack(site, out)
    for part in parts:
        print(f"{part}  {part.stat().st_size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
