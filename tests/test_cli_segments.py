"""`mteb-fairpos segments` end to end, through the console entry point's main()."""

from __future__ import annotations

import json

import pytest

from mteb_fairpos.cli import main
from mteb_fairpos.cli.segments import read_segments

SEGMENTS = [
    "The museum reopened its east wing with a new collection of maritime maps and ship models. " * 3,
    "Heavy rain flooded several streets downtown, and the city opened two emergency shelters. " * 3,
    "The chess club celebrated its fiftieth anniversary with a simultaneous exhibition game. " * 3,
]


def test_prints_similarity_by_position(capsys, minilm):
    code = main(["segments", *sum((["--segment", s] for s in SEGMENTS), []), "--basket-size", "16", "--strength", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert "calibration: b16_lhalf_a1" in out
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [r[0] for r in rows] == ["1", "2", "3"]
    assert all(-1 <= float(v) <= 1 for r in rows for v in r[1:3])
    assert any(abs(float(r[3])) > 0 for r in rows)


def test_reads_jsonl_and_json_files(tmp_path):
    jsonl = tmp_path / "doc.jsonl"
    jsonl.write_text("\n".join(json.dumps({"text": s, "language": "en"}) for s in SEGMENTS))
    listed = tmp_path / "doc.json"
    listed.write_text(json.dumps(SEGMENTS))
    assert read_segments(jsonl) == read_segments(listed) == SEGMENTS


def test_malformed_line_is_named(tmp_path, capsys):
    bad = tmp_path / "doc.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": broken\n')
    assert main(["segments", "--file", str(bad)]) == 2
    assert "doc.jsonl:2: not valid JSON" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--segment", "only one"], "at least two segments"),
        (["--segment", "one", "--segment", "  "], "must not be empty"),
        (["--segment", "a", "--segment", "b", "--calibration", "b0_lhalf_a1"], "basket_size must be a positive integer"),
        (["--segment", "a", "--segment", "b", "--calibration", "nonsense"], "Valid form"),
    ],
)
def test_bad_input_is_a_clear_error(capsys, minilm, argv, message):
    assert main(["segments", *argv]) == 2
    assert message in capsys.readouterr().err


def test_cut_segments_are_reported(capsys, minilm):
    long = [s * 4 for s in SEGMENTS]
    assert main(["segments", *sum((["--segment", s] for s in long), [])]) == 0
    assert "maximum length cut segment(s) [2, 3]" in capsys.readouterr().out
