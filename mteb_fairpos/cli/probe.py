"""``mteb-fairpos probe``: the permutation fairness probe on any corpus and model, configs side by side.

Runs a permutation task through ``mteb.evaluate`` once per calibration config (``none`` is the
uncalibrated twin, run first) and prints the probe's full report per subset: the per-position means
with 95 % CIs, the fairness ratio with its 95 % interval and each calibrated config's paired change
against the twin (bootstrap over segment sets and topics: ``--resamples``, ``--bootstrap-seed``), the
OLS position effects (beta_p with clustered SE and p), the
same for tau on mean-pooled models, and, for mixed instances, the lead-vs-later contrast and the
language effect. Results are written in mteb's layout under ``<output>/results`` (the
uncalibrated twin as ``fair-off/<model>``, each config as ``fair/<model>[-<config>]``); settings
that change the numbers name the result (see :func:`mteb_fairpos.tasks.permutation.settings_suffix`:
corpus, sets, window, mode, seed) or, for the model's own settings (``--max-length``,
``--prompt``), its mteb experiment folder. A profile plot, ``compare``'s view and the leaderboard page
(``<output>/leaderboard/index.html``) close the run.

Examples::

    mteb-fairpos probe --corpus my_corpus.jsonl -m intfloat/multilingual-e5-base --prompt "passage: " \\
        --subsets n3_en n3_de n3_en-de --sets 20 --calibration none b128_lhalf_a0.5 b64_lhalf_a1
    mteb-fairpos probe --corpus impresso-project/wiki_comparable_corpus_en_de_hi_it_ko_zh --subsets n3_de
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..offline import minilm_path
from .options import (
    add_batch_size,
    add_device,
    distinct_configs,
    add_max_length,
    add_model,
    add_output,
    add_quiet,
    non_negative_int,
    positive_int,
    removed_if_left_empty,
    resamples,
    seed,
)

DEFAULT_SUBSETS = ["n3_en", "n3_de", "n3_en-de"]
DEFAULT_CALIBRATIONS = ["none", "b128_lhalf_a0.5"]
DEMO_CALIBRATIONS = ["none", "b128_lhalf_a0.5", "b64_lhalf_a1"]
DATA_WARNINGS = "mteb_fairpos.permutation.probe"
"""The logger whose warnings are about the data (few segment sets, segments cut), not the model."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "probe", help="permutation fairness probe on a corpus and model, calibration configs side by side",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--corpus", default=None, metavar="FILE_OR_HF_ID",
                        help="a JSONL/Parquet file (one row per topic), a save_to_disk folder, or a Hugging Face dataset id "
                        "with one split per language (default: the bundled man-page corpus)")
    parser.add_argument("--corpus-revision", default=None, metavar="REV", help="revision of a Hugging Face corpus (default main)")
    add_probe_options(parser, calibrations=DEFAULT_CALIBRATIONS, output="fairpos-probe")
    parser.set_defaults(func=run)
    return parser


def add_probe_options(parser: argparse.ArgumentParser, *, calibrations: list[str], output: str) -> None:
    """The options ``probe`` and ``demo`` share (``demo`` is ``probe`` on the bundled corpus)."""
    add_model(parser)
    parser.add_argument("--prompt", default=None, metavar="TEXT",
                        help="document prompt put before every document and segment, e.g. 'passage: ' for e5 (default: the model's own)")
    parser.add_argument("--subsets", nargs="+", default=DEFAULT_SUBSETS, metavar="SUBSET",
                        help=f"instances to run: n<N>_<lang> or n<N>_<lead>-<later> with BCP-47 tags, e.g. n3_de, n3_en-de, "
                        f"n3_zh-CN (default: {' '.join(DEFAULT_SUBSETS)})")
    parser.add_argument("--sets", type=_sets, default=None, metavar="K",
                        help="segment sets per instance (default: the task's); each set gives n! documents")
    parser.add_argument("--calibration", nargs="+", default=calibrations, metavar="CONFIG",
                        help="calibration configs to compare, in text form ('none' = uncalibrated), e.g. none b128_lhalf_a0.5 "
                        f"b64_lhalf_a1 (default: {' '.join(calibrations)})")
    parser.add_argument("--window", nargs=2, type=positive_int, default=None, metavar=("LOW", "HIGH"),
                        help="segment length window in tokens (default: the paper's 1,000-2,000 of 8,192 scaled to the max length)")
    parser.add_argument("--mode", choices=["filter", "lead"], default=None,
                        help="texts outside the window: drop them (filter, the paper) or keep their leading sentences (lead); "
                        "default: the task's")
    parser.add_argument("--seed", type=seed, default=42, help="draws the segment sets (default 42)")
    parser.add_argument("--resamples", type=resamples, default=2000,
                        help="bootstrap resamples behind the fairness intervals and the paired changes (default 2000)")
    parser.add_argument("--bootstrap-seed", type=non_negative_int, default=0,
                        help="seed of the bootstrap; the same seed gives the same intervals (default 0)")
    add_batch_size(parser, default=16, unit="texts through the model")
    add_device(parser, note="cpu for the default model, whose verified numbers are CPU ones")
    add_output(parser, default=Path(output), what="output folder")
    add_quiet(parser)
    add_max_length(parser, default=512 if output == "fairpos-demo" else None)


def _sets(text: str) -> int:
    """An argparse type: at least two segment sets, as the intervals resample sets (one has no spread)."""
    value = positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"expected at least 2 segment sets (the intervals resample them), got {value}")
    return value


def run(args: argparse.Namespace) -> int:
    import mteb
    from mteb.cache import ResultCache
    from ..model import load_checkpoint
    from ..mteb_models import LoadedWeights
    from ..results import collect, load
    from ..results.tables import effect_tables, main_table, profile_tables
    from ..permutation.plot import plot_profiles
    from ..permutation.report import format_betas, format_mixed, format_profiles

    started = time.perf_counter()
    calibrations = _calibrations(args.calibration)
    subsets = _ordered(_readable(args.subsets))
    model_name = args.model or minilm_path()
    device = args.device or ("cpu" if args.model is None else None)
    base = load_checkpoint(model_name, device=device)
    experiment = _model_settings(base, args)
    weights = LoadedWeights()  # every config wraps this one loaded copy
    weights.add(base, model_name, device=device, max_seq_length=experiment.get("max_seq_length"))
    task_class, corpus = _task_and_corpus(args)
    settings = {"seed": args.seed, "corpus": corpus, "num_sets": args.sets, "segment_mode": args.mode,
                "segment_window": tuple(args.window) if args.window else None,
                "resamples": args.resamples, "resampling_seed": args.bootstrap_seed}
    probe_task = task_class(**settings)
    _check_subsets(probe_task, subsets)
    key = "all-MiniLM-L6-v2" if args.model is None else Path(model_name.rstrip("/")).name
    label = args.model or "all-MiniLM-L6-v2 (offline)"
    print(f"mteb-fairpos probe: {probe_task.metadata.name} on {getattr(corpus, 'source', None) or probe_task.metadata.dataset['path']}")
    print(f"model {label}, max length {base.max_seq_length} tokens, document prompt {_show_prompt(base)}; "
          f"configs: {', '.join(str(c) if c else 'none' for c in calibrations)}")

    runs: dict[str, dict[str, dict[str, Any]]] = {}
    baseline: dict[str, Any] = {}  # the uncalibrated run's observations: each calibrated config is paired with them
    with removed_if_left_empty(args.out), once_per_run(logging.getLogger(DATA_WARNINGS)):  # every config meets the same data
        cache = ResultCache(args.out)
        for calibration in calibrations:
            name = "uncalibrated" if calibration is None else f"calibrated ({calibration})"
            task = task_class(**settings, baseline=baseline)
            task.filter_languages(None, hf_subsets=subsets)
            tick = time.perf_counter()
            encoder = _encoder(weights, base, model_name, device, calibration, key, experiment, revision_known=args.model is None)
            result = mteb.evaluate(encoder, task, cache=cache, overwrite_strategy="always", show_progress_bar=False,
                                   encode_kwargs={"batch_size": args.batch_size, "show_progress_bar": not args.quiet})
            runs[name] = {s["hf_subset"]: s for s in result.task_results[0].scores["test"]}
            if calibration is None:
                baseline = dict(task.observations)
            documents = sum(load(s).counts.documents for s in runs[name].values())
            print(f"  {name}: {documents} documents in {time.perf_counter() - tick:.0f} s")

    first = load(next(iter(runs.values()))[subsets[0]]).settings
    print(f"segment window [{first.window_low}, {first.window_high}] tokens ({first.mode}), "
          f"segment sets per instance {first.sets}, all n! orders, seed {args.seed}; intervals from {first.resamples} "
          f"bootstrap resamples of {first.resampled or 'segment sets'}, bootstrap seed {first.resampling_seed}")
    left = {subset: load(entry).counts.excluded for subset, entry in next(iter(runs.values())).items()}
    print("topics left out: " + ("; ".join(
        f"{subset} " + ", ".join(f"{count} {reason.replace('_', ' ')}" for reason, count in sorted(reasons.items()))
        for subset, reasons in left.items() if reasons) or "none") + "\n")
    print(format_profiles(runs, subsets, "sigma"))
    print(format_betas(runs, subsets, "sigma"))
    if any(s.get("tau_status") == "measured" for r in runs.values() for s in r.values()):
        print(format_profiles(runs, subsets, "tau"))
        print(format_betas(runs, subsets, "tau"))
    mixed = format_mixed(runs, subsets)
    if mixed:
        print(mixed)
    notes = sorted({note for r in runs.values() for s in r.values() for note in s.get("notes", [])})
    if notes:
        print("notes:\n" + "\n".join(f"  - {note}" for note in notes) + "\n")
    figure = plot_profiles(runs, args.out / "profile.png")
    print(f"profile plot: {figure}")
    found = collect(args.out, tasks=[probe_task.metadata.name])
    print(f"\nwhat `mteb-fairpos compare {args.out}` reads back from mteb's result folders:\n")
    print(main_table(found))
    print(profile_tables(found))
    print(effect_tables(found))
    print(f"mteb results: {args.out / 'results'} (task {probe_task.metadata.name})")
    from ..leaderboard import publish

    print(f"leaderboard page: {publish([args.out], args.out / 'leaderboard')[1]}")
    print(f"total time: {time.perf_counter() - started:.0f} s")
    return 0


@contextmanager
def once_per_run(logger: logging.Logger) -> Iterator[None]:
    """Let each distinct message of ``logger`` through once: a warning about the data would otherwise
    repeat for every config scored on it."""
    seen: set[str] = set()

    def first_time(record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message in seen:
            return False
        seen.add(message)
        return True

    logger.addFilter(first_time)
    try:
        yield
    finally:
        logger.removeFilter(first_time)


def _calibrations(texts: Sequence[str]) -> list[Any]:
    configs = distinct_configs(texts, "--calibration", uncalibrated=True)
    return sorted(configs, key=lambda config: config is not None)  # the uncalibrated twin first: the others pair with it


def _model_settings(base: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Apply --max-length and --prompt to the model; the ones that differ from the model's own become
    mteb experiment kwargs, so their results get their own folder."""
    from ..model import set_max_length
    from ..segmented import document_prompt

    experiment: dict[str, Any] = {}
    if args.max_length and args.max_length != base.max_seq_length:
        set_max_length(base, args.max_length)
        experiment["max_seq_length"] = args.max_length
    if args.prompt is not None and args.prompt != document_prompt(base):
        base.prompts = {**(base.prompts or {}), "document": args.prompt}
        experiment["document_prompt"] = args.prompt
    return experiment


def _task_and_corpus(args: argparse.Namespace) -> tuple[type, Any]:
    from ..permutation.corpus import load_hf_corpus, load_local_corpus
    from ..tasks.permutation import DEMO_SUBSETS, PermutationFairness, PermutationFairnessManpages, PermutationFairnessManpagesDemo

    source = getattr(args, "corpus", None)
    if getattr(args, "corpus_revision", None) is not None and (source is None or Path(source).exists()):
        raise ValueError("--corpus-revision applies to a Hugging Face corpus (--corpus owner/name); "
                         f"{'the bundled corpus' if source is None else repr(source)} is read as it is.")
    if source is None:  # the demo's three subsets are a task of their own, which the run then completes
        return (PermutationFairnessManpagesDemo if set(args.subsets) == set(DEMO_SUBSETS) else PermutationFairnessManpages), None
    if Path(source).exists():
        return PermutationFairness, load_local_corpus(source)
    if source.count("/") == 1 and not source.endswith((".jsonl", ".parquet", ".ndjson")):
        return PermutationFairness, load_hf_corpus(source, revision=getattr(args, "corpus_revision", None))
    raise FileNotFoundError(f"--corpus {source}: no such file or folder (a Hugging Face dataset id looks like owner/name).")


def _readable(subsets: list[str]) -> list[str]:
    """The subset names, or one error naming every name that is not one (with the reason of the first)."""
    from ..permutation.instances import LanguageConfig

    reasons = {}
    for name in subsets:
        try:
            LanguageConfig.parse(name)
        except ValueError as err:
            reasons[name] = str(err)
    if reasons:
        raise ValueError(f"unknown subset(s) {list(reasons)}: {next(iter(reasons.values()))}")
    return subsets


def _check_subsets(task: Any, subsets: list[str]) -> None:
    valid = task.metadata.hf_subsets
    unknown = [name for name in subsets if name not in valid]
    if unknown:
        corpus = task.corpus_override  # one without texts is refused by the task itself
        have = f"the corpus has {list(corpus.languages)}; " if corpus is not None else ""
        raise ValueError(f"subset(s) {unknown} cannot be built: {have}valid: {' '.join(valid)}.")


def _encoder(weights: Any, base: Any, path: str, device: str | None, calibration: Any, key: str,
             experiment: Mapping[str, Any], *, revision_known: bool) -> Any:
    """The plugin's encoder of ``base`` (held in ``weights``), named as the registered models are."""
    from ..mteb_models import base_model, build_encoder, checkpoint_meta

    meta = checkpoint_meta(base, key, calibration, path=path, device=device)
    update: dict[str, Any] = {"experiment_kwargs": dict(experiment) or None}
    if revision_known:
        update["revision"] = base_model(key).weights_revision
    return build_encoder(meta.model_copy(update=update), weights=weights)


def _show_prompt(base: Any) -> str:
    from ..segmented import document_prompt

    prompt = document_prompt(base)
    return repr(prompt) if prompt else "none"


def _ordered(subsets: list[str]) -> list[str]:
    """Monolingual instances first (per n), so mixed ones can pool them for the language effect."""
    from ..permutation.instances import LanguageConfig

    configs = [LanguageConfig.parse(s) for s in dict.fromkeys(subsets)]
    return [c.name for c in sorted(configs, key=lambda c: (c.n, c.mixed))]
