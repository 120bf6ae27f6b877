"""The docs stay true: every runnable example runs, every link leads somewhere, and the README
keeps the two commands of a fresh machine.

- A fenced block with the info string ``console`` holds commands that run offline, each on a
  line ``$ COMMAND`` (``# exit N`` at its end when it is meant to fail). Each block runs, line
  by line, in a fresh git repository of two commits (``main``, then ``feature``) with no
  settings file, a throw-away SQLite database and a model URL where nothing listens, so an
  example that quietly needs a server fails here instead of in a reader's terminal.
- ``sh``/``bash`` blocks are shown, not run: they need GitLab or a model server. `plan` and
  `capacity` never do, so a line of theirs in such a block is an example nobody checks.
- A ``toml`` block is a settings file: reviewbot must accept it.
- Every relative link of README.md and docs/*.md points to a file that exists, and an
  ``#anchor`` to a heading of that file (GitHub's and GitLab's anchor rule), and every page of
  docs/ can be reached from the README.
- The generated sections (the configuration reference from `Settings`, the command-line
  reference from the click tree) are what ``python -m reviewbot.commands.docs`` writes now: a
  stale one fails with that command. They are well-formed Markdown (every table row has its
  header's cells, no HTML), and click's plain help text shows as written.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from reviewbot.commands.docs import (
    BEGIN,
    END,
    GENERATED_PAGES,
    REGENERATE,
    GeneratedPage,
    docs_command,
    plain_text,
    render_commands,
    render_settings,
    updated_text,
)
from reviewbot.config import load_settings, setting_docs
from tests import layers_doc
from tests.fakes.silent_server import closed_port
from tests.layers_table import FOLDERS, MODULES
from tests.test_cli_help import all_commands, resolve

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
VENV_BIN = Path(sys.executable).parent
RUNNABLE = "console"
SHOWN = ("sh", "bash", "shell")
# Commands that never contact a server: an example of theirs can always be run.
OFFLINE_COMMANDS = ("reviewbot plan", "reviewbot capacity")
EXPECTED_STATUS = re.compile(r"\s+# exit (\d+)$")
COMMAND_TIMEOUT_S = 120
FRESH_MACHINE = (
    "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]'",
    ".venv/bin/pytest",
)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    info: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


FENCE = re.compile(r"^(\s*)```(.*)$")


def code_blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, dedented by their fence's indentation (list items)."""
    blocks: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, info = len(opening.group(1)), opening.group(2).strip()
        body: list[str] = []
        index += 1
        while index < len(lines) and not FENCE.match(lines[index]):
            body.append(lines[index][indent:])
            index += 1
        line_of_fence = index - len(body)
        blocks.append(Block(page, line_of_fence, info, "\n".join(body)))
        index += 1
    return blocks


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in code_blocks(page)]


def commands(block: Block) -> list[tuple[str, int]]:
    """Each ``$ `` line of a console block (a trailing backslash continues it) and the exit
    status it expects."""
    found: list[tuple[str, int]] = []
    pending = ""
    for raw in block.text.splitlines():
        line = raw.rstrip()
        if not pending:
            assert line.startswith("$ "), (
                f"{block.where}: a console block holds only '$ command' lines, got {line!r}"
            )
            line = line[2:]
        pending += line
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        expected = EXPECTED_STATUS.search(pending)
        status = int(expected.group(1)) if expected else 0
        found.append((EXPECTED_STATUS.sub("", pending), status))
        pending = ""
    assert not pending, f"{block.where}: the last command ends with a backslash"
    return found


RUNNABLE_BLOCKS = [block for block in all_blocks() if block.info == RUNNABLE]


def test_the_docs_have_runnable_examples() -> None:
    """The README's first review runs here, so the collection below is never empty."""
    readme = [block for block in RUNNABLE_BLOCKS if block.page.name == "README.md"]
    assert any("reviewbot plan --git HEAD~1..HEAD" in block.text for block in readme)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def example_repository(path: Path) -> Path:
    """Two commits: ``app.py`` on ``main``, then a change on ``feature`` (checked out); and a
    Hugging Face ``config.json`` for ``reviewbot capacity --model-config``."""
    repo = path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "docs@example.com")
    _git(repo, "config", "user.name", "docs")
    (repo / "app.py").write_text(
        "def total(prices):\n    result = 0\n    for price in prices:\n"
        "        result += price\n    return result\n"
    )
    _git(repo, "add", "app.py")
    _git(repo, "commit", "-q", "-m", "total")
    _git(repo, "checkout", "-q", "-b", "feature")
    (repo / "app.py").write_text(
        "def total(prices, discount=0):\n    result = 0\n    for price in prices:\n"
        "        result += price\n    return result - result * discount / 100\n"
    )
    _git(repo, "commit", "-q", "-am", "discount")
    shipped = ROOT / "reviewbot" / "ops" / "models" / "qwen3.5-9b.json"
    config = json.loads(shipped.read_text())["config"]
    (repo / "config.json").write_text(json.dumps(config))
    return repo


def offline_environment(path: Path, port: int) -> dict[str, str]:
    """The caller's environment without any REVIEWBOT_* setting; no settings file, a fresh
    database, and a model server and GitLab URL where nothing listens."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("REVIEWBOT_")}
    env.update(
        PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
        REVIEWBOT_CONFIG=os.devnull,
        REVIEWBOT_DATABASE_URL=f"sqlite:///{path / 'docs.db'}",
        REVIEWBOT_LLM_BASE_URL=f"http://127.0.0.1:{port}/v1",
        REVIEWBOT_GITLAB_URL=f"http://127.0.0.1:{port}",
        XDG_CONFIG_HOME=str(path / "config"),
        XDG_DATA_HOME=str(path / "data"),
        COLUMNS="100",
    )
    return env


@pytest.mark.slow
@pytest.mark.parametrize("block", RUNNABLE_BLOCKS, ids=lambda block: block.where)
def test_every_console_example_runs(block: Block, tmp_path: Path) -> None:
    repo = example_repository(tmp_path)
    with closed_port() as port:
        env = offline_environment(tmp_path, port)
        for command, expected in commands(block):
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=repo,
                env=env,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
            assert done.returncode == expected, (
                f"{block.where}: `{command}` exited {done.returncode}, expected {expected}\n"
                f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            )


def test_offline_commands_are_shown_in_runnable_blocks() -> None:
    unchecked = [
        f"{block.where}: {line.strip()}"
        for block in all_blocks()
        if block.info in SHOWN
        for line in block.text.splitlines()
        if line.strip().startswith(OFFLINE_COMMANDS)
    ]
    assert unchecked == [], "offline commands belong in ```console blocks (run by this test)"


@pytest.mark.parametrize(
    "block", [b for b in all_blocks() if b.info == "toml"], ids=lambda block: block.where
)
def test_every_toml_example_is_a_settings_file_reviewbot_accepts(
    block: Block, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(block.text)
    load_settings(env={}, config_file=config)


def test_the_readme_gives_the_two_commands_of_a_fresh_machine() -> None:
    readme = set((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    ci = set((ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines())
    for command in FRESH_MACHINE:
        assert command in readme, f"the README has no line {command!r}"
        assert command in ci, f".ci/run has no line {command!r}"


# The README is the front page: reference belongs in docs/ (it had grown back to 13 KB).
README_MAX_BYTES = 12 * 1024


def test_the_readme_stays_a_front_page() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_MAX_BYTES, (
        f"README.md is {size} bytes, over its {README_MAX_BYTES}: move reference into docs/"
    )


# --- links -----------------------------------------------------------------------------------

LINK = re.compile(r"(?<!!)\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)\)")
INLINE_CODE = re.compile(r"`[^`]*`")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def outside_blocks(page: Path) -> list[str]:
    """The lines of a page outside its fenced blocks (a ``# comment`` in a block is no
    heading, a ``[x](y)`` in one no link)."""
    kept: list[str] = []
    inside = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            inside = not inside
        elif not inside:
            kept.append(line)
    return kept


def anchor(heading: str) -> str:
    """The anchor GitHub and GitLab give a heading: lower case, links and code marks dropped,
    anything but letters, digits, spaces, '-' and '_' removed, spaces made '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in outside_blocks(page):
        heading = HEADING.match(line)
        if heading is None:
            continue
        name = anchor(heading.group(1))
        count = seen.get(name, 0)
        seen[name] = count + 1
        found.add(name if count == 0 else f"{name}-{count}")
    return found


def relative_links(page: Path) -> list[str]:
    text = "\n".join(INLINE_CODE.sub("", line) for line in outside_blocks(page))
    return [target for target in LINK.findall(text) if not EXTERNAL.match(target)]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading(page: Path) -> None:
    broken: list[str] = []
    for target in relative_links(page):
        path_part, _, fragment = target.partition("#")
        destination = (page.parent / path_part).resolve() if path_part else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif fragment and destination.suffix == ".md" and fragment not in anchors(destination):
            broken.append(f"{target}: no heading #{fragment} in {destination.name}")
    assert broken == []


def test_every_docs_page_can_be_reached_from_the_readme() -> None:
    reached: set[Path] = set()
    todo = [ROOT / "README.md"]
    while todo:
        page = todo.pop()
        if page in reached or page.suffix != ".md" or not page.exists():
            continue
        reached.add(page)
        for target in relative_links(page):
            path_part = target.partition("#")[0]
            if path_part:
                todo.append((page.parent / path_part).resolve())
    unreached = sorted(str(p.relative_to(ROOT)) for p in DOCS.glob("*.md") if p not in reached)
    assert unreached == []


def test_the_anchor_rule_matches_the_platforms() -> None:
    """Examples whose anchors GitHub and GitLab agree on."""
    examples = {
        "Checking a set-up: `reviewbot doctor`": "checking-a-set-up-reviewbot-doctor",
        "Other model servers (Ollama, llama.cpp)": "other-model-servers-ollama-llamacpp",
        "`max_model_len`": "max_model_len",
        "Why [this](x.md) works": "why-this-works",
    }
    assert {heading: anchor(heading) for heading in examples} == examples


# --- generated sections ----------------------------------------------------------------------


@pytest.mark.parametrize("page", GENERATED_PAGES, ids=lambda page: page.path)
def test_the_generated_sections_are_up_to_date(page: GeneratedPage) -> None:
    text = (ROOT / page.path).read_text(encoding="utf-8")
    assert text == updated_text(text, page.section, page.render()), (
        f"{page.path} is stale: run `.venv/bin/{REGENERATE}` and commit the result"
    )


def test_the_configuration_reference_shows_every_setting() -> None:
    page = render_settings()
    for doc in setting_docs():
        assert f"### `{doc.name}`" in page
        assert doc.help in page and doc.env in page
        if doc.bounds is not None:
            assert doc.bounds.describe() in page, doc.name


def test_the_command_line_reference_shows_every_command_and_option() -> None:
    page = render_commands()
    for path in all_commands():
        name = " ".join(("reviewbot", *path))
        assert f"# `{name}`\n" in page, name
        assert f"```text\n{name} " in page, name
        section = page.split(f"# `{name}`\n", 1)[1].split("\n#", 1)[0]
        for param in resolve(path).params:
            for opt in param.opts:
                shown = opt if opt.startswith("-") else opt.upper()
                assert f"`{shown}" in section, f"{name}: {opt}"


MARKDOWN = MarkdownIt("commonmark").enable("table")
UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


@given(st.text(alphabet="ab 19*_<>[]|\\&!#()-+=~.:/", min_size=1).map(str.strip).filter(bool))
def test_plain_help_text_shows_as_written(text: str) -> None:
    """In a paragraph and in the second cell of a table row, as the references put it."""
    paragraph = MARKDOWN.parse(plain_text(text))
    row = MARKDOWN.parse(f"| a | b |\n|---|---|\n| x | {plain_text(text, cell=True)} |\n")
    for inline in (
        next(t for t in paragraph if t.type == "inline"),
        [t for t in row if t.type == "inline"][3],
    ):
        tokens = inline.children or []
        assert {token.type for token in tokens} <= {"text"}
        assert "".join(token.content for token in tokens) == text


def _generated_section(page: GeneratedPage) -> str:
    text = (ROOT / page.path).read_text(encoding="utf-8")
    begin, end = BEGIN.format(section=page.section), END.format(section=page.section)
    return text.split(begin, 1)[1].split(end, 1)[0]


@pytest.mark.parametrize("page", GENERATED_PAGES, ids=lambda page: page.path)
def test_the_generated_sections_are_well_formed_markdown(page: GeneratedPage) -> None:
    assert_well_formed(_generated_section(page))


def assert_well_formed(section: str) -> None:
    """No HTML, and every table row has its header's cells."""
    tokens = MARKDOWN.parse(section)
    assert not [token for token in tokens if token.type.startswith("html")]
    inline_html = [
        child.content
        for token in tokens
        for child in token.children or []
        if child.type.startswith("html")
    ]
    assert inline_html == []
    # GFM splits a row at every "|" not escaped by a backslash, in code too: each row must
    # have its header's cells (markdown-it pads and cuts rows, so count in the source)
    header = 0
    for line in section.splitlines():
        if not line.startswith("|"):
            header = 0
            continue
        cells = len(UNESCAPED_PIPE.split(line.strip().strip("|")))
        header = header or cells
        assert cells == header, line


def _copy_of_the_docs(tmp_path: Path) -> Path:
    for page in GENERATED_PAGES:
        copy = tmp_path / page.path
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text((ROOT / page.path).read_text(encoding="utf-8"), encoding="utf-8")
    return tmp_path


def test_check_names_a_stale_page_and_writes_nothing_then_regenerating_fixes_it(
    tmp_path: Path,
) -> None:
    root = _copy_of_the_docs(tmp_path)
    page = GENERATED_PAGES[0]
    path = root / page.path
    begin, end = BEGIN.format(section=page.section), END.format(section=page.section)
    text = path.read_text(encoding="utf-8")
    stale = text[: text.index(begin) + len(begin)] + "\nold table\n" + text[text.index(end) :]
    path.write_text(stale, encoding="utf-8")

    checked = CliRunner().invoke(docs_command, ["--check", "--root", str(root)])
    assert checked.exit_code == 1
    assert f"{page.path} is stale: run `{REGENERATE}`" in checked.output
    assert path.read_text(encoding="utf-8") == stale

    written = CliRunner().invoke(docs_command, ["--root", str(root)])
    assert written.exit_code == 0, written.output
    assert path.read_text(encoding="utf-8") == text
    assert CliRunner().invoke(docs_command, ["--check", "--root", str(root)]).exit_code == 0


def test_a_page_without_its_markers_is_one_line_exit_2(tmp_path: Path) -> None:
    root = _copy_of_the_docs(tmp_path)
    (root / GENERATED_PAGES[0].path).write_text("# no markers\n", encoding="utf-8")
    result = CliRunner().invoke(docs_command, ["--root", str(root)])
    assert result.exit_code == 2
    assert "no generated section" in result.output


# --- the layers section of docs/architecture.md (tests/layers_doc.py) -------------------------


def _layers_section() -> str:
    text = (ROOT / layers_doc.PAGE).read_text(encoding="utf-8")
    return text.split(layers_doc.BEGIN, 1)[1].split(layers_doc.END, 1)[0]


def test_the_layers_section_is_up_to_date() -> None:
    text = (ROOT / layers_doc.PAGE).read_text(encoding="utf-8")
    assert text == layers_doc.updated_text(text, layers_doc.render_layers()), (
        f"{layers_doc.PAGE} is stale: run `.venv/bin/{layers_doc.REGENERATE}` and commit it"
    )


def test_the_layers_section_is_well_formed_markdown() -> None:
    assert_well_formed(_layers_section())


def test_the_layers_section_shows_every_folder_and_every_module_of_another_layer() -> None:
    section = _layers_section()
    for folder in FOLDERS:
        assert f"| `{layers_doc.folder_path(folder)}` |" in section, folder
    for module in MODULES:
        path = layers_doc.module_path(module)
        assert f"`{path}`" in section and (ROOT / "reviewbot" / path).is_file(), module


def test_the_layers_check_names_a_stale_page_and_writes_nothing_then_regenerating_fixes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / layers_doc.PAGE
    path.parent.mkdir(parents=True)
    text = (ROOT / layers_doc.PAGE).read_text(encoding="utf-8")
    stale = layers_doc.updated_text(text, "old table")
    path.write_text(stale, encoding="utf-8")

    assert layers_doc.main(["--check", "--root", str(tmp_path)]) == 1
    assert f"is stale: run `{layers_doc.REGENERATE}`" in capsys.readouterr().out
    assert path.read_text(encoding="utf-8") == stale

    assert layers_doc.main(["--root", str(tmp_path)]) == 0
    assert path.read_text(encoding="utf-8") == text
    assert layers_doc.main(["--check", "--root", str(tmp_path)]) == 0


def test_a_page_without_the_layers_markers_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / layers_doc.PAGE).write_text("# no markers\n", encoding="utf-8")
    assert layers_doc.main(["--root", str(tmp_path)]) == 2
    assert "no generated section" in capsys.readouterr().err
