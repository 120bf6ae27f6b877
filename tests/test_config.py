"""Settings: precedence (defaults < TOML < environment < flags), validation, secrets, repo file."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from reviewbot.config import (
    MAX_CONFIG_FILE_BYTES,
    ConfigError,
    Settings,
    apply_repo_overrides,
    load_settings,
    setting_bounds,
    setting_docs,
)


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


def test_a_settings_file_nested_too_deep_is_refused_by_name(tmp_path: Path) -> None:
    """tomllib recurses: a 50,000-deep array (100 KB, under the size cap) was a RecursionError
    (a traceback from every command given it with --config)."""
    deep = tmp_path / "deep.toml"
    deep.write_text("exclude = " + "[" * 50_000 + "]" * 50_000 + "\n")
    with pytest.raises(ConfigError, match=f"config file {deep} .*nested too deep"):
        load_settings(env={}, config_file=deep)


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


def test_every_setting_has_help_and_says_what_an_unset_default_means() -> None:
    """The configuration reference is generated from these (docs/configuration.md)."""
    for doc in setting_docs():
        assert doc.help.strip().endswith((".", ")")), f"{doc.name}: no help text"
        if doc.default is None:
            assert doc.default_text, f"{doc.name}: say what the default means (default_text)"


def test_the_declared_choices_are_exactly_what_settings_accept() -> None:
    for doc in setting_docs():
        if not doc.choices:
            continue
        for choice in doc.choices:
            value = (choice,) if "list" in doc.kind else choice
            Settings(**{doc.name: value})
        refused = ("no-such-choice",) if "list" in doc.kind else "no-such-choice"
        with pytest.raises(ConfigError, match=doc.name):
            Settings(**{doc.name: refused})


def test_the_secrets_are_the_fields_kept_out_of_repr() -> None:
    hidden = {f.name for f in dataclasses.fields(Settings) if not f.repr}
    assert hidden == {doc.name for doc in setting_docs() if doc.secret}
    assert hidden == {"gitlab_token", "llm_api_key", "webhook_secret"}


# ---- every numeric setting is finite and bounded where it is parsed (issue 17 item 3)

NUMERIC_SETTINGS = [
    f.name
    for f in dataclasses.fields(Settings)
    if any(kind in str(f.type) for kind in ("int", "float"))
]
HOSTILE_NUMBERS = ["1e400", "-1e400", "nan", "inf", "-inf", str(2**70), "-1", "0", "9" * 5000]


def test_every_numeric_setting_declares_its_bounds() -> None:
    missing = [name for name in NUMERIC_SETTINGS if setting_bounds(name) is None]
    assert missing == []


@pytest.mark.parametrize("name", NUMERIC_SETTINGS)
@pytest.mark.parametrize("raw", HOSTILE_NUMBERS)
def test_a_hostile_number_in_the_environment_is_refused_by_name(name: str, raw: str) -> None:
    bounds = setting_bounds(name)
    assert bounds is not None
    if raw in ("0", "-1") and float(raw) >= bounds.low and not bounds.above_low:
        return  # 0 is meaningful here (e.g. "no limit")
    with pytest.raises(ConfigError) as caught:
        load_settings(env={f"REVIEWBOT_{name.upper()}": raw})
    message = str(caught.value)
    assert name in message.lower() and len(message) < 200 and "\n" not in message


@pytest.mark.parametrize("name", NUMERIC_SETTINGS)
@pytest.mark.parametrize(
    "value", ["1e400", "-1e400", "nan", "inf", str(2**70), "-1", "3.5", "true", "[1]"]
)
def test_a_hostile_number_in_the_toml_file_is_refused_by_name(
    tmp_path: Path, name: str, value: str
) -> None:
    bounds = setting_bounds(name)
    assert bounds is not None
    if value == "-1" and bounds.low < 0:
        return
    if value == "3.5" and "float" in str(Settings.__dataclass_fields__[name].type):
        return  # 3.5 seconds is fine
    config = tmp_path / "reviewbot.toml"
    config.write_text(f"[reviewbot]\n{name} = {value}\n")
    with pytest.raises(ConfigError, match=name):
        load_settings(env={}, config_file=config)


def test_the_largest_allowed_values_are_accepted() -> None:
    env = {}
    for name in NUMERIC_SETTINGS:
        bounds = setting_bounds(name)
        assert bounds is not None
        env[f"REVIEWBOT_{name.upper()}"] = str(int(bounds.high))
    settings = load_settings(env=env)
    assert settings.concurrency == int(setting_bounds("concurrency").high)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("name", "url"),
    [
        ("gitlab_url", "http://[::1"),
        ("gitlab_url", "http://gitlab.example.com:99999"),
        ("gitlab_url", "gopher://gitlab.example.com"),
        ("llm_base_url", "https://[::1/v1"),
        ("llm_base_url", "http:///v1"),
        ("database_url", "postgresql://[::1"),
    ],
)
def test_a_url_that_does_not_parse_is_refused_by_name(name: str, url: str) -> None:
    with pytest.raises(ConfigError, match=name):
        load_settings(env={f"REVIEWBOT_{name.upper()}": url})


@pytest.mark.parametrize(
    ("path", "kind"),
    [("/dev/zero", "a device"), ("/dev/urandom", "a device"), ("/", "a directory")],
)
def test_a_config_path_that_is_not_a_regular_file_is_refused_before_reading(
    path: str, kind: str
) -> None:
    with pytest.raises(ConfigError, match=f"is not a regular file \\({kind}\\)"):
        load_settings(env={}, config_file=path)


def test_the_null_device_as_config_file_means_no_settings_file() -> None:
    assert load_settings(env={"REVIEWBOT_CONFIG": os.devnull}).concurrency == 8


def test_a_fifo_as_config_file_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"is not a regular file \(a FIFO\)"):
        load_settings(env={"REVIEWBOT_CONFIG": str(fifo)})


def test_a_config_file_over_the_size_cap_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("# padding\n" * (MAX_CONFIG_FILE_BYTES // 10 + 1))
    with pytest.raises(ConfigError, match="larger than 1,048,576 bytes"):
        load_settings(env={}, config_file=config)
    config.write_text("# padding\n" * (MAX_CONFIG_FILE_BYTES // 10 - 1) + "concurrency = 2\n")
    assert load_settings(env={}, config_file=config).concurrency == 2


def test_a_reviewbot_key_that_is_not_a_table_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("reviewbot = 3\n")
    with pytest.raises(ConfigError, match=r"reviewbot must be a table"):
        load_settings(env={}, config_file=config)
