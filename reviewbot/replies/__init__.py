"""Answers in the bot's threads: a human replies to one of reviewbot's comments, the worker
answers once.

Modules, along one answer:

- ``answer``: the reply job from the queue to the note in the thread (read the thread as GitLab
  has it, check the author's role for a command that changes state, ask the model, post once);
- ``intent``: whether a plain reply asks the bot to learn something (pure);
- ``teach``: ``/reviewbot learn`` and proposed learnings made from a thread;
- ``guidance``: which of the team's rules and learnings an answer about one finding is told
  (pure).

Owns: the package's layout, nothing else. Must not: import an entry point (the worker calls
``answer.run_reply``).
"""
