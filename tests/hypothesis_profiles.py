"""How many examples the property tests (Hypothesis) try: a profile for each kind of run.

- ``fast``, the default: every run of the suite, a contributor's and CI's; a quarter of the
  examples each test is written for (:func:`examples`), never fewer than
  :data:`MIN_EXAMPLES`.
- ``thorough``: four times the examples each test is written for, for a nightly-style run
  (``REVIEWBOT_HYPOTHESIS_PROFILE=thorough``, or ``HYPOTHESIS_PROFILE=thorough``).
- ``default``, Hypothesis' own: exactly the examples each test is written for.

A test says how many examples it is written for, at Hypothesis' default scale of 100, through
:func:`examples` (``@settings(max_examples=examples(300))``); a test that names no number gets
the profile's ``max_examples``. Each profile inherits what Hypothesis loaded before it (its
``ci`` profile on a CI machine: derandomized, no example database).

:func:`load_profile` runs when ``tests/conftest.py`` is imported, before any test module, so
that :func:`examples` reads the profile of this run; pytest's ``--hypothesis-profile`` option
also works.
"""

from __future__ import annotations

import os

from hypothesis import settings

PROFILE_ENV = "REVIEWBOT_HYPOTHESIS_PROFILE"
HYPOTHESIS_PROFILE_ENV = "HYPOTHESIS_PROFILE"
FAST = "fast"
THOROUGH = "thorough"
# Hypothesis' own default max_examples: the scale the tests' counts are written at.
WRITTEN_SCALE = 100
FAST_EXAMPLES = 25  # a quarter of the written counts
THOROUGH_EXAMPLES = 400  # four times the written counts
MIN_EXAMPLES = 10  # under fewer, a property test hardly tries the edges of its strategies

settings.register_profile(FAST, parent=settings.default, max_examples=FAST_EXAMPLES)
settings.register_profile(THOROUGH, parent=settings.default, max_examples=THOROUGH_EXAMPLES)


def profile_name() -> str:
    """The profile this run asked for (``REVIEWBOT_HYPOTHESIS_PROFILE``, then
    ``HYPOTHESIS_PROFILE``), else :data:`FAST`."""
    return os.environ.get(PROFILE_ENV) or os.environ.get(HYPOTHESIS_PROFILE_ENV) or FAST


def load_profile() -> None:
    """Load the profile this run asked for."""
    settings.load_profile(profile_name())


def examples(written: int) -> int:
    """How many examples a test written for ``written`` tries under the loaded profile:
    ``written`` scaled by the profile's ``max_examples`` over :data:`WRITTEN_SCALE`, and never
    fewer than :data:`MIN_EXAMPLES` (nor than ``written``, when that is fewer)."""
    current = settings.default
    assert current is not None, "no Hypothesis profile is loaded"
    scaled = written * current.max_examples // WRITTEN_SCALE
    return max(scaled, min(written, MIN_EXAMPLES))
