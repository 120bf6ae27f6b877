"""The README's picture of a weekly report: seed a store that looks like a team's (ten weeks
of reviews on weekdays, a prompt change three weeks ago that lifted acceptance, votes,
addressed findings, unreadable tool calls now and then), build the report of the last week,
open it in headless Chromium and save the whole page, from its title to its last table, as a
PNG in the charts' own colours.

Run: ``.venv/bin/python docs/screenshots/make_report_screenshot.py [--out docs/screenshots]``
(needs Chromium: chromium, chromium-browser or google-chrome on PATH). Writes
``report.png`` (and keeps ``report.html`` beside it when ``--keep-html``). Deterministic: the
same seed gives the same store and the same page.

Chromium draws the page in a window taller than the page (:data:`WINDOW_SIZE`); the picture is
cut :data:`BOTTOM_MARGIN_PX` below the last thing drawn, and a page that reaches the window's
bottom edge is an error (make the window taller), never a picture cut mid-chart. The PNG keeps
a palette of :data:`PALETTE_COLOURS` chosen by octree quantisation, which gives the charts'
small areas of colour (lines, markers, legend keys) their own entries: median cut, Pillow's
default, had merged them into the page's greys (green, purple and red came out teal, grey and
brown).
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from PIL import Image, ImageChops

from reviewbot.report.document import build_report, write_report
from reviewbot.store import MergeRequestKey, Store, upgrade
from reviewbot.window import Window

MONDAY = datetime(2026, 3, 9, tzinfo=UTC)  # the report's week: 2026-W11
WEEKS = 10
PROMPT_CHANGE_WEEKS_AGO = 3
OLD_PROMPT, NEW_PROMPT = "v1+5e6f7a8b", "v2+9c0d1e2f"
MODEL = "Qwen/Qwen3.5-35B-A3B-GPTQ-Int4"
GITLAB = "https://gitlab.example.com"
PROJECTS = ("platform/api", "platform/web", "data/pipeline", "mobile/app")
CATEGORIES = ("bug", "security", "error-handling", "performance", "concurrency", "style")
SEVERITIES = (("critical", 0.08), ("major", 0.32), ("minor", 0.45), ("info", 0.15))
REVIEWS_PER_WEEKDAY = (6, 14)
WORK_DAYS = 5
FINDINGS_PER_REVIEW = (0, 6)
CALLS_PER_REVIEW = (1, 4)
TTFT_MEDIAN_MS, TTFT_SIGMA = 360.0, 0.4
UP_RATE = {OLD_PROMPT: 0.55, NEW_PROMPT: 0.75}  # share of votes that are 👍
VOTE_RATE, ADDRESSED_RATE, PUSHED_AGAIN_RATE = 0.45, 0.25, 0.6
INVALID_CALL_RATE = {OLD_PROMPT: 0.06, NEW_PROMPT: 0.02}
WINDOW_SIZE = "1100,8000"  # taller than the page: the whole of it is drawn
BOTTOM_MARGIN_PX = 32  # below the last thing drawn (the page's own margin: 2rem)
BACKGROUND = (255, 255, 255)
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars")
SHOWN_WIDTH = 900  # pixels of the PNG the README shows
PALETTE_COLOURS = 256  # a quantised PNG of the whole page stays well under 300 KB
BROWSER_TIMEOUT_S = 120


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def _severity(rng: random.Random) -> str:
    return rng.choices([s for s, _ in SEVERITIES], weights=[w for _, w in SEVERITIES])[0]


def _review(
    store: Store,
    clock: Clock,
    rng: random.Random,
    started: datetime,
    iid: int,
    *,
    prompt: str,
    version: int = 0,
) -> None:
    project = PROJECTS[iid % len(PROJECTS)]
    clock.now = started
    review = store.start_review(
        project=project,
        mr_iid=iid,
        head_sha=f"{iid:039x}{version}",
        base_sha=None,
        start_sha=None,
        trigger="webhook",
        model=MODEL,
        prompt_version=prompt,
        key=MergeRequestKey(GITLAB, PROJECTS.index(project) + 1, iid),
    )
    calls = []
    for chunk in range(rng.randint(*CALLS_PER_REVIEW)):
        tool_calls = rng.randint(1, 5)
        calls.append(
            {
                "chunk_index": chunk,
                "mode": "tool_calls",
                "outcome": "ok",
                "ttft_ms": TTFT_MEDIAN_MS * math.exp(rng.gauss(0, TTFT_SIGMA)),
                "tool_calls": tool_calls,
                "invalid_tool_calls": sum(
                    rng.random() < INVALID_CALL_RATE[prompt] for _ in range(tool_calls)
                ),
                "started_at": started,
            }
        )
    store.record_llm_calls(review, calls)
    findings = [
        {
            "fingerprint": f"{iid}-{version}-{n}",
            "path": f"src/module_{n}.py",
            "side": "new",
            "line": rng.randint(1, 400),
            "severity": _severity(rng),
            "category": rng.choice(CATEGORIES),
            "title": "finding",
            "body": "body",
            "anchor": "exact",
            "state": "posted",
        }
        for n in range(rng.randint(*FINDINGS_PER_REVIEW))
    ]
    ids = store.record_findings(review, findings)
    clock.now = started + timedelta(seconds=rng.uniform(20, 140))
    store.finish_review(review, status="succeeded")
    for finding_id in ids:
        _outcomes(store, rng, finding_id, project, prompt, clock.now)


def _outcomes(
    store: Store, rng: random.Random, finding_id: int, project: str, prompt: str, at: datetime
) -> None:
    later = at + timedelta(hours=rng.uniform(1, 30))
    if rng.random() < VOTE_RATE:
        vote = "thumbsup" if rng.random() < UP_RATE[prompt] else "thumbsdown"
        store.record_feedback(
            finding_id=finding_id,
            project=project,
            kind="award",
            value=vote,
            username="lead",
            event_key=f"vote-{finding_id}",
            created_at=later,
        )
    if rng.random() < ADDRESSED_RATE:  # of findings whose MR got a later version
        store.record_feedback(
            finding_id=finding_id,
            project=project,
            kind="addressed",
            value="changed",
            event_key=f"addressed-{finding_id}",
            created_at=later,
        )


def seed(url: str, seed_value: int) -> Store:
    """A migrated store at ``url`` holding WEEKS weeks of a team's reviews."""
    upgrade(url)
    clock = Clock(MONDAY)
    store = Store.from_url(url, clock=clock)
    rng = random.Random(seed_value)
    iid = 0
    for week in range(WEEKS - 1, -1, -1):
        monday = MONDAY - timedelta(days=7 * week)
        for day in range(WORK_DAYS):
            for _ in range(rng.randint(*REVIEWS_PER_WEEKDAY)):
                iid += 1
                started = monday + timedelta(days=day, hours=rng.uniform(8, 18))
                prompt = NEW_PROMPT if week < PROMPT_CHANGE_WEEKS_AGO else OLD_PROMPT
                _review(store, clock, rng, started, iid, prompt=prompt)
                if rng.random() < PUSHED_AGAIN_RATE:  # a later version: findings addressable
                    again = started + timedelta(hours=rng.uniform(1, 20))
                    _review(store, clock, rng, again, iid, prompt=prompt, version=1)
    return store


def _chromium() -> str:
    found = next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)
    if found is None:
        sys.exit("Chromium is not installed (apt-get install -y chromium)")
    return found


def _whole_page(image: Image.Image) -> Image.Image:
    """``image`` (the window) cut BOTTOM_MARGIN_PX below the last thing drawn; SystemExit when
    the page reaches the window's bottom edge (it would be cut)."""
    drawn = ImageChops.difference(image, Image.new("RGB", image.size, BACKGROUND)).getbbox()
    if drawn is None:
        sys.exit("Chromium drew a blank page")
    bottom = drawn[3] + BOTTOM_MARGIN_PX
    if bottom > image.height:
        sys.exit(f"the page is taller than the window ({WINDOW_SIZE}): make WINDOW_SIZE taller")
    return image.crop((0, 0, image.width, bottom))


def screenshot(page: Path, png: Path, profile: Path) -> None:
    """The whole of ``page`` as Chromium draws it, scaled and quantised into ``png``."""
    raw = png.with_suffix(".raw.png")
    subprocess.run(
        [
            _chromium(),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={WINDOW_SIZE}",
            f"--screenshot={raw}",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=BROWSER_TIMEOUT_S,
        check=True,
    )
    with Image.open(raw) as image:
        whole = _whole_page(image.convert("RGB"))
    height = round(whole.height * SHOWN_WIDTH / whole.width)
    small = whole.resize((SHOWN_WIDTH, height), Image.Resampling.LANCZOS)
    small.quantize(PALETTE_COLOURS, method=Image.Quantize.FASTOCTREE).save(png, optimize=True)
    raw.unlink()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--keep-html", action="store_true")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        store = seed(f"sqlite:///{Path(scratch) / 'team.sqlite'}", options.seed)
        try:
            week = Window(MONDAY, MONDAY + timedelta(days=7))
            report = build_report(store, week, now=week.until + timedelta(hours=6))
        finally:
            store.close()
        (page,) = write_report(report, Path(scratch), ["html"])
        options.out.mkdir(parents=True, exist_ok=True)
        png = options.out / "report.png"
        screenshot(page, png, Path(scratch) / "profile")
        if options.keep_html:
            shutil.copy(page, options.out / "report.html")
    print(f"{png}: {png.stat().st_size // 1024} KB, {report['totals']['reviews']} reviews")


if __name__ == "__main__":
    main()
