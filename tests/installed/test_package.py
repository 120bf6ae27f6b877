"""The wheel holds the whole package, imports with no extras, and the sdist gives the same wheel.

The tree once passed 3,400 tests while the wheel missed ``reviewbot/repo/`` and ``pyyaml`` was a
dev-only dependency: every command of the installed package failed at its first import. These
tests look only at what ``pip install`` gives a user (the venv of ``tests/installed/artifacts``),
from a directory outside the checkout.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.installed.artifacts import ROOT, Installed, clean_env, wheel_from_sdist
from tests.installed.tier import INSTALLED

pytestmark = INSTALLED

# Run by something else, never imported: python -m runs the CLI, Alembic runs its environment
# (`reviewbot db upgrade` in test_commands runs it). Their imports are still checked statically.
NOT_IMPORTABLE = {"reviewbot.commands.__main__", "reviewbot.migrations.env"}

IMPORT_EACH = """
import importlib, json, sys
import reviewbot
failures, imported = [], []
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
        imported.append(name)
    except ImportError as error:
        failures.append({"module": name, "missing": getattr(error, "name", None),
                         "error": repr(error)})
print(json.dumps({"file": reviewbot.__file__, "imported": imported, "failures": failures}))
"""


def wheel_names(wheel: Path) -> set[str]:
    return set(zipfile.ZipFile(wheel).namelist())


def wheel_modules(wheel: Path) -> list[str]:
    """Every module the wheel contains, walked from its file list (namespace folders such as
    ``reviewbot/migrations`` and revision files such as ``0001_initial.py`` included)."""
    modules = []
    for name in sorted(wheel_names(wheel)):
        if name.endswith(".py"):
            module = name.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
            modules.append(module)
    return modules


def tracked_package_files() -> set[str]:
    """What the wheel must hold: every tracked file of reviewbot/, prompts/ and migrations/, at
    its installed name."""
    installed_as = {"reviewbot": "reviewbot", "prompts": "reviewbot/templates"}
    installed_as["migrations"] = "reviewbot/migrations"
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", *installed_as],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    names = set()
    for name in listed:
        top, rest = name.split("/", 1)
        names.add(f"{installed_as[top]}/{rest}")
    return names


def distribution_of(module: str) -> str:
    """The distribution that provides a top-level module, as the dev venv knows it."""
    found = importlib.metadata.packages_distributions().get(module.split(".")[0])
    return ", ".join(found) if found else f"(no installed distribution provides {module!r})"


def test_the_wheel_holds_every_file_of_the_package(installed: Installed) -> None:
    in_wheel = wheel_names(installed.wheel)
    missing = sorted(tracked_package_files() - in_wheel)
    assert not missing, f"tracked files the wheel leaves out: {missing}"
    stray = sorted(n for n in in_wheel if n.startswith(("tests/", "deploy/", "docs/")))
    assert not stray, f"the wheel ships files that are not the package: {stray}"


def test_every_module_imports_in_a_venv_without_extras(installed: Installed, outside: Path) -> None:
    modules = [m for m in wheel_modules(installed.wheel) if m not in NOT_IMPORTABLE]
    done = subprocess.run(
        [str(installed.python), "-c", IMPORT_EACH, json.dumps(modules)],
        cwd=outside,
        env=clean_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout)
    assert result["file"].startswith(str(installed.venv)), result["file"]
    named = [
        f"{f['module']}: {f['error']} (install {distribution_of(f['missing'] or '?')})"
        for f in result["failures"]
    ]
    assert not named, "modules that do not import from the wheel:\n" + "\n".join(named)
    assert result["imported"] == modules


def imported_top_levels(source: str) -> set[str]:
    """The top-level names a module imports anywhere (module level or inside a function)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def runtime_requirements(wheel: Path) -> set[str]:
    """The distributions the wheel requires without an extra (its METADATA's Requires-Dist)."""
    archive = zipfile.ZipFile(wheel)
    [metadata] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    required = set()
    for line in archive.read(metadata).decode().splitlines():
        if line.startswith("Requires-Dist:") and "extra ==" not in line:
            spec = line.removeprefix("Requires-Dist:").strip()
            name = spec.split(";")[0].split("[")[0]
            for stop in "<>=!~ (":
                name = name.split(stop)[0]
            required.add(normalise(name))
    return required


def normalise(distribution: str) -> str:
    return distribution.lower().replace("_", "-").replace(".", "-")


def test_every_third_party_import_is_a_runtime_dependency(installed: Installed) -> None:
    """Lazy imports (inside functions) too: the import walk only runs module level code."""
    archive = zipfile.ZipFile(installed.wheel)
    required = runtime_requirements(installed.wheel)
    standard = set(sys.stdlib_module_names) | {"reviewbot", "__future__"}
    providers = importlib.metadata.packages_distributions()
    undeclared = []
    for name in archive.namelist():
        if not name.endswith(".py"):
            continue
        for top in sorted(imported_top_levels(archive.read(name).decode()) - standard):
            distributions = {normalise(d) for d in providers.get(top, [])}
            if not distributions & required:
                undeclared.append(f"{name} imports {top} ({distribution_of(top)})")
    assert not undeclared, "imports not covered by [project.dependencies]:\n" + "\n".join(
        undeclared
    )


def test_the_sdist_builds_the_same_wheel(installed: Installed, tmp_path: Path) -> None:
    from_sdist = wheel_from_sdist(installed.sdist, tmp_path / "from-sdist")
    assert wheel_names(from_sdist) == wheel_names(installed.wheel)


def test_the_console_script_and_python_m_start(installed: Installed, outside: Path) -> None:
    version = importlib.metadata.version("reviewbot")
    for argv in ([str(installed.script)], [str(installed.python), "-m", "reviewbot.commands"]):
        done = subprocess.run(
            [*argv, "--version"], cwd=outside, env=clean_env(), capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert version in done.stdout
