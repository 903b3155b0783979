"""`spans.join_segments`: the one place a segmented document's text and spans are made together."""

from __future__ import annotations

import pytest

from mteb_fairpos.integrations.qdrant import parse_document
from mteb_fairpos.permutation import assemble
from mteb_fairpos.spans import join_segments

SEGMENTS = ["Erster Artikel.", "Second article, longer.", "第三篇文章。"]


@pytest.mark.parametrize("separator", [" ", "\n\n", ""])
def test_each_span_slices_back_its_segment(separator):
    text, spans = join_segments(SEGMENTS, separator)
    assert text == separator.join(SEGMENTS)
    assert [text[start:end] for start, end in spans] == SEGMENTS
    assert all(end + len(separator) == nxt for (_, end), (nxt, _) in zip(spans, spans[1:]))


def test_no_segment_makes_an_empty_document():
    assert join_segments([]) == ("", ())


def test_permutation_documents_and_qdrant_records_join_alike():
    text, spans = join_segments(SEGMENTS)
    assert assemble(SEGMENTS) == (text, spans)
    doc = parse_document({"id": "d", "segments": SEGMENTS})
    assert doc.text == text and [(s.start, s.end) for s in doc.segments] == list(spans)
    with pytest.raises(ValueError, match="duplicate segments"):
        assemble([SEGMENTS[0], SEGMENTS[0]])  # the permutation probe refuses a repeated text; joining alone does not
    assert join_segments([SEGMENTS[0], SEGMENTS[0]])[1] == ((0, 15), (16, 31))
