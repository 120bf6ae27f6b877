"""docs/screenshots/make_report_screenshot.py, the script behind the README's picture of a
weekly report: run as a user runs it (its own process, writing into a temporary folder), it
seeds its store, builds the week's report and writes a PNG of plausible size and content; and
the README shows that script's output: the PNG it links has the script's format (the width it
scales to, its palette), shows the whole page (it ends in blank rows, shorter than the browser
window: not cut mid-chart) in the charts' own colours (each series' colour is there, not a
palette's neighbour of it: green, purple and red had come out teal, grey and brown), and the
store the script seeds holds what the picture shows (72 reviews in 2026-W11 against 63 the week
before, 221 findings, the trend from 2026-W04 with the prompt change marked in 2026-W09).

The run needs Chromium: skipped when it is not installed, unless REVIEWBOT_REQUIRE_BROWSER is
set (.ci/run sets it, so CI never skips it), as in tests/test_report_browser.py.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from types import ModuleType

import pytest
from PIL import Image, ImageStat

from reviewbot.report.document import build_report
from reviewbot.report.html import (
    ACCEPTANCE_COLOUR,
    ADDRESSED_COLOUR,
    P50_COLOUR,
    P95_COLOUR,
    SEVERITY_COLOURS,
)
from reviewbot.report.trend import FINDINGS_COLOUR, RATE_LINES, trend_changes
from reviewbot.window import Window

pytestmark = pytest.mark.slow  # measured: see docs/development.md

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "docs" / "screenshots" / "make_report_screenshot.py"
README = ROOT / "README.md"
README_IMAGE = re.compile(r"!\[[^\]]*\]\((docs/screenshots/[^)]+\.png)\)")
REQUIRE_ENV = "REVIEWBOT_REQUIRE_BROWSER"
SCRIPT_TIMEOUT_S = 600
MIN_PNG_BYTES, MAX_PNG_BYTES = 30_000, 300_000  # a page of charts and tables, quantised
MIN_LUMINANCE_STDDEV = 20.0  # a blank page has none
MIN_DARK_PIXELS = 10_000
DARK = 128
WHITE = 250  # every channel at least this: the page's background, after scaling
MIN_BLANK_ROWS = 16  # the page's bottom margin scaled (26 rows), less the scaling's blur
COLOUR_TOLERANCE = 6  # per channel, between a series' colour and the picture's pixels
MIN_COLOUR_PIXELS = 200  # of each series' colour: a line, its markers and its legend key
# What the README's picture shows (docs/screenshots/report.png, seed 25): if the script's
# store changes, the picture must be made again, and these figures with it.
SHOWN = {"reviews": 72, "previous_reviews": 63, "findings": 221, "first_week": "2026-W04"}
PROMPT_CHANGE = ("2026-W09", "prompt v2+9c0d1e2f")


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_report_screenshot", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _window_height(script: ModuleType) -> int:
    """The height of the script's browser window, scaled to the width the PNG shows."""
    width, height = (int(n) for n in script.WINDOW_SIZE.split(","))
    return round(height * script.SHOWN_WIDTH / width)


def _series_colours(script: ModuleType) -> dict[str, tuple[int, int, int]]:
    """The colour of every series the script's report draws (its severities, the rate lines,
    p50, p95, findings per MR, the two rates bars), as RGB."""
    named = {
        **{severity: SEVERITY_COLOURS[severity] for severity, _ in script.SEVERITIES},
        **{key: colour for key, *_, colour in RATE_LINES},
        "p50": P50_COLOUR,
        "p95": P95_COLOUR,
        "findings per MR": FINDINGS_COLOUR,
        "acceptance bars": ACCEPTANCE_COLOUR,
        "addressed bars": ADDRESSED_COLOUR,
    }
    return {
        name: Image.new("RGB", (1, 1), colour).getpixel((0, 0)) for name, colour in named.items()
    }


def _assert_in_full_colour(image: Image.Image, script: ModuleType) -> None:
    counts = image.convert("RGB").getcolors(maxcolors=image.width * image.height) or []
    for name, wanted in _series_colours(script).items():
        near = sum(
            count
            for count, colour in counts
            if max(abs(a - b) for a, b in zip(colour, wanted, strict=True)) <= COLOUR_TOLERANCE
        )
        assert near >= MIN_COLOUR_PIXELS, f"{name} {wanted}: {near} pixels of its colour"


def _assert_the_whole_page(image: Image.Image, script: ModuleType) -> None:
    """The picture ends below the page's last line (blank rows), inside the window."""
    assert image.height < _window_height(script), "the page filled the window: cut"
    rgb = image.convert("RGB")
    bottom = rgb.crop((0, image.height - MIN_BLANK_ROWS, image.width, image.height))
    assert min(low for low, _ in bottom.getextrema()) >= WHITE, (
        "the picture stops on something drawn: the page is cut"
    )


def _assert_the_scripts_png(png: Path, script: ModuleType) -> None:
    with Image.open(png) as image:
        assert image.format == "PNG"
        assert image.width == script.SHOWN_WIDTH
        assert image.mode == "P"  # quantised, as the script saves it
        assert len(image.getcolors(maxcolors=256) or ()) <= script.PALETTE_COLOURS
        _assert_the_whole_page(image, script)
        _assert_in_full_colour(image, script)
        grey = image.convert("L")
        assert ImageStat.Stat(grey).stddev[0] > MIN_LUMINANCE_STDDEV, "not a blank page"
        dark = sum(count for value, count in enumerate(grey.histogram()) if value < DARK)
        assert dark > MIN_DARK_PIXELS, "text and charts drawn"
    assert MIN_PNG_BYTES < png.stat().st_size < MAX_PNG_BYTES


def test_the_script_writes_a_png_of_its_seeded_store(tmp_path: Path) -> None:
    script = _script()
    if not any(shutil.which(name) for name in script.CHROMIUM_NAMES):
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"{REQUIRE_ENV} is set but Chromium is not installed")
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    out = tmp_path / "shots"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), "--keep-html"],
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    png = out / "report.png"
    assert f"{png}: " in done.stdout and f"{SHOWN['reviews']} reviews" in done.stdout
    _assert_the_scripts_png(png, script)
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "reviewbot report 2026-W11" in page and page.count("<svg") == 4
    assert sorted(path.name for path in out.iterdir()) == ["report.html", "report.png"]


def test_the_readme_shows_the_scripts_picture_of_its_store(tmp_path: Path) -> None:
    script = _script()
    (linked,) = README_IMAGE.findall(README.read_text(encoding="utf-8"))
    assert ROOT / linked == SCRIPT.parent / "report.png", "the README shows the script's PNG"
    _assert_the_scripts_png(ROOT / linked, script)
    store = script.seed(f"sqlite:///{tmp_path / 'team.sqlite'}", 25)  # the script's default
    try:
        week = Window(script.MONDAY, script.MONDAY + timedelta(days=7))
        report = build_report(store, week, now=week.until)
    finally:
        store.close()
    assert report["totals"]["reviews"] == SHOWN["reviews"]
    assert report["previous"]["totals"]["reviews"] == SHOWN["previous_reviews"]
    assert report["totals"]["findings"] == SHOWN["findings"]
    weeks = report["trend"]["weeks"]
    assert weeks[0]["week"] == SHOWN["first_week"] and weeks[-1]["week"] == "2026-W11"
    changes = dict(zip((w["week"] for w in weeks), trend_changes(weeks), strict=True))
    assert changes[PROMPT_CHANGE[0]] == [PROMPT_CHANGE[1]]
