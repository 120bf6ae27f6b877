"""``python -m reviewbot.commands``: the console script ``reviewbot``.

Owns: the ``python -m`` way in. Must not: do anything but call `reviewbot.commands.main`.
"""

from reviewbot.commands import main

main()
