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
    task = PosIRCrossLingual(languages=["deu", "fra"], domains=[FIN], revision="main")  # main stays selectable
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
    assert data.skipped == {"no_query_text": 0, "relevant_doc_missing": 1, "no_qrels": 0, "qrels_of_unknown_query": 0}
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
    # eng has queries in one bin only: PSI is undefined, and the average leaves it out
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


def _one(**changes):
    return {"hf_subset": "deu-Latn.game", "language": "deu-Latn", "ndcg_at_10": 0.5, "n_queries": 3,
            "cells": {"Q1": {"0.00-0.05": [3, 1.5]}, "Q2": {}, "Q3": {}, "Q4": {}}, **changes}


@pytest.mark.parametrize(("entries", "error", "message"), [
    ({"test": [_one()]}, TypeError, "expected the score entries of one split (result.scores['test']), got a mapping with keys ['test']."),
    ([_one(), "x"], TypeError, "score entry 1 is a str, not a mapping of scores."),
    ([_one(), _one()], ValueError, "PosIR subset 'deu-Latn.game' is given twice (entries 0 and 1); it would be pooled twice."),
    ([{k: v for k, v in _one().items() if k != "n_queries"}], ValueError, "records no n_queries; was it written by this task?"),
    ([_one(n_queries="3")], TypeError, "PosIR subset 'deu-Latn.game' records n_queries '3', not a count of queries."),
    ([_one(n_queries=-1)], TypeError, "records n_queries -1, not a count of queries."),
    ([_one(cells={"Q9": {"0.00-0.05": [3, 1.5]}})], TypeError, "cells['Q9'] is not the bins of a length bucket (Q1, Q2, Q3, Q4)."),
    ([_one(cells={"Q1": [1, 2]})], TypeError, "cells['Q1'] is not the bins of a length bucket"),
    ([_one(cells={"Q1": {"0.00-0.07": [3, 1.5]}})], TypeError, "cells['Q1']['0.00-0.07'] is not a position bin's [count, sum of nDCG@10]"),
    ([_one(cells={"Q1": {"0.00-0.05": ["3", "1.5"]}})], TypeError, "cells['Q1']['0.00-0.05'] is not a position bin's"),
    ([_one(cells={"Q1": {"0.00-0.05": [3]}})], TypeError, "cells['Q1']['0.00-0.05'] is not a position bin's"),
])
def test_scores_that_are_not_a_splits_entries_are_named_not_misread(entries, error, message):
    """Before: the whole ``result.scores`` failed on 'str' has no 'get', an entry without a count of queries was left
    out unseen, a subset given twice weighed double, and malformed cells failed in the merge (KeyError, unpacking)."""
    with pytest.raises(error) as caught:
        summarize_scores(entries)
    assert message in str(caught.value)


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


def test_a_text_column_of_bytes_is_named_before_anything_is_embedded(tmp_path):
    import pyarrow as pa

    copy = tmp_path / "posir"
    shutil.copytree(POSIR, copy)
    corpus = copy / "deu-Latn" / f"IndustryCorpus2_{MED}" / "corpus.parquet"
    table = pq.read_table(corpus)
    binary = pa.array([t.encode("utf-8") for t in table.column("text").to_pylist()], type=pa.binary())
    pq.write_table(table.set_column(table.schema.get_field_index("text"), "text", binary), corpus)
    with pytest.raises(DatasetSchemaError, match=rf"corpus.parquet of {copy}: column 'text' holds binary, not strings"):
        _loaded(data_dir=copy, languages=["deu"])


# ------------------------------------------------------------------ against the real dataset's layout
def test_the_31st_domain_is_fineweb(tmp_path, caplog):
    from mteb_fairpos.tasks.posir import POSIR_DOMAINS

    assert "fineweb" in POSIR_DOMAINS and "other" not in POSIR_DOMAINS and len(POSIR_DOMAINS) == 31
    assert len(PosIR(domains=["fineweb"]).hf_subsets) == 10
    copy = tmp_path / "posir"
    shutil.copytree(POSIR, copy)
    shutil.copytree(copy / "eng-Latn" / f"IndustryCorpus2_{FIN}", copy / "eng-Latn" / "fineweb")
    with caplog.at_level(logging.WARNING, logger="mteb_fairpos.tasks.posir"):
        task = _loaded(data_dir=copy, languages=["eng"])
    assert "eng-Latn.fineweb" in task.hf_subsets and "match no declared domain" not in caplog.text
    assert "eng-Latn.fineweb" not in task.skipped_subsets and len(task.skipped_subsets) == 28


def test_the_four_extra_languages_are_selectable_not_default():
    from mteb_fairpos.tasks.posir import EXTRA_LANGUAGES

    assert EXTRA_LANGUAGES == ("hin-Deva", "pol-Latn", "ben-Beng", "jpn-Jpan")
    assert not any(s.startswith(EXTRA_LANGUAGES) for s in PosIR().hf_subsets + PosIRCrossLingual().hf_subsets)
    assert len(PosIR(languages=["hin"]).hf_subsets) == 31
    assert len(mteb.get_task("PosIR", languages=["pol"]).hf_subsets) == 31
    assert mteb.get_task("PosIR", hf_subsets=["ben-Beng.game"]).hf_subsets == ["ben-Beng.game"]
    cross = PosIRCrossLingual(languages=["jpn"])
    assert len(cross.hf_subsets) == 31
    assert cross.metadata.hf_subsets_to_langscripts["jpn-Jpan.game"] == ["jpn-Jpan", "eng-Latn"]
    # asking for the paper's languages explicitly still gives exactly the paper's subsets
    assert mteb.get_task("PosIR", languages=["deu"]).hf_subsets == PosIR(languages=["deu"]).hf_subsets


def test_domain_choice_survives_mtebs_own_filter(monkeypatch):
    monkeypatch.setenv(DOMAINS_ENV, "computer_programming_code")
    assert len(PosIR().hf_subsets) == 10
    assert len(mteb.get_task("PosIR").hf_subsets) == 10
    assert mteb.get_task("PosIR", languages=["deu"]).hf_subsets == ["deu-Latn.computer_programming_code"]
    assert PosIR(domains=["game"]).filter_languages(None).hf_subsets == PosIR(domains=["game"]).hf_subsets
    with pytest.raises(ValueError, match="no subset left"):
        PosIR(languages=["deu"]).filter_languages(["fra"])


def test_metadata_license_and_pinned_revision(monkeypatch):
    from mteb_fairpos.tasks.posir import LAST_KNOWN_REVISION, REVISION_ENV

    assert PosIR.metadata.license == "mit" and PosIRCrossLingual.metadata.license == "mit"
    assert LAST_KNOWN_REVISION == "8faa66a19e4b2cf5764bc2e2adb19e9eca503d63"
    assert PosIR().metadata.dataset["revision"] == LAST_KNOWN_REVISION
    assert PosIR(revision="main").metadata.dataset["revision"] == "main"
    assert PosIR.metadata.dataset["revision"] == LAST_KNOWN_REVISION  # the class is untouched
    monkeypatch.setenv(REVISION_ENV, "main")
    assert mteb.get_task("PosIR").metadata.dataset["revision"] == "main"


def test_pinned_revision_reaches_the_hub(monkeypatch):
    """The hub is mocked (no network here): every listing and download asks for the pinned commit."""
    import huggingface_hub
    from huggingface_hub.hf_api import RepoFolder

    from mteb_fairpos.tasks.posir import LAST_KNOWN_REVISION

    revisions = []

    def list_repo_tree(self, repo_id, path_in_repo=None, repo_type=None, revision=None, **_):
        revisions.append(revision)
        yield from (RepoFolder(path=f"{path_in_repo}/{c.name}", oid="0") for c in sorted((POSIR / path_in_repo).iterdir()))

    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_tree", list_repo_tree)
    PosIR(languages=["deu"], domains=[FIN]).load_data()
    assert revisions == [LAST_KNOWN_REVISION]


def test_paper_query_instruction_option(encoder):
    from mteb_fairpos.tasks.posir import PAPER_QUERY_INSTRUCTION, PosIRCrossLingualInstructed, PosIRInstructed

    assert PAPER_QUERY_INSTRUCTION.startswith("Instruct: Given a web search query") and PAPER_QUERY_INSTRUCTION.endswith("\nQuery: ")
    assert PosIR().query_instruction == "" and PosIR(query_instruction=True).query_instruction == PAPER_QUERY_INSTRUCTION
    assert PosIR(query_instruction="Find: ").query_instruction == "Find: "
    # an instruction changes every figure: the name says which, so mteb's cache keeps the results apart
    assert [PosIR(query_instruction=i).metadata.name for i in (None, False, True, "Find: ")] == [
        "PosIR", "PosIR", "PosIR.instruction-paper", "PosIR.instruction-7d8d0fff26a9"]
    assert [PosIRInstructed(query_instruction=i).metadata.name for i in (True, False)] == [
        "PosIRInstructed", "PosIRInstructed.instruction-none"]
    assert mteb.get_task("PosIRInstructed").query_instruction == PAPER_QUERY_INSTRUCTION
    assert mteb.get_task("PosIRCrossLingualInstructed").query_instruction == PAPER_QUERY_INSTRUCTION
    assert len(PosIRInstructed().hf_subsets) == 310 and len(PosIRCrossLingualInstructed().hf_subsets) == 248
    with pytest.raises(TypeError, match="query_instruction"):
        PosIR(query_instruction=3)
    task = _loaded(PosIRInstructed, languages=["deu"], domains=[FIN])
    plain = load_domain(_ref(task, f"deu-Latn.{FIN}"))
    data = load_domain(_ref(task, f"deu-Latn.{FIN}"), task.query_instruction)
    assert list(data.split["queries"]["text"]) == [PAPER_QUERY_INSTRUCTION + t for t in plain.split["queries"]["text"]]
    result = mteb.evaluate(encoder, task, cache=None, co2_tracker=False).task_results[0]
    assert result.scores["test"][0]["query_instruction"] == PAPER_QUERY_INSTRUCTION


def test_cross_lingual_embeds_each_english_corpus_once(tmp_path, encoder):
    # two query languages (deu and a copy of it as fra) x two domains: 4 subsets, 2 English corpora
    copy = tmp_path / "posir"
    shutil.copytree(POSIR, copy)
    shutil.copytree(copy / "deu-Latn", copy / "fra-Latn")
    calls = []
    original = encoder.encode

    def counting(inputs, *, prompt_type=None, **kwargs):  # a spy: the real model still embeds
        calls.append((kwargs["hf_subset"], getattr(prompt_type, "value", prompt_type)))
        return original(inputs, prompt_type=prompt_type, **kwargs)

    encoder.encode = counting
    try:
        task = _loaded(PosIRCrossLingual, data_dir=copy, languages=["deu", "fra"], domains=[FIN, MED])
        result = mteb.evaluate(encoder, task, cache=None, co2_tracker=False).task_results[0]
    finally:
        del encoder.encode
    assert task.hf_subsets == [f"deu-Latn.{FIN}", f"fra-Latn.{FIN}", f"deu-Latn.{MED}", f"fra-Latn.{MED}"]
    assert sorted(s for s, side in calls if side == "document") == [f"deu-Latn.{FIN}", f"deu-Latn.{MED}"]
    assert sum(side == "query" for _, side in calls) == 4 and task._corpus_cache.hits == 2
    scores = {e["hf_subset"]: e for e in result.scores["test"]}
    for domain in (FIN, MED):  # fra is a copy of deu: the reused corpus gives the same ranking
        assert scores[f"fra-Latn.{domain}"]["ndcg_at_10"] == scores[f"deu-Latn.{domain}"]["ndcg_at_10"]


@pytest.mark.slow
def test_real_mteb_run_keeps_the_domain_choice(tmp_path):
    """`MTEB_FAIRPOS_POSIR_DOMAINS` with plain `mteb run -l deu`: exactly that German domain runs."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = tmp_path / "data"
    shutil.copytree(POSIR, root / "infgrad" / "PosIR-Benchmark-v1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MTEB_FAIRPOS_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", MTEB_FAIRPOS_DATA_DIR=str(root), **{DOMAINS_ENV: FIN})
    script = Path(sys.executable).parent / "mteb"
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "mteb"]
    out = subprocess.run([*command, "run", "-m", "fair-off/all-MiniLM-L6-v2", "-t", "PosIR", "-l", "deu",
                          "--output-folder", str(tmp_path / "results"), "--no-co2-tracker"],
                         env=env, capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stderr[-3000:]
    (file,) = (tmp_path / "results").rglob("PosIR.json")
    subsets = [entry["hf_subset"] for entry in json.loads(file.read_text())["scores"]["test"]]
    assert subsets == [f"deu-Latn.{FIN}"]
    # the plain `mteb run` saves each query's nDCG@10 beside the result, and the reader pools it per language
    from mteb_fairpos.results import collect, units

    sidecar = units.read(units.sidecar_path(file))
    assert list(sidecar.tables) == [("test", f"deu-Latn.{FIN}")] and sidecar.model == "fair-off/all-MiniLM-L6-v2"
    (scores,) = collect(tmp_path / "results").scores.values()
    assert scores.units is not None and scores.headline["main"].value == pytest.approx(scores.main_score)


def _rewritten(tmp_path, name, change, schema=None):
    """A copy of the fixture whose eng-Latn finance file ``name`` went through ``change`` (a function of its rows)."""
    import pyarrow as pa

    copy = tmp_path / "posir"
    shutil.copytree(POSIR, copy)
    path = copy / "eng-Latn" / f"IndustryCorpus2_{FIN}" / name
    rows = pq.read_table(path).to_pylist()
    change(rows)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema or pq.read_schema(path)), path)
    return copy


def test_a_query_id_given_twice_is_an_error(tmp_path):
    """The second row replaced the first one's text and position without a count."""
    def repeat(rows):
        rows.append({**rows[0], "text": "another question"})

    task = _loaded(data_dir=_rewritten(tmp_path, "queries.parquet", repeat), languages=["eng"])
    with pytest.raises(DatasetSchemaError, match=rf"eng-Latn/IndustryCorpus2_{FIN}: query id 'q-fin-1' appears twice"):
        load_domain(_ref(task, f"eng-Latn.{FIN}"))


def test_a_query_without_text_is_a_counted_skip_and_a_document_without_text_an_error(tmp_path):
    """Both were embedded as the empty text, counted nowhere."""
    def blank(rows):
        rows[0]["text"], rows[1]["text"] = None, "  "

    before = load_domain(_ref(_loaded(languages=["eng"]), f"eng-Latn.{FIN}"))
    data = load_domain(_ref(_loaded(data_dir=_rewritten(tmp_path, "queries.parquet", blank), languages=["eng"]),
                            f"eng-Latn.{FIN}"))
    assert data.skipped == {**before.skipped, "no_query_text": 2}
    assert set(data.split["relevant_docs"]) == set(before.split["relevant_docs"]) - {"q-fin-1", "q-fin-2"}

    def no_text(rows):
        rows[0]["text"] = None

    task = _loaded(data_dir=_rewritten(tmp_path / "corpus", "corpus.parquet", no_text), languages=["eng"])
    with pytest.raises(DatasetSchemaError, match=rf"IndustryCorpus2_{FIN}: corpus id '[^']+' has no text"):
        load_domain(_ref(task, f"eng-Latn.{FIN}"))


@pytest.mark.parametrize("name, column, kind", [("queries.parquet", "pos_token_length", "numbers"),
                                                ("qrels/test.parquet", "score", "numbers")])
def test_a_number_column_of_text_is_named_before_anything_is_embedded(tmp_path, name, column, kind):
    """It failed while its subset was scored, after the others were embedded, naming no file or column."""
    import pyarrow as pa

    schema = pq.read_schema(POSIR / "eng-Latn" / f"IndustryCorpus2_{FIN}" / name)
    schema = schema.set(schema.get_field_index(column), pa.field(column, pa.string()))

    def as_text(rows):
        for row in rows:
            row[column] = str(row[column])

    copy = _rewritten(tmp_path, name, as_text, schema)
    with pytest.raises(DatasetSchemaError, match=rf"{name} of {copy}: column '{column}' holds string, not {kind}"):
        _loaded(data_dir=copy, languages=["eng"])


def test_a_span_with_a_missing_end_leaves_its_query_unplaced(tmp_path):
    """float(None) failed while the subset was scored."""
    def cut(rows):
        rows[0]["pos_char_span"] = [0, None]

    data = load_domain(_ref(_loaded(data_dir=_rewritten(tmp_path, "queries.parquet", cut), languages=["eng"]),
                            f"eng-Latn.{FIN}"))
    assert data.positions["q-fin-1"] is None


def test_damaged_data_behind_an_intact_footer_is_named(tmp_path):
    """pyarrow's OSError named no file."""
    copy = tmp_path / "posir"
    shutil.copytree(POSIR, copy)
    path = copy / "eng-Latn" / f"IndustryCorpus2_{FIN}" / "queries.parquet"
    column = pq.ParquetFile(path).metadata.row_group(0).column(1)
    data = bytearray(path.read_bytes())
    start, size = column.data_page_offset, column.total_compressed_size
    data[start:start + size] = b"\xab" * size
    path.write_bytes(bytes(data))
    task = _loaded(data_dir=copy, languages=["eng"])
    with pytest.raises(DatasetSchemaError, match=rf"IndustryCorpus2_{FIN}/queries.parquet of {copy}: its data cannot be read"):
        load_domain(_ref(task, f"eng-Latn.{FIN}"))


def test_a_subset_without_a_query_is_left_out_of_the_result(tmp_path, encoder, caplog):
    """It was written with main score None, and mteb's own TaskResult.get_score() failed on the whole result."""
    def unknown(rows):
        for row in rows:
            row["query-id"] = "elsewhere-" + row["query-id"]

    task = _loaded(data_dir=_rewritten(tmp_path, "qrels/test.parquet", unknown), languages=["eng"], domains=[FIN, MED])
    result = mteb.evaluate(encoder, task, cache=None, co2_tracker=False).task_results[0]
    assert [entry["hf_subset"] for entry in result.scores["test"]] == [f"eng-Latn.{MED}"]
    assert result.get_score() == result.scores["test"][0]["main_score"]
    assert task.skipped_subsets == [f"eng-Latn.{FIN}"]
    assert f"eng-Latn.{FIN}: no query left to evaluate; the subset is left out of the result" in caplog.text
