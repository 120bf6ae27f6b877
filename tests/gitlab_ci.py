"""A GitLab CI job as a runner sees it: a template's inputs interpolated, its rules evaluated, its
variables expanded and its ``before_script`` + ``script`` made into one shell script.

Only what reviewbot's templates use is supported, and anything else is refused (never guessed):
``spec:inputs`` with defaults (https://docs.gitlab.com/ci/yaml/inputs/), ``$[[ inputs.NAME ]]``
inside string values (GitLab interpolates values after parsing the YAML, so an input can never
add keys), ``rules:if`` made of ``$VAR == "text"`` / ``!=`` comparisons and bare ``$VAR``
(set and not empty) joined by ``&&``, and ``$VAR`` / ``${VAR}`` in ``variables`` (expanded by
the runner before the job starts,
https://docs.gitlab.com/ci/variables/#use-cicd-variables-in-other-variables).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

INPUT_REFERENCE = re.compile(r"\$\[\[\s*inputs\.([\w-]+)\s*\]\]")
VARIABLE_REFERENCE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
COMPARISON = re.compile(r'^\$(\w+)\s*(==|!=)\s*"([^"]*)"$')
PRESENCE = re.compile(r"^\$(\w+)$")


def load_template(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(spec header, jobs): a template with inputs is two YAML documents split by ``---``."""
    documents = list(yaml.safe_load_all(path.read_text()))
    assert len(documents) == 2, "header with spec:inputs, then the configuration"
    header, jobs = documents
    assert set(header) == {"spec"}
    return header["spec"], jobs


def input_values(spec: dict[str, Any], given: dict[str, str]) -> dict[str, str]:
    """Every input's value: the given one, else its default; GitLab's refusals otherwise."""
    declared = spec.get("inputs", {})
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise ValueError(f"unknown input arguments: {', '.join(unknown)}")
    values = {}
    for name, definition in declared.items():
        if name in given:
            values[name] = given[name]
        elif definition and "default" in definition:
            values[name] = str(definition["default"])
        else:
            raise ValueError(f"`{name}` input: required value has not been provided")
    return values


def interpolate(value: Any, values: dict[str, str]) -> Any:
    """Replace ``$[[ inputs.NAME ]]`` in every string of a parsed configuration."""
    if isinstance(value, str):
        return INPUT_REFERENCE.sub(lambda match: values[match.group(1)], value)
    if isinstance(value, list):
        return [interpolate(item, values) for item in value]
    if isinstance(value, dict):
        return {key: interpolate(item, values) for key, item in value.items()}
    return value


def rule_matches(condition: str, env: dict[str, str]) -> bool:
    """A ``rules:if`` of comparisons and presence checks joined by ``&&``. An unset variable is
    null for GitLab: equal to no string, not even ``""``."""
    verdicts = []
    for part in (part.strip() for part in condition.split("&&")):
        if presence := PRESENCE.match(part):
            verdicts.append(bool(env.get(presence.group(1))))
            continue
        match = COMPARISON.match(part)
        if not match:
            raise ValueError(f"unsupported rules:if expression: {part!r}")
        name, operator, text = match.groups()
        equal = name in env and env[name] == text
        verdicts.append(equal == (operator == "=="))
    return all(verdicts)


def expand(value: str, env: dict[str, str]) -> str:
    """``$VAR`` and ``${VAR}`` as the runner expands them in ``variables`` (unset: empty)."""
    return VARIABLE_REFERENCE.sub(lambda m: env.get(m.group(1) or m.group(2), ""), value)


@dataclass(frozen=True)
class CiJob:
    """One job of a template, inputs interpolated."""

    name: str
    definition: dict[str, Any]

    @property
    def image(self) -> str:
        image = self.definition["image"]
        return image if isinstance(image, str) else image["name"]

    @property
    def entrypoint(self) -> list[str] | None:
        image = self.definition["image"]
        return None if isinstance(image, str) else image.get("entrypoint")

    def runs_in(self, pipeline_env: dict[str, str]) -> bool:
        """Whether the job is in a pipeline with these predefined variables (first rule wins;
        every rule of reviewbot's templates is an ``if`` that adds the job)."""
        return any(rule_matches(rule["if"], pipeline_env) for rule in self.definition["rules"])

    def environment(self, pipeline_env: dict[str, str]) -> dict[str, str]:
        """The job's environment: the pipeline's variables, then the job's, expanded."""
        env = dict(pipeline_env)
        for name, value in self.definition.get("variables", {}).items():
            env[name] = expand(str(value), env)
        return env

    def shell_script(self) -> str:
        """``before_script`` and ``script`` as one POSIX shell script that stops at the first
        failing line, as the runner runs them."""
        lines = [*self.definition.get("before_script", []), *self.definition["script"]]
        return "\n".join(["set -e", *lines]) + "\n"

    @property
    def artifact_paths(self) -> list[str]:
        return list(self.definition.get("artifacts", {}).get("paths", []))


def template_jobs(path: Path, inputs: dict[str, str]) -> dict[str, CiJob]:
    """The jobs of a template included with these inputs."""
    spec, jobs = load_template(path)
    values = input_values(spec, inputs)
    return {name: CiJob(name, interpolate(job, values)) for name, job in jobs.items()}
