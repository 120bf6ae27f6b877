"""The weekly accuracy report: what the bot did and whether its comments were worth reading.

Modules, from the store's figures to the files a team lead opens:

- ``document``: the report as data, built from the store's queries (``reviewbot report``);
- ``days``, ``trend``, ``learnings``: its per-day figures, the weeks' trend and the learnings'
  part;
- ``text`` and ``html`` (with ``templates/report.html.j2`` and ``plot``'s charts): the two
  renderings of one document.

Owns: the package's layout, nothing else. Must not: hold a figure or a query (its modules
and the store do).
"""
