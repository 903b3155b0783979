"""``mteb-fairpos demo``: the permutation fairness probe, offline, uncalibrated vs calibrated.

Runs the ``PermutationFairnessSample`` task through ``mteb.evaluate`` on the sample corpus
bundled with the package, twice: with the plain all-MiniLM-L6-v2 and with the same weights
calibrated (``FairSentenceTransformer``). Prints the per-position profile and the fitted OLS
coefficients, writes the results in mteb's own layout (``<out>/results/<model>/<revision>/``, the
twin as ``fair-off/<model>`` and the calibrated model as ``fair/<model>[-<config>]``) and the
profile plot (like the paper's Figure 3), and ends with what ``mteb-fairpos compare`` reads back.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..offline import minilm_path
from .common import add_model_arguments, calibration_from_args

DEFAULT_SUBSETS = ["n3_en", "n3_de", "n3_en-de"]
DEFAULT_SETS = {3: 8, 4: 2}


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "demo", help="offline permutation fairness probe on the bundled sample, uncalibrated vs calibrated",
        description=__doc__,
    )
    parser.add_argument("--output", "--out", dest="out", type=Path, default=Path("fairpos-demo"), help="output folder (default: ./fairpos-demo)")
    parser.add_argument("--subsets", nargs="+", default=DEFAULT_SUBSETS, metavar="SUBSET",
                        help=f"instances to run, e.g. n3_de or n3_en-de (default: {' '.join(DEFAULT_SUBSETS)})")
    parser.add_argument("--sets", type=int, default=None, metavar="K",
                        help="segment sets per instance (default: 8 for n=3, 2 for n=4, 1 above); each set gives n! documents")
    parser.add_argument("--batch-size", type=int, default=16, help="texts per forward pass (default 16)")
    parser.add_argument("--seed", type=int, default=42, help="draws the segment sets (default 42)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    add_model_arguments(parser, max_length=512)  # all-MiniLM-L6-v2 ships 256, its BERT takes 512
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    import mteb
    from mteb.cache import ResultCache
    from mteb.models import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    from ..model import FairSentenceTransformer
    from ..mteb_models import base_model, calibrated_name, twin_name
    from ..results import collect
    from .compare import effect_tables, main_table, profile_tables
    from ..permutation.instances import LanguageConfig
    from ..permutation.plot import plot_profiles
    from ..tasks.permutation import PermutationFairnessSample

    started = time.perf_counter()
    calibration = calibration_from_args(args)
    valid = PermutationFairnessSample.metadata.hf_subsets
    unknown = [name for name in args.subsets if name not in valid]
    if unknown:
        raise ValueError(f"unknown subset(s) {unknown} of the bundled sample; valid: {' '.join(valid)}.")
    subsets = _ordered(args.subsets)
    num_sets = {n: args.sets or DEFAULT_SETS.get(n, 1) for n in {LanguageConfig.parse(s).n for s in subsets}}
    model_name = args.model or minilm_path()
    base = SentenceTransformer(model_name, device=args.device or ("cpu" if args.model is None else None))
    if args.max_length:
        base.max_seq_length = args.max_length
    models = {
        "uncalibrated": FairSentenceTransformer(base, calibration=None),
        f"calibrated ({calibration})": FairSentenceTransformer(base, calibration=calibration),
    }
    label = args.model or "all-MiniLM-L6-v2 (offline)"
    print("mteb-fairpos demo: permutation fairness probe on the bundled sample (not a benchmark)")
    print(f"model {label}, max length {base.max_seq_length} tokens; calibration {calibration}")

    runs: dict[str, dict[str, dict[str, Any]]] = {}
    args.out.mkdir(parents=True, exist_ok=True)
    cache = ResultCache(args.out)
    key = "all-MiniLM-L6-v2" if args.model is None else Path(model_name.rstrip("/")).name
    for name, model in models.items():
        task = PermutationFairnessSample(seed=args.seed, num_sets=num_sets)
        task.filter_languages(None, hf_subsets=subsets)
        tick = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            encoder = SentenceTransformerEncoderWrapper(model)
            encoder.mteb_model_meta = encoder.mteb_model_meta.model_copy(update={
                "name": twin_name(key) if model.plan is None else calibrated_name(key, calibration),
                "revision": base_model(key).weights_revision if args.model is None else encoder.mteb_model_meta.revision,
            })
            result = mteb.evaluate(encoder, task, cache=cache, overwrite_strategy="always", show_progress_bar=False,
                                   encode_kwargs={"batch_size": args.batch_size, "show_progress_bar": not args.quiet})
        task_result = result.task_results[0]
        runs[name] = {s["hf_subset"]: s for s in task_result.scores["test"]}
        print(f"  {name}: {sum(s['num_documents'] for s in runs[name].values())} documents in {time.perf_counter() - tick:.0f} s")

    first = next(iter(runs.values()))[subsets[0]]
    print(f"segment window [{first['segment_window_low']}, {first['segment_window_high']}] tokens, "
          f"segment sets per instance {num_sets}, all n! orders, seed {args.seed}\n")
    print(format_profiles(runs, subsets, "sigma"))
    print(format_betas(runs, subsets, "sigma"))
    if any(s.get("tau_status") == "measured" for r in runs.values() for s in r.values()):
        print(format_profiles(runs, subsets, "tau"))
        print(format_betas(runs, subsets, "tau"))
    mixed = format_mixed(runs, subsets)
    if mixed:
        print(mixed)
    figure = plot_profiles(runs, args.out / "profile.png")
    print(f"profile plot: {figure}")
    found = collect(args.out)
    print(f"\nwhat `mteb-fairpos compare {args.out}` reads back from mteb's result folders:\n")
    print(main_table(found))
    print(profile_tables(found))
    print(effect_tables(found))
    print(f"mteb results: {args.out / 'results'}")
    print(f"total time: {time.perf_counter() - started:.0f} s")
    return 0


def _ordered(subsets: list[str]) -> list[str]:
    """Monolingual instances first (per n), so mixed ones can pool them for the language effect."""
    from ..permutation.instances import LanguageConfig

    configs = [LanguageConfig.parse(s) for s in dict.fromkeys(subsets)]
    return [c.name for c in sorted(configs, key=lambda c: (c.n, c.mixed))]


def _prefix(measure: str) -> str:
    return "" if measure == "sigma" else f"{measure}_"


def format_profiles(runs: Mapping[str, Mapping[str, Mapping[str, Any]]], subsets: list[str], measure: str) -> str:
    """Per-position means with 95 % CI half-widths and the fairness ratio, one row per subset and model."""
    p = _prefix(measure)
    width = max(len(name) for name in runs)
    top = max(_n_of(s) for s in subsets)
    what = "cosine(document, standalone segment)" if measure == "sigma" else "cosine(standalone, late-chunked segment)"
    lines = [f"mean {measure} = {what} by position; (+-) half-width of the 95% CI"]
    lines.append(f"{'subset':<10} {'model':<{width}} {'docs':>5}  " + "  ".join(f"{'pos ' + str(i):>15}" for i in range(1, top + 1))
                 + f"  {'fairness':>8}")
    for subset in subsets:
        for k, (name, per_subset) in enumerate(runs.items()):
            scores = per_subset.get(subset)
            if scores is None or scores.get(f"{p}position_1") is None:
                continue
            cells = []
            for i in range(1, top + 1):
                mean = scores.get(f"{p}position_{i}")
                if mean is None:
                    cells.append(f"{'':>15}")
                    continue
                half = (scores[f"{p}position_{i}_ci_high"] - scores[f"{p}position_{i}_ci_low"]) / 2
                cells.append(f"{mean:.3f} (+-{half:.3f})".rjust(15))
            lines.append(f"{subset if k == 0 else '':<10} {name:<{width}} {scores['num_documents']:>5}  " + "  ".join(cells)
                         + f"  {scores[f'{p}position_fairness']:>8.3f}")
    return "\n".join(lines) + "\n"


def format_betas(runs: Mapping[str, Mapping[str, Mapping[str, Any]]], subsets: list[str], measure: str) -> str:
    """beta_0 and beta_p (SE) with p-values: OLS with position dummies, SE clustered by segment set."""
    p = _prefix(measure)
    width = max(len(name) for name in runs)
    top = max(_n_of(s) for s in subsets)
    lines = [f"OLS {measure} ~ beta_0 + sum_p beta_p [position = p] (position 1 = baseline); SE clustered by segment set"]
    lines.append(f"{'subset':<10} {'model':<{width}} {'beta_0':>15}  " + "  ".join(f"{'beta_' + str(i):>24}" for i in range(2, top + 1)))
    for subset in subsets:
        for k, (name, per_subset) in enumerate(runs.items()):
            scores = per_subset.get(subset)
            if scores is None or scores.get(f"{p}beta_0") is None:
                continue
            cells = []
            for i in range(2, top + 1):
                beta = scores.get(f"{p}beta_{i}")
                cells.append(f"{'':>24}" if beta is None else
                             f"{beta:+.3f} ({_se(scores, f'{p}beta_{i}')}) {_pvalue(scores.get(f'{p}beta_{i}_pvalue'))}".rjust(24))
            lines.append(f"{subset if k == 0 else '':<10} {name:<{width}} {scores[f'{p}beta_0']:>7.3f} ({_se(scores, f'{p}beta_0')})  "
                         + "  ".join(cells))
    return "\n".join(lines) + "\n"


def format_mixed(runs: Mapping[str, Mapping[str, Mapping[str, Any]]], subsets: list[str]) -> str:
    lines = []
    for subset in subsets:
        for name, per_subset in runs.items():
            scores = per_subset.get(subset)
            if not scores or not scores.get("mixed"):
                continue
            lead, later = scores["lead_language"], scores["later_language"]
            text = (f"{subset} {name}: position 1 ({lead}) minus later positions ({later}) = {scores['lead_vs_later']:+.3f} "
                    f"({_se(scores, 'lead_vs_later')}) {_pvalue(scores['lead_vs_later_pvalue'])}")
            if scores.get("language_effect") is not None:
                text += (f"; {lead} instead of {later}, net of position = {scores['language_effect']:+.3f} "
                         f"({_se(scores, 'language_effect')}) {_pvalue(scores['language_effect_pvalue'])}"
                         f" [pooled with {', '.join(scores['language_effect_pooled_with'])}]")
            lines.append(text)
    return ("lead vs later language (mixed instances)\n" + "\n".join(lines) + "\n") if lines else ""


def _n_of(subset: str) -> int:
    from ..permutation.instances import LanguageConfig

    return LanguageConfig.parse(subset).n


def _se(scores: Mapping[str, Any], key: str) -> str:
    se = scores.get(f"{key}_se")
    return "n/a" if se is None else f"{se:.3f}"


def _pvalue(p: float | None) -> str:
    if p is None:
        return "p=n/a"
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"
