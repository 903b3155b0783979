"""One language-code convention for the probe: BCP-47 tags, mapped to mteb's ISO 639-3 + script."""

from __future__ import annotations

import json

import pytest

from mteb_fairpos.permutation import CorpusError
from mteb_fairpos.permutation.corpus import load_corpus_file
from mteb_fairpos.permutation.instances import LanguageConfig
from mteb_fairpos.permutation.languages import LanguageTagError, language_tag, mteb_language
from mteb_fairpos.tasks.permutation import PermutationFairness


@pytest.mark.parametrize(("written", "tag", "mteb_code"), [
    ("en", "en", "eng-Latn"),
    ("zh-cn", "zh-CN", "zho-Hans"),
    ("zh-TW", "zh-TW", "zho-Hant"),  # the region changes the script
    ("zh-hant", "zh-Hant", "zho-Hant"),
    ("ja", "ja", "jpn-Jpan"),
    ("ko", "ko", "kor-Hang"),  # mteb's script for Korean, not the likely-subtag 'Kore'
    ("pt-br", "pt-BR", "por-Latn"),
    ("sr-latn", "sr-Latn", "srp-Latn"),
])
def test_tags_are_canonical_and_map_to_mteb(written, tag, mteb_code):
    assert language_tag(written) == tag
    assert mteb_language(written) == mteb_code


@pytest.mark.parametrize("bad", ["English", "xx-yy-zz-qq!", "", "cn"])
def test_what_is_not_a_tag_is_refused_clearly(bad):
    with pytest.raises(LanguageTagError, match="not a language code"):
        language_tag(bad)


def test_subset_names_with_regions_parse_as_one_language():
    assert LanguageConfig.parse("n3_zh-CN") == LanguageConfig(3, "zh-CN", "zh-CN")
    mixed = LanguageConfig.parse("n3_en-zh-CN")
    assert (mixed.lead, mixed.later, mixed.mixed, mixed.name) == ("en", "zh-CN", True, "n3_en-zh-CN")
    assert LanguageConfig.parse("n4_pt-BR-en").languages == ("pt-BR", "en", "en", "en")
    assert LanguageConfig.parse("n3_en-de") == LanguageConfig(3, "en", "de")
    assert LanguageConfig(3, "zh-cn", "en").name == "n3_zh-CN-en"  # codes are canonicalised on the way in


def test_lower_case_regions_in_subset_names_get_a_hint_instead_of_a_mixed_reading():
    with pytest.raises(ValueError, match="'cn' is not a language tag \\(one language\\? write 'zh-CN'\\)"):
        LanguageConfig.parse("n3_zh-cn")
    with pytest.raises(ValueError, match="names 3 languages"):
        LanguageConfig.parse("n3_en-de-fr")


def test_a_corpus_with_regional_tags_builds_canonical_subsets(tmp_path):
    path = tmp_path / "corpus.jsonl"
    rows = [{"id": f"t{i}", "texts": {"en": f"text {i}", "zh-cn": f"文本 {i}", "pt-br": f"texto {i}"}} for i in range(3)]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    corpus = load_corpus_file(path)
    assert corpus.languages == ("en", "pt-BR", "zh-CN")
    corpus.require_languages(["zh-cn"])  # any spelling of a tag names the same language
    task = PermutationFairness(corpus=path)
    assert "n3_zh-CN" in task.hf_subsets and "n3_zh-CN-en" in task.hf_subsets
    assert task.metadata.hf_subsets_to_langscripts["n3_zh-CN"] == ["zho-Hans"]
    assert task.metadata.hf_subsets_to_langscripts["n3_pt-BR-en"] == ["por-Latn", "eng-Latn"]


def test_two_spellings_of_one_language_in_a_row_are_an_error(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"id": "a", "texts": {"zh-cn": "x", "zh-CN": "y"}}) + "\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="two texts for the language 'zh-CN'"):
        load_corpus_file(path)
