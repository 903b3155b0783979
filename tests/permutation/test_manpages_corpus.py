"""The bundled real-text corpus (translated Linux man pages): size, provenance, and the effect it shows."""

from __future__ import annotations

import json

import pytest

from mteb_fairpos.permutation.corpus import MANPAGES_FINGERPRINT, MANPAGES_PATH, manpages_corpus

ACCEPTED = {"GPL-1.0-or-later", "GPL-2.0-or-later", "Linux-man-pages-copyleft", "VERBATIM_ONE_PARA", "PUBLIC_DOMAIN",
            "BSD-3-Clause", "MIT"}


def test_at_least_100_topics_in_at_least_four_languages():
    corpus = manpages_corpus()
    coverage = corpus.coverage()
    assert len(corpus) >= 100 and coverage["en"] == len(corpus)
    assert sum(count >= 100 for count in coverage.values()) >= 4, coverage
    assert corpus.skipped == {}  # no empty or repeated text slipped through the build
    assert corpus.fingerprint() == MANPAGES_FINGERPRINT  # a changed file must change the dataset revision too


def test_every_topic_has_its_licence_and_attribution():
    rows = [json.loads(line) for line in MANPAGES_PATH.read_text(encoding="utf-8").splitlines()]
    notice = MANPAGES_PATH.with_name("manpages_corpus.NOTICE.md").read_text(encoding="utf-8")
    assert "| manpages | 6.03-2 |" in notice and "| manpages-de | 4.18.1-1 |" in notice
    for row in rows:
        assert row["license"] in ACCEPTED, row["id"]
        assert set(row["translation_licenses"]) == set(row["texts"]) - {"en"}
        assert f"## {row['id']}\n" in notice and row["page"].endswith(")")
        assert row["texts"]["en"].lower().startswith(row["id"].rsplit(".", 1)[0].lower())  # the NAME line opens every text


@pytest.mark.slow
def test_the_bundled_corpus_shows_the_first_position_bias_and_calibrations_effect(minilm_dir):
    """The main job's claim, on real text: MiniLM favours position 1 (CIs apart), and calibration
    (basket 64, full strength) makes the profile fairer."""
    from sentence_transformers import SentenceTransformer

    from mteb_fairpos import CalibrationConfig, FairSentenceTransformer
    from mteb_fairpos.permutation import ProbeSession, ProbeSettings
    from mteb_fairpos.permutation.selection import SelectionSettings

    base = SentenceTransformer(minilm_dir, device="cpu")
    base.max_seq_length = 512
    settings = ProbeSettings(num_sets={3: 12}, selection=SelectionSettings(mode="lead"))
    scores, baseline = {}, None
    for name, config in (("off", None), ("strong", CalibrationConfig.parse("b64_lhalf_a1"))):
        session = ProbeSession(manpages_corpus(), FairSentenceTransformer(base, calibration=config), settings)
        result = session.run("n3_en", baseline=baseline)  # the strong config is paired with the plain run
        scores[name], baseline = result.scores, result.observations
    off, strong = scores["off"], scores["strong"]
    assert off["position_1_ci_low"] > off["position_3_ci_high"] and off["beta_3_pvalue"] < 0.001
    assert strong["position_fairness"] > off["position_fairness"] + 0.05
    assert strong["change_position_fairness_ci_low"] > 0 and strong["change_position_fairness_pvalue"] < 0.05  # not noise
