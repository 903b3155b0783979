"""`mteb-fairpos segments` end to end, through the console entry point's main()."""

from __future__ import annotations

import json

import pytest

from mteb_fairpos.cli import main
from mteb_fairpos.segment_report import read_segments

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
    listed = tmp_path / "doc.json"
    listed.write_text('[{"text": "one", "text": "two"}, "three"]')
    assert main(["segments", "--file", str(listed)]) == 2
    assert "the key 'text' appears twice" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--segment", "only one"], "at least two segments"),
        (["--segment", "one", "--segment", "  "], "segments must not be empty: segment 2 is"),
        (["--segment", "a", "--segment", "b", "--calibration", "b0_lhalf_a1"], "basket_size must be a positive integer"),
        (["--segment", "a", "--segment", "b", "--calibration", "nonsense"], "Valid form"),
        (["--segment", "a", "--segment", "b", "--calibration", "b8_lhalf_a0.5", "--strength", "0.9", "--basket-size", "4"],
         "--basket-size/--strength apply to a config built from parts, which --calibration replaces; give one or the other"),
    ],
)
def test_bad_input_is_a_clear_error(capsys, minilm, argv, message, monkeypatch):
    from sentence_transformers import SentenceTransformer

    def no_load(*args, **kwargs):
        raise AssertionError("the model was loaded for input that is refused anyway")

    monkeypatch.setattr(SentenceTransformer, "__init__", no_load)  # every refusal comes before the model loads
    assert main(["segments", *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_warning_is_one_line_naming_the_command(minilm):
    """As an error is: not Python's default form (the file and line of the warning's call, then that line's source)."""
    import warnings

    shown = []
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: shown.append(
            warnings.formatwarning(message, category, filename, lineno, line))  # what would reach stderr
        assert main(["segments", "--segment", "The council approved the budget.", "--segment", "Snow fell."]) == 0
    assert shown and all(text.startswith("mteb-fairpos segments: warning: ") and text.count("\n") == 1 for text in shown)
    assert any("left uncalibrated" in text for text in shown)
    assert warnings.formatwarning("m", UserWarning, "f.py", 1).startswith("f.py:1: UserWarning: m")  # restored after the run


def test_cut_segments_are_reported(capsys, minilm):
    """As the command's other warnings: one line on stderr naming the command (it was a line of the table on stdout)."""
    import warnings

    long = [s * 4 for s in SEGMENTS]
    shown = []
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: shown.append(
            warnings.formatwarning(message, category, filename, lineno, line))  # what would reach stderr
        assert main(["segments", *sum((["--segment", s] for s in long), [])]) == 0
    assert "mteb-fairpos segments: warning: the model's maximum length cut segment(s) [2, 3].\n" in shown
    assert "cut segment" not in capsys.readouterr().out


def test_strength_zero_reports_no_change_on_a_prompted_model(minilm):
    # the calibrated and uncalibrated sides both carry the model's document prompt, so strength 0
    # (the plain model) changes nothing; comparing plain encode with encode_document would not
    from mteb_fairpos import CalibrationConfig, FairSentenceTransformer
    from mteb_fairpos.segment_report import segment_report

    original = minilm.prompts
    minilm.prompts = {**original, "document": "passage: "}
    try:
        model = FairSentenceTransformer(minilm, CalibrationConfig(basket_size=16, strength=0.0))
        report = segment_report(model, SEGMENTS)
        prompted = model.encode_document([" ".join(SEGMENTS)], normalize_embeddings=True)[0]
        unprompted = model.encode([" ".join(SEGMENTS)], normalize_embeddings=True)[0]
    finally:
        minilm.prompts = original
    assert float(abs(prompted @ unprompted - 1)) > 1e-4  # the prompt does change the vector
    assert list(report.calibrated - report.uncalibrated) == [0.0, 0.0, 0.0]


def test_truncation_counts_the_prompt_tokens(minilm):
    # a document that fits without the prompt but not with it: the last segment loses its tail
    from mteb_fairpos import CalibrationConfig, FairSentenceTransformer
    from mteb_fairpos.segment_report import segment_report

    tokenizer = minilm.tokenizer
    first = "word " * 120
    second = "other " * (minilm.max_seq_length - 2 - 120)
    assert len(tokenizer(first + " " + second)["input_ids"]) == minilm.max_seq_length
    original = minilm.prompts
    minilm.prompts = {**original, "document": "passage of a long text: "}
    try:
        report = segment_report(FairSentenceTransformer(minilm, CalibrationConfig()), [first.strip(), second.strip()])
    finally:
        minilm.prompts = original
    assert report.truncated_positions == [2]


def test_help_and_argument_errors_import_nothing_heavy():
    """--help and each subcommand's --help build the parsers; none of them may pull in torch, sentence-transformers,
    qdrant-client or mteb (they cost seconds before a word is printed)."""
    import subprocess
    import sys

    code = ("import contextlib, io, sys; from mteb_fairpos.cli import SUBCOMMANDS, main\n"
            "for argv in [['--help']] + [[name, '--help'] for name in SUBCOMMANDS]:\n"
            "    with contextlib.redirect_stdout(io.StringIO()) as shown, contextlib.suppress(SystemExit):\n"
            "        main(argv)\n"
            "    assert 'usage: mteb-fairpos' in shown.getvalue(), argv\n"
            "print(sorted(m for m in ('torch', 'sentence_transformers', 'qdrant_client', 'mteb') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"  # after `mteb-fairpos --help` and every `mteb-fairpos COMMAND --help`
    version = subprocess.run([sys.executable, "-c", "from mteb_fairpos.cli import main; main(['--version'])"],
                             capture_output=True, text=True, timeout=120)
    assert version.stdout.startswith("mteb-fairpos ")


def test_one_vocabulary_across_subcommands():
    """--output, --max-length and --model mean the same in every subcommand that has them (old spellings kept)."""
    from pathlib import Path

    from mteb_fairpos.cli import build_parser

    parser = build_parser()
    for argv, attribute in ((["compare", "r", "--output", "o"], "out"), (["demo", "--output", "o"], "out"),
                            (["discoverability", "-c", "c", "--output", "o"], "out"),
                            (["sweep", "-t", "T", "--output", "o"], "output_folder")):
        assert Path(getattr(parser.parse_args(argv), attribute)) == Path("o"), argv
    assert parser.parse_args(["compare", "r", "--out", "o"]).out == Path("o")  # the earlier spelling still works
    assert Path(parser.parse_args(["sweep", "-t", "T", "--out", "o"]).output_folder) == Path("o")  # beside --output-folder
    for command in (["index", "f", "-c", "c"], ["search", "q", "-c", "c"], ["discoverability", "-c", "c"],
                    ["segments"], ["profile"], ["demo"], ["sweep", "-t", "T"]):
        assert parser.parse_args([*command, "--max-length", "64"]).max_length == 64, command
    for command in (["index", "f", "-c", "c"], ["search", "q", "-c", "c"], ["discoverability", "-c", "c"], ["segments"],
                    ["profile"], ["demo"], ["sweep", "-t", "T"]):
        assert parser.parse_args([*command, "-m", "m"]).model == parser.parse_args([*command, "--model", "m"]).model == "m"
        assert parser.parse_args([*command, "--device", "cpu"]).device == "cpu", command
    subcommands = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices
    undocumented = {name: [a.option_strings[0] for a in sub._actions if a.option_strings and not a.help]
                    for name, sub in subcommands.items()}
    assert not any(undocumented.values()), undocumented  # help text on every option


def test_bad_input_is_one_line_with_exit_status_2(tmp_path, capsys):
    from mteb_fairpos.cli import main

    assert main(["segments", "--file", str(tmp_path)]) == 2
    assert f"{tmp_path} is a folder; give a JSON or JSONL file" in capsys.readouterr().err
    assert main(["demo", "--subsets", "n3_xx", "--output", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert "unknown subset(s) ['n3_xx']" in err and "n3_en" in err and "Traceback" not in err
    assert main(["segments", "-m", str(tmp_path / "no-such-model"), "--segment", "a", "--segment", "b"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mteb-fairpos segments: error:") and len(err.splitlines()) <= 3
