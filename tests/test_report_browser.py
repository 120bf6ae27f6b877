"""report.html looked at in a real browser: headless Chromium renders it offline, the DOM holds
the three inline SVG charts and the screenshot is not blank.

Skipped when Chromium is not installed, unless REVIEWBOT_REQUIRE_BROWSER is set (.ci/run sets
it after installing Chromium, so CI never skips it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from PIL import Image, ImageStat

from reviewbot.report import build_report, write_report
from reviewbot.report_html import CHART_IDS
from reviewbot.store import MergeRequestKey, Store, upgrade
from reviewbot.window import Window

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
REQUIRE_ENV = "REVIEWBOT_REQUIRE_BROWSER"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
)
WINDOW_SIZE = "1200,2600"
BROWSER_TIMEOUT_S = 120
# A blank page has no variance; the charts and tables give far more than this.
MIN_LUMINANCE_STDDEV = 20.0
MIN_DARK_PIXELS = 10_000
DARK = 128
MONDAY = datetime(2026, 3, 9, tzinfo=UTC)


def _chromium() -> str | None:
    found = next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)
    if found is None and os.environ.get(REQUIRE_ENV):
        pytest.fail(f"{REQUIRE_ENV} is set but Chromium is not installed")
    return found


def _report_file(tmp_path: Path) -> Path:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    upgrade(url)
    now = [MONDAY]
    store = Store.from_url(url, clock=lambda: now[0])
    try:
        for day in range(5):
            now[0] = MONDAY + timedelta(days=day, hours=9)
            review = store.start_review(
                project="group/app",
                mr_iid=day + 1,
                head_sha="a" * 40,
                base_sha=None,
                start_sha=None,
                trigger="ci",
                model="qwen",
                prompt_version="v1",
                key=MergeRequestKey("https://gitlab.example.com", 7, day + 1),
            )
            store.record_llm_calls(
                review,
                [
                    {
                        "chunk_index": 0,
                        "mode": "tool_calls",
                        "outcome": "ok",
                        "ttft_ms": 200.0 + 150 * day,
                        "started_at": MONDAY + timedelta(days=day),
                    },
                ],
            )
            store.record_findings(
                review,
                [
                    {
                        "fingerprint": f"{day}{n}",
                        "path": "a.py",
                        "side": "new",
                        "line": n + 1,
                        "severity": ("critical", "major", "minor")[n % 3],
                        "category": ("bug", "security")[n % 2],
                        "title": "t",
                        "body": "b",
                        "anchor": "exact",
                        "state": "posted",
                    }
                    for n in range(day + 2)
                ],
            )
            now[0] += timedelta(seconds=30 + 20 * day)
            store.finish_review(review, status="succeeded")
        window = Window(MONDAY, MONDAY + timedelta(days=7))
        report = build_report(store, window, now=MONDAY + timedelta(days=8))
    finally:
        store.close()
    (path,) = write_report(report, tmp_path / "out", ["html"])
    return path


def test_report_html_renders_with_its_charts_in_chromium(tmp_path: Path) -> None:
    chromium = _chromium()
    if chromium is None:
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    page = _report_file(tmp_path)
    common = [
        chromium,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--window-size={WINDOW_SIZE}",
    ]
    dom = subprocess.run(
        [*common, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=BROWSER_TIMEOUT_S,
        check=True,
    ).stdout
    assert dom.count("<svg") == len(CHART_IDS)
    for chart_id in CHART_IDS:
        assert f'id="{chart_id}"' in dom
    screenshot = tmp_path / "report.png"
    subprocess.run(
        [*common, f"--screenshot={screenshot}", page.as_uri()],
        capture_output=True,
        timeout=BROWSER_TIMEOUT_S,
        check=True,
    )
    with Image.open(screenshot) as image:
        grey = image.convert("L")
        assert ImageStat.Stat(grey).stddev[0] > MIN_LUMINANCE_STDDEV
        dark = sum(count for value, count in enumerate(grey.histogram()) if value < DARK)
        assert dark > MIN_DARK_PIXELS
