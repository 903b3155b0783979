"""`probe` (and so `demo`) write the leaderboard page and print its path; `compare` points to it."""

from __future__ import annotations

import json

import pytest

from conftest import COMMIT, RETRIEVAL
from results_folders import retrieval_entry, write_result
from mteb_fairpos.cli import main
from mteb_fairpos.permutation import sample_corpus


@pytest.mark.slow  # the probe on the offline MiniLM: ~50 s here
def test_probe_writes_the_page(minilm_dir, tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": t.id, "texts": {"en": t.texts["en"]}}) + "\n"
                              for t in sample_corpus() if "en" in t.texts), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["probe", "--corpus", str(corpus), "--subsets", "n3_en", "--sets", "2", "--calibration", "none", "b128_lhalf_a1",
                 "--max-length", "512", "--output", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    page = out / "leaderboard" / "index.html"
    assert f"leaderboard page: {page}" in printed
    html = page.read_text()
    assert "fair-off/all-MiniLM-L6-v2" in html and "fair/all-MiniLM-L6-v2-b128_lhalf_a1" in html
    assert "n3_en fairness" in html and 'class="mark band"' in html


def test_compare_points_to_the_page(tmp_path, capsys):
    write_result(tmp_path / "run", "fair/all-MiniLM-L6-v2", COMMIT, RETRIEVAL, {"test": [retrieval_entry(0.8, {"begin": 0.8, "end": 0.7})]})
    assert main(["compare", str(tmp_path / "run"), "--out", str(tmp_path / "cmp"), "--no-plots"]) == 0
    assert f"mteb-fairpos leaderboard {tmp_path / 'run'} -o" in capsys.readouterr().out
