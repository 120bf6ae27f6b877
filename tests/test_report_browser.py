"""report.html looked at in a real browser: headless Chromium renders it offline, the DOM holds
the inline SVG charts and the screenshot is not blank (also for stores with data on one day,
on every day, on no day of the week, and across 8 weeks: issue 25); a page built from hostile data
runs no script (its title stays the report's, no element or link comes from the data) and
still renders; and the page's Content-Security-Policy alone stops a script that an escape
missed (the same page without the policy shows that such a script would have run).

Skipped when Chromium is not installed, unless REVIEWBOT_REQUIRE_BROWSER is set (.ci/run sets
it after installing Chromium, so CI never skips it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageStat

from reviewbot.report.document import build_report, write_report
from reviewbot.report.html import CHART_IDS, CONTENT_SECURITY_POLICY
from reviewbot.store import MergeRequestKey, Store, upgrade
from reviewbot.window import Window
from tests.builders import MONDAY, FakeClock
from tests.test_report_charts import seed_review

pytestmark = pytest.mark.slow  # measured: see docs/development.md

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
TITLE = "reviewbot report 2026-W11"
PWNED = "pwned"  # what each hostile script would set the page's title to
BENIGN = {
    "project": "group/app",
    "gitlab_url": "https://gitlab.example.com",
    "model": "qwen",
    "prompt_version": "v1",
    "categories": ("bug", "security"),
}
HOSTILE = {
    "project": f"<script>document.title='{PWNED}'</script>",
    "gitlab_url": f"javascript:document.title='{PWNED}'//",
    "model": f"<img src=x onerror=\"document.title='{PWNED}'\">",
    "prompt_version": f"<svg onload=document.title='{PWNED}'>",
    "categories": (f"</svg><script>document.title='{PWNED}'</script>", '" onfocus="x'),
}
# A script an escape missed, put where data would go; only the policy stands in its way.
MISSED_ESCAPE = (
    f"<script>document.title='{PWNED}'</script><img src=x onerror=\"document.title='{PWNED}'\">"
)
TITLE_ELEMENT = re.compile(r"<title>(.*?)</title>", re.DOTALL)


def _chromium() -> str | None:
    found = next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)
    if found is None and os.environ.get(REQUIRE_ENV):
        pytest.fail(f"{REQUIRE_ENV} is set but Chromium is not installed")
    return found


def _report_file(tmp_path: Path, names: dict[str, Any]) -> Path:
    """report.html of five days of reviews whose texts are ``names`` (the second review, and
    every other one, of a local run without a GitLab URL)."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    upgrade(url)
    now = [MONDAY]
    store = Store.from_url(url, clock=lambda: now[0])
    try:
        for day in range(5):
            now[0] = MONDAY + timedelta(days=day, hours=9)
            on_gitlab = day % 2 == 0
            review = store.start_review(
                project=names["project"],
                mr_iid=day + 1 if on_gitlab else None,
                head_sha="a" * 40,
                base_sha=None,
                start_sha=None,
                trigger="ci",
                model=names["model"],
                prompt_version=names["prompt_version"],
                key=MergeRequestKey(names["gitlab_url"], 7, day + 1) if on_gitlab else None,
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
                        "category": names["categories"][n % 2],
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


class _Elements(HTMLParser):
    """The element and attribute names of a serialised DOM, and its text."""

    def __init__(self, dom: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.text = ""
        self.feed(dom)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes |= {name for name, _ in attrs}

    def handle_data(self, data: str) -> None:
        self.text += data


def _browser(tmp_path: Path) -> list[str]:
    chromium = _chromium()
    if chromium is None:
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    return [
        chromium,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--window-size={WINDOW_SIZE}",
    ]


def _dom(browser: list[str], page: Path) -> str:
    """The page's DOM once loaded (and any script on it run), serialised by Chromium."""
    return subprocess.run(
        [*browser, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=BROWSER_TIMEOUT_S,
        check=True,
    ).stdout


def _title(dom: str) -> str:
    found = TITLE_ELEMENT.search(dom)
    assert found, "no <title> in the DOM"
    return found.group(1)


def _assert_charts_drawn(browser: list[str], page: Path, dom: str) -> None:
    assert dom.count("<svg") == len(CHART_IDS)
    for chart_id in CHART_IDS:
        assert f'id="{chart_id}"' in dom
    screenshot = page.with_suffix(".png")
    subprocess.run(
        [*browser, f"--screenshot={screenshot}", page.as_uri()],
        capture_output=True,
        timeout=BROWSER_TIMEOUT_S,
        check=True,
    )
    with Image.open(screenshot) as image:
        grey = image.convert("L")
        assert ImageStat.Stat(grey).stddev[0] > MIN_LUMINANCE_STDDEV
        dark = sum(count for value, count in enumerate(grey.histogram()) if value < DARK)
        assert dark > MIN_DARK_PIXELS


def test_report_html_renders_with_its_charts_in_chromium(tmp_path: Path) -> None:
    browser = _browser(tmp_path)
    page = _report_file(tmp_path, BENIGN)
    dom = _dom(browser, page)
    assert _title(dom) == TITLE
    assert dom.count('<a href="https://gitlab.example.com/group/app/-/merge_requests/') == 3
    _assert_charts_drawn(browser, page, dom)


def _seeded_report(tmp_path: Path, days: tuple[int, ...]) -> Path:
    """report.html of the week of MONDAY for a store with one review on each of ``days``
    (days after MONDAY; negative: weeks before)."""
    url = f"sqlite:///{tmp_path / 'seeded.sqlite'}"
    upgrade(url)
    clock = FakeClock(MONDAY)
    store = Store.from_url(url, clock=clock)
    try:
        for n, day in enumerate(days):
            seed_review(store, clock, MONDAY + timedelta(days=day, hours=10), iid=n + 1)
        window = Window(MONDAY, MONDAY + timedelta(days=7))
        report = build_report(store, window, now=MONDAY + timedelta(days=8))
    finally:
        store.close()
    (path,) = write_report(report, tmp_path / "out", ["html"])
    return path


@pytest.mark.parametrize(
    "days",
    [(2, 2, 2), tuple(range(7)), (-3, -10), tuple(range(-49, 7, 3))],
    ids=["one-day", "every-day", "no-day", "eight-weeks"],
)
def test_each_kind_of_week_renders_its_charts(tmp_path: Path, days: tuple[int, ...]) -> None:
    browser = _browser(tmp_path)
    page = _seeded_report(tmp_path, days)
    dom = _dom(browser, page)
    assert _title(dom) == TITLE
    _assert_charts_drawn(browser, page, dom)


def test_a_page_of_hostile_data_runs_nothing_and_still_renders(tmp_path: Path) -> None:
    browser = _browser(tmp_path)
    page = _report_file(tmp_path, HOSTILE)
    dom = _dom(browser, page)
    assert _title(dom) == TITLE  # no script ran
    # the data is text: no element, handler or link made of it (the review on GitLab has a
    # javascript: URL, so no link at all), and it shows
    elements = _Elements(dom)
    assert not {"script", "img", "a", "iframe", "object", "embed"} & elements.tags
    assert not [name for name in elements.attributes if name.startswith("on")]
    assert HOSTILE["project"] in elements.text
    _assert_charts_drawn(browser, page, dom)


def test_the_content_security_policy_alone_stops_a_script_an_escape_missed(
    tmp_path: Path,
) -> None:
    browser = _browser(tmp_path)
    html = _report_file(tmp_path, BENIGN).read_text(encoding="utf-8")
    assert CONTENT_SECURITY_POLICY in html.replace("&#39;", "'")
    missed = html.replace("<body>", f"<body>{MISSED_ESCAPE}", 1)
    guarded = tmp_path / "missed-escape.html"
    guarded.write_text(missed, encoding="utf-8")
    # the probe works: without the policy, the same page runs the script
    unguarded = tmp_path / "no-policy.html"
    policy = re.compile(r'<meta http-equiv="Content-Security-Policy"[^>]*>')
    assert policy.search(missed)
    unguarded.write_text(policy.sub("", missed), encoding="utf-8")
    assert _title(_dom(browser, unguarded)) == PWNED
    dom = _dom(browser, guarded)
    assert _title(dom) == TITLE
    _assert_charts_drawn(browser, guarded, dom)
