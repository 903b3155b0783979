"""The one input reader: the same id check for files and in-memory records, folders, and local URIs."""

from __future__ import annotations

import json

import pytest

from mteb_fairpos.integrations.qdrant import InputError, parse_documents, read_documents, scan_file, scan_input
from mteb_fairpos.integrations.qdrant.input import read_range


def write(path, ids):
    path.write_text("".join(json.dumps({"id": i, "segments": [f"text of {i}", "more"]}) + "\n" for i in ids))
    return path


def test_in_memory_records_and_files_count_duplicate_ids_the_same_way(tmp_path):
    ids = ["a", "b", "a", "c", "a", "b"]
    message = r"2 document id\(s\) occur more than once \(3 extra record\(s\)\): 'a' x3 \(first at {0} 1\); 'b' x2"
    with pytest.raises(InputError, match=message.format("record")):
        parse_documents([{"id": i, "segments": ["x"]} for i in ids])
    with pytest.raises(InputError, match=message.format("docs.jsonl line")):
        read_documents(write(tmp_path / "docs.jsonl", ids))
    docs, problems = parse_documents([{"id": i, "segments": ["x"]} for i in ids], on_error="skip")
    assert [d.doc_id for d in docs] == ["a", "b", "c"]
    assert [p.where for p in problems] == ["record 3", "record 5", "record 6"]


def test_a_folder_skips_hidden_and_foreign_files_and_a_file_uri_reads_like_a_path(tmp_path):
    write(tmp_path / "a.jsonl", ["a1", "a2"])
    write(tmp_path / "b.ndjson", ["b1"])
    write(tmp_path / ".a.jsonl.partial-12", ["x"])
    (tmp_path / "readme.txt").write_text("not input")
    scan = scan_input(tmp_path, range_size=1)
    assert [r.name for r in scan.ranges] == ["a-000000001", "a-000000002", "b-000000001"]
    assert [d.doc_id for r in scan.ranges for d in read_range(r)] == ["a1", "a2", "b1"]
    assert scan_input(f"file://{tmp_path}", range_size=1).ranges == scan.ranges
    with pytest.raises(InputError, match="is a folder; give a JSONL or Parquet file"):
        scan_file(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        scan_input(tmp_path / "missing")


def test_a_file_given_twice_is_refused_not_read_twice(tmp_path):
    docs = write(tmp_path / "docs.jsonl", ["a", "b"])
    for inputs in ([docs, docs], [tmp_path / "docs.jsonl", f"file://{docs}"], [tmp_path, docs]):
        with pytest.raises(InputError, match=r"is '.*docs\.jsonl' again \(given twice, through a link, or inside a folder given too\)"):
            scan_input([str(i) for i in inputs])
    assert scan_input(str(tmp_path)).documents == 2  # the folder alone: each file once
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "link.jsonl").symlink_to(docs)
    with pytest.raises(InputError, match="again"):
        scan_input([str(docs), str(elsewhere / "link.jsonl")])  # a link to it is the same file


def test_a_format_given_reads_a_file_whose_suffix_does_not_say(tmp_path):
    plain = write(tmp_path / "documents", ["a", "b", "c"])
    with pytest.raises(InputError, match="cannot tell the format of 'documents' from its suffix"):
        scan_input(str(plain))
    scan = scan_input(str(plain), format="jsonl", range_size=2)
    assert scan.documents == 3 and [r.format for r in scan.ranges] == ["jsonl", "jsonl"]
    assert [d.doc_id for r in scan.ranges for d in read_range(r)] == ["a", "b", "c"]


@pytest.mark.parametrize(("given", "error", "message"), [
    (None, TypeError, "expected a path or a URI (s3://bucket/...), got NoneType None."),
    (["docs.jsonl"], TypeError, "expected a path or a URI (s3://bucket/...), got list ['docs.jsonl']."),
    ("  ", ValueError, "the path is empty; give a file, a folder or a URI."),
])
def test_a_location_that_is_no_path_is_named_not_made_a_folder_of_its_text(tmp_path, monkeypatch, given, error, message):
    """str(None) was the folder 'None' (encode wrote its parts there), a list a file named "['docs.jsonl']"."""
    from mteb_fairpos.integrations.qdrant import encode_to_parts, read_documents

    monkeypatch.chdir(tmp_path)
    with pytest.raises(error) as caught:
        read_documents(given)
    assert str(caught.value) == message
    (tmp_path / "docs.jsonl").write_text('{"id": "a", "segments": ["One.", "Two."]}\n')
    with pytest.raises(error):
        encode_to_parts(tmp_path / "docs.jsonl", given, lambda: pytest.fail("the model was loaded"), "c", show_progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl"]
