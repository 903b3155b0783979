"""Input records of the Qdrant integration: both document forms, files, and bad input (no model needed)."""

from __future__ import annotations

import json

import pytest

from mteb_fairpos.integrations.qdrant import InputError, parse_document, parse_documents, read_documents
from mteb_fairpos.integrations.qdrant.store import point_id


def test_segment_list_is_joined_with_single_spaces_and_spans_point_at_each_segment():
    doc = parse_document({"id": 7, "language": "de", "metadata": {"page": 3},
                          "segments": ["Erster Artikel.", {"text": "Second article.", "language": "en", "id": "s2"}]})
    assert doc.doc_id == "7"
    assert doc.text == "Erster Artikel. Second article."
    first, second = doc.segments
    assert (first.position, first.start, first.end, first.language, first.segment_id) == (1, 0, 15, "de", None)
    assert (second.position, second.language, second.segment_id) == (2, "en", "s2")
    assert doc.segment_text(second) == "Second article."
    assert doc.metadata == {"page": 3}


def test_text_with_span_objects_and_span_shorthand_agree():
    text = "Alpha beta. Gamma delta."
    long_form = parse_document({"id": "d", "text": text, "segments": [{"start": 0, "end": 11, "language": "en", "id": "a"},
                                                                     {"start": 12, "end": 24}]})
    shorthand = parse_document({"id": "d", "text": text, "spans": [[0, 11], [12, 24]], "language": "en"})
    assert [(s.start, s.end) for s in long_form.segments] == [(s.start, s.end) for s in shorthand.segments] == [(0, 11), (12, 24)]
    assert long_form.text == text
    assert [long_form.segment_text(s) for s in long_form.segments] == ["Alpha beta.", "Gamma delta."]
    assert shorthand.segments[1].language == "en"


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"id": "d", "segments": []}, "no segments"),
        ({"id": "d"}, "no segments"),
        ({"id": "d", "text": "short", "spans": []}, "no segments"),
        ({"segments": ["x"]}, "needs an 'id'"),
        ({"id": "", "segments": ["x"]}, "'id' is empty"),
        ({"id": "d", "text": "short text", "spans": [[0, 5], [6, 40]]}, "outside the text"),
        ({"id": "d", "text": "short text", "spans": [[-1, 5]]}, "outside the text"),
        ({"id": "d", "text": "short text", "spans": [[3, 3]]}, "outside the text"),
        ({"id": "d", "text": "short text", "spans": [[0, 6], [4, 9]]}, "overlaps"),
        ({"id": "d", "text": "short text", "spans": [[0, 1.5]]}, "must be an integer"),
        ({"id": "d", "text": "short text", "segments": [{"text": "short"}]}, "must be character spans"),
        ({"id": "d", "segments": [{"start": 0, "end": 3}]}, "no 'text'"),
        ({"id": "d", "segments": ["fine", "   "]}, "segment 2: the segment text is empty"),
        ({"id": "d", "segments": "not a list"}, "must be a list"),
        ({"id": "d", "segments": ["x"], "spans": [[0, 1]]}, "not both"),
        ({"id": "d", "segments": [{"text": "a", "id": 7}, {"text": "b"}, {"text": "c", "id": "7"}]},
         "segment 3: id '7' is segment 1's too"),
        ({"id": "d", "text": "ab cd", "segments": [{"start": 0, "end": 2, "id": "s"}, {"start": 3, "end": 5, "id": "s"}]},
         "segment 2: id 's' is segment 1's too"),
        ("just a string", "expected a JSON object"),
        # metadata a payload would keep another way in each store
        ({"id": "d", "segments": ["x"], "metadata": {"v": float("nan")}}, r"metadata\.v = nan is not a JSON number"),
        ({"id": "d", "segments": ["x"], "metadata": {"a": [1, {"b": float("inf")}]}}, r"metadata\.a\[1\]\.b = inf"),
        ({"id": "d", "segments": ["x"], "metadata": {"v": 10**30}}, "does not fit 64 bits"),
        ({"id": "d", "segments": ["x"], "metadata": {"v": b"\x00\x01"}}, "metadata.v is a bytes, not a JSON value"),
    ],
)
def test_bad_records_are_refused_with_a_reason(record, message):
    with pytest.raises(InputError, match=message):
        parse_document(record)


def test_dates_in_metadata_are_stored_as_their_iso_text_in_every_store():
    import datetime
    import decimal

    doc = parse_document({"id": "d", "segments": ["x"], "metadata": {
        "when": datetime.datetime(2024, 1, 2, 3, 4), "day": datetime.date(2024, 1, 2), "tags": ["a", 2, None]}})
    assert doc.metadata == {"when": "2024-01-02T03:04:00", "day": "2024-01-02", "tags": ["a", 2, None]}
    with pytest.raises(InputError, match="metadata.price is a Decimal"):
        parse_document({"id": "d", "segments": ["x"], "metadata": {"price": decimal.Decimal("1.50")}})


def test_a_byte_order_mark_is_no_error_and_a_json_document_is_named_as_one(tmp_path):
    marked = tmp_path / "marked.jsonl"
    marked.write_bytes(b'\xef\xbb\xbf{"id": "a", "segments": ["One.", "Two."]}\n\xef\xbb\xbf{"id": "b", "segments": ["Three."]}\n')
    documents, problems = read_documents(marked)
    assert [d.doc_id for d in documents] == ["a", "b"] and problems == []
    pretty = tmp_path / "pretty.jsonl"
    pretty.write_text('[\n  {"id": "a", "segments": ["One."]}\n]\n')
    with pytest.raises(InputError, match="pretty.jsonl line 1: .*looks like one JSON document over many lines"):
        read_documents(pretty)


def test_malformed_jsonl_line_is_named(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text('{"id": "a", "segments": ["one"]}\n\n{"id": "b", "segments": ["two"]\n{"id": "c", "segments": []}\n')
    with pytest.raises(InputError, match=r"docs\.jsonl line 3: malformed JSON"):
        read_documents(path)



@pytest.mark.parametrize("line", ['{"id": "a", "id": "b", "segments": ["x"]}',
                                  '{"id": "a", "segments": [{"text": "x", "language": "de", "language": "fr"}]}'])
def test_a_key_given_twice_is_refused_not_overwritten(tmp_path, line):
    """JSON parsers keep one value of a repeated key and drop the other unseen: one of two ids, one of two texts."""
    path = tmp_path / "docs.jsonl"
    path.write_text('{"id": "z", "segments": ["fine"]}\n' + line + "\n")
    with pytest.raises(InputError, match=r"docs\.jsonl line 2: .*the key '(id|language)' appears twice"):
        read_documents(path)


def test_skip_mode_reports_every_bad_line_and_keeps_the_good_ones(tmp_path):
    path = tmp_path / "docs.jsonl"
    lines = [
        json.dumps({"id": "a", "segments": ["one"]}),
        '{"id": "b", "segments": ["two"]',  # malformed
        json.dumps({"id": "c", "segments": []}),  # no segments
        json.dumps({"id": "d", "text": "tiny", "spans": [[0, 99]]}),  # span outside
        json.dumps({"id": "a", "segments": ["again"]}),  # duplicate id
        json.dumps({"id": "e", "segments": ["five"]}),
    ]
    path.write_text("\n".join(lines) + "\n")
    docs, problems = read_documents(path, on_error="skip")
    assert [d.doc_id for d in docs] == ["a", "e"]
    assert [p.where for p in problems] == [f"docs.jsonl line {n}" for n in (2, 3, 4, 5)]
    assert "malformed JSON" in problems[0].reason
    assert "no segments" in problems[1].reason and problems[1].doc_id == "c"
    assert "outside the text" in problems[2].reason
    assert "duplicate document id 'a'" in problems[3].reason and "line 1" in problems[3].reason


def test_in_memory_records_name_the_record_number():
    with pytest.raises(InputError, match="record 2"):
        parse_documents([{"id": "a", "segments": ["x"]}, {"id": "b", "segments": []}])


def test_parquet_both_forms_and_bad_row(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.Table.from_pylist([
        {"id": "p1", "segments": [{"text": "First part.", "language": "en", "id": "x"},
                                  {"text": "Zweiter Teil.", "language": "de", "id": None}]},
        {"id": "p2", "segments": [{"text": "Only one.", "language": None, "id": None}]},
    ])
    pq.write_table(table, tmp_path / "docs.parquet")
    docs, problems = read_documents(tmp_path / "docs.parquet")
    assert not problems
    assert [d.text for d in docs] == ["First part. Zweiter Teil.", "Only one."]
    assert docs[0].segments[1].language == "de" and docs[0].segments[0].segment_id == "x"

    spans = pa.Table.from_pylist([
        {"id": "s1", "text": "Alpha beta. Gamma.", "spans": [[0, 11], [12, 18]]},
        {"id": "s2", "text": "Tiny.", "spans": [[0, 50]]},
    ])
    pq.write_table(spans, tmp_path / "spans.parquet")
    with pytest.raises(InputError, match=r"spans\.parquet row 2 .*outside the text"):
        read_documents(tmp_path / "spans.parquet")
    docs, problems = read_documents(tmp_path / "spans.parquet", on_error="skip")
    assert [d.doc_id for d in docs] == ["s1"] and problems[0].where == "spans.parquet row 2"


def test_missing_file_and_unknown_suffix(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_documents(tmp_path / "nope.jsonl")
    (tmp_path / "docs.txt").write_text("{}")
    with pytest.raises(InputError, match="format"):
        read_documents(tmp_path / "docs.txt")


def test_point_ids_are_deterministic_and_distinct():
    assert point_id("c", "doc", 0) == point_id("c", "doc", 0)
    ids = {point_id(c, d, p) for c in ("c", "c2") for d in ("doc", "doc1", "1") for p in range(3)}
    assert len(ids) == 18
    # length-prefixed names: no collision between ("c", "1" + "2") and ("c1", "2")-like splits
    assert point_id("c1", "2", 0) != point_id("c", "12", 0)
    assert point_id("c", "doc1", 2) != point_id("c", "doc", 12)


# ---------------------------------------------------------------------------- held-out bad input
def test_misspelled_keys_are_refused_with_a_suggestion():
    with pytest.raises(InputError, match=r"unknown record key\(s\) 'langauge' \(did you mean 'language'\?\).*metadata"):
        parse_document({"id": "d", "langauge": "de", "segments": ["a", "b"]})
    with pytest.raises(InputError, match=r"segment 2: unknown segment key\(s\) 'txt' \(did you mean 'text'\?\)"):
        parse_document({"id": "d", "segments": ["a", {"txt": "b"}]})
    with pytest.raises(InputError, match=r"unknown segment key\(s\) 'lang'"):
        parse_document({"id": "d", "text": "ab cd", "segments": [{"start": 0, "end": 2, "lang": "en"}]})


def test_a_lone_surrogate_is_refused_before_the_tokenizer():
    with pytest.raises(InputError, match=r"segment 2: the segment text holds a lone surrogate \('\\ud800'\) at character 3"):
        parse_document({"id": "d", "segments": ["fine", "bad\ud800text"]})
    with pytest.raises(InputError, match="the document 'text' holds a lone surrogate"):
        parse_document({"id": "d", "text": "x\udfffy z", "spans": [[0, 3]]})
    with pytest.raises(InputError, match="the document 'id' holds a lone surrogate"):
        parse_document({"id": "d\ud800", "segments": ["a"]})


def test_non_utf8_bytes_name_the_line_and_can_be_skipped(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_bytes(json.dumps({"id": "a", "segments": ["one", "two"]}).encode() + b"\n"
                     + b'{"id": "b", "segments": ["caf\xe9", "x"]}\n'
                     + json.dumps({"id": "c", "segments": ["three", "four"]}).encode() + b"\n")
    byte = b'{"id": "b", "segments": ["caf\xe9'.index(b"\xe9") + 1
    with pytest.raises(InputError, match=rf"docs.jsonl line 2: .*not UTF-8: invalid continuation byte at byte {byte} "):
        read_documents(path)
    docs, problems = read_documents(path, on_error="skip")
    assert [d.doc_id for d in docs] == ["a", "c"] and [p.where for p in problems] == ["docs.jsonl line 2"]


def test_a_folder_a_string_or_a_single_dict_get_clear_errors(tmp_path):
    with pytest.raises(InputError, match="is a folder; give a JSONL or Parquet file"):
        read_documents(tmp_path)
    with pytest.raises(TypeError, match="got a str; to index a file, use index_file"):
        parse_documents("docs.jsonl")
    with pytest.raises(TypeError, match=r"got a single record \(a dict\): wrap it in a list"):
        parse_documents({"id": "a", "segments": ["x"]})
