"""The built-in analyzers, run on the MR's changed files of a checkout: Ruff (Python), the
secrets scanner (``reviewbot.analyzers.secrets``) and Semgrep with the team's rules.

Each runs only when named in ``analyzers`` (Semgrep also only with ``semgrep_config``), only
when installed (on ``PATH``, or next to the running interpreter: a virtual environment's
``bin``), in its own process group stopped at ``analyzer_timeout_s``. One that is not
installed, fails, times out or answers what cannot be read is an :class:`AnalyzerProblem`
("analyzer ruff did not run: timed out after 60 s"); one that ran is named in ``used`` with
its count, 0 included.

Ruff (``ruff check --output-format json --no-cache``; the checkout's own Ruff settings apply):
``E9``, ``F63``, ``F7``, ``F82``, ``PLE`` and ``B`` rules (syntax errors, undefined names,
pyflakes' and pylint's error families, bugbear) are bugs of major severity; ``S`` (bandit) is
security, major; the rest style, minor. Its snippet is the flagged line of the checkout.

Owns: the tools' command lines and the reading of their output. Must not: choose the files
(``reviewbot.analyzers.collect`` does) or read a report of the pipeline.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from reviewbot.analyzer_findings import AnalyzerFinding, AnalyzerProblem, AnalyzerRun
from reviewbot.analyzer_settings import RUFF, SECRETS, SEMGREP, AnalyzerSettings
from reviewbot.analyzers.processes import ToolFailure, run_tool, stderr_summary
from reviewbot.analyzers.report_json import ReportContext, counted, line_number, repository_path
from reviewbot.analyzers.sarif import read_sarif_data
from reviewbot.analyzers.secrets import SECRETS_TOOL, scan_lines
from reviewbot.findings import Category, Severity

__all__ = ["find_tool", "run_builtin_analyzers", "run_ruff", "run_secrets", "run_semgrep"]

PYTHON_SUFFIXES = (".py", ".pyi")
RUFF_OK_EXIT_CODES = (0, 1)  # 1: findings
SEMGREP_OK_EXIT_CODES = (0, 1)
RUFF_BUG_PREFIXES = ("E9", "F63", "F7", "F82", "PLE", "B")
RUFF_SECURITY_PREFIX = "S"
RUFF_SYNTAX_RULE = "syntax-error"  # Ruff reports a syntax error with no code
MAX_SCANNED_FILE_BYTES = 2 * 1024 * 1024  # a larger file is not scanned for secrets
MAX_SNIPPET_CHARS = 200


def _did_not_run(tool: str, reason: str) -> AnalyzerRun:
    return AnalyzerRun(problems=(AnalyzerProblem(f"analyzer {tool}", f"did not run: {reason}"),))


def find_tool(name: str) -> str | None:
    """The executable ``name`` on PATH, else next to the running interpreter."""
    found = shutil.which(name)
    if found:
        return found
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else None


def run_builtin_analyzers(
    checkout: Path, changed: Mapping[str, Sequence[int]], settings: AnalyzerSettings
) -> AnalyzerRun:
    """The analyzers ``settings.analyzers`` names, on the ``changed`` files of ``checkout``."""
    run = AnalyzerRun()
    if RUFF in settings.analyzers:
        run = run.merged(run_ruff(checkout, sorted(changed), settings.analyzer_timeout_s))
    if SECRETS in settings.analyzers:
        run = run.merged(run_secrets(checkout, changed))
    if SEMGREP in settings.analyzers and settings.semgrep_config:
        run = run.merged(
            run_semgrep(
                checkout, sorted(changed), settings.semgrep_config, settings.analyzer_timeout_s
            )
        )
    return run


# --- ruff ------------------------------------------------------------------------------------


def run_ruff(
    checkout: Path, paths: Sequence[str], timeout_s: float, executable: str | None = None
) -> AnalyzerRun:
    """Ruff on the Python files among ``paths``."""
    files = [p for p in paths if p.endswith(PYTHON_SUFFIXES) and (checkout / p).is_file()]
    if not files:
        return AnalyzerRun(used=("analyzer ruff (no Python file changed)",))
    ruff = executable or find_tool(RUFF)
    if ruff is None:
        return _did_not_run(RUFF, "not installed (no ruff on PATH or beside the interpreter)")
    argv = [ruff, "check", "--output-format", "json", "--no-cache", "--", *files]
    try:
        output = run_tool(argv, checkout, timeout_s)
    except ToolFailure as failure:
        return _did_not_run(RUFF, failure.reason)
    if output.returncode not in RUFF_OK_EXIT_CODES:
        return _did_not_run(RUFF, f"exit code {output.returncode}: {stderr_summary(output.stderr)}")
    try:
        items = json.loads(output.stdout or b"[]")
    except json.JSONDecodeError as error:
        return _did_not_run(RUFF, f"its output is not JSON ({error.msg})")
    if not isinstance(items, list):
        return _did_not_run(RUFF, "its output is not a list of diagnostics")
    context = ReportContext(roots=(str(checkout.resolve()), str(checkout)))
    findings = [f for item in items if (f := _ruff_finding(item, checkout, context))]
    return AnalyzerRun(
        findings=tuple(findings),
        used=(f"analyzer ruff ({counted(len(findings))} in {counted(len(files), 'file')})",),
    )


def _ruff_finding(item: Any, checkout: Path, context: ReportContext) -> AnalyzerFinding | None:
    if not isinstance(item, Mapping):
        return None
    location = item.get("location") if isinstance(item.get("location"), Mapping) else {}
    end_location = item.get("end_location") if isinstance(item.get("end_location"), Mapping) else {}
    line = line_number(location.get("row"))
    filename = item.get("filename")
    if line is None or not isinstance(filename, str):
        return None
    code = str(item.get("code") or RUFF_SYNTAX_RULE)
    severity, category = _ruff_judged(code)
    path = repository_path(filename, context)
    end = line_number(end_location.get("row"))
    return AnalyzerFinding(
        tool=RUFF,
        rule=code,
        path=path,
        line=line,
        end_line=end if end is not None and end > line else None,
        severity=severity,
        category=category,
        message=str(item.get("message", "")),
        snippet=_line_text(checkout / path, line),
        origin="built-in ruff",
    )


def _ruff_judged(code: str) -> tuple[Severity, Category]:
    if code == RUFF_SYNTAX_RULE or code.startswith(RUFF_BUG_PREFIXES):
        return Severity.MAJOR, Category.BUG
    if code.startswith(RUFF_SECURITY_PREFIX) and code[1:].isdigit():
        return Severity.MAJOR, Category.SECURITY
    return Severity.MINOR, Category.STYLE


def _line_text(path: Path, line: int) -> str:
    lines = _read_lines(path)
    return lines[line - 1].strip()[:MAX_SNIPPET_CHARS] if lines and line <= len(lines) else ""


def _read_lines(path: Path) -> list[str] | None:
    """The file's lines, or None when it is missing, too large or binary."""
    try:
        if path.stat().st_size > MAX_SCANNED_FILE_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data:
        return None
    return data.decode("utf-8", "replace").splitlines()


# --- the secrets scanner ---------------------------------------------------------------------


def run_secrets(checkout: Path, changed: Mapping[str, Sequence[int]]) -> AnalyzerRun:
    """The secrets scanner on the ``changed`` lines of each file (every line where none are
    given); a file too large or binary is named as not scanned."""
    findings: list[AnalyzerFinding] = []
    skipped = []
    for path, lines in sorted(changed.items()):
        text = _read_lines(checkout / path)
        if text is None:
            if (checkout / path).is_file():
                skipped.append(path)
            continue  # deleted by the MR: nothing of it to scan
        wanted = set(lines) if lines else set(range(1, len(text) + 1))
        numbered = [(n, t) for n, t in enumerate(text, start=1) if n in wanted]
        findings += scan_lines(path, numbered, origin="built-in secrets scanner")
    problems = tuple(
        AnalyzerProblem(
            f"analyzer {SECRETS}",
            f"did not scan {path}: binary or larger than "
            f"{MAX_SCANNED_FILE_BYTES // (1024 * 1024)} MiB",
        )
        for path in skipped
    )
    scanned = counted(len(changed), "file")
    used = f"analyzer {SECRETS} ({SECRETS_TOOL}, {counted(len(findings))} in {scanned})"
    return AnalyzerRun(findings=tuple(findings), used=(used,), problems=problems)


# --- semgrep ---------------------------------------------------------------------------------


def run_semgrep(
    checkout: Path,
    paths: Sequence[str],
    config: str,
    timeout_s: float,
    executable: str | None = None,
) -> AnalyzerRun:
    """Semgrep with the team's ``config`` on the files among ``paths``, read as SARIF."""
    files = [p for p in paths if (checkout / p).is_file()]
    if not files:
        return AnalyzerRun(used=("analyzer semgrep (no file to scan)",))
    semgrep = executable or find_tool(SEMGREP)
    if semgrep is None:
        return _did_not_run(SEMGREP, "not installed (no semgrep on PATH or beside the interpreter)")
    argv = [
        semgrep,
        "scan",
        "--config",
        config,
        "--sarif",
        "--quiet",
        "--metrics=off",
        "--",
        *files,
    ]
    try:
        output = run_tool(argv, checkout, timeout_s)
    except ToolFailure as failure:
        return _did_not_run(SEMGREP, failure.reason)
    if output.returncode not in SEMGREP_OK_EXIT_CODES:
        return _did_not_run(
            SEMGREP, f"exit code {output.returncode}: {stderr_summary(output.stderr)}"
        )
    try:
        log = json.loads(output.stdout)
    except json.JSONDecodeError as error:
        return _did_not_run(SEMGREP, f"its output is not JSON ({error.msg})")
    if not isinstance(log, Mapping):
        return _did_not_run(SEMGREP, "its output is not a SARIF log")
    context = ReportContext(roots=(str(checkout.resolve()), str(checkout)))
    run = read_sarif_data("semgrep output", log, context)
    if run.problems:
        return _did_not_run(SEMGREP, "; ".join(p.reason for p in run.problems))
    findings = tuple(replace(f, origin="built-in semgrep") for f in run.findings)
    return AnalyzerRun(
        findings=findings, used=(f"analyzer semgrep ({counted(len(findings))}, rules {config})",)
    )
