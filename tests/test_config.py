"""Settings: precedence (defaults < TOML < environment < flags), validation, secrets, repo file."""

from __future__ import annotations

from pathlib import Path

import pytest

from reviewbot.config import ConfigError, Settings, apply_repo_overrides, load_settings


def test_precedence_toml_then_env_then_overrides(tmp_path: Path) -> None:
    toml = tmp_path / "reviewbot.toml"
    toml.write_text(
        '[reviewbot]\nllm_base_url = "http://gpu:8000/v1"\nconcurrency = 4\n'
        'exclude = ["docs/*"]\nmin_severity = "major"\n'
    )
    env = {"REVIEWBOT_CONCURRENCY": "6", "REVIEWBOT_GITLAB_TOKEN": "glpat-secret"}
    settings = load_settings(env=env, config_file=toml, overrides={"min_severity": "info"})
    assert settings.llm_base_url == "http://gpu:8000/v1"
    assert settings.concurrency == 6  # env beats the file
    assert settings.min_severity == "info"  # flags beat everything
    assert settings.exclude == ("docs/*",)
    assert settings.gitlab_token == "glpat-secret"


def test_defaults_need_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    settings = load_settings(env={})
    assert settings.llm_base_url == "http://127.0.0.1:8000/v1"
    assert (
        settings.database_url.startswith("sqlite:///") and "reviewbot.db" in settings.database_url
    )
    assert settings.concurrency == 8 and settings.max_output_tokens == 4096


def test_secrets_never_in_repr_or_describe() -> None:
    settings = Settings(gitlab_token="glpat-very-secret", llm_api_key="sk-also-secret")
    assert "very-secret" not in repr(settings) and "also-secret" not in repr(settings)
    described = settings.describe()
    assert described["gitlab_token"] == "***" and described["llm_api_key"] == "***"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"REVIEWBOT_CONCURRENCY": "many"}, "REVIEWBOT_CONCURRENCY: cannot use 'many'"),
        ({"REVIEWBOT_MIN_SEVERITY": "urgent"}, "min_severity: 'urgent' is not one of"),
        ({"REVIEWBOT_CONCURRENCY": "0"}, "concurrency must be at least 1"),
        ({"REVIEWBOT_ENABLE_THINKING": "maybe"}, "REVIEWBOT_ENABLE_THINKING"),
        ({"REVIEWBOT_PUBLISH_MODE": "email"}, "publish_mode"),
    ],
)
def test_bad_values_are_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(env=env)


def test_bad_toml_and_unknown_keys(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("concurrency = = 3\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(env={}, config_file=broken)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("colour = 'blue'\n")
    with pytest.raises(ConfigError, match="unknown setting 'colour'"):
        load_settings(env={}, config_file=unknown)
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(env={}, config_file=tmp_path / "missing.toml")


def test_thinking_tri_state() -> None:
    assert load_settings(env={"REVIEWBOT_ENABLE_THINKING": "false"}).enable_thinking is False
    assert load_settings(env={"REVIEWBOT_ENABLE_THINKING": "auto"}).enable_thinking is None


def test_repository_file_may_only_set_review_policy() -> None:
    base = Settings(exclude=("vendor/*",))
    applied = apply_repo_overrides(base, 'exclude = ["gen/*"]\nlanguage = "German"\n')
    assert applied.exclude == ("vendor/*", "gen/*") and applied.language == "German"
    with pytest.raises(ConfigError, match="llm_base_url cannot be set from the repository"):
        apply_repo_overrides(base, 'llm_base_url = "http://evil/v1"\n')
    with pytest.raises(ConfigError, match="not valid TOML"):
        apply_repo_overrides(base, "[[[")


def test_every_setting_is_documented_in_the_readme() -> None:
    from dataclasses import fields

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| `")]
    documented = {cell.strip("` ") for row in rows for cell in row.split("|")[1].split(",")}
    missing = [f.name.upper() for f in fields(Settings) if f.name.upper() not in documented]
    assert missing == [], f"settings missing from the README's configuration table: {missing}"
