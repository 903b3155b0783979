"""mteb's own registry checks, run on the plugin's models and tasks.

mteb tests every entry of its registry in its repository's test suite (mteb 2.x,
``tests/test_models/test_model_meta.py`` and ``tests/test_tasks/test_metadata.py``); those files
are not installed with mteb, so the assertions they hold are restated here, each under the name
of the mteb test it comes from. An entry may fail a check only where ``docs/registry.md`` lists it
as a known gap (what cannot be computed without the hub), and a listed gap that no longer fails
must leave the list: the list is exactly what fails.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "registry.md"
GAP_ROW = re.compile(r"^\| `(?P<entry>[^`]+)` \| `(?P<check>[a-z_]+)` \|")


def documented_gaps() -> set[tuple[str, str]]:
    """The (entry pattern, mteb check) rows of the known-gaps table in docs/registry.md."""
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("## Known gaps"):]
    return {(m["entry"], m["check"]) for m in map(GAP_ROW.match, section.splitlines()) if m}


@pytest.fixture(scope="module")
def plugin_entries():
    from mteb.models.model_implementations import MODEL_REGISTRY

    from mteb_fairpos.mteb_models import model_metas
    from mteb_fairpos.mteb_plugin import MODEL_PROVIDERS, register
    from mteb_fairpos.tasks import TASKS

    register()
    assert len(MODEL_PROVIDERS) == 2  # fair/ + fair-off/ (model_metas) and sea/ (SEA_MODELS)
    from mteb_fairpos.sea import SEA_MODELS

    names = [meta.name for meta in [*model_metas(), *SEA_MODELS]]
    return [MODEL_REGISTRY[name] for name in names], [cls() for cls in TASKS]


# ------------------------------------------------------------------ mteb's checks, one function each
# (the docstring names the mteb test each assertion comes from)
def name_and_revision(meta) -> None:
    """tests/test_models/test_model_meta.py::test_check_model_name_and_revision"""
    assert meta.name is not None
    assert meta.revision is not None


def training_datasets_can_be_derived(meta) -> None:
    """tests/test_models/test_model_meta.py::test_check_training_datasets_can_be_derived"""
    assert meta.name != meta.adapted_from
    meta.get_training_datasets()


def n_embedding_parameters(meta) -> None:
    """tests/test_models/test_model_meta.py::test_n_embedding_parameters (open-weights text models)"""
    if meta.open_weights and "text" in meta.modalities:
        assert meta.n_embedding_parameters is not None


def model_type_filter(meta) -> None:
    """tests/test_models/test_model_meta.py::test_get_model_metas_each_model_type: a model the type
    filter returns declares that type."""
    import mteb

    for model_type in ("dense", "cross-encoder", "late-interaction"):
        for found in mteb.get_model_metas(model_names=[meta.name], model_types=[model_type]):
            assert model_type in found.model_type


def metadata_is_filled_and_valid(task) -> None:
    """tests/test_tasks/test_metadata.py::test_all_metadata_is_filled_and_valid"""
    from mteb.abstasks import AbsTaskRetrieval

    task.metadata._validate_metadata()
    assert task.metadata.is_filled(), f"Metadata for {task.metadata.name} is not filled"
    assert task.metadata.dataset.get("trust_remote_code", False) is False
    assert isinstance(task.metadata.simplified_task_type, str)
    if task.is_aggregate:
        assert set(task.metadata.hf_subsets_to_langscripts.keys()) == {"default"}
        return
    assert task.metadata.descriptive_stats is not None, f"Dataset {task.metadata.name} should have descriptive stats"
    assert task.metadata.n_samples is not None
    if isinstance(task.metadata.prompt, dict):
        assert isinstance(task, AbsTaskRetrieval), f"Task {task.metadata.name} has a dict prompt"


MODEL_CHECKS = {"test_check_model_name_and_revision": name_and_revision,
                "test_check_training_datasets_can_be_derived": training_datasets_can_be_derived,
                "test_n_embedding_parameters": n_embedding_parameters,
                "test_get_model_metas_each_model_type": model_type_filter}
TASK_CHECKS = {"test_all_metadata_is_filled_and_valid": metadata_is_filled_and_valid}
"""mteb's test names (what docs/registry.md's gaps table names) and the check each runs."""


# ------------------------------------------------------------------ the plugin's entries against them
def failures(plugin_entries) -> set[tuple[str, str]]:
    """Every (entry name, check name) where one of mteb's checks fails on a plugin entry."""
    metas, tasks = plugin_entries
    failed = set()
    for checks, entries, name_of in ((MODEL_CHECKS, metas, lambda m: m.name), (TASK_CHECKS, tasks, lambda t: t.metadata.name)):
        for entry in entries:
            for check_name, check in checks.items():
                try:
                    check(entry)
                except AssertionError:
                    failed.add((name_of(entry), check_name))
    return failed


def test_mtebs_checks_pass_on_every_plugin_entry_but_the_documented_gaps(plugin_entries):
    failed = failures(plugin_entries)
    gaps = documented_gaps()
    assert gaps, f"no known-gaps table found in {DOCS}"
    undocumented = {(name, check) for name, check in failed
                    if not any(check == gap_check and fnmatch.fnmatchcase(name, pattern) for pattern, gap_check in gaps)}
    assert not undocumented, f"mteb's checks fail on plugin entries not listed in {DOCS.name}: {sorted(undocumented)}"
    closed = {(pattern, check) for pattern, check in gaps
              if not any(check == c and fnmatch.fnmatchcase(name, pattern) for name, c in failed)}
    assert not closed, f"listed as known gaps in {DOCS.name} but passing now (remove them): {sorted(closed)}"


def test_the_checks_catch_what_they_check(plugin_entries):
    """A check that could not fail would prove nothing: break one entry of each kind and see it caught."""
    metas, tasks = plugin_entries
    fair = next(m for m in metas if m.name == "fair/all-MiniLM-L6-v2")
    broken = fair.model_copy(update={"n_embedding_parameters": None, "revision": None})
    assert failures(([broken], [])) == {("fair/all-MiniLM-L6-v2", "test_n_embedding_parameters"),
                                        ("fair/all-MiniLM-L6-v2", "test_check_model_name_and_revision")}
    sample = next(t for t in tasks if t.metadata.name == "PermutationFairnessSample")
    unfilled = type(sample)()
    unfilled.metadata = sample.metadata.model_copy(update={"date": None})
    assert failures(([], [unfilled])) == {("PermutationFairnessSample", "test_all_metadata_is_filled_and_valid")}


def test_embedding_parameters_follow_the_checkpoint_config(minilm_dir):
    """n_embedding_parameters is vocab_size x hidden_size of the config (mteb's rule): the offline
    MiniLM's own config.json gives the table's values, and every base model agrees with the number
    mteb computed from the hub for the same weights."""
    import json

    from mteb.models.model_implementations import MODEL_REGISTRY

    from mteb_fairpos.mteb_models import BASE_MODELS, base_model

    config = json.loads((Path(minilm_dir) / "config.json").read_text())
    minilm = base_model("all-MiniLM-L6-v2")
    assert (minilm.vocab_size, minilm.hidden_size) == (config["vocab_size"], config["hidden_size"])
    for base in BASE_MODELS:
        assert base.n_embedding_parameters == MODEL_REGISTRY[base.upstream].n_embedding_parameters, base.key
