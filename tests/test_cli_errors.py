"""Bad settings and unreachable services give one line on stderr and an exit code, never a trace."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from reviewbot.cli import main


@pytest.mark.parametrize(
    ("args", "env", "code", "message"),
    [
        (["reviews", "list", "--database-url", "notaurl"], {}, 2, "bad database URL"),
        (
            ["reviews", "list", "--database-url", "postgresql://u:hunter2@127.0.0.1:1/x"],
            {},
            1,
            "cannot open postgresql://u:***@127.0.0.1:1/x: connection failed",
        ),
        (["plan", "--diff", "-"], {"REVIEWBOT_CONCURRENCY": "lots"}, 2, "REVIEWBOT_CONCURRENCY"),
        (["run", "1", "--project", "g/a"], {"REVIEWBOT_GITLAB_URL": ""}, 2, "REVIEWBOT_GITLAB_"),
        (["db", "upgrade", "--database-url", "mysql+nodriver://x/y"], {}, 2, "bad database URL"),
    ],
)
def test_one_line_errors(args: list[str], env: dict[str, str], code: int, message: str) -> None:
    result = CliRunner().invoke(main, args, env={"REVIEWBOT_CONFIG": "", **env}, input="")
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output and "hunter2" not in result.stderr
