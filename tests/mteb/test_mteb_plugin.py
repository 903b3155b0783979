"""Registration with mteb: in-process, through the .pth hook of built wheels, and the real `mteb run`."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

import fairpos_tiny_tasks

REPO = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).resolve().parents[1]
MINILM_REVISION = "8b3219a92973c328a8e22fadcfa821b5dc75636a"  # the weights' commit: the fair/* revision
PLUGIN_MODELS = [f"{org}/{key}" for key in ("gte-multilingual-base", "bge-m3", "Qwen3-Embedding-0.6B",
                                            "multilingual-e5-base", "all-MiniLM-L6-v2") for org in ("fair", "fair-off")]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MTEB_FAIRPOS_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    env.update(extra)
    return env


def _mteb_command() -> list[str]:
    script = Path(sys.executable).parent / "mteb"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "mteb"]


@pytest.fixture(scope="module")
def registered():
    import mteb

    from mteb_fairpos.mteb_plugin import register

    report = register()
    fairpos_tiny_tasks.register()
    return mteb, report


# ---------------------------------------------------------------------------------- in process
def test_models_are_registered(registered):
    mteb, report = registered
    from mteb.models.model_implementations import MODEL_REGISTRY

    for name in PLUGIN_MODELS:
        assert name in MODEL_REGISTRY, name
    # a config is a model name of its own; the revision is the weights' commit
    assert mteb.get_model_meta("fair/all-MiniLM-L6-v2").loader_kwargs["calibration"] == "b128_lhalf_a0.5"
    assert mteb.get_model_meta("fair-off/all-MiniLM-L6-v2").loader_kwargs["calibration"] == "off"
    assert mteb.get_model_meta("fair/all-MiniLM-L6-v2").revision == MINILM_REVISION
    assert mteb.get_model_meta("fair/bge-m3-b256_llast_a1").loader_kwargs["calibration"] == "b256_llast_a1"  # the grid
    assert set(PLUGIN_MODELS) <= set(report.models) or set(PLUGIN_MODELS) <= set(MODEL_REGISTRY)
    names = {m.name for m in mteb.get_model_metas(frameworks=["Sentence Transformers"])}
    assert "fair/Qwen3-Embedding-0.6B" in names


def test_tasks_are_registered(registered):
    mteb, _ = registered
    from mteb_fairpos.tasks import TASKS

    task = mteb.get_task("FairPosTinyRetrieval")
    assert type(task).__name__ == "FairPosTinyRetrieval"
    listed = {t.metadata.name for t in mteb.get_tasks(task_types=["Retrieval"], languages=["eng"])}
    assert "FairPosTinyRetrieval" in listed  # TASK_LIST, used by the filters
    for cls in TASKS:
        assert mteb.get_task(cls.metadata.name).metadata.name == cls.metadata.name


def test_benchmark_groups_the_plugin_tasks(registered):
    mteb, _ = registered
    from mteb_fairpos import mteb_plugin
    from mteb_fairpos.tasks import TASKS

    try:
        assert mteb_plugin.register_benchmark(["FairPosTinyRetrieval"]) == "FairPos"
        bench = mteb.get_benchmark("FairPos")
        assert [t.metadata.name for t in bench.tasks] == ["FairPosTinyRetrieval"]
        assert "FairPos" in {b.name for b in mteb.get_benchmarks()}
    finally:
        module = sys.modules["mteb.benchmarks.benchmarks"]
        module.__dict__.pop("MTEB_FAIRPOS_BENCHMARK", None)
        mteb_plugin.register()
        cache = sys.modules["mteb.benchmarks.get_benchmark"]
        cache._build_registry.cache_clear()
        cache._build_aliases_registry.cache_clear()
    # FairPos holds each measurement once (no Tiny twin, no second probe); the samples are FairPosSmall
    assert [t.metadata.name for t in mteb.get_benchmark("FairPos").tasks] == [
        "SQuADPosQ", "FineWebPosQ", "PosIR", "PosIRCrossLingual", "PermutationFairness"]
    assert [t.metadata.name for t in mteb.get_benchmark("FairPosSmall").tasks] == [
        "SQuADPosQTiny", "FineWebPosQTiny", "PermutationFairnessSample"]
    assert {c.metadata.name for c in TASKS} >= {"PermutationFairnessPaper", "PosIRInstructed"}  # registered, not benchmarked


def test_register_is_idempotent(registered):
    mteb, _ = registered
    from mteb.models.model_implementations import MODEL_REGISTRY

    from mteb_fairpos.mteb_plugin import register

    registry = sys.modules["mteb.get_tasks"]
    sizes = (len(MODEL_REGISTRY), len(registry._TASKS_REGISTRY), len(registry.TASK_LIST))
    register()
    fairpos_tiny_tasks.register()
    assert (len(MODEL_REGISTRY), len(registry._TASKS_REGISTRY), len(registry.TASK_LIST)) == sizes
    names = [t.metadata.name for t in registry.TASK_LIST]
    assert len(names) == len(set(names))


def test_foreign_names_are_not_overwritten(registered):
    mteb, _ = registered
    from mteb_fairpos.mteb_plugin import Registration, register_models, register_tasks

    original = mteb.get_model_meta("sentence-transformers/all-MiniLM-L6-v2")
    impostor = original.model_copy(update={"revision": "x"})
    report = Registration()
    assert register_models([impostor], report) == []
    assert mteb.get_model_meta("sentence-transformers/all-MiniLM-L6-v2") is original
    sts = type(mteb.get_task("STSBenchmark"))
    clone = type("STSBenchmark", (sts,), {"__module__": "somewhere_else"})
    assert register_tasks([clone], report) == []
    assert type(mteb.get_task("STSBenchmark")) is sts
    assert len(report.skipped) == 2


def test_unknown_names_keep_mtebs_did_you_mean(registered):
    mteb, _ = registered
    with pytest.raises(KeyError, match="Did you mean: 'fair/all-MiniLM-L6-v2'"):
        mteb.get_model_meta("fair/all-MiniLM-L6-v3")
    with pytest.raises(KeyError, match="Did you mean: 'FairPosTinyRetrieval'"):
        mteb.get_task("FairPosTinyRetreival")


def test_metadata_agrees_with_mtebs_own_entries(registered):
    from mteb.models.model_implementations import MODEL_REGISTRY

    from mteb_fairpos.mteb_models import BASE_MODELS, fair_model_meta

    for base in BASE_MODELS:
        meta = fair_model_meta(base.key, "b128_lhalf_a0.5")
        upstream = MODEL_REGISTRY[base.upstream]
        for field in ("embed_dim", "n_parameters", "license", "release_date", "languages", "memory_usage_mb"):
            assert getattr(meta, field) == getattr(upstream, field), (base.key, field)
        # all-MiniLM-L6-v2 is loaded at its position table's 512 tokens instead of the checkpoint's 256
        assert meta.max_tokens == (base.max_seq_length or upstream.max_tokens), base.key
        assert meta.loader_kwargs.get("max_seq_length") == base.max_seq_length
        assert meta.similarity_fn_name == upstream.similarity_fn_name
        assert meta.adapted_from == base.upstream
        assert meta.loader_kwargs.get("trust_remote_code") is None
    qwen = fair_model_meta("Qwen3-Embedding-0.6B", None)
    assert qwen.loader_kwargs["padding_side"] == "left" and qwen.loader_kwargs["calibration"] == "off"
    assert qwen.revision == "b22da495047858cce924d27d76261e96be6febc0"  # the weights' commit
    gte = fair_model_meta("gte-multilingual-base")
    assert gte.loader_kwargs["hub_id"] == "alibaba-nlp-community/gte-multilingual-base"
    assert (gte.name, gte.loader_kwargs["calibration"]) == ("fair/gte-multilingual-base", "b128_lhalf_a0.5")
    assert fair_model_meta("fair/bge-m3", "off").name == "fair-off/bge-m3"
    assert fair_model_meta("fair/bge-m3", "b64_ln2_a1").name == "fair/bge-m3-b64_ln2_a1"



def test_a_model_name_alone_gives_the_entry_it_names():
    """The names mteb accepts give their own entries: a config in the name, or the twin, is not replaced by the
    default; a calibration given beside a name that carries another is refused."""
    from mteb_fairpos.mteb_models import fair_model_meta

    named = fair_model_meta("fair/all-MiniLM-L6-v2-b64_llast_a1")
    assert (named.name, named.loader_kwargs["calibration"]) == ("fair/all-MiniLM-L6-v2-b64_llast_a1", "b64_llast_a1")
    twin = fair_model_meta("fair-off/all-MiniLM-L6-v2")
    assert (twin.name, twin.loader_kwargs["calibration"]) == ("fair-off/all-MiniLM-L6-v2", "off")
    assert fair_model_meta("fair/bge-m3", "none").name == fair_model_meta("fair/bge-m3", None).name == "fair-off/bge-m3"
    assert fair_model_meta("fair/bge-m3-b64_ln2_a1", "b64_ln2_a1.0").name == "fair/bge-m3-b64_ln2_a1"
    with pytest.raises(ValueError, match=r"'fair/bge-m3-b64_ln2_a1' names the config b64_ln2_a1, and "
                                         r"calibration='b128_lhalf_a0.5' another; give the base model \('fair/bge-m3'\)"):
        fair_model_meta("fair/bge-m3-b64_ln2_a1", "b128_lhalf_a0.5")
    with pytest.raises(ValueError, match=r"'fair-off/bge-m3' names the config none \(the twin\), and calibration='b64_ln2_a1'"):
        fair_model_meta("fair-off/bge-m3", "b64_ln2_a1")
    assert fair_model_meta("fair-off/bge-m3", "off").name == "fair-off/bge-m3"


def test_calibration_from_environment(monkeypatch):
    from mteb_fairpos.config import ConfigError
    from mteb_fairpos.mteb_models import ENV_CALIBRATION, configured_calibrations, fair_model_meta, model_metas

    monkeypatch.setenv(ENV_CALIBRATION, "b64_ln3_a0.250, b96_llast_a1")
    metas = {m.name: m for m in model_metas()}
    assert metas["fair/bge-m3-b64_ln3_a0.25"].loader_kwargs["calibration"] == "b64_ln3_a0.25"  # normalised text form
    assert "fair/bge-m3-b96_llast_a1" in metas and metas["fair/bge-m3"].loader_kwargs["calibration"] == "b128_lhalf_a0.5"
    monkeypatch.setenv(ENV_CALIBRATION, "b128_lbogus")
    _, problems = configured_calibrations()
    assert len(problems) == 1 and "Valid form: b<basket>_l<layers>_a<strength>" in problems[0]
    assert not any("bogus" in name for name in (m.name for m in model_metas()))  # not registered
    with pytest.raises(ConfigError, match="example: b128_lhalf_a0.5"):
        fair_model_meta("fair/all-MiniLM-L6-v2", "basket128")
    with pytest.raises(KeyError, match="not an mteb-fairpos model"):
        fair_model_meta("fair/unknown-model")


# ---------------------------------------------------------------------------------- fresh processes
def _hook_installed() -> bool:
    return any((Path(p) / "mteb_fairpos_hook.pth").is_file() for p in site.getsitepackages())


@pytest.mark.slow
def test_fresh_process_importing_the_plugin_first():
    """Registration waits for half-executed plugin modules that import mteb themselves; then
    mteb's own CLI code (`mteb available-tasks`) lists the plugin's tasks."""
    if not _hook_installed():
        pytest.skip("the .pth hook is not installed here: pip install -e . (the wheel test below still runs)")
    code = textwrap.dedent("""
        import sys
        assert "mteb_fairpos" not in sys.modules and "mteb" not in sys.modules
        import mteb_fairpos.tasks  # imports mteb while mteb_fairpos.tasks is still executing
        import mteb
        from mteb_fairpos.tasks import TASKS
        assert all(mteb.get_task(cls.metadata.name) for cls in TASKS)
        from mteb.models.model_implementations import MODEL_REGISTRY
        print(mteb.get_model_meta("fair/all-MiniLM-L6-v2").loader_kwargs["calibration"], "fair-off/bge-m3" in MODEL_REGISTRY,
              mteb.get_task("FairPosTinyRetrieval").metadata.name)
        from mteb.cli import main
        sys.argv = ["mteb", "available-tasks", "-t", "FairPosTinyRetrieval"]
        main()
    """)
    out = subprocess.run([sys.executable, "-c", code], env=_env(MTEB_FAIRPOS_EXTRA_TASKS="fairpos_tiny_tasks"),
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["b128_lhalf_a0.5", "True", "FairPosTinyRetrieval"]
    assert any("FairPosTinyRetrieval" in line for line in lines[1:])  # the available-tasks table


def test_import_mteb_does_not_load_the_statistics():
    """statsmodels is imported where the probe's regression runs, not when mteb registers the tasks."""
    code = ("import sys, mteb; mteb.get_task('PermutationFairnessSample'); "
            "print(sorted(m for m in sys.modules if m.startswith('statsmodels')))")
    out = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_python_without_mteb_does_not_load_the_plugin():
    code = "import sys; print(sorted(m for m in sys.modules if m.startswith(('mteb', 'torch'))))"
    out = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _build(tmp_path: Path) -> dict[str, Path]:
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "_mteb_fairpos_hook.py", "mteb_fairpos_hook.pth"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(REPO / "mteb_fairpos", source / "mteb_fairpos", ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path / "dist"
    code = (
        "from setuptools import build_meta as b; import sys; "
        f"print(b.build_wheel({str(dist)!r})); print(b.build_editable({str(dist)!r}))"
    )
    dist.mkdir()
    out = subprocess.run([sys.executable, "-c", code], cwd=source, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    wheels = {("editable" if "editable" in p.name else "regular"): p for p in dist.glob("*.whl")}
    assert set(wheels) == {"regular", "editable"}
    return wheels


@pytest.mark.slow
def test_wheels_ship_the_hook_and_it_registers(tmp_path):
    wheels = _build(tmp_path)
    pth_line = (REPO / "mteb_fairpos_hook.pth").read_text().strip()
    with zipfile.ZipFile(wheels["editable"]) as editable:
        assert editable.read("mteb_fairpos_hook.pth").decode().strip() == pth_line
        finder = next(n for n in editable.namelist() if n.endswith("_finder.py"))
        assert "'_mteb_fairpos_hook'" in editable.read(finder).decode()
        assert sorted(n for n in editable.namelist() if n.endswith(".pth"))[-1] == "mteb_fairpos_hook.pth"  # after the finder's
    unpacked = tmp_path / "site"
    with zipfile.ZipFile(wheels["regular"]) as regular:
        assert regular.read("mteb_fairpos_hook.pth").decode().strip() == pth_line
        regular.extractall(unpacked)
    # A Python without site processing, whose only processed site dir is the unpacked wheel: the
    # wheel's .pth alone must arm the hook, and the wheel's package is the one registered.
    deps = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    code = textwrap.dedent(f"""
        import sys, site
        sys.path.extend({[str(p) for p in dict.fromkeys(deps)]!r})
        site.addsitedir({str(unpacked)!r})
        assert "_mteb_fairpos_hook" in sys.modules and "mteb" not in sys.modules
        import mteb, mteb_fairpos
        assert mteb_fairpos.__file__.startswith({str(unpacked)!r}), mteb_fairpos.__file__
        print(mteb.get_model_meta("fair-off/all-MiniLM-L6-v2").loader_kwargs["calibration"])
    """)
    out = subprocess.run([sys.executable, "-S", "-c", code], env=_env(), cwd=tmp_path, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-1] == "off"


@pytest.mark.slow
def test_mteb_run_end_to_end_and_results_load_back(tmp_path, registered, monkeypatch):
    """The real `mteb run` command, offline; then another config and the twin next to it; ResultCache reads all."""
    if not _hook_installed():
        pytest.skip("the .pth hook is not installed here: pip install -e .")
    mteb, _ = registered
    task = "FairPosTinyRetrieval"
    command = [*_mteb_command(), "run", "-m", "fair/all-MiniLM-L6-v2", "-t", task, "--output-folder", str(tmp_path),
               "--batch-size", "4", "--no-co2-tracker", "-v", "1"]
    out = subprocess.run(command, env=_env(MTEB_FAIRPOS_EXTRA_TASKS="fairpos_tiny_tasks"), capture_output=True,
                         text=True, timeout=400)
    assert out.returncode == 0, out.stderr[-4000:]
    folder = tmp_path / "results" / "fair__all-MiniLM-L6-v2" / MINILM_REVISION
    assert (folder / f"{task}.json").is_file(), sorted(str(p) for p in tmp_path.rglob("*"))
    meta = json.loads((folder / "model_meta.json").read_text())
    assert meta["revision"] == MINILM_REVISION and meta["loader"] == "FairEncoder"
    assert meta["loader_kwargs"]["calibration"] == "b128_lhalf_a0.5"
    settings = [json.loads(line) for line in (folder / "run_settings.jsonl").read_text().splitlines()]
    assert settings[-1]["encode_kwargs"]["batch_size"] == 4

    # a config from MTEB_FAIRPOS_CALIBRATION (read when the plugin registers) under its own name, and the twin
    from mteb_fairpos.mteb_plugin import register

    cache = mteb.ResultCache(tmp_path)
    monkeypatch.setenv("MTEB_FAIRPOS_CALIBRATION", "b64_llast_a1")
    try:
        register()
        other = mteb.get_model_meta("fair/all-MiniLM-L6-v2-b64_llast_a1")
        assert other.loader_kwargs["calibration"] == "b64_llast_a1" and other.revision == MINILM_REVISION
        mteb.evaluate(other, [mteb.get_task(task)], cache=cache, show_progress_bar=False)
    finally:
        monkeypatch.delenv("MTEB_FAIRPOS_CALIBRATION")
        register()
    mteb.evaluate(mteb.get_model_meta("fair-off/all-MiniLM-L6-v2"), [mteb.get_task(task)], cache=cache,
                  show_progress_bar=False)
    assert (tmp_path / "results" / "fair__all-MiniLM-L6-v2-b64_llast_a1" / MINILM_REVISION / f"{task}.json").is_file()

    names = ["fair/all-MiniLM-L6-v2", "fair/all-MiniLM-L6-v2-b64_llast_a1", "fair-off/all-MiniLM-L6-v2"]
    loaded = cache.load_results(models=names, tasks=[task], include_remote=False)
    revisions = {(r["model_name"], r["revision"]) for r in loaded.model_revisions}
    assert revisions == {(name, MINILM_REVISION) for name in names}
    # mteb's own tables keep every config as a row of its own (configs as revisions hid all but one)
    joined = loaded.join_revisions()
    assert sorted(m.model_name for m in joined) == sorted(names)
    frame = loaded.to_dataframe()
    assert len(frame) == 1 and {c for c in frame.columns if c.startswith("fair")} == set(names)
    aggregated = loaded.get_aggregated_scores()
    assert set(aggregated) == set(names)
    for scores in aggregated.values():
        assert 0.0 <= scores["Mean(Task)"] <= 1.0
    result = cache.load_task_result(task, mteb.get_model_meta("fair/all-MiniLM-L6-v2"))
    entry = result.scores["test"][0]
    assert {"position_begin", "position_middle", "position_end", "psi"} <= set(entry)


# ---------------------------------------------------------------------------------- the hook's own hacks
def test_cpython_import_details_the_hook_relies_on(tmp_path, monkeypatch):
    """Fails loudly if a Python release changes how a module is marked as executing, or how that mark is cleared."""
    import importlib

    import _mteb_fairpos_hook as hook

    (tmp_path / "fairpos_probe_module.py").write_text(
        "import sys, _mteb_fairpos_hook as hook\n"
        "SEEN = hook._is_initialising(sys.modules[__name__])\n"
        "DONE = []\n"
        "WATCHED = hook._when_done(sys.modules[__name__], lambda: DONE.append('done'))\n"
        "DONE_BEFORE_END = list(DONE)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("fairpos_probe_module")
    assert module.SEEN is True and module.WATCHED is True and module.DONE_BEFORE_END == []
    assert module.DONE == ["done"] and not hook._is_initialising(module)
    assert type(module.__spec__).__name__ == "ModuleSpec"  # the watcher stepped aside again


def test_setuptools_editable_strategy_the_build_wraps():
    """setup.py wraps setuptools' private editable_wheel._select_strategy (see the wheel test for the whole build)."""
    import inspect

    from setuptools.command.editable_wheel import _StaticPth, editable_wheel

    assert list(inspect.signature(editable_wheel._select_strategy).parameters) == ["self", "name", "tag", "build_lib"]
    assert list(inspect.signature(_StaticPth.__call__).parameters) == ["self", "wheel", "files", "mapping"]
    assert hasattr(_StaticPth, "__enter__") and hasattr(_StaticPth, "__exit__")


def test_an_unsupported_mteb_gets_one_warning_and_no_half_registration(monkeypatch):
    import mteb

    from mteb_fairpos import mteb_plugin

    calls = []
    monkeypatch.setattr(mteb_plugin, "register_models", lambda *a, **k: calls.append("models") or [])
    monkeypatch.setattr(mteb_plugin, "register_tasks", lambda *a, **k: calls.append("tasks") or [])
    monkeypatch.setattr(mteb, "__version__", "2.99.0")
    with pytest.warns(mteb_plugin.RegistrationWarning, match=r"mteb 2.99.0 is installed, but .* supports mteb<2.27,>=2.26") as caught:
        report = mteb_plugin.register()
    assert len(caught) == 1 and calls == [] and report.models == [] and report.tasks == []
    monkeypatch.undo()
    assert mteb_plugin.unsupported_mteb() is None  # the installed mteb is within the pin
