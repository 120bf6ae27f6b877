"""Deterministic analyzers' findings, as data: read from the reports a pipeline already
produced, and produced by a small built-in set (docs/analyzers.md).

The entry points (``reviewbot.analyzers.collect``), with stable signatures:

* ``collect_in_checkout(checkout, changed, head_sha, settings, report_paths=(), *,
  also_commits=()) -> AnalyzerRun``: ``reviewbot ci`` and the host's repository cache. Reads the
  reports at ``report_paths`` and ``settings.analyzer_reports`` and runs the built-in analyzers
  ``settings.analyzers`` names on the ``changed`` files (``{path: [changed lines]}``, an empty
  list for the whole file), keeping findings on the changed lines.
* ``CheckoutAnalyzers(checkout, settings, report_paths, also_commits)(head_sha, files)``: the
  same, called by the review with the MR's head and its ``FileDiff`` s (``RunOptions.analyzers``).
* ``collect_from_pipeline(gitlab, project, head_sha, settings, changed=None) -> AnalyzerRun``:
  the webhook worker. Reads ``settings.analyzer_report_jobs`` (``JOB:PATH``) from the jobs of
  the latest pipeline of ``head_sha`` through GitLab's job artifacts API
  (``reviewbot.gitlab.PipelineArtifactReader``).

Neither raises for a report or a tool: a report that is missing, malformed, too large or for
another commit, and an analyzer that is not installed, fails or times out, is an
:class:`~reviewbot.analyzer_findings.AnalyzerProblem` of the run; a report or an analyzer that
found nothing is named in ``used``.

Modules: ``report_json`` (the parse, limits, paths, commit check), ``sarif``,
``gitlab_security``, ``code_quality`` (one reader per format), ``reports`` (the reader by
shape), ``changes`` (the diff's added lines), ``secrets`` (the built-in scanner's
patterns): pure. ``processes`` (a tool's process), ``builtin`` (ruff, secrets on files,
semgrep), ``collect`` (the entry points): adapters.

Owns: nothing but this map. Must not: import its modules here (the pure readers stay
importable without the adapters).
"""
