"""Comparable corpora (local files, the Hugging Face layout, the bundled sample) and segment selection."""

from __future__ import annotations

import json

import pytest

from mteb_fairpos.permutation import (
    HF_DATASET,
    CorpusError,
    LanguageConfig,
    SelectionSettings,
    build_corpus,
    build_pool,
    corpus_from_splits,
    count_tokens,
    eligible_topics,
    load_corpus_file,
    load_hf_corpus,
    sample_corpus,
)


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_dir)


def _write_jsonl(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------- the sample
def test_sample_corpus_is_parallel_in_four_languages(tokenizer):
    corpus = sample_corpus()
    assert len(corpus) >= 24
    assert set(corpus.languages) >= {"en", "de", "fr", "it"}
    assert all(set(t.texts) == set(corpus.languages) for t in corpus), "every topic is written in every language"
    assert corpus.skipped == {}
    # every text fits the window scaled to a 512-token model, within +/-70 % of its English version
    window, _ = SelectionSettings().resolve(512)
    for topic in corpus:
        lengths = dict(zip(topic.texts, count_tokens(tokenizer, list(topic.texts.values()))))
        assert all(window[0] <= n <= window[1] for n in lengths.values()), (topic.id, lengths)
        assert all(abs(n - lengths["en"]) <= 0.7 * lengths["en"] for n in lengths.values()), (topic.id, lengths)


# --------------------------------------------------------------------------- local files
def test_jsonl_with_texts_and_wide_columns(tmp_path):
    path = _write_jsonl(tmp_path / "c.jsonl", [
        {"id": "a", "texts": {"en": " Alpha text. ", "de": "Alpha Text."}, "title": "ignored"},
        "",
        {"id": 2, "text_en": "Beta text.", "text_de": "Beta Text."},
        {"id": "c", "texts": {"en": "Gamma text.", "de": None}},
    ])
    corpus = load_corpus_file(path)
    assert [t.id for t in corpus] == ["a", "2", "c"]
    assert corpus.topic("a").texts["en"] == "Alpha text."  # stripped
    assert corpus.topic("2").texts == {"en": "Beta text.", "de": "Beta Text."}
    assert "de" not in corpus.topic("c").texts  # missing language: the topic simply lacks it
    assert corpus.coverage() == {"de": 2, "en": 3}


@pytest.mark.parametrize("row, message", [
    ('{"id": "a", "texts": {"en": "x"', "not valid JSON"),
    ('["a", "b"]', "expected an object"),
    ('{"texts": {"en": "x"}}', "missing or invalid 'id'"),
    ('{"id": "", "texts": {"en": "x"}}', "missing or invalid 'id'"),
    ('{"id": "a", "texts": ["x"]}', "'texts' must map"),
    ('{"id": "a"}', "no texts"),
    ('{"id": "a", "texts": {"en": 5}}', "must be a string"),
    ('{"id": "a", "texts": {"English": "x"}}', "not a language code"),
    ('{"id": "a", "texts": {"en": "x"}, "text_en": "y"}', r"two texts for the language 'en' \('texts'.en and the column 'text_en'\); give one."),
])
def test_malformed_rows_name_the_line(tmp_path, row, message):
    path = _write_jsonl(tmp_path / "bad.jsonl", [{"id": "ok", "texts": {"en": "fine"}}, row])
    with pytest.raises(CorpusError, match=message) as err:
        load_corpus_file(path)
    assert "bad.jsonl:2" in str(err.value)


def test_duplicate_ids_unknown_format_and_missing_file(tmp_path):
    path = _write_jsonl(tmp_path / "dup.jsonl", [{"id": "a", "texts": {"en": "one"}}, {"id": "a", "texts": {"en": "two"}}])
    with pytest.raises(CorpusError, match="more than once"):
        load_corpus_file(path)
    other = tmp_path / "c.csv"
    other.write_text("id,en\n")
    with pytest.raises(CorpusError, match="unknown corpus format"):
        load_corpus_file(other)
    with pytest.raises(FileNotFoundError):
        load_corpus_file(tmp_path / "nope.jsonl")


@pytest.mark.parametrize("text", [5, ["x"]])
def test_a_text_of_a_corpus_built_in_memory_that_is_not_a_string_is_named(text):
    with pytest.raises(CorpusError, match=f"<memory>: topic 'a': the 'en' text must be a string, got {type(text).__name__}"):
        build_corpus([("a", {"en": text})])
    assert build_corpus([("a", {"en": None, "de": "Text."})]).topic("a").texts == {"de": "Text."}  # missing, as null in a file


def test_duplicate_texts_are_dropped_and_reported():
    corpus = build_corpus([("a", {"en": "Same words.", "de": "A"}), ("b", {"en": "Same words.", "de": "B"}),
                           ("c", {"en": "  ", "de": "C"})])
    assert "en" not in corpus.topic("b").texts and "en" not in corpus.topic("c").texts
    assert corpus.skipped == {"duplicate_text:en": 1, "empty_text:en": 1}


def test_parquet_struct_and_map_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    struct = pa.table({"id": ["a", "b"], "texts": [{"en": "A text.", "de": "A Text."}, {"en": "B text.", "de": None}]})
    pq.write_table(struct, tmp_path / "s.parquet")
    corpus = load_corpus_file(tmp_path / "s.parquet")
    assert corpus.topic("a").texts == {"en": "A text.", "de": "A Text."} and set(corpus.topic("b").texts) == {"en"}
    mapped = pa.table({"id": [1], "texts": pa.array([[("en", "M text."), ("it", "Testo M.")]], type=pa.map_(pa.string(), pa.string()))})
    pq.write_table(mapped, tmp_path / "m.parquet")
    assert load_corpus_file(tmp_path / "m.parquet").topic("1").texts == {"en": "M text.", "it": "Testo M."}
    bad = pa.table({"id": ["a"], "text_en": [3]})
    pq.write_table(bad, tmp_path / "bad.parquet")
    with pytest.raises(CorpusError, match="row 1"):
        load_corpus_file(tmp_path / "bad.parquet")


# --------------------------------------------------------------------------- Hugging Face layout
def _hf_splits(**overrides):
    from datasets import Dataset, DatasetDict

    def split(lang, rows):
        return Dataset.from_dict({
            "wiki_pageid": [r[0] * 10 for r in rows], "language": [lang] * len(rows),
            "url": [f"https://{lang}.example/{r[0]}" for r in rows], "title": [f"T{r[0]}" for r in rows],
            "text": [r[1] for r in rows], "aligned_id": [r[0] for r in rows], "id": [f"{i}{lang}" for i, _ in enumerate(rows)],
        })

    splits = {"en": split("en", [(1, "One."), (2, "Two."), (3, "Three.")]),
              "de": split("de", [(1, "Eins."), (3, "Drei.")])}
    splits.update(overrides)
    return DatasetDict(splits)


def test_hf_layout_one_split_per_language():
    corpus = corpus_from_splits(_hf_splits())
    assert corpus.coverage() == {"de": 2, "en": 3}
    assert corpus.topic("3").texts == {"en": "Three.", "de": "Drei."}
    assert "de" not in corpus.topic("2").texts


def test_hf_layout_errors_are_clear():
    from datasets import Dataset

    with pytest.raises(CorpusError, match=r"no split for language\(s\) \['zh'\]"):
        corpus_from_splits(_hf_splits(), languages=["en", "zh"])
    with pytest.raises(CorpusError, match="lacks column"):
        corpus_from_splits(_hf_splits(de=Dataset.from_dict({"text": ["x"], "topic": [1]})))
    with pytest.raises(CorpusError, match="'language'"):
        corpus_from_splits(_hf_splits(de=Dataset.from_dict({"text": ["x"], "aligned_id": [1], "language": ["fr"]})))
    with pytest.raises(CorpusError, match="one split per language"):
        corpus_from_splits(["not", "a", "dict"])  # type: ignore[arg-type]


def test_load_hf_corpus_uses_datasets(monkeypatch):
    import datasets

    calls = {}

    def fake_load_dataset(path, revision=None, **kwargs):
        calls.update(path=path, revision=revision)
        return _hf_splits()

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    corpus = load_hf_corpus(revision="abc", languages=["en", "de"])
    assert calls == {"path": HF_DATASET, "revision": "abc"}
    assert len(corpus) == 3 and corpus.source.endswith("@abc")


# --------------------------------------------------------------------------- selection
def test_window_scales_with_the_model():
    assert SelectionSettings().resolve(8192) == ((1000, 2000), 8192)
    assert SelectionSettings().resolve(512) == ((62, 125), 512)
    assert SelectionSettings(max_document_tokens=1024).resolve(512) == ((125, 250), 1024)
    assert SelectionSettings(segment_window=(10, 20)).resolve(512) == ((10, 20), 512)
    with pytest.raises(ValueError, match=r"segment_window \(--window LOW HIGH\) must be"):  # probe shows it as it is
        SelectionSettings(segment_window=(20, 10))


def test_all_texts_exceeding_the_window_is_an_error(tokenizer):
    with pytest.raises(CorpusError, match="exceed the segment window") as raised:
        build_pool(sample_corpus(), ["de"], tokenizer, SelectionSettings(), 256)
    # the probe command reports this message as it is: it names the options as well as the keywords
    for spelling in ("segment_window (--window LOW HIGH)", "(--max-length)", "segment_mode='lead' (--mode lead)"):
        assert spelling in str(raised.value)


def test_length_rule_and_missing_languages_are_reported(tokenizer):
    en = "The old mill by the river ground wheat for the village every autumn. " * 5
    corpus = build_corpus([
        ("fits", {"en": en, "de": "Die alte Mühle am Fluss mahlte jeden Herbst Weizen für das Dorf. " * 3}),
        ("long", {"en": en + "x", "de": "Die alte Mühle am Fluss mahlte jeden Herbst Weizen. " * 9}),
        ("noger", {"en": en + "y"}),
        ("tiny", {"en": "Short.", "de": "Kurz."}),
    ])
    pool = build_pool(corpus, ["en", "de"], tokenizer, SelectionSettings(segment_window=(30, 400)), 512)
    chosen, excluded = eligible_topics(pool, corpus, "en", "de", 0.7)
    assert chosen == ["fits"]
    assert excluded == {"length_mismatch": 1, "missing_language": 1, "outside_window": 1}
    assert pool.outside["en"]["too_short"] == 1


def test_lead_mode_keeps_whole_leading_sentences(tokenizer):
    text = " ".join(f"Sentence number {i} describes one more detail of the harbour." for i in range(40))
    corpus = build_corpus([("t", {"en": text})])
    with pytest.raises(CorpusError):
        build_pool(corpus, ["en"], tokenizer, SelectionSettings(segment_window=(20, 60)), 512)
    pool = build_pool(corpus, ["en"], tokenizer, SelectionSettings(segment_window=(20, 60), mode="lead"), 512)
    cut = pool.texts[("t", "en")]
    assert text.startswith(cut) and cut.endswith("harbour.") and 20 <= pool.lengths[("t", "en")] <= 60


def test_session_reports_too_few_usable_topics(tokenizer, minilm):
    from mteb_fairpos.permutation import ProbeSession, ProbeSettings

    corpus = build_corpus([(f"t{i}", {"en": f"Topic {i} has a text of moderate length about item {i}. " * 4}) for i in range(2)])
    session = ProbeSession(corpus, minilm, ProbeSettings(num_sets=2, selection=SelectionSettings(segment_window=(5, 200))))
    with pytest.raises(CorpusError, match="only 2 usable topic"):
        session.run(LanguageConfig.monolingual(3, "en"))
    with pytest.raises(CorpusError, match="no topic has a text in \\['fr'\\]"):
        session.run("n3_fr")


def test_a_save_to_disk_folder_is_read_with_load_from_disk(tmp_path):
    # the authors distribute the corpus as a DatasetDict written by save_to_disk, one split per language
    from mteb_fairpos.permutation import load_local_corpus
    from mteb_fairpos.tasks.permutation import PermutationFairnessSample

    folder = tmp_path / "wiki_comparable"
    _hf_splits().save_to_disk(str(folder))
    corpus = load_local_corpus(folder)
    assert corpus.coverage() == {"de": 2, "en": 3} and corpus.topic("1").texts == {"en": "One.", "de": "Eins."}
    assert load_local_corpus(folder, languages=["en"]).coverage() == {"en": 3}
    task = PermutationFairnessSample(corpus=folder).filter_languages(None, hf_subsets=["n3_en"])
    assert task.load_corpus().coverage() == {"de": 2, "en": 3} and task.hf_subsets == ["n3_en"]
    # a folder that is not a saved DatasetDict is named, not handed to load_dataset
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="not a DatasetDict saved with save_to_disk"):
        load_local_corpus(tmp_path / "empty")
    single = tmp_path / "single"
    _hf_splits()["en"].save_to_disk(str(single))
    with pytest.raises(CorpusError, match="single Dataset, not one split per language"):
        load_local_corpus(single)


def test_the_probe_stays_out_of_mtebs_type_filters(recwarn):
    import mteb

    for name in ("PermutationFairness", "PermutationFairnessPaper", "PermutationFairnessSample"):
        assert name not in {t.metadata.name for t in mteb.get_tasks(task_types=["STS"])}
        assert mteb.get_task(name).metadata.name == name  # found by name, as `mteb run -t` does
        assert name in {t.metadata.name for t in mteb.get_tasks(tasks=[name])}
    assert not [w for w in recwarn if "beta" in str(w.message)]  # the flag is not a user-facing notice


def test_a_users_corpus_declares_its_own_languages(tmp_path):
    """An en/de/fr corpus gets en/de/fr subsets, not the paper's (which would fail on 'hi')."""
    from mteb_fairpos.tasks.permutation import PermutationFairness

    rows = [{"id": f"t{i}", "texts": {"en": f"English text {i}.", "de": f"Deutscher Text {i}.", "fr": f"Texte {i}."}}
            for i in range(4)]
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = PermutationFairness(corpus=path)
    assert {lang for s in task.hf_subsets for lang in s.split("_")[1].split("-")} == {"en", "de", "fr"}
    assert "n3_fr" in task.hf_subsets and "n4_fr-en" in task.hf_subsets and "n3_hi" not in task.hf_subsets
    assert task.metadata.hf_subsets_to_langscripts["n3_fr"] == ["fra-Latn"]
    assert PermutationFairness.metadata.hf_subsets_to_langscripts["n3_hi"] == ["hin-Deva"]  # the class is untouched
    task.load_data()  # every declared subset can be built from the corpus
    assert task.filter_languages(["fra"]).hf_subsets == [s for s in task.metadata.hf_subsets if "fr" in s]
    japanese = tmp_path / "ja.jsonl"
    japanese.write_text(json.dumps({"id": "a", "texts": {"en": "x", "ja": "y"}}) + "\n")
    assert PermutationFairness(corpus=japanese).metadata.hf_subsets_to_langscripts["n3_ja"] == ["jpn-Jpan"]
    unknown = tmp_path / "private.jsonl"
    unknown.write_text(json.dumps({"id": "a", "texts": {"en": "x", "qaa": "y"}}) + "\n")  # a private-use tag
    with pytest.raises(CorpusError, match="'qaa' has no ISO 639-3 \\+ script code that mteb knows"):
        PermutationFairness(corpus=unknown)


def test_counting_tokens_of_long_texts_warns_about_nothing(capfd, minilm_dir):
    """Measuring segments is not running them, so transformers' 'longer than the maximum' warning must not fire."""
    from transformers import AutoTokenizer

    from mteb_fairpos.permutation.selection import count_tokens

    tokenizer = AutoTokenizer.from_pretrained(minilm_dir)  # a fresh one: transformers warns once per instance
    assert count_tokens(tokenizer, ["word " * 2000])[0] == 2000
    assert "Token indices sequence length" not in capfd.readouterr().err


def test_the_same_text_in_texts_and_as_a_column_is_one_text(tmp_path):
    path = _write_jsonl(tmp_path / "both.jsonl", [{"id": "a", "texts": {"en": "Same."}, "text_en": "Same."}])
    assert load_corpus_file(path).topic("a").texts == {"en": "Same."}


def test_a_text_another_topic_holds_in_another_language_is_named(caplog):
    """Kept (a set of one language never meets both), but named: a mixed configuration's set may."""
    corpus = build_corpus([("a", {"en": "Untranslated words.", "de": "A"}), ("b", {"en": "B", "de": "Untranslated words."}),
                           ("c", {"en": "Same in both.", "de": "Same in both."})])
    assert corpus.topic("b").texts["de"] == "Untranslated words." and corpus.skipped == {}
    assert "topics 'a' (en), 'b' (de) hold the same text in different languages" in caplog.text
    assert "'c'" not in caplog.text  # one topic's own texts may be alike


def test_a_damaged_parquet_corpus_is_a_corpus_error(tmp_path):
    """pyarrow's ArrowInvalid reached callers that catch CorpusError (the CLI, the task)."""
    (tmp_path / "corpus.parquet").write_bytes(b"not a parquet file")
    with pytest.raises(CorpusError, match=r"corpus.parquet: not a readable Parquet file"):
        load_corpus_file(tmp_path / "corpus.parquet")
