"""Experiment instances of the permutation probe: configurations, orders, sets, documents."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest

from mteb_fairpos.permutation import CorpusError, LanguageConfig, assemble, build_instance, draw_sets, orders


def _texts(topics, languages=("en", "de")):
    return {(t, lang): f"{lang} text about {t}." for t in topics for lang in languages}


TOPICS = [f"t{i:02d}" for i in range(12)]


def test_config_names_round_trip():
    assert LanguageConfig.monolingual(3, "de").name == "n3_de"
    assert LanguageConfig(4, "en", "de").name == "n4_en-de"
    for name in ("n3_de", "n4_en-de", "n6_zh-ko"):
        assert LanguageConfig.parse(name).name == name
    mixed = LanguageConfig.parse("n3_en-de")
    assert mixed.mixed and mixed.languages == ("en", "de", "de")
    assert not LanguageConfig.parse("n5_it").mixed


@pytest.mark.parametrize("bad", ["3_de", "n3", "n3_en-en", "n3_EN", "nx_de", "n3_en-de-fr"])
def test_config_parse_rejects(bad):
    with pytest.raises(ValueError):
        LanguageConfig.parse(bad)


def test_config_rejects_n_below_two():
    with pytest.raises(ValueError, match="n must be"):
        LanguageConfig(1, "en", "en")


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_all_orders_are_the_n_factorial_permutations(n):
    perms = orders(n)
    assert len(perms) == math.factorial(n) == len(set(perms))
    assert set(perms) == set(itertools.permutations(range(n)))


def test_factorial_explosion_needs_a_sample_size():
    with pytest.raises(ValueError, match="orders_per_set"):
        orders(8)
    rng = np.random.default_rng(3)
    sampled = orders(8, orders_per_set=50, rng=rng)
    assert len(sampled) == len(set(sampled)) == 50
    assert sampled == orders(8, orders_per_set=50, rng=np.random.default_rng(3))
    with pytest.raises(ValueError):
        orders(3, orders_per_set=0)


def test_instance_builds_every_order_of_every_set():
    config = LanguageConfig.monolingual(3, "en")
    inst = build_instance(config, TOPICS, _texts(TOPICS), num_sets=5, seed=7)
    assert len(inst.sets) == 5 and len(set(inst.sets)) == 5
    assert len(inst.documents) == 5 * 6 and inst.orders_per_set == 6
    for set_index, topics in enumerate(inst.sets):
        docs = [d for d in inst.documents if d.set_index == set_index]
        assert {d.order for d in docs} == set(itertools.permutations(range(3)))
        # every topic of the set sits at every position exactly (n-1)! times
        per_position = Counter((pos, key[0]) for d in docs for pos, key in enumerate(d.keys))
        assert set(per_position.values()) == {2}
        assert {key[0] for d in docs for key in d.keys} == set(topics)


def test_instance_is_seeded():
    config = LanguageConfig.monolingual(4, "en")
    a = build_instance(config, TOPICS, _texts(TOPICS), num_sets=6, seed=1)
    b = build_instance(config, TOPICS, _texts(TOPICS), num_sets=6, seed=1)
    c = build_instance(config, TOPICS, _texts(TOPICS), num_sets=6, seed=2)
    assert a.sets == b.sets and [d.text for d in a.documents] == [d.text for d in b.documents]
    assert a.sets != c.sets


def test_mixed_configuration_puts_the_lead_language_first():
    config = LanguageConfig(3, "en", "de")
    inst = build_instance(config, TOPICS, _texts(TOPICS), num_sets=4, seed=0)
    for doc in inst.documents:
        assert [lang for _, lang in doc.keys] == ["en", "de", "de"]
    # the permutation decides the topic at position 1: every topic of a set leads in some document
    for set_index, topics in enumerate(inst.sets):
        leads = {d.keys[0][0] for d in inst.documents if d.set_index == set_index}
        assert leads == set(topics)


def test_same_seed_gives_the_same_sets_across_configurations():
    mono = build_instance(LanguageConfig.monolingual(3, "de"), TOPICS, _texts(TOPICS), num_sets=4, seed=5)
    mixed = build_instance(LanguageConfig(3, "en", "de"), TOPICS, _texts(TOPICS), num_sets=4, seed=5)
    assert mono.sets == mixed.sets


def test_document_spans_point_at_the_segments():
    config = LanguageConfig(3, "en", "de")
    texts = _texts(TOPICS)
    inst = build_instance(config, TOPICS, texts, num_sets=2, seed=0)
    for doc in inst.documents:
        assert [doc.text[a:b] for a, b in doc.char_spans] == [texts[key] for key in doc.keys]
        assert doc.text == " ".join(texts[key] for key in doc.keys)


def test_fewer_topics_than_n_is_an_error():
    with pytest.raises(CorpusError, match="only 2 usable topic"):
        build_instance(LanguageConfig.monolingual(3, "en"), TOPICS[:2], _texts(TOPICS[:2]), num_sets=1)


def test_duplicate_segments_in_a_set_are_an_error():
    with pytest.raises(ValueError, match="duplicate segments"):
        assemble(["same text.", "other text.", "same text."])
    texts = _texts(TOPICS[:3])
    texts[("t01", "en")] = texts[("t00", "en")]
    with pytest.raises(ValueError, match="duplicate segments"):
        build_instance(LanguageConfig.monolingual(3, "en"), TOPICS[:3], texts, num_sets=1)
    with pytest.raises(ValueError, match="distinct"):
        draw_sets(["a", "b", "a"], 2, 1, np.random.default_rng(0))


def test_shortfall_of_sets_is_reported_not_hidden():
    inst = build_instance(LanguageConfig.monolingual(3, "en"), TOPICS[:4], _texts(TOPICS[:4]), num_sets=10, seed=0)
    assert len(inst.sets) == math.comb(4, 3)
    assert inst.notes and "only 4 of 10" in inst.notes[0]


def test_fits_filter_is_respected_and_no_fit_is_an_error():
    short = {"t00", "t01", "t02", "t03"}
    inst = build_instance(LanguageConfig.monolingual(3, "en"), TOPICS, _texts(TOPICS), num_sets=50, seed=0,
                          fits=lambda s: set(s) <= short)
    assert inst.sets and all(set(s) <= short for s in inst.sets)
    with pytest.raises(CorpusError, match="maximum document length"):
        build_instance(LanguageConfig.monolingual(3, "en"), TOPICS, _texts(TOPICS), num_sets=3, fits=lambda s: False)


def test_large_pools_are_sampled_without_repeats():
    topics = [f"x{i}" for i in range(200)]
    sets = draw_sets(topics, 5, 40, np.random.default_rng(0))
    assert len(sets) == 40 and len({frozenset(s) for s in sets}) == 40
    assert all(len(set(s)) == 5 for s in sets)


def test_sampled_orders_for_large_n():
    topics = [f"x{i}" for i in range(10)]
    inst = build_instance(LanguageConfig.monolingual(7, "en"), topics, _texts(topics, ("en",)), num_sets=2,
                          orders_per_set=30, seed=0)
    assert inst.orders_per_set == 30 and len(inst.documents) == 60
    with pytest.raises(ValueError, match="5,040 orders"):
        build_instance(LanguageConfig.monolingual(7, "en"), topics, _texts(topics, ("en",)), num_sets=2)


def test_a_text_two_topics_hold_in_two_languages_names_them_in_a_mixed_set():
    """An untranslated page passes the corpus (duplicates are dropped per language), and a mixed set holding both
    failed in assemble naming neither topic."""
    texts = _texts(TOPICS[:3])
    texts[("t01", "de")] = texts[("t00", "en")]
    with pytest.raises(CorpusError, match=r"n3_en-de: duplicate segments in a set: topics 't00' \(en\) and 't01' "
                                          r"\(de\) hold the same text"):
        build_instance(LanguageConfig.parse("n3_en-de"), TOPICS[:3], texts, num_sets=1, orders_per_set=6)
