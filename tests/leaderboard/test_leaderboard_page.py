"""`mteb-fairpos leaderboard`: the page it writes, read as HTML (the browser tests open it)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from conftest import MINILM, POSIR, PROBE, RETRIEVAL
from mteb_fairpos.cli import main
from mteb_fairpos.leaderboard import build, write
from mteb_fairpos.results import collect
from mteb_fairpos.results.tables import issues_text


class _Tags(HTMLParser):
    """Every start tag with its attributes."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _tags(html: str) -> list[tuple[str, dict[str, str]]]:
    parser = _Tags()
    parser.feed(html)
    return parser.tags


def test_command_writes_a_self_contained_page(results, tmp_path, capsys):
    site = tmp_path / "site"
    assert main(["leaderboard", str(results), "-o", str(site)]) == 0
    printed = capsys.readouterr().out
    assert f"leaderboard: {site / 'index.html'}" in printed and "models: 4   tasks: 3" in printed
    html = (site / "index.html").read_text()
    tags = _tags(html)
    external = [a for _, a in tags for k in ("src", "href") if re.match(r"^(https?:)?//", a.get(k, ""))]
    assert external == [] and not any(t in ("link", "iframe", "img") for t, _ in tags)
    assert not any(t == "script" and "src" in a for t, a in tags)
    for text in (*MINILM, "fair/bge-m3", RETRIEVAL, PROBE, POSIR, "Broken.json", "Notes.json", "README.txt", "no-twin"):
        assert text in html, text


def test_pooled_values_are_marked_and_changes_without_an_interval_are_neutral(results, tmp_path):
    assert main(["leaderboard", str(results), "-o", str(tmp_path / "site")]) == 0
    html = (tmp_path / "site" / "index.html").read_text()
    marks = re.findall(r'<sup class="pooled-mark" title="([^"]*)">', html)
    assert len([m for m in marks if m.startswith("main score and PSI are means over 2 subsets")]) == 3  # the probe, 3 models
    assert len([m for m in marks if m.startswith("pooled per language as PosIR does")]) == 4  # main and PSI, 2 models
    assert len(marks) == 7
    # these results hold no per-query scores: each change is shown with its sign, neutral and marked "no CI"
    deltas = {value: tone for tone, value in re.findall(r'<span class="delta (\w+)" data-verdict="no interval" [^>]*>([^<]+)<', html)}
    assert deltas["+0.0900"] == deltas["-0.2509"] == deltas["-0.0200"] == "unknown"  # main up, PSI down, a probe subset down
    assert '<span class="delta better"' not in html and '<span class="delta worse"' not in html


def test_every_chart_has_drawn_marks_and_the_twin_is_dashed(results, tmp_path):
    assert main(["leaderboard", str(results), "-o", str(tmp_path / "site")]) == 0
    html = (tmp_path / "site" / "index.html").read_text()
    charts = re.findall(r'<svg class="chart".*?</svg>', html, flags=re.S)
    assert len(charts) >= 8  # profiles per base model, probe subsets, PosIR's languages, the trade-off
    for chart in charts:
        assert re.search(r'class="mark[^"]*"', chart), chart[:200]
        assert 'class="label"' in chart and 'class="legend"' in chart
    assert any('stroke-dasharray="6 4"><title>fair-off/all-MiniLM-L6-v2' in chart for chart in charts)
    assert any("<polygon class=\"mark band\"" in chart for chart in charts)  # the probe's 95 % intervals
    assert any('marker-end="url(#head)"' in chart for chart in charts)  # twin -> calibrated arrows
    assert 'id="head"' in html


def test_links_point_at_the_result_files(results, tmp_path):
    site = tmp_path / "site"
    assert main(["leaderboard", str(results), "-o", str(site)]) == 0
    links = [a["href"] for t, a in _tags((site / "index.html").read_text()) if t == "a" and a["href"].endswith(".json")]
    assert len(links) > 20
    assert all((site / link).is_file() for link in links)


def test_no_results_and_no_folder(results, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["leaderboard", str(tmp_path / "empty"), "-o", str(tmp_path / "site")]) == 1
    assert "no readable mteb results" in capsys.readouterr().out
    assert main(["leaderboard", str(results), "--models", "nobody", "-o", str(tmp_path / "site")]) == 1
    assert re.search(r"for the --tasks and --models given \(they leave out all \d+ result file", capsys.readouterr().out)
    assert main(["leaderboard", str(tmp_path / "nowhere"), "-o", str(tmp_path / "site")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_how_a_number_was_pooled_is_a_note_not_an_issue(results, tmp_path):
    """The header counts what is wrong (missing, partial, unreadable); the pooled marks' explanations are listed
    apart, as notes, so a complete run's page reports no issues."""
    board = build([results], tmp_path / "site")
    html = (write(board, tmp_path / "site")).read_text()
    pooled = [issue for _, issue in board.issues if issue.kind == "pooled"]
    problems = len(board.issues) - len(pooled)
    assert pooled and problems and f'<dt>issues</dt><dd><a href="#issues">{problems}</a></dd>' in html
    notes = html.split("<h3>Notes</h3>")[1]
    assert notes.count('<tr class="issue pooled">') == len(pooled) and '<tr class="issue partial">' not in notes
    listed, noted = issues_text(collect(results)).split("\n\nNotes:\n")  # compare's report splits them alike
    assert len(listed.splitlines()) == problems and "[pooled]" not in listed and noted.count("[pooled]") == len(pooled)
