"""The team's learnings: what a team taught the bot ("don't flag X here"), proposed from its
turned-down findings or made in a thread, and applied to every later review.

Modules:

- ``learning``: a learning as data, how it applies to a finding and how it reads in a prompt
  (pure);
- ``teaching``: adding, listing and applying the learnings in force for an MR (through the
  store's learning book), and what they withheld;
- ``proposals``: the notes that propose a learning on GitLab, and reading their evidence.

Owns: the package's layout, nothing else. Must not: hold a learning or a query here.
"""
