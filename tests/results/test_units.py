"""The per-query sidecar: written beside the result by mteb's own save (``mteb.evaluate`` with a
ResultCache), never inside the result JSON; checked by the reader against its result; paired by
``compare`` across results written by separate runs, and absent from results of earlier releases."""

from __future__ import annotations

import dataclasses
import json
import shutil

import mteb
import numpy as np
import pyarrow.parquet as pq
import pytest
from results_folders import register_tasks, retrieval_entry, simulated_queries, write_grouped_result, write_result
from retrieval_check import FIXTURES

from mteb_fairpos import fairness
from mteb_fairpos.cli import main
from mteb_fairpos.results import collect, pairing, tables, units
from mteb_fairpos.tasks.posq import SQuADPosQ

TWIN, CALIBRATED, OTHER = "fair-off/all-MiniLM-L6-v2", "fair/all-MiniLM-L6-v2", "fair/all-MiniLM-L6-v2-b64_llast_a1"
COMMIT = "8b3219a92973c328a8e22fadcfa821b5dc75636a"


@pytest.fixture(scope="module", autouse=True)
def _tasks():
    register_tasks()


@pytest.fixture(scope="module")
def encoder(minilm):
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper

    return SentenceTransformerEncoderWrapper(minilm)


def _evaluate(encoder, folder):
    from mteb.cache import ResultCache

    task = SQuADPosQ(data_dir=FIXTURES / "squad_v2")
    return mteb.evaluate(encoder, task, cache=ResultCache(folder), co2_tracker=False).task_results[0]


def test_a_run_with_a_cache_writes_each_querys_score_beside_its_result(encoder, tmp_path):
    result = _evaluate(encoder, tmp_path)
    (path,) = tmp_path.glob("results/*/*/SQuADPosQ.json")
    sidecar = units.read(units.sidecar_path(path))
    rows = sidecar.tables[("test", "default")]
    entry = result.scores["test"][0]
    assert rows.num_rows == entry["n_queries"] == 9 and rows.schema.field("score").type == "float"
    assert sidecar.kind == "retrieval" and sidecar.digests == {"test/default": entry[units.DIGEST]}
    stored = json.loads(path.read_text())["scores"]["test"][0]
    assert not any(isinstance(v, (list, dict)) and len(v) >= 9 for v in stored.values())  # no per-query list in the JSON
    assert stored["bootstrap_resamples"] == 2000 and stored["harmonic_mean_ci_low"] <= stored["harmonic_mean"]
    (scores,) = collect(tmp_path).scores.values()
    assert scores.units is not None and scores.headline["main"].interval == (stored["harmonic_mean_ci_low"], stored["harmonic_mean_ci_high"])
    assert scores.headline["psi"].interval == (stored["psi_ci_low"], stored["psi_ci_high"])


def test_without_the_save_hook_the_result_is_written_as_before(encoder, tmp_path, monkeypatch):
    from mteb.cache import ResultCache

    monkeypatch.setattr(ResultCache, "save_to_cache", ResultCache.save_to_cache.__wrapped__)
    _evaluate(encoder, tmp_path)
    (path,) = tmp_path.glob("results/*/*/SQuADPosQ.json")
    assert not units.sidecar_path(path).exists()
    (scores,) = collect(tmp_path).scores.values()
    assert scores.units is None and scores.main_score is not None
    assert scores.drawn == "queries by relevant document"  # what the entry records, without a sidecar to say
    assert any("is missing" in issue.message for issue in collect(tmp_path).issues)


def test_a_sidecar_that_is_not_its_results_is_reported_and_not_used(tmp_path):
    root = tmp_path / "results"
    mine = write_grouped_result(root, CALIBRATED, COMMIT, *simulated_queries(60, 1))
    theirs = write_grouped_result(root, TWIN, COMMIT, *simulated_queries(60, 2))
    shutil.copy(units.sidecar_path(theirs), units.sidecar_path(mine))  # another run's rows
    found = collect(tmp_path)
    assert [i.kind for i in found.issues] == ["units"] and "do not match the result's digest" in found.issues[0].message
    assert found.get(next(m for m in found.models if m.name == CALIBRATED), "SQuADPosQ").units is None
    shutil.copy(theirs, mine)  # now the result matches its rows, but the folder is another model's
    found = collect(tmp_path)
    assert [i.kind for i in found.issues] == ["units"] and f"records model {TWIN}" in found.issues[0].message
    scores = found.get(next(m for m in found.models if m.name == CALIBRATED), "SQuADPosQ")
    assert scores.units is None and scores.headline == scores.stored and "main" in scores.stored  # the JSON's own intervals


def _damage_metadata(path, **changes):
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[b"mteb_fairpos.units"])
    pq.write_table(table.replace_schema_metadata({b"mteb_fairpos.units": json.dumps({**meta, **changes}).encode()}), path)


@pytest.mark.parametrize("changes", [{"digests": "abc"}, {"digests": {"test/default": 7}}, {"task": ["SQuADPosQ"]}])
def test_a_sidecar_with_damaged_metadata_is_reported_and_its_result_still_read(tmp_path, changes):
    root = tmp_path / "results"
    path = write_grouped_result(root, CALIBRATED, COMMIT, *simulated_queries(60, 1))
    write_grouped_result(root, TWIN, COMMIT, *simulated_queries(60, 2))
    _damage_metadata(units.sidecar_path(path), **changes)
    found = collect(tmp_path)
    assert [i.kind for i in found.issues] == ["units"] and "of the wrong type" in found.issues[0].message
    scores = found.get(next(m for m in found.models if m.name == CALIBRATED), "SQuADPosQ")
    assert scores.units is None and scores.main_score is not None and "main" in scores.headline


@pytest.mark.parametrize("digest", ["missing", None, 12345])
def test_rows_whose_entry_records_no_digest_of_text_are_reported_and_not_used(tmp_path, digest):
    root = tmp_path / "results"
    path = write_grouped_result(root, CALIBRATED, COMMIT, *simulated_queries(60, 1))
    write_grouped_result(root, TWIN, COMMIT, *simulated_queries(60, 2))
    data = json.loads(path.read_text())
    entry = data["scores"]["test"][0]
    if digest == "missing":
        del entry[units.DIGEST]
    else:
        entry[units.DIGEST] = digest
    path.write_text(json.dumps(data))
    found = collect(tmp_path)
    assert [i.kind for i in found.issues] == ["units"]
    assert ("whose entry records no units_digest" if digest != 12345 else "units_digest is not text (int)") in found.issues[0].message
    scores = found.get(next(m for m in found.models if m.name == CALIBRATED), "SQuADPosQ")
    assert scores.units is None and scores.main_score is not None


def test_reading_a_folder_resamples_nothing_until_an_interval_is_asked_for(tmp_path, monkeypatch):
    root = tmp_path / "results"
    write_grouped_result(root, TWIN, COMMIT, *simulated_queries(200, 5))
    retrieval = pairing.KINDS["retrieval"]
    drawn = []

    def counted(*args, **kwargs):
        drawn.append(1)
        return real(*args, **kwargs)

    real = retrieval.intervals
    monkeypatch.setitem(pairing.KINDS, "retrieval", dataclasses.replace(retrieval, intervals=counted))  # the real bootstrap, counted
    (scores,) = collect(tmp_path).scores.values()
    assert scores.units is not None and drawn == []
    first = scores.headline["main"]
    assert drawn == [1] and scores.headline["main"] is first  # drawn once, then kept
    assert first.interval[0] < first.value < first.interval[1]


def test_a_resumed_run_keeps_the_rows_of_subsets_it_did_not_redo(tmp_path):
    result = tmp_path / "Task.json"
    first, second = units.rows(["a", "b"], ["x", None], [1.0, 0.5]), units.rows(["c"], ["y"], [0.25])
    entries = {"test": [{"hf_subset": "one", units.DIGEST: units.hand_over("Task", "test", "one", first)}]}
    units.write_beside(result, "Task", entries, "m", "r")
    entries["test"].append({"hf_subset": "two", units.DIGEST: units.hand_over("Task", "test", "two", second)})
    units.write_beside(result, "Task", entries, "m", "r")  # "one" is no longer at hand: kept from the file
    sidecar = units.read(units.sidecar_path(result))
    assert sorted(sidecar.tables) == [("test", "one"), ("test", "two")]
    assert sidecar.problems("Task", {("test", "one"): entries["test"][0][units.DIGEST], ("test", "two"): entries["test"][1][units.DIGEST]}) == []
    assert pq.read_table(units.sidecar_path(result)).num_rows == 3


def test_compare_pairs_each_calibrated_result_with_its_twin_query_by_query(tmp_path, capsys):
    root = tmp_path / "results"
    scores, groups = simulated_queries(400, 3)
    rng = np.random.default_rng(4)
    write_grouped_result(root, TWIN, COMMIT, scores, groups)
    lifted = {q: min(1.0, v + 0.08 + rng.normal(0, 0.02)) for q, v in scores.items()}
    write_grouped_result(root, CALIBRATED, COMMIT, lifted, groups)
    noise = {q: float(np.clip(v + rng.normal(0, 0.03), 0, 1)) for q, v in list(scores.items())[:380]}  # 20 queries fewer
    write_grouped_result(root, OTHER, COMMIT, noise, groups)
    write_result(root, "fair-off/bge-m3", COMMIT, "SQuADPosQ", {"test": [retrieval_entry(0.5, {"0-100": 0.6, "100-200": 0.4}, 0.33)]})
    write_result(root, "fair/bge-m3", COMMIT, "SQuADPosQ", {"test": [retrieval_entry(0.6, {"0-100": 0.6, "100-200": 0.6}, 0.0)]})
    assert main(["compare", str(tmp_path), "-o", str(tmp_path / "out"), "--no-plots"]) == 0
    out = capsys.readouterr().out
    changes = {line.split(" | ")[0].strip("| ") + " " + line.split(" | ")[3]: line for line in out.splitlines()
               if line.startswith("| fair/") and "SQuADPosQ" in line}
    found = collect(tmp_path)
    twin = found.get(next(m for m in found.models if m.name == TWIN), "SQuADPosQ")
    tested = [(f"{model.name} [8b3219a] {measure}", pairing.change(found.get(model, "SQuADPosQ"), twin, measure))
              for model in found.models if model.name in (CALIBRATED, OTHER) for measure in ("main", "psi")]
    assert len(tested) == 4
    calibrated = found.get(next(m for m in found.models if m.name == CALIBRATED), "SQuADPosQ")
    assert pairing.change(calibrated, twin, "fairness", subset="n3_en") is None  # a retrieval result has no probe fairness
    holm = dict(zip([key for key, _ in tested], pairing.holm([change.pvalue for _, change in tested]), strict=True))
    assert all(holm[key] >= change.pvalue for key, change in tested)  # adjusted for the 4 changes the table tests
    main_row, other_row = changes["fair/all-MiniLM-L6-v2 [8b3219a] main"], changes["fair/all-MiniLM-L6-v2-b64_llast_a1 [8b3219a] main"]
    assert "(400 paired)" in main_row and main_row.endswith(f"| better | {pairing.format_p(holm[f'{CALIBRATED} [8b3219a] main'])} |")
    assert "(380 paired)" in other_row
    assert other_row.endswith(f"| not significant | {pairing.format_p(holm[f'{OTHER} [8b3219a] main'])} |")
    assert "(no interval: no per-unit scores for this result or the twin)" in changes["fair/bge-m3 [8b3219a] main"]
    assert changes["fair/bge-m3 [8b3219a] psi"].endswith("| no interval |  |")  # no test, so not in the family
    assert "] (partial)" not in out and "0." in out.split("## Main scores")[1].split("[")[1]  # main scores carry intervals


def test_posir_intervals_and_changes_follow_its_pooling_per_language(tmp_path):
    """PosIR's sidecar rows are each query's relative-position bin; the reader resamples each language's
    queries within it and averages the languages, as `summarize_scores` pools the point figures."""
    from mteb_fairpos.tasks.grouped_metrics import POSITION_BINS
    from mteb_fairpos.tasks.posir import PosIR
    from mteb_fairpos.tasks.posir.task import position_scores

    root, task, rng = tmp_path / "results", PosIR(), np.random.default_rng(12)
    queries = {subset: [f"q{i}" for i in range(n)] for subset, n in (("deu-Latn.law", 80), ("deu-Latn.game", 50), ("eng-Latn.law", 70))}
    places = {subset: {q: (("Q1", "Q2")[i % 2], POSITION_BINS[i % 5]) for i, q in enumerate(ids)} for subset, ids in queries.items()}
    base = {subset: dict(zip(ids, rng.random(len(ids)).tolist(), strict=True)) for subset, ids in queries.items()}
    for name, lift in ((TWIN, 0.0), (CALIBRATED, 0.05)):
        entries = []
        for subset, values in base.items():
            scores = {q: v + lift for q, v in values.items()}
            entry = position_scores(scores, places[subset])
            entry.update(hf_subset=subset, languages=[subset.split(".")[0]], ndcg_at_10=float(np.mean(list(scores.values()))))
            entry["main_score"] = entry["ndcg_at_10"]
            entry[units.DIGEST] = task.hand_over_units("test", subset, scores, {q: (p[1],) for q, p in places[subset].items()},
                                                       bucket={q: p[0] for q, p in places[subset].items()})
            entries.append(entry)
        path = write_result(root, name, COMMIT, "PosIR", {"test": entries})
        units.write_beside(path, "PosIR", {"test": entries}, name, COMMIT)
    found = collect(tmp_path)
    twin, calibrated = (found.get(next(m for m in found.models if m.name == n), "PosIR") for n in (TWIN, CALIBRATED))
    assert twin.headline["main"].value == pytest.approx(twin.main_score)  # the papers' mean over languages
    assert twin.headline["psi"].value == pytest.approx(twin.psi)
    low, high = twin.headline["main"].interval
    assert low < twin.main_score < high
    from mteb_fairpos.results import pairing

    change = pairing.change(calibrated, twin, "main")
    assert change.value == pytest.approx(0.05) and change.interval == pytest.approx((0.05, 0.05)) and change.paired == 200
    psi_change = pairing.change(calibrated, twin, "psi")
    assert psi_change.interval is not None and psi_change.paired == 200 and psi_change.value == pytest.approx(calibrated.psi - twin.psi)


def test_the_probes_sidecar_gives_each_subsets_fairness_its_interval_and_an_unknown_kind_is_reported(tmp_path):
    """The probe's per-observation rows (kind ``probe``) give each subset's fairness its two-way bootstrap
    interval, drawn as the result records (its resamples and seed); a twin of another corpus shares no
    observation, so its change has no interval and says why; a sidecar of a kind this release does not read
    is reported, not used."""
    from results_folders import simulated_probe_rows, write_probe_result

    from mteb_fairpos.permutation import fairness_bootstrap
    from mteb_fairpos.resampling import Resampling

    rows = simulated_probe_rows(5)
    root = tmp_path / "results"
    write_probe_result(root, TWIN, COMMIT, {"n3_en": simulated_probe_rows(6, prefix="other-"), "n3_de": simulated_probe_rows(7)},
                       resamples=300, seed=9)
    path = write_probe_result(root, CALIBRATED, COMMIT, {"n3_en": rows, "n3_de": simulated_probe_rows(8)}, resamples=300, seed=9)
    found = collect(tmp_path)
    calibrated, twin = found.get(*_key(found, CALIBRATED)), found.get(*_key(found, TWIN))
    assert calibrated.unit_kind == "probe" and calibrated.resampling == Resampling(300, 9)
    assert calibrated.drawn == "segment sets and topics"  # as the entries record it: the probe's units do not say
    expected = fairness_bootstrap(rows["score"], np.asarray(rows["group"], dtype=int), rows["segment_set"], rows["topic"],
                                  Resampling(300, 9)).fairness
    estimate = calibrated.headline["fairness n3_en"]
    assert (estimate.value, *estimate.interval) == pytest.approx((expected.estimate, expected.ci_low, expected.ci_high), rel=1e-6)
    assert estimate.value == pytest.approx(calibrated.profiles["n3_en"]["3"] / calibrated.profiles["n3_en"]["1"], rel=1e-6)
    change = pairing.change(calibrated, twin, "fairness", subset="n3_en")
    assert change.interval is None and change.why == "the two results share no observations of subset n3_en"
    other = pairing.change(calibrated, twin, "fairness", subset="n3_de")  # same ids, other sets and topics
    assert other.interval is None and other.why.endswith("another corpus or selection): not the same observations")
    assert pairing.change(calibrated, twin, "main").why == (
        "subset(s) n3_de, n3_en could not be paired, so the mean over subsets is not either")
    plain = fairness.min_max_ratio(calibrated.profiles["n3_en"].values()) - fairness.min_max_ratio(twin.profiles["n3_en"].values())
    assert (f"| fairness n3_en | {plain:+.4f} (no interval: the two results share no observations of subset n3_en) | "
            "no interval |") in tables.changes_table(found)

    table = pq.read_table(units.sidecar_path(path))
    metadata = json.loads(table.schema.metadata[b"mteb_fairpos.units"])
    pq.write_table(table.replace_schema_metadata({b"mteb_fairpos.units": json.dumps({**metadata, "kind": "clicks"}).encode()}),
                   units.sidecar_path(path))
    again = collect(tmp_path)
    assert again.get(*_key(again, CALIBRATED)).units is None
    assert any("kind 'clicks', which this release does not read" in i.message for i in again.issues if i.kind == "units")


def test_the_probes_psi_is_one_minus_its_main_score_so_its_interval_and_change_are_the_main_scores_mirrored(tmp_path):
    from results_folders import simulated_probe_rows, write_probe_result

    root = tmp_path / "results"
    write_probe_result(root, TWIN, COMMIT, {"n3_en": simulated_probe_rows(5), "n3_de": simulated_probe_rows(6)}, resamples=300, seed=9)
    write_probe_result(root, CALIBRATED, COMMIT, {"n3_en": simulated_probe_rows(5, shift=-0.03), "n3_de": simulated_probe_rows(6, shift=-0.03)},
                       resamples=300, seed=9)
    found = collect(tmp_path)
    calibrated, twin = found.get(*_key(found, CALIBRATED)), found.get(*_key(found, TWIN))
    main, psi = calibrated.headline["main"], calibrated.headline["psi"]
    assert psi.value == pytest.approx(calibrated.psi, rel=1e-9) and psi.value == pytest.approx(1 - main.value, rel=1e-9)
    assert psi.interval == pytest.approx((1 - main.interval[1], 1 - main.interval[0]), rel=1e-12)
    lifted, lowered = pairing.change(calibrated, twin, "main"), pairing.change(calibrated, twin, "psi")
    assert lowered.value == pytest.approx(calibrated.psi - twin.psi, rel=1e-9) and lowered.value == -lifted.value < 0
    assert lowered.interval == (-lifted.interval[1], -lifted.interval[0]) and lowered.pvalue == lifted.pvalue
    assert lowered.paired == lifted.paired == 2 * 12 * 6 * 3 and lowered.verdict(higher_is_better=False) == "better"
    row = next(line for line in tables.changes_table(found).splitlines() if line.startswith(f"| {CALIBRATED}") and "| psi |" in line)
    family = [lifted.pvalue, lowered.pvalue, *(pairing.change(calibrated, twin, "fairness", subset=s).pvalue for s in ("n3_de", "n3_en"))]
    assert lowered.text() in row and row.endswith(f"| better | {pairing.format_p(pairing.holm(family)[1])} |")


def test_a_figure_the_sidecar_does_not_reproduce_gets_no_interval_or_paired_change(tmp_path):
    """An interval stands only around the result's own number: a probe result whose entries store a PSI of their
    own (not one minus the main score, as the probe writes it) keeps its PSI, without the mirrored interval."""
    from results_folders import simulated_probe_rows, write_probe_result

    root = tmp_path / "results"
    write_probe_result(root, TWIN, COMMIT, {"n3_en": simulated_probe_rows(5)}, resamples=300, seed=9)
    path = write_probe_result(root, CALIBRATED, COMMIT, {"n3_en": simulated_probe_rows(5, shift=-0.03)}, resamples=300, seed=9)
    stored = json.loads(path.read_text())
    stored["scores"]["test"][0]["psi"] = 0.5  # the digest covers the sidecar's rows, not the entry's figures
    path.write_text(json.dumps(stored))
    found = collect(tmp_path)
    calibrated, twin = found.get(*_key(found, CALIBRATED)), found.get(*_key(found, TWIN))
    assert calibrated.psi == 0.5 and "psi" not in calibrated.headline and calibrated.unmatched == {"psi"}
    assert "main" in calibrated.headline and "fairness n3_en" in calibrated.headline
    change = pairing.change(calibrated, twin, "psi")
    assert change.interval is None and change.value == pytest.approx(0.5 - twin.psi)
    assert change.why == "the per-unit scores do not reproduce this result's psi (a result edited or written otherwise)"
    assert pairing.change(calibrated, twin, "main").interval is not None


def test_the_probes_tau_fairness_gets_its_interval_and_paired_change_from_the_sidecars_tau_column(tmp_path):
    """A mean-pooled model's sidecar holds tau beside sigma: its fairness per subset gets the same two-way interval,
    and its change against the twin is paired on the same observations; compare shows both."""
    from results_folders import simulated_probe_rows, write_probe_result

    from mteb_fairpos.leaderboard.data import probe_subsets
    from mteb_fairpos.permutation import fairness_bootstrap
    from mteb_fairpos.resampling import Resampling

    def with_tau(seed, lift):
        rows = simulated_probe_rows(seed)
        rng = np.random.default_rng(seed + 100)
        rows["tau"] = [0.9 - (0.05 - lift) * int(p) + rng.normal(0, 0.01) for p in rows["group"]]
        return rows

    root = tmp_path / "results"
    plain, lifted = with_tau(5, 0.0), with_tau(5, 0.03)
    write_probe_result(root, TWIN, COMMIT, {"n3_en": plain}, resamples=300, seed=9)
    write_probe_result(root, CALIBRATED, COMMIT, {"n3_en": lifted}, resamples=300, seed=9)
    found = collect(tmp_path)
    calibrated, twin = found.get(*_key(found, CALIBRATED)), found.get(*_key(found, TWIN))
    tau = lambda rows: np.asarray(rows["tau"], dtype=np.float32).astype(np.float64)  # noqa: E731 - as the sidecar holds it
    expected = fairness_bootstrap(tau(lifted), np.asarray(lifted["group"], dtype=int), lifted["segment_set"], lifted["topic"],
                                  Resampling(300, 9), baseline_values=tau(plain))
    estimate = calibrated.headline["fairness tau n3_en"]
    assert (estimate.value, *estimate.interval) == pytest.approx((expected.fairness.estimate, expected.fairness.ci_low,
                                                                  expected.fairness.ci_high), rel=1e-9)
    change = pairing.change(calibrated, twin, "fairness", subset="tau n3_en")
    assert (change.value, *change.interval, change.pvalue) == pytest.approx(
        (expected.change.estimate, expected.change.ci_low, expected.change.ci_high, expected.change.pvalue), rel=1e-9)
    assert change.paired == len(lifted["unit"]) and change.verdict(higher_is_better=True) == "better"
    assert calibrated.headline["main"].value == calibrated.headline["fairness n3_en"].value  # tau is not pooled into main
    assert f"| fairness tau n3_en | {change.text()} | better |" in tables.changes_table(found)
    tau_table = tables.profile_tables(found).split(": tau n3_en")[1]
    assert f"{estimate.value:.4f} [{estimate.interval[0]:.3f}, {estimate.interval[1]:.3f}] |" in tau_table
    header = tables.main_table(found).splitlines()[0]  # a column per subset: its sigma fairness, not its tau one
    assert "PermutationFairnessSample: n3_en" in header and "tau" not in header
    assert probe_subsets(found, "PermutationFairnessSample") == ["n3_en"]  # the page's columns and languages
    for side, label in ((CALIBRATED, "this result"), (TWIN, "the twin")):  # a sidecar of an earlier release: sigma only
        sidecar = units.sidecar_path(next(root.glob(f"{side.replace('/', '__')}/*/PermutationFairnessSample.json")))
        kept = pq.read_table(sidecar)
        pq.write_table(kept.drop_columns(["tau"]), sidecar)
        found = collect(tmp_path)
        calibrated, twin = found.get(*_key(found, CALIBRATED)), found.get(*_key(found, TWIN))
        change = pairing.change(calibrated, twin, "fairness", subset="tau n3_en")
        assert change.interval is None and change.why.startswith(f"{label}'s per-unit scores hold no tau for subset n3_en")
        assert pairing.change(calibrated, twin, "fairness", subset="n3_en").interval is not None
        pq.write_table(kept, sidecar)


def _key(found, name: str) -> tuple:
    return next(model for model in found.models if model.name == name), "PermutationFairnessSample"


def test_a_result_merged_from_another_folder_keeps_its_rows(tmp_path):
    """The Ray sweep evaluates each subset into a folder of its own and merges the results: the merged
    save writes the rows the parts' sidecars hold."""
    part = tmp_path / "part" / "Task.json"
    part.parent.mkdir()
    rows = units.rows(["a", "b"], ["x", "y"], [1.0, 0.5])
    entries = {"test": [{"hf_subset": "one", units.DIGEST: units.hand_over("Task", "test", "one", rows)}]}
    units.write_beside(part, "Task", entries, "m", "r")
    units.hand_over("Task", "test", "one", units.rows(["c"], ["x"], [0.0]))  # what the driver holds: not these rows
    units.carry_over(part)
    merged = tmp_path / "merged" / "Task.json"
    merged.parent.mkdir()
    assert units.write_beside(merged, "Task", entries, "m", "r") is not None
    assert units.read(units.sidecar_path(merged)).tables[("test", "one")].column("unit").to_pylist() == ["a", "b"]


def test_a_run_draws_each_passage_with_its_questions_and_an_earlier_sidecar_its_queries(encoder, tmp_path):
    """The sidecar records each query's relevant passage, and the result that its bootstrap drew passages; a sidecar
    of an earlier release, without that column, is read as it was written: queries drawn one by one."""
    from mteb_fairpos.results.schema import CLUSTERS, QUERIES

    _evaluate(encoder, tmp_path)
    (path,) = tmp_path.glob("results/*/*/SQuADPosQ.json")
    stored = json.loads(path.read_text())["scores"]["test"][0]
    assert stored["bootstrap_units"] == CLUSTERS
    rows = units.read(units.sidecar_path(path)).tables[("test", "default")]
    task = SQuADPosQ(data_dir=FIXTURES / "squad_v2")
    task.load_data()
    qrels = task.dataset["default"]["test"]["relevant_docs"]
    assert {q: c for q, c in zip(rows.column("unit").to_pylist(), rows.column("cluster").to_pylist())} == {
        q: next(iter(docs)) for q, docs in qrels.items()}
    (scores,) = collect(tmp_path).scores.values()
    assert scores.drawn == CLUSTERS and scores.units.clusters is not None
    earlier = dataclasses.make_dataclass("Sidecar", ["tables"])({("test", "default"): rows.drop_columns(["cluster"])})
    drawn = pairing._retrieval_units(earlier, None, list(task.position_groups))
    assert drawn.clusters is None and drawn.resampled == QUERIES


def test_a_sidecars_clusters_stay_within_their_subset():
    """PosIR's subsets each have their own corpus: one document id in two subsets is two documents, so two units."""
    import pyarrow as pa

    table = pa.table({"unit": ["q1", "q2"], "group": ["a", "a"], "score": pa.array([0.5, 0.7], pa.float32()),
                      "cluster": ["doc-1", "doc-1"]})
    sidecar = dataclasses.make_dataclass("Sidecar", ["tables"])({("test", "deu-a"): table, ("test", "deu-b"): table})
    drawn = pairing._retrieval_units(sidecar, None, ["a"])
    assert len(set(drawn.clusters.tolist())) == 2 and len(drawn.units()[0]) == 2


def test_cross_lingual_posir_draws_a_document_once_with_its_queries_in_every_language():
    """Cross-lingual subsets search their domain's English corpus: one document id in two languages' subsets is one
    document, so one unit, and the two languages are drawn together; monolingual PosIR's subsets have corpora of
    their own, so there the same id is two documents."""
    import pyarrow as pa

    from mteb_fairpos.tasks.posir import PosIR, PosIRCrossLingual

    table = pa.table({"unit": ["q1", "q2"], "group": ["a", "a"], "score": pa.array([0.5, 0.7], pa.float32()),
                      "cluster": ["doc-1", "doc-2"]})
    sidecar = dataclasses.make_dataclass("Sidecar", ["tables"])(
        {("test", "deu-Latn.finance"): table, ("test", "fra-Latn.finance"): table, ("test", "fra-Latn.law"): table})
    cross = pairing._retrieval_units(sidecar, PosIRCrossLingual(), ["a"])
    strata, unit_of = cross.units()
    assert len(strata) == 4  # doc-1 and doc-2 of finance, each in both languages; doc-1 and doc-2 of law
    assert sorted(np.unique(strata, return_counts=True)[1].tolist()) == [4]  # French joins German: one draw
    assert len({(cross.strata_labels[s], u) for s, u in zip(cross.strata, unit_of)}) == 6
    own = pairing._retrieval_units(sidecar, PosIR(), ["a"])
    assert len(own.units()[0]) == 6 and len(set(own.units()[0].tolist())) == 2


def test_a_cross_lingual_run_draws_each_english_document_with_its_queries_in_every_language(encoder, tmp_path):
    """End to end: a cross-lingual PosIR run over two query languages records each query's English document in the
    sidecar, and the reader draws each document once, with its queries in both languages (one draw for both)."""
    from mteb.cache import ResultCache

    from mteb_fairpos.tasks.posir import PosIRCrossLingual

    copy = tmp_path / "posir"
    shutil.copytree(FIXTURES / "posir", copy)
    shutil.copytree(copy / "deu-Latn", copy / "fra-Latn")  # a second query language over the same English corpora
    task = PosIRCrossLingual(languages=["deu", "fra"], data_dir=copy)
    mteb.evaluate(encoder, task, cache=ResultCache(tmp_path / "results"), co2_tracker=False)
    (scores,) = collect(tmp_path / "results").scores.values()
    drawn = scores.units
    strata, unit_of = drawn.units()
    languages = {label: {str(c) for c, code in zip(drawn.clusters, drawn.strata) if drawn.strata_labels[code] == label}
                 for label in drawn.strata_labels}
    assert set(languages) == {"deu-Latn", "fra-Latn"} and languages["deu-Latn"] == languages["fra-Latn"]
    assert all(cluster.startswith("test/eng-Latn.") for cluster in languages["deu-Latn"])
    assert len(set(strata.tolist())) == 1 and len(strata) == len(languages["deu-Latn"])
    assert all({drawn.strata_labels[c] for c in drawn.strata[unit_of == u]} == {"deu-Latn", "fra-Latn"}
               for u in range(len(strata)))



def test_a_table_whose_p_values_holm_cannot_bring_below_5_percent_says_so(tmp_path, monkeypatch):
    """A p-value counted from R resamples is at least 2/(R + 1): with 100 resamples, Holm over 4 changes cannot reach
    0.05 (4 x 0.0198), and the table says so; over 2 changes it can, and there is no note."""
    from mteb_fairpos.resampling import Resampling

    monkeypatch.setattr(SQuADPosQ, "resampling", Resampling(100, 11))  # the setting a run records, made small
    root = tmp_path / "results"
    scores, groups = simulated_queries(120, 3)
    write_grouped_result(root, TWIN, COMMIT, scores, groups)
    write_grouped_result(root, CALIBRATED, COMMIT, {q: min(1.0, v + 0.2) for q, v in scores.items()}, groups)
    pair = tables.changes_table(collect(tmp_path))
    assert pair.count("\n| fair/") == 2 and "resamples a bootstrap p-value" not in pair
    write_grouped_result(root, OTHER, COMMIT, {q: min(1.0, v + 0.1) for q, v in scores.items()}, groups)
    four = tables.changes_table(collect(tmp_path))
    assert four.count("\n| fair/") == 4
    assert four.endswith("\n\nWith 100 resamples a bootstrap p-value is at least 2/(R + 1) = 0.0198, so Holm's adjustment for "
                         "these 4 changes cannot bring one below 0.05; compare fewer at once (--tasks, --models) to test at "
                         "most 2 together.")


def test_a_probe_sidecar_that_holds_one_observation_twice_is_named_and_not_used(tmp_path):
    """Pairing kept one of the two rows without a word; the sidecar is now reported, and the result read without it."""
    from results_folders import simulated_probe_rows, write_probe_result

    rows = simulated_probe_rows(5)
    rows["unit"][1] = rows["unit"][0]  # a writer's slip, recorded in the digest
    write_probe_result(tmp_path, CALIBRATED, COMMIT, {"n3_en": rows}, resamples=50, seed=1)
    found = collect(tmp_path)
    (scores,) = found.scores.values()
    assert scores.units is None
    assert any("subset n3_en holds observation '0:1' 2 times; each is one row. Not used." in message
               for _, message in scores.notes)
