"""PosIR: lazy (language, domain) loading -> positions -> retrieval -> pooled metrics."""

from __future__ import annotations

import shutil

import mteb
import pyarrow.parquet as pq
import pytest
from retrieval_check import FIXTURES, own_ndcg_at_10

from mteb_fairpos.tasks._base import DatasetSchemaError
from mteb_fairpos.tasks.grouped_metrics import cell_figures, empty_cells, add_to_cells
from mteb_fairpos.tasks.posir import (
    CROSS_LINGUAL_LANGUAGES,
    DOMAINS_ENV,
    POSIR_LANGUAGES,
    LanguageUnit,
    PosIR,
    PosIRCrossLingual,
    average_over_languages,
    load_domain,
)

POSIR = FIXTURES / "posir"


@pytest.fixture(scope="module")
def encoder(minilm):
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper

    return SentenceTransformerEncoderWrapper(minilm)


def _unit(task, lang):
    return task.dataset[lang]["test"]


def test_metadata_languages_and_settings():
    assert len(POSIR_LANGUAGES) == 10 and PosIR().hf_subsets == list(POSIR_LANGUAGES)
    cross = PosIRCrossLingual()
    assert cross.hf_subsets == list(CROSS_LINGUAL_LANGUAGES) and "eng-Latn" not in cross.hf_subsets
    assert cross.metadata.hf_subsets_to_langscripts["deu-Latn"] == ["deu-Latn", "eng-Latn"]
    assert PosIR.metadata.main_score == "ndcg_at_10"
    assert PosIR(languages=["deu"]).hf_subsets == ["deu-Latn"]
    # mteb's own language filter works on the subsets too:
    assert PosIR().filter_languages(["kor"]).hf_subsets == ["kor-Kore"]


def test_loading_is_lazy_and_finds_domains():
    task = PosIR(data_dir=POSIR, languages=["eng-Latn", "deu-Latn"])
    task.load_data()
    unit = _unit(task, "eng-Latn")
    assert isinstance(unit, LanguageUnit)  # nothing but a description: files are read per domain later
    assert unit.domains == ["finance", "medicine"] and unit.corpus_language == "eng-Latn"
    cross = PosIRCrossLingual(data_dir=POSIR, languages=["deu"])
    cross.load_data()
    assert _unit(cross, "deu-Latn").corpus_language == "eng-Latn"


def test_one_domain_alone_by_argument_or_environment(monkeypatch):
    task = PosIR(data_dir=POSIR, languages=["eng"], domains=["medicine"])
    task.load_data()
    assert _unit(task, "eng-Latn").domains == ["medicine"]
    monkeypatch.setenv(DOMAINS_ENV, "finance")
    env_task = PosIR(data_dir=POSIR, languages=["eng"])
    env_task.load_data()
    assert _unit(env_task, "eng-Latn").domains == ["finance"]


def test_unknown_language_or_domain_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown language 'xx'"):
        PosIR(languages=["xx"])
    with pytest.raises(ValueError, match="unknown language"):
        PosIRCrossLingual(languages=["eng"])  # English queries have no cross-lingual setting
    task = PosIR(data_dir=POSIR, languages=["eng"], domains=["astrology"])
    with pytest.raises(ValueError, match=r"unknown domain\(s\) \['astrology'\].*finance"):
        task.load_data()
    missing_language = PosIR(data_dir=POSIR, languages=["fra"])
    with pytest.raises(DatasetSchemaError, match="fra-Latn"):
        missing_language.load_data()


def test_domain_positions_and_skips():
    task = PosIR(data_dir=POSIR, languages=["eng"])
    task.load_data()
    data = load_domain(_unit(task, "eng-Latn"), "finance")
    # q-fin-5's relevant document is not in the corpus; q-fin-6 has a zero document length
    assert data.skipped == {"relevant_doc_missing": 1, "no_qrels": 0, "qrels_of_unknown_query": 0}
    assert set(data.split["relevant_docs"]) == {"q-fin-1", "q-fin-2", "q-fin-3", "q-fin-4", "q-fin-6"}
    assert data.positions["q-fin-6"] is None
    assert data.positions["q-fin-1"] == ("Q1", "0.05-0.10")  # span midpoint 10 of 177 chars
    assert data.positions["q-fin-3"][0] == "Q2" and data.positions["q-fin-4"][0] == "Q4"
    assert len(data.split["corpus"]) == 3


def _expected_language(minilm, unit):
    """Own retrieval per domain, pooled like the task should: per-query nDCG into cells."""
    cells, scores = empty_cells(), []
    for domain in unit.domains:
        data = load_domain(unit, domain)
        own = own_ndcg_at_10(minilm, data.split)
        scores.extend(own.values())
        for qid, score in own.items():
            if data.positions[qid] is not None:
                add_to_cells(cells, *data.positions[qid], score)
    return sum(scores) / len(scores), cell_figures(cells), len(scores)


@pytest.mark.parametrize("task_cls", [PosIR, PosIRCrossLingual])
def test_end_to_end_with_minilm(task_cls, encoder, minilm):
    task = task_cls(data_dir=POSIR, languages=["deu"])
    task.load_data()
    ndcg, figures, n = _expected_language(minilm, _unit(task, "deu-Latn"))
    result = mteb.evaluate(encoder, task, cache=None, co2_tracker=False).task_results[0]
    scores = result.scores["test"][0]
    assert scores["hf_subset"] == "deu-Latn"
    assert scores["ndcg_at_10"] == pytest.approx(ndcg, abs=1e-4) and scores["main_score"] == scores["ndcg_at_10"]
    assert scores["n_queries"] == n == 7
    for key in ("ndcg_at_10_Q1", "ndcg_at_10_Q2", "ndcg_at_10_Q3", "ndcg_at_10_Q4", "psi_Q1", "psi",
                "position_0.50-0.55", "harmonic_mean"):
        assert scores[key] == pytest.approx(figures[key], abs=1e-4), key
    assert scores["position_0.95-1.00"] is None  # an empty bin is reported, not scored
    assert scores["unplaced_queries"] == 1
    assert scores["skipped_queries"]["relevant_doc_missing"] == 1
    assert set(scores["domains"]) == {"finance", "medicine"}
    assert scores["domains"]["finance"]["n_queries"] == 5 and scores["domains"]["medicine"]["n_queries"] == 2
    # pooled over all queries = query-weighted mean of the domains
    d = scores["domains"]
    weighted = (d["finance"]["ndcg_at_10"] * 5 + d["medicine"]["ndcg_at_10"] * 2) / 7
    assert scores["ndcg_at_10"] == pytest.approx(weighted)
    assert scores["corpus_language"] == ("eng-Latn" if task_cls is PosIRCrossLingual else "deu-Latn")


def test_average_over_languages():
    rows = [{"ndcg_at_10": 0.5, "psi": 0.2, "psi_Q1": None}, {"ndcg_at_10": 0.7, "psi": 0.4, "psi_Q1": 0.3}]
    avg = average_over_languages(rows)
    assert avg["ndcg_at_10"] == pytest.approx(0.6) and avg["psi"] == pytest.approx(0.3)
    assert avg["psi_Q1"] == pytest.approx(0.3) and avg["ndcg_at_10_Q4"] is None and avg["n_languages"] == 2


# ------------------------------------------------------------------ bad input
def test_missing_column_or_file_is_a_clear_error(tmp_path):
    copy = tmp_path / "posir"
    shutil.copytree(POSIR, copy)
    queries = copy / "eng-Latn" / "finance" / "queries.parquet"
    pq.write_table(pq.read_table(queries).drop(["pos_char_span"]), queries)
    task = PosIR(data_dir=copy, languages=["eng"])
    task.load_data()
    with pytest.raises(DatasetSchemaError, match="pos_char_span"):
        load_domain(_unit(task, "eng-Latn"), "finance")
    (copy / "eng-Latn" / "medicine" / "qrels" / "test.parquet").unlink()
    with pytest.raises(DatasetSchemaError, match="qrels/test.parquet"):
        load_domain(_unit(task, "eng-Latn"), "medicine")
