"""Package discovery, the one thing pyproject.toml cannot say on its own.

setuptools' ``find`` directive looks only inside folders, so it cannot also name the packages
that ``[tool.setuptools.package-dir]`` maps from the top of the repository (``prompts/`` ships
as ``reviewbot.templates``, ``migrations/`` as ``reviewbot.migrations``). Here every mapped
package and every folder below it is a package, with or without an ``__init__.py``
(``migrations/versions/`` has none); nothing is listed by hand, so a new folder can never be
left out of the wheel again (``reviewbot/repo/`` once was). Everything else is in
pyproject.toml.
"""

import tomllib
from pathlib import Path

from setuptools import find_namespace_packages, setup

PYPROJECT = Path(__file__).parent / "pyproject.toml"
NOT_PACKAGES = ["__pycache__", "*.__pycache__", "*.egg-info"]


def discovered_packages() -> list[str]:
    """Each package-dir mapping's package and every folder below its folder."""
    package_dir = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-dir"]
    packages = []
    for name, folder in package_dir.items():
        found = find_namespace_packages(where=folder, exclude=NOT_PACKAGES)
        packages += [name, *(f"{name}.{package}" for package in found)]
    return sorted(set(packages))


setup(packages=discovered_packages())
