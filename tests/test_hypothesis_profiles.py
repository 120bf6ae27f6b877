"""The Hypothesis profiles (tests/hypothesis_profiles.py): a run asks for one by name, and each
scales the examples a property test is written for."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from hypothesis import settings

from tests.hypothesis_profiles import (
    FAST,
    HYPOTHESIS_PROFILE_ENV,
    MIN_EXAMPLES,
    PROFILE_ENV,
    THOROUGH,
    examples,
    profile_name,
)

WRITTEN = 300
HYPOTHESIS_DEFAULT = "default"


@pytest.fixture
def under() -> Iterator[Callable[[str], None]]:
    """Load a profile for the test; the run's profile comes back after it."""
    before = settings.get_current_profile_name()
    yield settings.load_profile
    settings.load_profile(before)


@pytest.mark.parametrize(
    ("profile", "expected"),
    [(FAST, WRITTEN // 4), (HYPOTHESIS_DEFAULT, WRITTEN), (THOROUGH, WRITTEN * 4)],
)
def test_each_profile_scales_the_written_count(
    under: Callable[[str], None], profile: str, expected: int
) -> None:
    under(profile)
    assert examples(WRITTEN) == expected


def test_the_fast_profile_keeps_a_floor_and_never_adds(under: Callable[[str], None]) -> None:
    under(FAST)
    assert examples(MIN_EXAMPLES * 2) == MIN_EXAMPLES
    assert examples(MIN_EXAMPLES // 2) == MIN_EXAMPLES // 2


def test_a_run_asks_for_its_profile_by_either_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROFILE_ENV, raising=False)
    monkeypatch.delenv(HYPOTHESIS_PROFILE_ENV, raising=False)
    assert profile_name() == FAST
    monkeypatch.setenv(HYPOTHESIS_PROFILE_ENV, HYPOTHESIS_DEFAULT)
    assert profile_name() == HYPOTHESIS_DEFAULT
    monkeypatch.setenv(PROFILE_ENV, THOROUGH)
    assert profile_name() == THOROUGH
