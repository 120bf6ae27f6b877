"""``python -m reviewbot.commands``: the console script ``reviewbot``."""

from reviewbot.commands import main

main()
