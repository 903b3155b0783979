"""PosIR: one lazy subset per (language, domain) -> positions -> retrieval -> pooled metrics."""

from __future__ import annotations

import logging
import shutil

import mteb
import pyarrow.parquet as pq
import pytest
from retrieval_check import FIXTURES, own_ndcg_at_10

from mteb_fairpos.tasks._base import DatasetSchemaError
from mteb_fairpos.tasks.grouped_metrics import add_to_cells, cell_figures, empty_cells
from mteb_fairpos.tasks.posir import (
    CROSS_LINGUAL_LANGUAGES,
    DOMAINS_ENV,
    POSIR_DOMAINS,
    POSIR_LANGUAGES,
    DomainRef,
    PosIR,
    PosIRCrossLingual,
    average_over_languages,
    language_figures,
    load_domain,
    summarize_scores,
)

POSIR = FIXTURES / "posir"
FIN, MED = "finance_economics", "medicine_health_psychology_traditional_chinese_medicine"
FIXTURE_SUBSETS = {f"{lang}.{d}" for lang in ("deu-Latn", "eng-Latn") for d in (FIN, MED)}


@pytest.fixture(scope="module")
def encoder(minilm):
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper

    return SentenceTransformerEncoderWrapper(minilm)


def _loaded(task_cls=PosIR, **kwargs):
    task = task_cls(data_dir=kwargs.pop("data_dir", POSIR), **kwargs)
    task.load_data()
    return task


def _ref(task, subset):
    return task.dataset[subset]["test"]


# ------------------------------------------------------------------ subsets and selection
def test_one_subset_per_language_and_domain():
    assert len(POSIR_LANGUAGES) == 10 and len(POSIR_DOMAINS) == 31 == len(set(POSIR_DOMAINS))
    subsets = PosIR().hf_subsets
    assert len(subsets) == 310 and "deu-Latn.law_judiciary" in subsets
    assert PosIR.metadata.hf_subsets_to_langscripts["kor-Kore.game"] == ["kor-Kore"]
    cross = PosIRCrossLingual()
    assert len(cross.hf_subsets) == 8 * 31 and not any(s.startswith(("eng-Latn.", "cmn-Hans.")) for s in cross.hf_subsets)
    assert list(dict.fromkeys(s.split(".")[0] for s in cross.hf_subsets)) == list(CROSS_LINGUAL_LANGUAGES)
    assert cross.metadata.hf_subsets_to_langscripts["deu-Latn.sports"] == ["deu-Latn", "eng-Latn"]
    assert PosIR.metadata.main_score == "ndcg_at_10"


def test_one_language_or_one_domain_alone(monkeypatch):
    assert PosIR(languages=["deu"], domains=["law_judiciary"]).hf_subsets == ["deu-Latn.law_judiciary"]
    assert PosIR(languages="deu", domains="law_judiciary").hf_subsets == ["deu-Latn.law_judiciary"]  # one name
    assert {s.split(".")[0] for s in PosIR(languages=["deu-Latn"]).hf_subsets} == {"deu-Latn"}
    assert len(PosIR(domains=["game"]).hf_subsets) == 10
    assert PosIR(domains=["IndustryCorpus2_game"]).hf_subsets == PosIR(domains=["game"]).hf_subsets  # folder name works
    # mteb's own language filter works on the subsets too
    assert len(PosIR().filter_languages(["kor"]).hf_subsets) == 31
    assert len(mteb.get_task("PosIR", languages=["ita"]).hf_subsets) == 31
    # the environment variable reaches plain `mteb run`
    monkeypatch.setenv(DOMAINS_ENV, f"{MED}, sports")
    assert PosIR(languages=["eng"]).hf_subsets == [f"eng-Latn.{MED}", "eng-Latn.sports"]


def test_unknown_language_or_domain_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown language 'xx'"):
        PosIR(languages=["xx"])
    with pytest.raises(ValueError, match="unknown language"):
        PosIRCrossLingual(languages=["eng"])  # English queries have no cross-lingual setting
    with pytest.raises(ValueError, match=r"unknown domain\(s\) \['astrology'\].*law_judiciary"):
        PosIR(domains=["astrology"])
    with pytest.raises(ValueError, match="empty selection"):
        PosIR(domains=[])
    with pytest.raises(ValueError, match="empty selection"):
        PosIR(languages=[])


# ------------------------------------------------------------------ lazy loading and reconciliation
def test_loading_is_lazy_and_pairs_each_subset_with_its_folders():
    task = _loaded(languages=["eng", "deu"])
    assert set(task.hf_subsets) == FIXTURE_SUBSETS == set(task.dataset)
    ref = _ref(task, f"deu-Latn.{FIN}")
    assert isinstance(ref, DomainRef)  # a description only: files are read when the subset runs
    assert (ref.query_folder, ref.corpus_language) == (f"IndustryCorpus2_{FIN}", "deu-Latn")
    cross = _loaded(PosIRCrossLingual, languages=["deu"])
    assert _ref(cross, f"deu-Latn.{MED}").corpus_language == "eng-Latn"


def test_declared_domains_the_data_lacks_are_reported_skips(caplog):
    with caplog.at_level(logging.WARNING, logger="mteb_fairpos.tasks.posir"):
        task = _loaded(languages=["eng"])
    assert set(task.hf_subsets) == {f"eng-Latn.{FIN}", f"eng-Latn.{MED}"}
    assert len(task.skipped_subsets) == 29 and "eng-Latn.law_judiciary" in task.skipped_subsets
    assert "lacks 29 of the selected domain(s) for eng-Latn" in caplog.text and "law_judiciary" in caplog.text


def test_folder_names_with_or_without_prefix_and_undeclared_folders(tmp_path, caplog):
    copy = tmp_path / "posir"
    shutil.copytree(POSIR, copy)
    (copy / "eng-Latn" / f"IndustryCorpus2_{MED}").rename(copy / "eng-Latn" / MED)
    shutil.copytree(copy / "eng-Latn" / MED, copy / "eng-Latn" / "IndustryCorpus2_astrology")
    with caplog.at_level(logging.WARNING, logger="mteb_fairpos.tasks.posir"):
        task = _loaded(data_dir=copy, languages=["eng"])
    assert _ref(task, f"eng-Latn.{MED}").query_folder == MED
    assert "match no declared domain and are not evaluated: IndustryCorpus2_astrology" in caplog.text


def test_hub_path_lists_folders_and_downloads_files_one_at_a_time(monkeypatch, encoder):
    """The hub is mocked (no network here): the tree listing and the downloads serve the fixture."""
    import httpx
    import huggingface_hub
    from huggingface_hub.errors import RemoteEntryNotFoundError
    from huggingface_hub.hf_api import RepoFile, RepoFolder

    listed, downloaded = [], []

    def list_repo_tree(self, repo_id, path_in_repo=None, repo_type=None, revision=None, **_):
        assert (repo_id, repo_type, revision) == ("infgrad/PosIR-Benchmark-v1", "dataset", "main")
        listed.append(path_in_repo)
        folder = POSIR / path_in_repo
        if not folder.is_dir():
            raise RemoteEntryNotFoundError(f"404: {path_in_repo} not found", response=httpx.Response(404, request=httpx.Request("GET", "https://huggingface.co")))
        for child in sorted(folder.iterdir()):
            relative = f"{path_in_repo}/{child.name}"
            yield RepoFolder(path=relative, oid="0") if child.is_dir() else RepoFile(path=relative, size=1, blob_id="0")

    def hf_hub_download(repo_id, filename, repo_type=None, revision=None, **_):
        downloaded.append(filename)
        return str(POSIR / filename)

    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_tree", list_repo_tree)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    task = PosIRCrossLingual(languages=["deu", "fra"], domains=[FIN])
    task.load_data()
    assert sorted(listed) == ["deu-Latn", "eng-Latn", "fra-Latn"] and downloaded == []  # listing only
    assert task.hf_subsets == [f"deu-Latn.{FIN}"] and task.skipped_subsets == [f"fra-Latn.{FIN}"]
    result = mteb.evaluate(encoder, task, cache=None, co2_tracker=False).task_results[0]
    assert result.scores["test"][0]["n_queries"] == 5
    assert downloaded == [f"deu-Latn/IndustryCorpus2_{FIN}/queries.parquet",
                          f"eng-Latn/IndustryCorpus2_{FIN}/corpus.parquet",
                          f"deu-Latn/IndustryCorpus2_{FIN}/qrels/test.parquet"]


def test_a_language_without_data_is_a_clear_error():
    with pytest.raises(DatasetSchemaError, match=r"none of the selected subsets \(languages \['fra-Latn'\]\)"):
        _loaded(languages=["fra"])


def test_domain_positions_and_skips():
    data = load_domain(_ref(_loaded(languages=["eng"]), f"eng-Latn.{FIN}"))
    # q-fin-5's relevant document is not in the corpus; q-fin-6 has a zero document length
    assert data.skipped == {"relevant_doc_missing": 1, "no_qrels": 0, "qrels_of_unknown_query": 0}
    assert set(data.split["relevant_docs"]) == {"q-fin-1", "q-fin-2", "q-fin-3", "q-fin-4", "q-fin-6"}
    assert data.positions["q-fin-6"] is None
    assert data.positions["q-fin-1"] == ("Q1", "0.05-0.10")  # span midpoint 10 of 177 chars
    assert data.positions["q-fin-3"][0] == "Q2" and data.positions["q-fin-4"][0] == "Q4"
    assert len(data.split["corpus"]) == 3


# ------------------------------------------------------------------ end to end
def _expected_subset(minilm, ref):
    """Own retrieval of one subset, placed into cells the way the task should."""
    data = load_domain(ref)
    own = own_ndcg_at_10(minilm, data.split)
    cells = empty_cells()
    for qid, score in own.items():
        if data.positions[qid] is not None:
            add_to_cells(cells, *data.positions[qid], score)
    return sum(own.values()) / len(own), cell_figures(cells), len(own)


@pytest.mark.parametrize("task_cls", [PosIR, PosIRCrossLingual])
def test_end_to_end_with_minilm(task_cls, encoder, minilm):
    task = _loaded(task_cls, languages=["deu"])
    expected = {s: _expected_subset(minilm, _ref(task, s)) for s in task.hf_subsets}
    result = mteb.evaluate(encoder, task, cache=None, co2_tracker=False).task_results[0]
    entries = {e["hf_subset"]: e for e in result.scores["test"]}
    assert set(entries) == {f"deu-Latn.{FIN}", f"deu-Latn.{MED}"}
    for subset, (ndcg, figures, n) in expected.items():
        scores = entries[subset]
        assert scores["ndcg_at_10"] == pytest.approx(ndcg, abs=1e-4) and scores["main_score"] == scores["ndcg_at_10"]
        assert scores["n_queries"] == n
        for key in ("ndcg_at_10_Q1", "ndcg_at_10_Q2", "ndcg_at_10_Q4", "psi_Q1", "psi", "harmonic_mean",
                    "position_0.05-0.10", "position_0.50-0.55"):
            assert scores[key] == pytest.approx(figures[key], abs=1e-4), (subset, key)
        assert scores["position_0.95-1.00"] is None  # an empty bin is reported, not scored
        assert (scores["language"], scores["corpus_language"]) == (
            "deu-Latn", "eng-Latn" if task_cls is PosIRCrossLingual else "deu-Latn")
    fin = entries[f"deu-Latn.{FIN}"]
    assert fin["n_queries"] == 5 and fin["unplaced_queries"] == 1
    assert fin["skipped_queries"]["relevant_doc_missing"] == 1
    # the per-language pooling reads the very entries mteb wrote
    pooled = language_figures(result.scores["test"])["deu-Latn"]
    assert pooled["n_queries"] == 7 and pooled["n_domains"] == 2
    med = entries[f"deu-Latn.{MED}"]
    assert pooled["ndcg_at_10"] == pytest.approx((fin["ndcg_at_10"] * 5 + med["ndcg_at_10"] * 2) / 7)


# ------------------------------------------------------------------ pooling as the papers do
def _entry(language, domain, ndcg, cells):
    n = sum(count for bins in cells.values() for count, _ in bins.values())
    return {"hf_subset": f"{language}.{domain}", "language": language, "ndcg_at_10": ndcg, "n_queries": n,
            "cells": cells}


def test_language_pooling_by_hand():
    # deu, two domains. finance: 3 queries in Q1 (bins 0.00-0.05: 1.0 and 0.5; 0.95-1.00: 0.2),
    # ndcg 1.7/3; law: 1 query in Q1 bin 0.95-1.00 scoring 0.6, ndcg 0.6.
    fin = {"Q1": {"0.00-0.05": [2, 1.5], "0.95-1.00": [1, 0.2]}, "Q2": {}, "Q3": {}, "Q4": {}}
    law = {"Q1": {"0.95-1.00": [1, 0.6]}, "Q2": {}, "Q3": {}, "Q4": {}}
    eng = {"Q1": {}, "Q2": {"0.50-0.55": [2, 1.0]}, "Q3": {}, "Q4": {}}
    entries = [_entry("deu-Latn", "finance_economics", 1.7 / 3, fin), _entry("deu-Latn", "law_judiciary", 0.6, law),
               _entry("eng-Latn", "sports", 0.5, eng),
               {"hf_subset": "eng-Latn.game", "language": "eng-Latn", "ndcg_at_10": None, "n_queries": 0,
                "cells": empty_cells()}]  # a subset with no query adds nothing
    figures = language_figures(entries)
    deu = figures["deu-Latn"]
    # query-weighted: (1.7 + 0.6) / 4, not the mean of the two domains' nDCG (0.583)
    assert deu["ndcg_at_10"] == pytest.approx(2.3 / 4) and deu["n_queries"] == 4 and deu["n_domains"] == 2
    # pooled bins: 0.00-0.05 -> 1.5/2 = 0.75; 0.95-1.00 -> 0.8/2 = 0.4; PSI = 1 - 0.4/0.75
    assert deu["position_0.00-0.05"] == pytest.approx(0.75) and deu["position_0.95-1.00"] == pytest.approx(0.4)
    assert deu["psi"] == pytest.approx(1 - 0.4 / 0.75) and deu["psi_Q1"] == pytest.approx(1 - 0.4 / 0.75)
    assert deu["ndcg_at_10_Q1"] == pytest.approx((0.75 + 0.4) / 2) and deu["ndcg_at_10_Q2"] is None
    # eng has queries in one bin only: PSI is undefined (#12), and the average leaves it out
    assert figures["eng-Latn"]["n_domains"] == 1 and figures["eng-Latn"]["psi"] is None

    summary = summarize_scores(entries)
    assert summary["main_score"] == pytest.approx((2.3 / 4 + 0.5) / 2)
    assert summary["psi"] == pytest.approx(1 - 0.4 / 0.75)
    assert summary["positions"]["0.00-0.05"] == pytest.approx(0.75)  # deu only: eng has no query there
    assert summary["positions"]["0.50-0.55"] == pytest.approx(0.5) and summary["positions"]["0.30-0.35"] is None
    assert summary["average"]["n_languages"] == 2


def test_average_over_languages():
    rows = [{"ndcg_at_10": 0.5, "psi": 0.2, "psi_Q1": None}, {"ndcg_at_10": 0.7, "psi": 0.4, "psi_Q1": 0.3}]
    avg = average_over_languages(rows)
    assert avg["ndcg_at_10"] == pytest.approx(0.6) and avg["psi"] == pytest.approx(0.3)
    assert avg["psi_Q1"] == pytest.approx(0.3) and avg["ndcg_at_10_Q4"] is None and avg["n_languages"] == 2


def test_pooling_needs_the_cells():
    with pytest.raises(ValueError, match="has no 'cells'"):
        language_figures([{"hf_subset": "deu-Latn.game", "ndcg_at_10": 0.5, "n_queries": 3}])


# ------------------------------------------------------------------ bad input
def test_missing_column_or_file_is_a_clear_error(tmp_path):
    copy = tmp_path / "posir"
    shutil.copytree(POSIR, copy)
    queries = copy / "eng-Latn" / f"IndustryCorpus2_{FIN}" / "queries.parquet"
    pq.write_table(pq.read_table(queries).drop(["pos_char_span"]), queries)
    task = _loaded(data_dir=copy, languages=["eng"])
    with pytest.raises(DatasetSchemaError, match="pos_char_span"):
        load_domain(_ref(task, f"eng-Latn.{FIN}"))
    (copy / "eng-Latn" / f"IndustryCorpus2_{MED}" / "qrels" / "test.parquet").unlink()
    with pytest.raises(DatasetSchemaError, match="qrels/test.parquet"):
        load_domain(_ref(task, f"eng-Latn.{MED}"))
