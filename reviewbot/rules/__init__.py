"""The team's review rules: what the model is told to look for, from the instance and from the
repository's own files at the target branch.

Modules:

- ``ruleset``: the rules formats (``.reviewbot.toml``'s ``[[rules]]``, ``.reviewbot/rules.yaml``,
  GitLab Duo's file, context documents such as AGENTS.md) parsed and merged into one
  :class:`~reviewbot.rules.ruleset.RuleSet` (pure);
- ``sources``: which files a review reads its rules from, and reading them through the caller's
  reader;
- ``applied``: which rules each chunk is given within its budget, and what was left out (pure);
- ``pathglob``: the one glob matcher of rules and learnings, linear in the path's length (pure).

Owns: the package's layout, nothing else. Must not: hold a rule or read a file here.
"""
