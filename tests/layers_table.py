"""The layers of reviewbot, by folder: the one table ``tests/test_layers.py`` checks every import
against and ``docs/architecture.md`` shows (its "Layers" section is written from this module by
``python -m tests.layers_doc``).

A folder has one layer, and every module in it (and below it) has that layer, a new one too;
``MODULES`` names only the modules of another layer than their folder's (a pure module in an
adapter's folder, a pipeline module among the ground floor's vocabulary). ``reviewbot`` is the
top level: ``reviewbot/*.py``, the ground floor.

Owns: which layer each folder and each exception is in, what each folder is for in a few words,
and the cycles between folders known today. Must not: hold a check (``tests/test_layers.py``
does) or Markdown (``tests/layers_doc.py`` does).
"""

from __future__ import annotations

from dataclasses import dataclass

CORE, ADAPTERS, PIPELINE, ENTRY_POINTS = 0, 1, 2, 3
LAYER_NAMES = {
    CORE: "pure core",
    ADAPTERS: "adapters",
    PIPELINE: "pipeline and services",
    ENTRY_POINTS: "entry points",
}
ROOT = "reviewbot"


@dataclass(frozen=True)
class Folder:
    layer: int
    what: str  # the folder's part in the picture, a few words for the docs


# Each folder under reviewbot/ (as a package name; prompts/ and migrations/ ship inside reviewbot
# under the names on the left). A folder with no entry here fails tests/test_layers.py.
FOLDERS: dict[str, Folder] = {
    ROOT: Folder(CORE, "the ground floor: the vocabulary every layer uses, one noun a module"),
    "reviewbot.templates": Folder(CORE, "the Jinja2 prompt templates"),
    "reviewbot.rules": Folder(CORE, "the team's review rules: parsed, matched, budgeted"),
    "reviewbot.gitlab": Folder(ADAPTERS, "the GitLab API, one module per thing asked of it"),
    "reviewbot.llm": Folder(ADAPTERS, "the model server: runner, transports, factory"),
    "reviewbot.store": Folder(ADAPTERS, "the database: every table and every SQL statement"),
    "reviewbot.repo": Folder(ADAPTERS, "a repository at one commit, and the model's tools on it"),
    "reviewbot.analyzers": Folder(CORE, "analyzers' findings: reports read, tools run"),
    "reviewbot.ops": Folder(CORE, "the model server's side: capacity, doctor, loadtest, weights"),
    "reviewbot.learnings": Folder(PIPELINE, "the team's learnings: taught, proposed, applied"),
    "reviewbot.report": Folder(PIPELINE, "the accuracy report: figures, Markdown, HTML, charts"),
    "reviewbot.replies": Folder(PIPELINE, "answers in the bot's threads, once per note"),
    "reviewbot.webhook": Folder(PIPELINE, "the webhook listener: check, enqueue, answer 202"),
    "reviewbot.worker": Folder(PIPELINE, "the queue's worker: claim, run, heartbeat, settle"),
    "reviewbot.commands": Folder(ENTRY_POINTS, "the command line: click and rich only here"),
    "reviewbot.migrations": Folder(
        ENTRY_POINTS, "the schema's Alembic revisions, which Alembic runs"
    ),
}

# The modules whose layer is not their folder's. A module listed here must exist and differ from
# its folder's layer (tests/test_layers.py checks both).
MODULES: dict[str, int] = {
    # the top level: the pipeline and the services the commands run
    "reviewbot.app": PIPELINE,
    "reviewbot.review": PIPELINE,
    "reviewbot.passes": PIPELINE,
    "reviewbot.analyzer_review": PIPELINE,
    "reviewbot.mr": PIPELINE,
    "reviewbot.publish": PIPELINE,
    "reviewbot.feedback": PIPELINE,
    "reviewbot.eval": PIPELINE,
    "reviewbot.compare": PIPELINE,
    "reviewbot.ci": PIPELINE,
    "reviewbot.guidance": PIPELINE,
    "reviewbot.check_status": PIPELINE,
    "reviewbot.mr_walkthrough": PIPELINE,
    "reviewbot.mr_overview": PIPELINE,
    # the top level: adapters
    "reviewbot.queue": ADAPTERS,
    "reviewbot.slots": ADAPTERS,
    # the rules' files at the target branch
    "reviewbot.rules.sources": ADAPTERS,
    # the settings projects of a project's groups, through GitLab
    "reviewbot.group_settings": ADAPTERS,
    # the model's answers read, its tool rounds and tries: pure
    "reviewbot.llm.answers": CORE,
    "reviewbot.llm.rounds": CORE,
    "reviewbot.llm.tries": CORE,
    # the repository as a view, its tree, and the model's tools over a view: pure
    "reviewbot.repo.view": CORE,
    "reviewbot.repo.tree": CORE,
    "reviewbot.repo.tools": CORE,
    "reviewbot.repo.command_line": CORE,
    "reviewbot.repo.confine": CORE,
    "reviewbot.repo.search": CORE,
    "reviewbot.repo.definitions": CORE,
    # the analyzers: what runs a tool or reads a file or GitLab (the readers are pure)
    "reviewbot.analyzers.processes": ADAPTERS,
    "reviewbot.analyzers.builtin": ADAPTERS,
    "reviewbot.analyzers.collect": ADAPTERS,
    "reviewbot.analyzers.host": ADAPTERS,
    # the model server's side: what talks to servers and disks (the rest judges answers)
    "reviewbot.ops.weights_files": ADAPTERS,
    "reviewbot.ops.weights_doctor": PIPELINE,
    "reviewbot.ops.doctor_probes": PIPELINE,
    "reviewbot.ops.model_probes": PIPELINE,
    "reviewbot.ops.router_probes": PIPELINE,
    "reviewbot.ops.deadlines": PIPELINE,
    "reviewbot.ops.loadtest_plan": PIPELINE,
    "reviewbot.ops.loadtest_driver": PIPELINE,
    # a learning (the noun) and the package, which config.py imports it through: pure
    "reviewbot.learnings": CORE,
    "reviewbot.learnings.learning": CORE,
    # the report's wording and its learnings tables: pure
    "reviewbot.report.text": CORE,
    "reviewbot.report.learnings": CORE,
    # what a thread asks and the guidance an answer gets: pure
    "reviewbot.replies.intent": CORE,
    "reviewbot.replies.guidance": CORE,
    # a delivery's payloads and the listener's OpenAPI: pure; its metrics: an adapter
    "reviewbot.webhook.payloads": CORE,
    "reviewbot.webhook.openapi": CORE,
    "reviewbot.webhook.metrics": ADAPTERS,
}


# Cycles between folders: each is the folders of one layer whose modules import each other
# round (a folder's modules of one layer are one node; there is no arrow upward, so a cycle
# stays in its layer). Known today, each with why; tests/test_layers.py fails on a new one and
# on one that is gone (drop it here then).
KNOWN_FOLDER_CYCLES: dict[tuple[int, tuple[str, ...]], str] = {}


def folder_of(module: str) -> str:
    """The folder ``module`` is in: the listed folder its name starts with (a package is in its
    own folder, a folder below a listed one in that one), else the top level."""
    for name in FOLDERS:
        if name != ROOT and (module == name or module.startswith(f"{name}.")):
            return name
    return ROOT


def layer_of(module: str) -> int:
    """``module``'s layer: its own entry in ``MODULES``, else its folder's."""
    if module in MODULES:
        return MODULES[module]
    return FOLDERS[folder_of(module)].layer
