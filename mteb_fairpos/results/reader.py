"""Reading an mteb results folder: scores, position profiles and PSI per (model, task).

Every ``<model>/<revision>/<Task>.json`` (and ``<revision>/experiments/<name>/<Task>.json``) is
read with mteb's own ``TaskResult`` parser, and each score entry through `schema.load`; missing,
partial, foreign and corrupt results are recorded as :class:`Issue` objects, never skipped
silently.

Main score, PSI and profile are plain means over a result's entries, unless the task class says
how to pool its subsets: ``summarize_scores(entries)`` returning ``main_score``, ``psi`` and
``positions`` (PosIR pools its (language, domain) subsets per language, as its papers report).
An entry whose profile carries confidence intervals (a permutation-probe subset) is a separate
estimate: its profiles are kept per subset, never averaged with another subset's; a retrieval entry's
intervals over queries are not (they are kept when the result has that one entry).

The per-unit sidecar beside a result (`units`) is read and checked against the result (task, model,
the digest of every entry's rows); a valid one gives the headline intervals, pooled as the task pools
(`pairing`), and the unit scores that ``compare`` and the page pair with the twin's.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import fairness, jsonl
from ..mteb_plugin import registered_task
from ..resampling import Resampling
from .schema import CLUSTERS, QUERIES, Estimate, ScoreEntry, faults, load

_RESULT_SIDE_FILES = {"model_meta.json"}


# ---------------------------------------------------------------------------------- data
@dataclass(frozen=True, order=True)
class ModelKey:
    """One evaluated model: its name, revision (the weights' commit; the config in results of earlier
    releases) and experiment."""

    name: str
    revision: str
    experiment: str = ""

    @property
    def label(self) -> str:
        revision = self.revision[:7] if re.fullmatch(r"[0-9a-f]{40}", self.revision) else self.revision
        text = self.name if revision in ("", "no_revision_available") else f"{self.name} [{revision}]"
        return f"{text} ({self.experiment})" if self.experiment else text


@dataclass
class TaskScores:
    """What one result file says: main score, position profiles and PSI, averaged over entries."""

    task: str
    task_type: str | None
    main_score: float | None
    psi: float | None
    profiles: dict[str, dict[str, float | None]]
    """family ("" = the main profile) -> label -> mean value over the entries that report it; for
    entries that are estimates with confidence intervals (the permutation probe's subsets), one
    family per subset (``"n3_en"``, ``"tau n3_en"``) instead: those are never averaged together."""
    entries: int
    status: str = "ok"
    notes: list[tuple[str, str]] = field(default_factory=list)
    """(issue kind, message): ``partial`` for missing scores, ``unchecked`` for an unknown task."""
    intervals: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)
    """family -> label -> the entry's 95 % confidence interval, where the entry reports one."""
    effects: dict[str, dict[str, tuple[float, float | None, float | None]]] = field(default_factory=dict)
    """subset -> fitted effect (``beta_2``, ``tau_beta_3``, ``lead_vs_later``, ``language_effect``) ->
    (estimate, standard error, p-value), for entries that report regression results."""
    settings: dict[str, list[Any]] = field(default_factory=dict)
    """Stored setting key (``corpus``, ``corpus_fingerprint``, ``seed`` ...) -> its distinct values over the
    entries, in order (:class:`~.schema.Settings`)."""
    pools: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Language -> the task's own per-language figures, for a task that pools its subsets per language
    (PosIR: ``position_<bin>`` and, per length bucket, ``ndcg_at_10_<bucket>``)."""
    path: Path | None = None
    """The result file."""
    mteb_version: str = ""
    dataset_revision: str = ""
    stored: dict[str, Estimate] = field(default_factory=dict)
    """``main`` / ``psi`` -> the value with the 95 % interval its single entry stores, where it stores one."""
    units: Any = None
    """The unit scores of a valid per-unit sidecar (`pairing.KINDS`), for paired changes; ``None`` without."""
    unit_kind: str = ""
    unit_model: tuple[str, str] | None = None
    """(model, revision) the sidecar records, checked against the folder's model by `collect`."""
    resampling: Resampling | None = None
    """The bootstrap settings the result records (resamples, seed)."""
    resampled: tuple[str, ...] = ()
    """What the entries' bootstraps drew (`Settings.resampled`), each kind once."""
    task_object: Any = None
    """mteb's task object, where mteb knows the task."""
    changes_cache: dict[int, Any] = field(default_factory=dict, repr=False)
    _headline: dict[str, Estimate] | None = field(default=None, init=False, repr=False, compare=False)
    _unmatched: set[str] = field(default_factory=set, init=False, repr=False, compare=False)

    @property
    def profile(self) -> dict[str, float | None]:
        return self.profiles.get("", {})

    def figure(self, measure: str, family: str = "") -> float | None:
        """A measure's value (`pairing.measure_key`): ``main``, ``psi``, or ``fairness`` of a probe ``family`` (the
        min/max of its profile, docs/method.md#s2-3)."""
        if measure == "main":
            return self.main_score
        if measure == "psi":
            return self.psi
        if measure != "fairness":
            raise ValueError(f"unknown measure {measure!r}: main, psi or fairness.")
        profile = self.profiles.get(family)
        return fairness.min_max_ratio(profile.values()) if profile else None

    @property
    def headline(self) -> dict[str, Estimate]:
        """Measure (``main``, ``psi``, ``fairness <subset>``) -> the value with its 95 % interval, where the result
        has one: from its per-unit sidecar (pooled as the task pools), else :attr:`stored`. The sidecar's bootstrap
        runs on first use, so reading a results folder costs no resampling until a report asks for an interval."""
        if self._headline is None:
            from . import pairing

            if self.units is None:
                self._headline = self.stored
            else:  # an interval only around the result's own number: a figure the sidecar does not reproduce gets none
                drawn = pairing.headline(self.units, self.unit_kind, self.task_object, self.resampling or Resampling())
                self._unmatched = {key for key, estimate in drawn.items()
                                   if not _agrees(estimate.value, self.figure(*pairing.measure_of(key)))}
                self._headline = {key: estimate for key, estimate in drawn.items() if key not in self._unmatched}
        return self._headline

    @property
    def drawn(self) -> str | None:
        """What the headline's intervals draw (`Settings.resampled`): the sidecar's units where it has them, else what
        the entries record where they record one kind; ``None`` where neither says."""
        from_units = getattr(self.units, "resampled", None)  # retrieval units say; a probe's are drawn as recorded
        return from_units or (self.resampled[0] if len(self.resampled) == 1 else None)

    @property
    def unmatched(self) -> set[str]:
        """Measures whose value from the sidecar is not the result's own (:meth:`figure`, e.g. a result edited by
        hand): :attr:`headline` leaves them out, and they get no paired change."""
        _ = self.headline  # drawn together
        return self._unmatched


NOTE_KINDS = ("pooled",)
"""Issue kinds that say how a number was made (a mean over subsets), not that anything is wrong: reports list them
as notes and count them apart."""


@dataclass(frozen=True)
class Issue:
    kind: str
    """``corrupt``, ``foreign``, ``partial``, ``missing``, ``no-meta``, ``no-twin``, ``unchecked``, ``units`` (a
    per-unit sidecar that is missing, unreadable or not the result's); or, a note (:data:`NOTE_KINDS`), ``pooled``."""
    where: str
    message: str

    @property
    def note(self) -> bool:
        return self.kind in NOTE_KINDS

    def __str__(self) -> str:
        return f"[{self.kind}] {self.where}: {self.message}"


@dataclass
class Collection:
    """Everything read from one results folder."""

    root: Path
    scores: dict[tuple[ModelKey, str], TaskScores] = field(default_factory=dict)
    issues: list[Issue] = field(default_factory=list)
    experiments: dict[ModelKey, dict[str, Any]] = field(default_factory=dict)
    """The ``experiment_kwargs`` a model's ``model_meta.json`` records, where it records any."""
    filtered: int = 0
    """Result files left unread because ``tasks`` or ``models`` did not name them."""
    seen: dict[str, set[str]] = field(default_factory=lambda: {"tasks": set(), "models": set()})
    """The task and model names of every result file found, read or filtered out (`unmatched`)."""

    @property
    def problems(self) -> list[Issue]:
        """The issues that are not notes (`Issue.note`)."""
        return [issue for issue in self.issues if not issue.note]

    @property
    def notes(self) -> list[Issue]:
        """The issues that say how a number was made (`Issue.note`)."""
        return [issue for issue in self.issues if issue.note]

    @property
    def models(self) -> list[ModelKey]:
        return sorted({key for key, _ in self.scores}, key=model_order)

    @property
    def tasks(self) -> list[str]:
        return sorted({task for _, task in self.scores})

    def get(self, model: ModelKey, task: str) -> TaskScores | None:
        return self.scores.get((model, task))


def model_order(key: ModelKey) -> tuple:
    """Each base model's twin first, then its calibrated configs."""
    base = plugin_base(key.name) or key.name
    return (base, not key.name.startswith("fair-off/"), key.name, key.revision, key.experiment)


# ---------------------------------------------------------------------------------- reading
def results_root(path: Path) -> Path:
    """The folder holding ``<model>/<revision>/`` folders: ``path`` or its ``results`` subfolder."""
    path = Path(path)
    if not path.is_dir():
        what = "is a file, not a folder" if path.exists() else "does not exist"
        raise FileNotFoundError(f"results folder {path} {what}: give the --output-folder of `mteb run`.")
    inner = path / "results"
    if inner.is_dir() and not list(path.glob("*/*/*.json")):
        return inner
    return path


def collect(path: Path, *, tasks: Sequence[str] | None = None, models: Sequence[str] | None = None) -> Collection:
    """Read an mteb results folder, reporting what cannot be read or is incomplete."""
    for option, names in (("tasks", tasks), ("models", models)):
        if isinstance(names, str):  # a name would be matched as a substring of every name
            raise TypeError(f"{option} is a list of names; got the text {names!r} (write [{names!r}]).")
    root = results_root(path)
    found = Collection(root)
    for model_dir in sorted(root.iterdir()):
        if not model_dir.is_dir():
            if not model_dir.name.startswith("."):
                found.issues.append(Issue("foreign", _rel(model_dir, root), "not a model folder; skipped."))
            continue
        for revision_dir in sorted(model_dir.iterdir()):
            if not revision_dir.is_dir():
                found.issues.append(Issue("foreign", _rel(revision_dir, root), "expected <model>/<revision>/<Task>.json; skipped."))
                continue
            folders = [(revision_dir, "")]
            experiments = revision_dir / "experiments"
            if experiments.is_dir():
                folders += [(d, d.name) for d in sorted(experiments.iterdir()) if d.is_dir()]
            for folder, experiment in folders:
                _read_folder(found, root, model_dir, revision_dir, folder, experiment, tasks, models)
    if not found.scores and not found.seen["models"]:
        _report_deeper(found, root)
    report_gaps(found)
    return found


def _report_deeper(found: Collection, root: Path) -> None:
    """A folder that holds no ``<model>/<revision>/<Task>.json`` may hold results further down (a folder of runs):
    name where, since an empty table alone does not say why."""
    deeper = sorted({file.parents[2] for file in root.rglob("*.json")
                     if file.name not in _RESULT_SIDE_FILES and root in file.parents[2].parents})
    for folder in deeper[:5]:
        found.issues.append(Issue("foreign", _rel(folder, root), "holds <model>/<revision>/<Task>.json folders below "
                                  "this results folder, which are not read; give it as the results folder."))


def unmatched(seen: Mapping[str, set[str]], tasks: Sequence[str] | None, models: Sequence[str] | None) -> str:
    """The ``--tasks`` and ``--models`` names that no result file found has (``seen``: `Collection.seen`), as
    ``"--tasks Nope; --models x/y"``; ``""`` when every name matched (a typo would otherwise just narrow the table)."""
    parts = [f"{flag} {' '.join(missing)}" for flag, names, kind in (("--tasks", tasks, "tasks"), ("--models", models, "models"))
             if (missing := [name for name in dict.fromkeys(names or ()) if name not in seen[kind]])]
    return "; ".join(parts)


GAP_KINDS = ("missing", "no-twin")
"""The kinds of issue :func:`report_gaps` finds: what a collection lacks as a whole, not what a file holds."""


def report_gaps(found: Collection) -> None:
    """Add what the collection lacks as a whole to its issues: a task a model has no results for (``missing``), a
    model without its counterpart (``no-twin``). :func:`collect` finds them in its folder; a page of several folders
    finds them once, in all of them together (`mteb_fairpos.leaderboard.data.build`)."""
    _report_missing(found)
    _report_twins(found)


def _read_folder(found: Collection, root: Path, model_dir: Path, revision_dir: Path, folder: Path, experiment: str,
                 tasks: Sequence[str] | None, models: Sequence[str] | None) -> None:
    named = sorted(p for p in folder.glob("*.json") if p.name not in _RESULT_SIDE_FILES)
    files = [p for p in named if p.is_file()]
    for other in sorted(set(named) - set(files)):
        what = "a folder" if other.is_dir() else "a link to nothing" if other.is_symlink() else "not a plain file"
        found.issues.append(Issue("corrupt", _rel(other, root), f"{what}, not a result file; skipped."))
    if not files:
        return
    key = _model_key(found, root, model_dir, revision_dir, folder, experiment)
    found.seen["models"].add(key.name)
    found.seen["tasks"].update(file.stem for file in files)
    if models and key.name not in models:
        found.filtered += len(files)
        return
    for file in files:
        if tasks and file.stem not in tasks:
            found.filtered += 1
            continue
        scores = read_result(file, found.issues, where=_rel(file, root))
        if scores is None:
            continue
        if scores.task != file.stem:
            found.issues.append(Issue("foreign", _rel(file, root), f"holds task {scores.task!r}, not {file.stem!r}; skipped."))
            continue
        if scores.unit_model is not None and scores.unit_model != (key.name, key.revision):
            scores.notes.append(("units", f"its per-unit sidecar records model {scores.unit_model[0]} [{scores.unit_model[1]}], "
                                          "not this folder's; not used (no intervals or paired changes from it)."))
            scores.units = None  # the intervals the result records itself (`stored`) still hold
        for kind, note in scores.notes:
            found.issues.append(Issue(kind, f"{key.label}: {_rel(file, root)}", note))
        if (key, scores.task) in found.scores:  # two folders name the same model and revision: keep the first
            kept = found.scores[(key, scores.task)].path
            found.issues.append(Issue("duplicate", f"{key.label}: {_rel(file, root)}",
                                      f"another result of this model and task was read first ({_rel(kept, root)}); skipped."))
            continue
        found.scores[(key, scores.task)] = scores


def _model_key(found: Collection, root: Path, model_dir: Path, revision_dir: Path, folder: Path, experiment: str) -> ModelKey:
    name = model_dir.name.replace("__", "/")
    revision = revision_dir.name
    meta_file = folder / "model_meta.json"
    if meta_file.is_file():
        try:
            meta = jsonl.loads(meta_file.read_text(encoding="utf-8"))
            wrong = [field for field in ("name", "revision") if not isinstance(meta.get(field) or "", str)]
            if wrong:
                raise ValueError(f"its {' and '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} not text")
            name = meta.get("name") or name
            revision = meta.get("revision") or revision
        except (ValueError, UnicodeDecodeError, AttributeError) as err:  # JSONDecodeError is a ValueError
            found.issues.append(Issue("corrupt", _rel(meta_file, root), f"unreadable ({err}); model name taken from the folder."))
        else:
            if isinstance(meta.get("experiment_kwargs"), dict):
                found.experiments[ModelKey(name, revision, experiment)] = dict(meta["experiment_kwargs"])
    else:
        found.issues.append(Issue("no-meta", _rel(folder, root), "no model_meta.json; model name and revision taken from the folders."))
    return ModelKey(name, revision, experiment)


def read_result(file: Path, issues: list[Issue] | None = None, *, where: str | None = None) -> TaskScores | None:
    """One mteb result file as :class:`TaskScores`; ``None`` (with an issue) when it is not one.

    A file of a current mteb is read once and validated by mteb's ``TaskResult`` from the text (pydantic's JSON
    parser, the fastest route for PosIR's large entries), after a plain parse that refuses a repeated key (pydantic
    would keep one of its values unseen). A file it rejects, or one
    written before mteb 1.12.48, goes through ``TaskResult.from_disk``, which converts the layouts of
    older releases; one mteb cannot read either is parsed again, to say why.
    """
    where = where or str(file)
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        _add(issues, Issue("corrupt", where, f"not valid JSON ({err}); skipped."))
        return None
    except OSError as err:
        _add(issues, Issue("corrupt", where, f"cannot be read ({err.strerror or err}); skipped."))
        return None
    try:  # a repeated key would be resolved by the parser, one of its values dropped unseen
        jsonl.loads(text)
    except jsonl.DuplicateKey as err:
        _add(issues, Issue("corrupt", where, f"{err}; skipped."))
        return None
    except ValueError:
        pass  # not JSON: said below, with mteb's reason
    try:
        result = _task_result(file, text)
    except Exception as err:  # noqa: BLE001 - mteb's parser: pydantic validation and format conversions
        _add(issues, _rejected(text, where, err))
        return None
    try:  # mteb checks a result's frame; what this package reads inside its entries is checked as it is read
        scores = summarize(result)
        scores.path = file
        scores.mteb_version = str(result.mteb_version or "")
        scores.dataset_revision = str(result.dataset_revision or "")
        _read_units(scores, result, file)
    except (TypeError, KeyError, AttributeError, ValueError) as err:
        _add(issues, Issue("corrupt", where, f"its scores do not read as {result.task_name}'s ({type(err).__name__}: "
                                             f"{_first_line(err)}); skipped."))
        return None
    return scores


def _read_units(scores: TaskScores, result: Any, file: Path) -> None:
    """Attach the per-unit sidecar beside ``file`` when it is that result's (`units.Sidecar.problems`): its unit
    scores, which give the headline intervals and paired changes on first use; a sidecar that does not match is
    noted, not used."""
    from . import pairing, units

    path = units.sidecar_path(file)
    digests = {(split, str(raw.get("hf_subset", "default"))): raw.get(units.DIGEST)
               for split, entries in result.scores.items() for raw in entries}
    if not path.is_file():
        if any(isinstance(d, str) for d in digests.values()):
            scores.notes.append(("units", f"its entries record per-unit scores but {path.name} is missing; no paired changes."))
        return
    try:
        sidecar = units.read(path)
    except units.SidecarError as err:
        scores.notes.append(("units", f"{err} Not used."))
        return
    if sidecar.kind not in pairing.KINDS:
        scores.notes.append(("units", f"{path.name} holds rows of kind {sidecar.kind!r}, which this release does not read; not used."))
        return
    problems = sidecar.problems(result.task_name, digests)
    if problems:
        scores.notes.append(("units", f"{path.name} " + "; ".join(problems) + "; not used."))
        return
    try:
        scores.units = pairing.KINDS[sidecar.kind].units(sidecar, scores.task_object, list(scores.profile))
    except ValueError as err:
        scores.notes.append(("units", f"{path.name}: {err} Not used."))
        return
    scores.unit_kind, scores.unit_model = sidecar.kind, (sidecar.model, sidecar.revision)


def _task_result(file: Path, text: str):
    """``TaskResult.from_disk(file)``, without reading the file again when ``text`` validates as a result
    of mteb 1.12.48 or later (the releases that need none of from_disk's conversions)."""
    from mteb.results.task_result import TaskResult

    try:
        result = TaskResult.model_validate_json(text)
    except ValueError:
        return TaskResult.from_disk(file)
    return TaskResult.from_disk(file) if _before(result.mteb_version, "1.12.48") else result


def _before(version: str | None, release: str) -> bool:
    """Whether a stored ``mteb_version`` is older than ``release``. mteb stores a range (``2.12.16-2.15.4``)
    for a result that several releases wrote; its first release counts. (mteb parses these in a private
    helper, so the few lines are ours.)"""
    from packaging.version import InvalidVersion, Version

    for candidate in (version, (version or "").split("-", 1)[0]) if version else ():
        try:
            return Version(candidate) < Version(release)
        except InvalidVersion:
            continue
    return False


def _rejected(text: str, where: str, err: Exception) -> Issue:
    """Why mteb rejected a file: not JSON, not a task result, or a result mteb cannot read."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as bad:
        return Issue("corrupt", where, f"not valid JSON ({bad}); skipped.")
    if not isinstance(data, dict) or "task_name" not in data or "scores" not in data:
        return Issue("foreign", where, "not an mteb task result (no task_name/scores); skipped.")
    return Issue("foreign", where, f"mteb cannot read it ({type(err).__name__}: {_first_line(err)}); skipped.")


def summarize(result) -> TaskScores:
    """Main score, profiles and PSI of an mteb ``TaskResult``, with completeness notes."""
    mains: list[float] = []
    psis: list[float] = []
    sums: dict[str, dict[str, list[float]]] = {}
    labels_seen: dict[str, dict[str, None]] = {}
    notes: list[tuple[str, str]] = []
    intervals: dict[str, dict[str, tuple[float, float]]] = {}
    effects: dict[str, dict[str, tuple[float, float | None, float | None]]] = {}
    settings: dict[str, list[Any]] = {}
    stored: list[tuple[dict[str, tuple[float, float]], dict[str, tuple[float, float]]]] = []
    resampling: Resampling | None = None
    resampled: list[str] = []
    entries = 0
    for split, split_scores in result.scores.items():
        for raw in split_scores:
            entries += 1
            subset = raw.get("hf_subset", "default")
            main = _number(raw.get("main_score"))
            if main is None:
                notes.append(("partial", f"split {split}, subset {subset}: no numeric main score."))
            else:
                mains.append(main)
            entry = load(raw)
            for fault in faults(entry):
                notes.append(("partial", f"split {split}, subset {subset}: {fault}; not used."))
            for key, value in entry.settings.stored().items():
                if value not in (seen := settings.setdefault(key, [])):
                    seen.append(value)
            profiles = _values(entry)
            psi = entry_psi(entry)
            if psi is not None:
                psis.append(psi)
            by_queries = entry.settings.resampled in (QUERIES, CLUSTERS)
            if entry.settings.resampled and entry.settings.resampled not in resampled:
                resampled.append(entry.settings.resampled)
            if entry.settings.resamples:  # the bootstrap behind the entry's intervals: the sidecar's are drawn alike
                resampling = Resampling(entry.settings.resamples, entry.settings.resampling_seed or 0)
            if by_queries and entry.profiles.get(""):  # intervals over queries: kept for a single entry
                stored.append((entry.profiles[""].intervals, entry.intervals))
            if not by_queries and entry.profiles.get("") and entry.profiles[""].intervals:  # an estimate per subset: its own family
                for family, profile in profiles.items():
                    name = f"{family} {subset}".strip()
                    labels_seen[name] = dict.fromkeys(profile)
                    sums[name] = {label: [v] for label, v in profile.items() if v is not None}
                    intervals[name] = entry.profiles[family].intervals
                effects[subset] = _effects(entry)
                continue
            for family, profile in profiles.items():
                order = labels_seen.setdefault(family, {})
                for label, value in profile.items():
                    order.setdefault(label, None)
                    if value is not None:
                        sums.setdefault(family, {}).setdefault(label, []).append(value)
    averaged = {
        family: {label: _mean(sums.get(family, {}).get(label, [])) for label in order}
        for family, order in labels_seen.items()
    }
    status = "partial" if notes else "ok"
    task_type = None
    main_score, psi = _mean(mains), _mean(psis)
    if intervals and len(mains) > 1:
        notes.append(("pooled", f"main score and PSI are means over {len(mains)} subsets (of different n or languages); "
                                "the profiles are shown per subset, each with its confidence interval."))
    try:
        task = registered_task(result.task_name)  # a task run with other settings: the task it varies
        task_type = task.metadata.type
        if task.metadata.name != result.task_name:  # its settings may choose other subsets (a user's corpus)
            notes.append(("unchecked", f"task {result.task_name} runs {task.metadata.name} with settings of its own; "
                                       "completeness not checked."))
        elif missing := result.get_missing_evaluations(task):
            status = "partial"
            notes.append(("partial", "missing " + "; ".join(f"split {s}: {_some(v, 'subset')}" for s, v in sorted(missing.items())) + "."))
    except Exception:  # noqa: BLE001 - a task mteb does not know: completeness cannot be checked
        task = None
        notes.append(("unchecked", f"task {result.task_name} is not registered with mteb; completeness not checked."))
    pool = getattr(task, "summarize_scores", None)
    pools: dict[str, dict[str, Any]] = {}
    if pool is not None:
        try:
            pooled = pool([entry for split_scores in result.scores.values() for entry in split_scores])
        except ValueError as err:  # e.g. a file written before the task stored what its pooling needs
            status = "partial"
            notes.append(("partial", f"cannot pool the subsets as {result.task_name} does ({err}); plain means shown."))
        else:
            main_score, psi = pooled["main_score"], pooled["psi"]
            averaged[""] = dict(pooled["positions"])
            unfit = [name for name, value in (("main score", main_score), ("PSI", psi), *averaged[""].items())
                     if _not_finite(value)]
            if unfit:  # a subset's stored score is not one: the task's own pooling took it in
                status = "partial"
                values = [v for v in (main_score, psi, *averaged[""].values()) if _not_finite(v)]
                kind = "an infinite" if all(map(math.isinf, values)) else "a NaN" if all(map(math.isnan, values)) else \
                    "a NaN or infinite"
                notes.append(("partial", f"{result.task_name} pools {kind} {', '.join(unfit)} from its subsets; not used."))
                main_score, psi = (None if _not_finite(v) else v for v in (main_score, psi))
                averaged[""] = {label: None if _not_finite(v) else v for label, v in averaged[""].items()}
            pools = dict(pooled.get("languages", {}))
    own: dict[str, Estimate] = {}  # the single entry's own intervals
    if len(stored) == 1 and entries == 1:
        points, figures = stored[0]
        intervals[""] = points
        for measure, value, figure in (("main", main_score, "harmonic_mean"), ("psi", psi, "psi")):
            if value is not None and figure in figures and (figure != "harmonic_mean" or _main_is(task, figure)):
                own[measure] = Estimate(value, ci_low=figures[figure][0], ci_high=figures[figure][1])
    return TaskScores(
        task=result.task_name,
        task_type=task_type,
        main_score=main_score,
        psi=psi,
        profiles=averaged,
        entries=entries,
        status=status,
        notes=notes,
        intervals=intervals,
        effects={subset: found for subset, found in effects.items() if found},
        settings=settings,
        pools=pools,
        stored=own,
        resampling=resampling,
        resampled=tuple(resampled),
        task_object=task,
    )


def _not_finite(value: Any) -> bool:
    """A pooled figure that is a number but no finite one (NaN or infinite)."""
    return isinstance(value, float) and not math.isfinite(value)


def _main_is(task: Any, figure: str) -> bool:
    return getattr(getattr(task, "metadata", None), "main_score", figure) == figure


def _effects(entry: ScoreEntry) -> dict[str, tuple[float, float | None, float | None]]:
    """The fitted effects of a probe subset (position 1 is the baseline, so ``beta_0`` is left out)."""
    return {name: (value, _number(term.se), _number(term.pvalue))
            for name, term in entry.terms.items()
            if name not in ("beta_0", "tau_beta_0") and (value := _number(term.value)) is not None}


def _values(entry: ScoreEntry) -> dict[str, dict[str, float | None]]:
    return {family: profile.values for family, profile in entry.profiles.items() if profile.points}


def position_profiles(scores: Mapping[str, Any]) -> dict[str, dict[str, float | None]]:
    """The per-position profiles of one stored score entry: family -> label -> value."""
    return _values(load(scores))


def entry_psi(entry: ScoreEntry) -> float | None:
    """``psi``; else ``1 - position_fairness``; else ``1 - min/max`` of the main profile."""
    psi = _number(entry.psi)
    if psi is not None:
        return psi
    main = entry.profiles.get("")
    fairness_value = _number(main.fairness) if main else None
    if fairness_value is not None:
        return 1.0 - fairness_value
    return profile_psi(main.values if main else {})


def profile_psi(profile: Mapping[str, float | None]) -> float | None:
    return fairness.psi(profile.values())


def _report_missing(found: Collection) -> None:
    tasks = found.tasks
    for model in found.models:
        absent = [t for t in tasks if found.get(model, t) is None]
        if absent:
            found.issues.append(Issue("missing", model.label, f"no results for {', '.join(absent)}."))


def plugin_base(name: str) -> str | None:
    """The base model key of a plugin name (``fair/<key>[-<config>]``, ``fair-off/<key>``), else None. A key the
    registry does not know (a checkpoint ``probe --model`` ran, named after its folder) is the name without its
    organisation and config, so its calibrated results and its twin's still pair."""
    from ..config import CalibrationConfig, ConfigError
    from ..mteb_models import parse_name

    if not name.startswith(("fair/", "fair-off/")):
        return None
    try:
        return parse_name(name)[0].key
    except KeyError:
        org, _, rest = name.partition("/")
        key, dash, config = rest.rpartition("-")
        if org == "fair" and dash and key:
            try:
                CalibrationConfig.parse(config)
            except ConfigError:
                return rest
            return key
        return rest


def is_twin(model: ModelKey) -> bool:
    """The uncalibrated twin: ``fair-off/<model>``, or revision ``off`` in results of earlier releases."""
    return model.name.startswith("fair-off/") or model.revision == "off"


def twin_for(model: ModelKey, models: Iterable[ModelKey]) -> ModelKey | None:
    """The twin ``model``'s changes are taken against: one of the same base model, preferring the same
    experiment and revision; ``None`` for a twin itself or without one. A twin of other weights (another
    commit of the checkpoint) is none: the change would mix calibration with the weights' change."""
    if is_twin(model):
        return None
    base = plugin_base(model.name) or model.name
    twins = [m for m in models if is_twin(m) and (plugin_base(m.name) or m.name) == base and not _other_weights(m, model)]
    if not twins:
        return None
    return min(twins, key=lambda m: (m.experiment != model.experiment, m.revision != model.revision))


_COMMIT = re.compile(r"[0-9a-f]{40}")


def _other_weights(a: ModelKey, b: ModelKey) -> bool:
    """Whether two results name different commits of the weights (a result folder of this release is named after
    the commit; earlier releases named it after the config, or ``off``)."""
    return a.revision != b.revision and all(_COMMIT.fullmatch(key.revision) for key in (a, b))


def _report_twins(found: Collection) -> None:
    from ..mteb_models import twin_of

    names = {m.name for m in found.models}
    bases = {plugin_base(n): [] for n in names}
    for name in names:
        bases[plugin_base(name)].append(name)
    for name in sorted(names):
        twin = twin_of(name)
        if twin is None:
            continue
        present = twin in names if not name.startswith("fair-off/") else len(bases[plugin_base(name)]) > 1
        if not present:
            found.issues.append(Issue("no-twin", name, f"its counterpart {twin} has no results here, so the calibration's effect cannot be isolated."))
    for model in found.models:
        others = [m for m in found.models if is_twin(m) and plugin_base(m.name) == plugin_base(model.name)]
        if not is_twin(model) and others and twin_for(model, found.models) is None:
            found.issues.append(Issue("no-twin", model.label, "its counterpart has results only for other weights ("
                                      + ", ".join(m.label for m in others) + "), so the calibration's effect cannot be "
                                      "isolated."))


# ---------------------------------------------------------------------------------- helpers
def _agrees(drawn: float | None, own: float | None) -> bool:
    """Whether a figure recomputed from the sidecar is the result's own (float32 unit scores: 1e-5 apart at most)."""
    return drawn is not None and own is not None and math.isclose(drawn, own, rel_tol=1e-5, abs_tol=1e-6)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _some(names: Iterable[str], noun: str, shown: int = 5) -> str:
    """``"3 subsets [a, b, c]"``; long lists (PosIR has 310 subsets) end in ``"... and N more"``."""
    items = sorted(names)
    listed = ", ".join(items[:shown]) + (f", ... and {len(items) - shown} more" if len(items) > shown else "")
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'} [{listed}]"


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__


def _add(issues: list[Issue] | None, issue: Issue) -> None:
    if issues is not None:
        issues.append(issue)
