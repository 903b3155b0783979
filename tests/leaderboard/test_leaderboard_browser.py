"""The leaderboard page in a real browser: Debian's headless chromium driven by Playwright, the page
opened from disk. Skipped when chromium or Playwright is missing (`.ci/run` installs both); no
browser is ever downloaded."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import pytest

from conftest import MINILM, POSIR, PROBE, RETRIEVAL
from mteb_fairpos.cli import main

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium; .ci/run does)")


@contextlib.contextmanager
def _opened(results, site: Path):
    """The leaderboard built from ``results`` into ``site``, open in Chromium; the tab collects console errors."""
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
    assert main(["leaderboard", str(results), "-o", str(site)]) == 0
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        tab = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        tab.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        tab.on("pageerror", lambda error: errors.append(str(error)))
        tab.goto((site / "index.html").as_uri())
        tab.errors = errors
        yield tab
        browser.close()


@pytest.fixture
def page(results, tmp_path):
    with _opened(results, tmp_path / "site") as tab:
        yield tab


def _models(page) -> list[str]:
    return page.eval_on_selector_all("#board tr.model:not(.hidden) th.name", "cells => cells.map(c => c.textContent)")


def test_everything_is_on_the_page_without_errors(page):
    names = _models(page)
    assert [n.split(" [")[0] for n in names] == [*MINILM, "fair/bge-m3"]
    text = page.inner_text("body")
    for task in (RETRIEVAL, PROBE, POSIR):
        assert page.locator(f'#board th.task[data-task="{task}"]').is_visible()
        assert task in text
    assert "Broken.json" in text and "README.txt" in text
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "leaderboard.png"), full_page=True)
    assert (ARTIFACTS / "leaderboard.png").stat().st_size > 10_000
    assert page.errors == []


def test_sorting_reorders_the_rows(page):
    psi = page.locator(f'#board th[data-col="{RETRIEVAL}|psi|"]')
    psi.click()  # PSI: lower is fairer, so the first click puts the fairest first
    assert psi.get_attribute("aria-sort") == "ascending"
    assert [n.split(" [")[0] for n in _models(page)] == [MINILM[2], MINILM[1], "fair/bge-m3", MINILM[0]]
    psi.click()
    assert [n.split(" [")[0] for n in _models(page)] == [MINILM[0], "fair/bge-m3", MINILM[1], MINILM[2]]
    assert page.locator("#board tr.group:visible").count() == 0  # sorted rows leave their groups
    page.locator('#board th[data-col=""]').click()
    assert [n.split(" [")[0] for n in _models(page)] == [*MINILM, "fair/bge-m3"]
    assert page.locator("#board tr.group:visible").count() == 2
    assert page.errors == []


def test_filters_hide_what_they_should(page):
    page.select_option("#filter-family", "probe")
    visible = page.eval_on_selector_all("#board thead tr:nth-child(2) th:not(.hidden)", "c => c.map(x => x.dataset.col)")
    assert visible and all(col.startswith(PROBE) for col in visible)
    assert page.locator(f"#task-{RETRIEVAL}").is_hidden() and page.locator(f"#task-{PROBE}").is_visible()
    page.select_option("#filter-family", "")
    page.select_option("#filter-language", "de")
    visible = page.eval_on_selector_all("#board thead tr:nth-child(2) th:not(.hidden)", "c => c.map(x => x.dataset.col)")
    assert f"{PROBE}|fairness|n3_de" in visible and f"{PROBE}|fairness|n3_en" not in visible and f"{RETRIEVAL}|main|" not in visible
    page.select_option("#filter-language", "")
    page.select_option("#filter-base", "bge-m3")
    assert [n.split(" [")[0] for n in _models(page)] == ["fair/bge-m3"]
    assert "1 of 4 models" in page.inner_text("#shown")
    assert page.errors == []


def test_every_chart_has_drawn_marks(page):
    charts = page.locator("svg.chart")
    assert charts.count() >= 8
    sizes = page.eval_on_selector_all("svg.chart", """charts => charts.map(svg => Array.from(svg.querySelectorAll('.mark'))
        .map(m => { const box = m.getBBox(); return box.width + box.height; }).filter(s => s > 0).length)""")
    assert all(count > 0 for count in sizes), sizes


def test_intervals_stand_beside_their_numbers_and_a_change_spanning_zero_is_neutral(paired_results, tmp_path):
    with _opened(paired_results, tmp_path / "site") as tab:
        main_column = '[data-col="SQuADPosQ|main|"]'
        rows = {name.split(" [")[0]: i for i, name in enumerate(_models(tab))}
        cells = tab.locator(f"#board tr.model td{main_column}")
        for row in rows.values():  # every model's main score with its interval, visible
            interval = cells.nth(row).locator(".ci")
            assert interval.is_visible() and interval.inner_text().startswith("[0.")
        lifted, noisy = cells.nth(rows[MINILM[1]]).locator(".delta"), cells.nth(rows[MINILM[2]]).locator(".delta")
        colour = "el => getComputedStyle(el).color"
        assert lifted.get_attribute("data-verdict") == "better" and lifted.evaluate(colour) == "rgb(21, 127, 59)"
        assert noisy.get_attribute("data-verdict") == "not significant" and "N.S." in noisy.inner_text().upper()
        assert noisy.evaluate(colour) == "rgb(122, 128, 138)"  # the neutral grey, neither green nor red
        assert "paired" in noisy.get_attribute("title") and "[" in noisy.get_attribute("title")
        for change in (lifted, noisy):  # the paired interval stands beside the change, as in its title
            shown = change.locator(".change-ci")
            assert shown.is_visible() and shown.inner_text() in change.get_attribute("title")
        low, high = (float(end) for end in noisy.locator(".change-ci").inner_text().strip("[]").split(", "))
        assert low <= 0 <= high
        ARTIFACTS.mkdir(exist_ok=True)
        tab.screenshot(path=str(ARTIFACTS / "leaderboard-intervals.png"), full_page=True)
