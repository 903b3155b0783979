"""The permutation tasks end to end through mteb, with the real all-MiniLM-L6-v2 (offline)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mteb_fairpos.permutation import LanguageConfig, ProbeSession, ProbeSettings, sample_corpus
from mteb_fairpos.tasks.permutation import (
    PermutationFairness,
    PermutationFairnessPaper,
    PermutationFairnessSample,
    subset_names,
)

SETS = {3: 3, 4: 2}  # n=4 is not run here; every size still needs 2 sets to be usable


@pytest.fixture(scope="module")
def st512(minilm_dir):
    """Its own copy of all-MiniLM-L6-v2 with max length 512 (the shared fixture keeps 256)."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(minilm_dir, device="cpu")
    model.max_seq_length = 512
    return model


class Counter:
    """Counts the sequences that go through a model's first (Transformer) module."""

    def __init__(self, st):
        self.count = 0
        self.handle = st[0].register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, module, args, kwargs):
        features = args[0] if args else kwargs["features"]
        self.count += int(features["input_ids"].shape[0])

    def close(self):
        self.handle.remove()


def _evaluate(model, task):
    import mteb

    return mteb.evaluate(model, task, cache=None, show_progress_bar=False,
                         encode_kwargs={"batch_size": 16, "show_progress_bar": False}).task_results[0]


# --------------------------------------------------------------------------- metadata
def test_task_variants_and_subsets():
    from mteb_fairpos.tasks import TASKS

    assert {PermutationFairness, PermutationFairnessPaper, PermutationFairnessSample} <= set(TASKS)
    default = PermutationFairness.metadata
    assert default.main_score == "position_fairness"
    assert len(default.hf_subsets) == 2 * (6 + 10)
    assert default.eval_langs["n3_en-de"] == ["eng-Latn", "deu-Latn"] and default.eval_langs["n4_ko"] == ["kor-Hang"]
    paper = PermutationFairnessPaper.metadata
    assert len(paper.hf_subsets) == 4 * (6 + 30)
    assert PermutationFairnessPaper.default_num_sets == {3: 167, 4: 42, 5: 9, 6: 14}
    # ~1,000 documents per instance, 10,080 for n = 6 (the paper)
    assert [k * f for k, f in zip((167, 42, 9, 14), (6, 24, 120, 720))] == [1002, 1008, 1080, 10080]
    assert subset_names((3,), ("en", "de"), later_languages=("en",)) == ["n3_en", "n3_de", "n3_de-en"]
    sample = PermutationFairnessSample.metadata
    assert sample.hf_subsets[:4] == ["n3_en", "n3_de", "n3_fr", "n3_it"]


# --------------------------------------------------------------------------- end to end
def test_mteb_evaluate_writes_the_profile_scores(st512):
    from mteb.models import SentenceTransformerEncoderWrapper

    task = PermutationFairnessSample(num_sets=SETS).filter_languages(None, hf_subsets=["n3_en", "n3_de", "n3_en-de"])
    task.load_data()  # preloaded, so mteb leaves the task (and its probe session) loaded afterwards
    counter = Counter(st512)
    try:
        result = _evaluate(SentenceTransformerEncoderWrapper(st512), task)
    finally:
        counter.close()
    scores = {s["hf_subset"]: s for s in result.scores["test"]}
    assert list(scores) == ["n3_en", "n3_de", "n3_en-de"]
    for name, s in scores.items():
        assert s["main_score"] == s["position_fairness"]
        assert 0 < s["position_fairness"] <= 1
        means = [s[f"position_{p}"] for p in (1, 2, 3)]
        assert s["position_fairness"] == pytest.approx(min(means) / max(means))
        assert s["beta_2"] == pytest.approx(means[1] - means[0]) and s["beta_3"] == pytest.approx(means[2] - means[0])
        assert s["position_1_ci_low"] < means[0] < s["position_1_ci_high"]
        assert s["tau_status"] == "measured" and 0 < s["tau_position_1"] <= 1
        assert s["num_documents"] == 3 * 6 and s["num_segment_sets"] == 3 and s["num_observations"] == 3 * 6 * 3
        assert s["num_truncated_segments"] == 0 and s["num_tau_unaligned_documents"] == 0
        assert (s["segment_window_low"], s["segment_window_high"]) == (62, 125)
    mixed = scores["n3_en-de"]
    assert mixed["mixed"] and mixed["lead_vs_later"] is not None
    assert mixed["language_effect_pooled_with"] == ["n3_de", "n3_en"]
    json.loads(result.model_dump_json())  # the TaskResult is plain JSON
    # every unique segment once (shared across subsets), every document once: forward passes = unique + documents
    session = task.session
    documents = sum(s["num_documents"] for s in scores.values())
    unique = {key for r in session.results.values() for key in r.instance.segment_keys}
    assert len(unique) == len(session.segment_cache) < sum(s["num_unique_segments"] for s in scores.values())
    assert counter.count == len(unique) + documents == session.access.encoded_texts


def test_sigma_and_tau_match_an_independent_computation(st512):
    session = ProbeSession(sample_corpus(), st512, ProbeSettings(num_sets=2))
    result = session.run("n3_en")
    doc = result.instance.documents[4]
    texts = [session.pool.texts[key] for key in doc.keys]
    segment_vectors = st512.encode(texts, normalize_embeddings=True)
    document_vector = st512.encode([doc.text], normalize_embeddings=True)[0]
    row = 4 * 3  # observations are document-major
    assert result.observations.sigma[row:row + 3] == pytest.approx(segment_vectors @ document_vector, abs=1e-5)
    # late chunking by hand: find each segment's WordPiece ids inside the document's ids
    tokens = st512.encode([doc.text], output_value="token_embeddings")[0].numpy()
    ids = st512.tokenizer(doc.text)["input_ids"]
    for pos, text in enumerate(texts):
        piece = st512.tokenizer(text, add_special_tokens=False)["input_ids"]
        start = next(i for i in range(len(ids)) if ids[i:i + len(piece)] == piece)
        context = tokens[start:start + len(piece)].mean(axis=0)
        expected = float(context @ segment_vectors[pos] / np.linalg.norm(context))
        assert result.observations.tau[row + pos] == pytest.approx(expected, abs=1e-5)


def test_calibrated_documents_plain_segments(st512):
    from mteb_fairpos import CalibrationConfig, FairSentenceTransformer

    plain = ProbeSession(sample_corpus(), FairSentenceTransformer(st512, calibration=None), ProbeSettings(num_sets=2))
    fair = ProbeSession(sample_corpus(), FairSentenceTransformer(st512, CalibrationConfig(strength=1.0)), ProbeSettings(num_sets=2))
    a, b = plain.run("n3_de"), fair.run("n3_de")
    keys = sorted(plain.segment_cache)
    assert keys == sorted(fair.segment_cache)
    # standalone segments are the plain model's in both (the reference), documents differ
    assert np.allclose(np.stack([plain.segment_cache[k] for k in keys]), np.stack([fair.segment_cache[k] for k in keys]), atol=1e-5)
    assert not np.allclose(a.observations.sigma, b.observations.sigma, atol=1e-4)
    assert b.scores["tau_status"] == "measured"


def test_truncation_is_reported_not_measured(minilm_dir):
    from sentence_transformers import SentenceTransformer

    short = SentenceTransformer(minilm_dir, device="cpu")  # max length 256
    # allow documents longer than the model's 256 tokens: the model cuts them, the probe reports and excludes
    session = ProbeSession(sample_corpus(), short, ProbeSettings(num_sets=2, selection=_selection(max_document_tokens=2048)))
    scores = session.run("n3_en").scores
    assert scores["num_truncated_segments"] > 0
    assert scores["num_observations"] == scores["num_documents"] * 3 - scores["num_truncated_segments"]
    assert scores["position_3"] is not None  # some documents still hold the third segment whole
    from mteb_fairpos.permutation import CorpusError

    with pytest.raises(CorpusError, match=r"cuts position\(s\) \[3\] in every document"):
        session.run("n3_de")


def _selection(**kwargs):
    from mteb_fairpos.permutation import SelectionSettings

    return SelectionSettings(segment_window=(62, 125), **kwargs)


class MinimalEncoder:
    """An mteb encoder that is not sentence-transformers: the protocol route (tau N/A)."""

    def __init__(self, st):
        from mteb.models import ModelMeta

        self.st = st
        self.mteb_model_meta = ModelMeta.create_empty(overwrites={"name": st.tokenizer.name_or_path, "max_tokens": 512})

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
        texts = [text for batch in inputs for text in batch["text"]]
        return self.st.encode(texts, batch_size=kwargs.get("batch_size", 16))

    def similarity(self, a, b):  # pragma: no cover - not used by the probe
        return a @ b.T

    def similarity_pairwise(self, a, b):  # pragma: no cover
        return (a * b).sum(-1)


def test_protocol_route_for_other_encoders(st512):
    task = PermutationFairnessSample(num_sets={3: 2}).filter_languages(None, hf_subsets=["n3_en"])
    result = _evaluate(MinimalEncoder(st512), task)
    [scores] = result.scores["test"]
    assert scores["route"] == "protocol"
    assert scores["tau_status"].startswith("n/a") and scores["tau_position_fairness"] is None
    assert 0 < scores["position_fairness"] <= 1


def test_local_corpus_override(tmp_path, st512):
    rows = [json.dumps({"id": t.id, "texts": {"en": t.texts["en"]}}) for t in sample_corpus()][:6]
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(rows) + "\n")
    task = PermutationFairnessSample(corpus=path, num_sets={3: 2}).filter_languages(None, hf_subsets=["n3_en"])
    session = ProbeSession(task.load_corpus(), st512, task.probe_settings)
    assert session.run(LanguageConfig.monolingual(3, "en")).scores["usable_topics"] == 6
    bad = PermutationFairnessSample(corpus=path).filter_languages(None, hf_subsets=["n3_de"])
    from mteb_fairpos.permutation import CorpusError

    with pytest.raises(CorpusError, match="no topic has a text in \\['de'\\]"):
        bad.load_data()


@pytest.mark.usefixtures("minilm_dir")
def test_demo_command(tmp_path, capsys):
    from mteb_fairpos.cli import main

    assert main(["demo", "--out", str(tmp_path), "--subsets", "n3_en", "--sets", "2", "--calibration", "none", "b128_lhalf_a1"]) == 0
    out = capsys.readouterr().out
    assert "beta_2" in out and "uncalibrated" in out and "calibrated (b128_lhalf_a1)" in out
    assert "PermutationFairnessManpages" in out  # the demo is the probe on the bundled real-text corpus
    assert (tmp_path / "profile.png").stat().st_size > 10_000
    # mteb's own layout, one model name per config, and compare's view at the end; the max length
    # the demo sets (512, the checkpoint ships 256) is an mteb experiment of the model
    commit = "8b3219a92973c328a8e22fadcfa821b5dc75636a"
    experiment = tmp_path / "results" / "fair__all-MiniLM-L6-v2-b128_lhalf_a1" / commit / "experiments" / "max_seq_length_512"
    saved = json.loads((experiment / "PermutationFairnessManpages.sets-2.json").read_text())
    assert saved["task_name"] == "PermutationFairnessManpages.sets-2" and saved["scores"]["test"][0]["hf_subset"] == "n3_en"
    assert (tmp_path / "results" / "fair-off__all-MiniLM-L6-v2" / commit / "experiments" / "max_seq_length_512"
            / "PermutationFairnessManpages.sets-2.json").is_file()
    assert "mteb-fairpos compare" in out and "| fair-off/all-MiniLM-L6-v2 [8b3219a] (max_seq_length_512) |" in out
    from mteb_fairpos.results import collect

    assert [m.name for m in collect(tmp_path).models] == ["fair-off/all-MiniLM-L6-v2", "fair/all-MiniLM-L6-v2-b128_lhalf_a1"]


def test_predictions_carry_topic_order_and_language(tmp_path, st512):
    """A per-topic analysis needs no rebuild: every prediction row names its topic, document, order, language."""
    import mteb
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper

    task = PermutationFairnessSample(num_sets={3: 2}).filter_languages(None, hf_subsets=["n3_en-de"])
    mteb.evaluate(SentenceTransformerEncoderWrapper(st512), task, cache=None, show_progress_bar=False,
                  prediction_folder=tmp_path, encode_kwargs={"batch_size": 16, "show_progress_bar": False})
    (file,) = tmp_path.glob("*.json")
    rows = json.loads(file.read_text())["n3_en-de"]["test"]
    n = len(rows["sigma"])
    assert n == 2 * 6 * 3 and all(len(rows[k]) == n for k in ("topic", "language", "document", "order", "position"))
    assert {lang for lang, p in zip(rows["language"], rows["position"]) if p == 1} == {"en"}
    assert {lang for lang, p in zip(rows["language"], rows["position"]) if p > 1} == {"de"}
    first = [i for i, d in enumerate(rows["document"]) if d == 0]
    assert len(first) == 3 and len({rows["topic"][i] for i in first}) == 3  # three distinct topics in one document
    assert len({rows["order"][i] for i in first}) == 1 and rows["order"][first[0]].count("-") == 2


def test_sets_that_share_topics_get_two_way_inference_and_few_clusters_are_reported(st512):
    """Few usable topics make sets overlap: the errors and the fairness interval then respect topics too
    (two-way), and a run on fewer clusters than MIN_CLUSTERS says its inference is weak."""
    from mteb_fairpos.permutation import build_corpus
    from mteb_fairpos.permutation.probe import MIN_CLUSTERS

    few = build_corpus([(t.id, {"en": t.texts["en"]}) for t in list(sample_corpus())[:4]])
    session = ProbeSession(few, st512, ProbeSettings(num_sets={3: 3}))
    scores = session.run("n3_en").scores
    assert scores["num_distinct_topics"] == 4 and scores["num_segment_sets"] == 3
    assert scores["bootstrap_units"] == "segment sets and topics" and scores["bootstrap_resamples"] == 2000
    assert scores["position_fairness_ci_low"] <= scores["position_fairness"] <= scores["position_fairness_ci_high"]
    assert any("3 segment sets on 4 distinct topics" in note and f"fewer than {MIN_CLUSTERS}" in note for note in scores["notes"])
    assert not any("too small" in note for note in scores["notes"])  # the old warning about invalid errors is gone
    wide = ProbeSession(sample_corpus(), st512, ProbeSettings(num_sets={3: 2})).run("n3_en").scores
    assert wide["bootstrap_units"] == "segment sets" and wide["num_distinct_topics"] == 6
    assert any("only 2 segment sets:" in note for note in wide["notes"])


def test_a_changed_setting_never_reads_a_stale_result(tmp_path, st512):
    """Every setting that changes the numbers is part of the result's identity (the task name),
    so a rerun with other settings into the same results folder computes instead of reading the old file."""
    import mteb
    from mteb.cache import ResultCache
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper

    cache = ResultCache(tmp_path / "cache")
    wrapper = SentenceTransformerEncoderWrapper(st512)

    def run(**settings):
        task = PermutationFairnessSample(**settings).filter_languages(None, hf_subsets=["n3_en"])
        counter = Counter(st512)
        try:
            result = mteb.evaluate(wrapper, task, cache=cache, show_progress_bar=False,
                                   encode_kwargs={"batch_size": 16, "show_progress_bar": False}).task_results[0]
        finally:
            counter.close()
        return result, result.scores["test"][0], counter.count

    two, two_scores, _ = run(num_sets=2)
    three, three_scores, passes = run(num_sets=3)
    assert (two_scores["num_segment_sets"], three_scores["num_segment_sets"]) == (2, 3)
    assert passes > 0 and two.task_name == "PermutationFairnessSample.sets-2"
    assert three.task_name == "PermutationFairnessSample.sets-3"
    again, again_scores, passes = run(num_sets=3)
    assert passes == 0 and again_scores["num_segment_sets"] == 3  # the same settings do read the stored result
    assert again_scores["position_fairness"] == pytest.approx(three_scores["position_fairness"], abs=1e-6)
    _, seeded, passes = run(num_sets=3, seed=7)
    assert passes > 0 and seeded["seed"] == 7
    default = PermutationFairnessSample()
    assert default.metadata.name == "PermutationFairnessSample"  # defaults keep the plain name mteb run uses
    assert PermutationFairnessSample(num_sets={3: 10, 4: 3}).metadata.name == "PermutationFairnessSample"
    named = PermutationFairnessSample(orders_per_set=2, segment_window=(20, 90), max_document_tokens=400,
                                      segment_mode="lead", length_tolerance=0.5)
    assert named.metadata.name == ("PermutationFairnessSample.orders-2.window-20-90.maxlen-400.mode-lead"
                                   ".tolerance-0.5")

    rows = [json.dumps({"id": t.id, "texts": {"en": t.texts["en"]}}) for t in sample_corpus()][:8]
    path = tmp_path / "my docs.jsonl"
    path.write_text("\n".join(rows) + "\n")
    local, local_scores, passes = run(corpus=path, num_sets=2)
    from mteb_fairpos.permutation.corpus import load_corpus_file

    fingerprint = load_corpus_file(path).fingerprint()
    assert passes > 0 and local.task_name == f"PermutationFairnessSample.corpus-my_docs-{fingerprint}.sets-2"
    assert local.dataset_revision == fingerprint
    assert local_scores["corpus"] == str(path) and local_scores["corpus_fingerprint"] == fingerprint
    # everything that produced the numbers is in the result file
    saved = json.loads(next((tmp_path / "cache").rglob(f"{local.task_name}.json")).read_text())["scores"]["test"][0]
    for key in ("corpus", "corpus_fingerprint", "num_segment_sets", "orders_per_set", "segment_window_low",
                "segment_window_high", "segment_mode", "length_tolerance", "max_document_tokens", "model_max_length", "seed"):
        assert key in saved, key


@pytest.mark.parametrize(("settings", "error", "message"), [
    ({"num_set": 3}, TypeError, "PermutationFairnessSample got unknown setting(s) 'num_set'; its settings: seed, corpus, num_sets,"),
    ({"num_sets": 1}, ValueError, "num_sets must be an integer of at least 2 (standard errors are clustered by segment set); got 1."),
    ({"num_sets": 2.5}, ValueError, "num_sets must be an integer of at least 2 (standard errors are clustered by segment set); got 2.5."),
    ({"num_sets": {3: 1}}, ValueError, "num_sets[3] must be an integer of at least 2"),
    ({"num_sets": {5: 3}}, ValueError, "num_sets names 5, which PermutationFairnessSample does not build: its keys are numbers of segments, 3, 4."),
    ({"orders_per_set": 0}, ValueError, "orders_per_set must be None (all orders) or an integer of at least 1; got 0."),
    ({"seed": -1}, ValueError, "seed must be an integer from 0 to 2**32 - 1; got -1."),
    ({"resampling_seed": -1}, ValueError, "the resampling seed must be an integer of at least 0; got -1."),
    ({"resamples": "100"}, ValueError, "resamples must be an integer of at least 1; got '100'."),
    ({"corpus": [{"id": "a"}]}, TypeError, "corpus must be a path to a JSONL/Parquet file or a save_to_disk folder, or a "
                                           "ComparableCorpus; got list."),
])
def test_a_setting_no_run_can_use_is_refused_when_the_task_is_made(settings, error, message):
    """Before: a misspelt setting ran the defaults (mteb's task takes any keyword), and the others failed after every
    document was embedded, in numpy's words, or never (2.5 sets ran as 2)."""
    from mteb_fairpos.tasks.permutation import PermutationFairnessSample

    with pytest.raises(error) as caught:
        PermutationFairnessSample(**settings)
    assert message in str(caught.value)


@pytest.mark.parametrize(("text", "skipped"), [("", ""), ('{"id": "a", "texts": {"en": "  ", "de": ""}}\n', " (skipped: 1 empty_text:de; 1 empty_text:en)")])
def test_a_corpus_without_texts_is_refused_not_recorded_as_a_result_of_no_scores(tmp_path, text, skipped):
    from mteb_fairpos.permutation.corpus import CorpusError

    (tmp_path / "c.jsonl").write_text(text)
    with pytest.raises(CorpusError) as caught:
        PermutationFairness(corpus=tmp_path / "c.jsonl")
    assert str(caught.value) == (f"the corpus {tmp_path / 'c.jsonl'} holds no texts{skipped}; one row per topic: "
                                 '{"id": ..., "texts": {"en": ..., "de": ...}}.')
