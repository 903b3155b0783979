"""``mteb-fairpos search``: query a collection built by ``mteb-fairpos index``."""

from __future__ import annotations

import argparse
import json

from . import qdrant_common
from .options import add_connection_arguments, add_device, add_max_length, add_model, add_quiet, positive_int


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "search",
        help="search a Qdrant collection, optionally restricted by segment position or language",
        description="Encode the query (uncalibrated, as queries always are) and rank the collection's documents "
        "(or segments, with --segments) by their calibrated or uncalibrated vectors.",
    )
    parser.add_argument("query", help="query text")
    add_connection_arguments(parser)
    add_max_length(parser)
    add_model(parser, note="here the query model, by default the one stored with the collection")
    add_device(parser)
    parser.add_argument("--limit", type=positive_int, default=10, help="number of results (default 10)")
    parser.add_argument("--vector", choices=("calibrated", "uncalibrated"), default=None,
                        help="which document vectors to rank (default: calibrated, or the only ones the collection has)")
    parser.add_argument("--position", type=positive_int, nargs="+", default=None,
                        help="keep documents that have a segment at this position (or these positions) which the model "
                             "read; the rank is still that of the whole document vector")
    parser.add_argument("--language", type=_language, nargs="+", default=None,
                        help="keep documents with a segment in this language (with --position: the same segment)")
    parser.add_argument("--include-cut", action="store_true",
                        help="with --position/--language: also match segments the maximum length cut off entirely")
    parser.add_argument("--segments", action="store_true", help="rank late-chunk segment points instead of documents")
    parser.add_argument("--json", action="store_true", help="print the hits as JSON lines")
    add_quiet(parser, also="no note on a local-mode store")
    parser.set_defaults(func=run)
    return parser


def _language(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a language code, got an empty one")
    return text


def run(args: argparse.Namespace) -> int:
    from ..integrations.qdrant import FairQdrantIndex

    if args.include_cut and (args.segments or (args.position is None and args.language is None)):
        raise ValueError("--include-cut widens a --position/--language filter of documents; give one, without --segments.")

    with qdrant_common.opened_store(args, existing=True) as opened:
        model, name = qdrant_common.model_for_collection(args, opened, documents=False)
        index = FairQdrantIndex(model, args.collection, opened, model_name=name)
        position = None if args.position is None else (args.position[0] if len(args.position) == 1 else args.position)
        language = None if args.language is None else (args.language[0] if len(args.language) == 1 else args.language)
        hits = index.search(args.query, limit=args.limit, vector=args.vector, position=position, language=language,
                            level="segment" if args.segments else "document", with_text=True,
                            coverage=None if args.include_cut else ("full", "partial"))
    if args.json:
        for hit in hits:
            print(json.dumps(hit.to_dict(), ensure_ascii=False))
        return 0
    if not hits:
        print("no results")
    for rank, hit in enumerate(hits, start=1):
        where = f" segment {hit.position}/{hit.n_segments}" if hit.position is not None else f" ({hit.n_segments} segments)"
        print(f"{rank:>3}. {hit.score:.4f}  {hit.doc_id}{where}")
        layout = ", ".join(
            f"{s['position']}:{s.get('language') or '?'}[{s['char_span'][0]}:{s['char_span'][1]}]"
            + ("" if s.get("coverage", "full") == "full" else f"({s['coverage']})")
            for s in hit.segments
        )
        print(f"     layout {layout}")
        if hit.text:
            snippet = " ".join(hit.text.split())
            print(f"     {snippet[:160]}{'...' if len(snippet) > 160 else ''}")
    return 0
