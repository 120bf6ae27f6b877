"""The features' own groups of settings, as one base of :class:`reviewbot.config.Settings`.

Each feature declares its settings in a base class in its own module (groups, effort, checks,
analyzers, the MR overview, the idle second look, the GitLab request budget);
:class:`FeatureSettings` lists them once, so ``config.py`` names one base and keeps to its line
budget. The fields' order is the bases' order (a dataclass collects fields along the method
resolution order).

Owns: the list of the features' settings classes. Must not: declare a setting itself, read
anything, or be read as a global.
"""

from __future__ import annotations

from dataclasses import dataclass

from reviewbot.analyzer_settings import AnalyzerSettings
from reviewbot.check_settings import CheckSettings
from reviewbot.effort_settings import EffortSettings
from reviewbot.gitlab_budget_settings import GitLabBudgetSettings
from reviewbot.group_config import GroupConfig
from reviewbot.idle_settings import IdleReviewSettings
from reviewbot.mr_overview_settings import OverviewSettings

__all__ = ["FeatureSettings"]


@dataclass(frozen=True)
class FeatureSettings(
    GroupConfig,
    EffortSettings,
    CheckSettings,
    AnalyzerSettings,
    OverviewSettings,
    IdleReviewSettings,
    GitLabBudgetSettings,
):
    """Every feature's settings class: a base of ``Settings``, with no field of its own."""
