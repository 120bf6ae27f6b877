"""The wheel ships the prompt templates and the migrations, and finds them once installed."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.installed.artifacts import copy_checkout

pytestmark = pytest.mark.slow  # measured: see docs/development.md

ROOT = Path(__file__).parent.parent


def test_wheel_contains_templates_and_migrations_and_finds_them(tmp_path: Path) -> None:
    # built in a fresh copy: pip builds in the source folder, and a build/ left there by an
    # earlier build once hid a package missing from the wheel
    source = copy_checkout(tmp_path / "source")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    [wheel] = (tmp_path / "dist").glob("reviewbot-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for template in ("system.j2", "context.j2", "chunk.j2"):
        assert f"reviewbot/templates/{template}" in names
    assert "reviewbot/report/templates/report.html.j2" in names
    assert "reviewbot/migrations/env.py" in names
    shipped = {p.name for p in (ROOT / "reviewbot" / "ops" / "models").glob("*.json")}
    assert {f"reviewbot/ops/models/{name}" for name in shipped} <= names
    revisions = (ROOT / "migrations" / "versions").glob("0*.py")
    assert {f"reviewbot/migrations/versions/{p.name}" for p in revisions} <= names
    installed = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(installed)
    probe = (
        "import reviewbot, reviewbot.prompts as p, reviewbot.store.migrate as m;"
        "print(reviewbot.__file__); print(p._template_dir()); print(m.MIGRATIONS_DIR);"
        "print(m.head_revision()); print(p.prompt_version());"
        "import reviewbot.ops.model_shape as s; print(len(s.shipped_model_names()));"
        "import reviewbot.report.html as h; print(h._template().filename)"
    )
    env = {**os.environ, "PYTHONPATH": str(installed)}
    out = subprocess.run(
        [sys.executable, "-c", probe],
        env=env,
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert all(line.startswith(str(installed)) for line in [*out[:3], out[-1]]), out
    from reviewbot.prompts import prompt_version
    from reviewbot.store.migrate import head_revision

    assert out[3:-1] == [head_revision(), prompt_version(), str(len(shipped))]
