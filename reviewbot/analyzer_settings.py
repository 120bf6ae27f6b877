"""The settings of the deterministic analyzers and the pipeline's reports (docs/analyzers.md).

:class:`AnalyzerSettings` is a base of :class:`reviewbot.config.Settings`: its fields are
settings like any other (file, ``REVIEWBOT_*``, the generated reference), declared here to keep
``config.py`` to one screenful per concern.

Owns: the analyzers' settings, their defaults, bounds and help, and the check of a
``JOB:PATH`` pair. Must not: read anything, run a tool, or be read as a global.
"""

from __future__ import annotations

from dataclasses import dataclass

from reviewbot.setting_fields import Bounds, setting, shown

__all__ = [
    "ANALYZER_CHOICES",
    "DEFAULT_ANALYZER_DIGEST_TOKENS",
    "DEFAULT_ANALYZER_TIMEOUT_S",
    "AnalyzerSettings",
    "ReportJob",
    "parse_report_job",
]

RUFF = "ruff"
SECRETS = "secrets"
SEMGREP = "semgrep"
ANALYZER_CHOICES = (RUFF, SECRETS, SEMGREP)
DEFAULT_ANALYZER_TIMEOUT_S = 60
MAX_ANALYZER_TIMEOUT_S = 3600
JOB_PATH_SEPARATOR = ":"
DEFAULT_ANALYZER_DIGEST_TOKENS = 400  # the digest's share of a chunk's budget, at most
MAX_ANALYZER_DIGEST_TOKENS = 16384


@dataclass(frozen=True)
class ReportJob:
    """A report the webhook worker reads from the latest pipeline of the MR's head: the file
    ``path`` in the artifacts of the job named ``job``."""

    job: str
    path: str


def parse_report_job(text: str) -> ReportJob | str:
    """``"semgrep:gl-sast.sarif"`` -> ReportJob; a sentence saying what is wrong otherwise."""
    job, separator, path = text.partition(JOB_PATH_SEPARATOR)
    if not separator or not job.strip() or not path.strip():
        return f"analyzer_report_jobs takes JOB:PATH pairs, got {shown(text)}"
    return ReportJob(job.strip(), path.strip().lstrip("/"))


@dataclass(frozen=True)
class AnalyzerSettings:
    """The analyzers' settings: a base of ``Settings``."""

    analyzers: tuple[str, ...] = setting(
        ANALYZER_CHOICES,
        choices=ANALYZER_CHOICES,
        help="The built-in analyzers run on the MR's changed files where the checkout is at "
        "hand (`reviewbot ci`, the host's repository cache): `ruff` (Python, when installed), "
        "`secrets` (a built-in token scanner) and `semgrep` (when installed and "
        "`semgrep_config` is set). One that is not installed, fails or times out is named in "
        "the summary ([analyzers](analyzers.md)). `[]`: none.",
    )
    analyzer_timeout_s: int = setting(
        DEFAULT_ANALYZER_TIMEOUT_S,
        bounds=Bounds(1, MAX_ANALYZER_TIMEOUT_S, unit="s"),
        help="Each built-in analyzer is stopped (its whole process group) after this many "
        "seconds, and named as timed out.",
    )
    analyzer_reports: tuple[str, ...] = setting(
        (),
        help="Reports the pipeline already produced, read by `reviewbot ci` (the job's `needs:` "
        "artifacts, paths relative to the checkout): SARIF 2.1.0, GitLab SAST / secret "
        'detection JSON, Code Quality JSON, e.g. `["gl-sast-report.json"]`; '
        "`--analyzer-report` adds to them ([analyzers](analyzers.md)).",
    )
    analyzer_report_jobs: tuple[str, ...] = setting(
        (),
        help="Reports the webhook worker reads from the latest pipeline of the MR's head "
        "through GitLab's job artifacts API, as `JOB:PATH` pairs, e.g. "
        '`["semgrep:gl-sast-report.json", "lint:gl-code-quality-report.json"]`.',
    )
    analyzer_digest_tokens: int = setting(
        DEFAULT_ANALYZER_DIGEST_TOKENS,
        bounds=Bounds(0, MAX_ANALYZER_DIGEST_TOKENS, unit="tokens"),
        help="Each chunk's prompt tells the model what the analyzers already reported on its "
        "files (tool, rule, path:line, one line; secrets masked), in at most this many tokens, "
        "kept in the chunk's budget; a chunk whose files have none gets no digest. `0`: off "
        "([analyzers](analyzers.md)).",
    )
    eval_analyzer_reports: bool = setting(
        True,
        help="`reviewbot eval` merges the analyzer reports an item carries (its `analyzers/` "
        "folder) with the model's findings and tells the model of them, as a review with the "
        "pipeline's reports does; `false`: the model alone (`eval --compare` of analyzers off "
        "against on, [eval](eval.md)).",
    )
    semgrep_config: str | None = setting(
        None,
        default_text="not set: semgrep does not run",
        help="The team's Semgrep rules (`semgrep --config`: a file or folder of the checkout, "
        "or a registry name your Semgrep can reach). Semgrep runs only when this is set and "
        "`semgrep` is installed.",
    )

    def analyzer_settings_problem(self) -> str | None:
        """What is wrong with these settings, in a sentence (None: nothing)."""
        unknown = [name for name in self.analyzers if name not in ANALYZER_CHOICES]
        if unknown:
            return f"analyzers takes {', '.join(ANALYZER_CHOICES)}, got {shown(unknown)}"
        for pair in self.analyzer_report_jobs:
            parsed = parse_report_job(pair)
            if isinstance(parsed, str):
                return parsed
        return None

    def report_jobs(self) -> tuple[ReportJob, ...]:
        """The ``analyzer_report_jobs`` pairs (checked when the settings were built)."""
        return tuple(
            p for p in map(parse_report_job, self.analyzer_report_jobs) if isinstance(p, ReportJob)
        )
