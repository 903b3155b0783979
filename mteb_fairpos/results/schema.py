"""What a task writes into an mteb score entry about positions, and how it is read back.

This module is the one definition of the position keys; every writer (the permutation probe,
the position-grouped retrieval tasks) builds a :class:`ScoreEntry` and stores :func:`dump`'s
mapping, every reader (``compare``, the sweep table, the probe's printout, PosIR's pooling)
goes through :func:`load`. The stored keys stay flat, as mteb stores its own metrics, so the
main score (``position_fairness``, ``harmonic_mean``) is found where mteb looks for it and
files written by earlier releases read unchanged:

* ``[<family>_]position_<label>``: the profile ``<family>`` (``""`` the main one, ``"tau"`` the
  probe's late-chunk profile) at position ``<label>`` (``null`` for an empty group), in order,
  with ``_se``, ``_pvalue``, ``_ci_low``, ``_ci_high`` and ``_n`` where the value is an estimate;
* ``[<family>_]position_fairness`` (``min/max`` of the profile) and ``[<family>_]position_counts``
  (items per label): the two labels that are not positions;
* ``[tau_]beta_<k>``, ``lead_vs_later``, ``language_effect``: regression terms, with the same
  suffixes;
* ``psi``: the Position Sensitivity Index;
* ``<figure>_ci_low``, ``<figure>_ci_high`` for a headline figure that is not an estimate of its own
  (``[<family>_]position_fairness``, ``psi``, ``harmonic_mean``): its 95 % interval;
* ``change_<figure>`` (+ the estimate suffixes): a paired difference against a baseline model scored on the
  same units (the uncalibrated twin), with its interval and p-value;
* a mapping ``[<family>_]positions`` (``{label: value}``) is read as a profile too (an earlier
  convention; nothing writes it now);
* counts and settings under the keys :class:`Counts` and :class:`Settings` name (``num_documents``,
  ``n_queries``, ``n_queries_<bucket>``, ``corpus_fingerprint``, ``skipped_queries`` ...), read into
  those types; writers fill those types and readers read them, no other module spells these keys;
* every other key (main scores, statuses, notes) is kept as it is in ``details``.

A statistic (an estimate's ``se`` ..., a profile's ``fairness``, the entry's ``psi``) is ``None``
when the entry does not report it and ``nan`` when it reports it as undefined (stored as
``null``, e.g. the standard error of a perfect fit, or PSI over fewer than two groups). A
position's value is ``None`` for an empty group (stored as ``null`` too).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Callable, get_args, get_origin, get_type_hints

STATISTICS = ("se", "pvalue", "ci_low", "ci_high", "n")
"""The suffixes of an estimate's statistics, in the order they are written."""

_STAT = rf"(?:_(?P<stat>{'|'.join(STATISTICS)}))?$"
_POINT = re.compile(r"^(?:(?P<family>.+?)_)?position_(?P<label>.+?)" + _STAT)
_MAPPING = re.compile(r"^(?:(?P<family>.+?)_)?positions$")
_TERM = re.compile(r"^(?P<term>(?:tau_)?beta_\d+|lead_vs_later|language_effect)" + _STAT)
_CHANGE = re.compile(r"^change_(?P<figure>.+?)" + _STAT)
HEADLINES = ("position_fairness", "tau_position_fairness", "psi", "harmonic_mean")
"""The headline figures that carry an interval beside their value (``<figure>_ci_low`` / ``_ci_high``)."""
_INTERVAL = re.compile(rf"^(?P<figure>{'|'.join(HEADLINES)})_ci_(?P<end>low|high)$")


@dataclass
class Estimate:
    """One value with the statistics its writer reports (``None``: not reported; ``nan``: undefined)."""

    value: float | None
    se: float | None = None
    pvalue: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: float | None = None

    @property
    def interval(self) -> tuple[float, float] | None:
        """The 95 % confidence interval, where both ends are numbers."""
        low, high = _defined(self.ci_low), _defined(self.ci_high)
        return None if low is None or high is None else (low, high)


@dataclass
class Profile:
    """A score per position label, in order, with the profile's fairness and counts where written."""

    points: dict[str, Estimate] = field(default_factory=dict)
    fairness: float | None = None
    counts: dict[str, int] | None = None

    @property
    def values(self) -> dict[str, float | None]:
        return {label: point.value for label, point in self.points.items()}

    @property
    def intervals(self) -> dict[str, tuple[float, float]]:
        return {label: ci for label, point in self.points.items() if (ci := point.interval) is not None}


def _key(stored: str, *, prefix: bool = False) -> Any:
    """A typed field stored under the mteb score key ``stored``; with ``prefix``, a mapping stored
    as one key ``<stored><label>`` per label."""
    return field(default=None, metadata={"key": stored, "prefix": prefix})


@dataclass
class Counts:
    """What an entry counted: the probe's documents, segments, topics, observations and exclusions; a
    retrieval task's queries, its empty position groups and the queries it skipped (by reason). ``None``:
    not recorded."""

    documents: int | None = _key("num_documents")
    segments: int | None = _key("num_unique_segments")
    topics: int | None = _key("num_distinct_topics")
    truncated: int | None = _key("num_truncated_segments")
    excluded: dict[str, int] | None = _key("excluded_topics")
    """topics left out, by reason."""
    observations: int | None = _key("num_observations")
    """(document, position) pairs the probe's regression used."""
    clusters: int | None = _key("num_clusters")
    """segment sets the standard errors are clustered by."""
    unaligned: int | None = _key("num_tau_unaligned_documents")
    """documents whose segments could not be located for the late-chunk profile."""
    usable: int | None = _key("usable_topics")
    """topics the corpus offers in every language of the configuration."""
    queries: int | None = _key("n_queries")
    """queries scored."""
    unplaced: int | None = _key("unplaced_queries")
    """scored queries without a position (PosIR: no usable answer span)."""
    buckets: dict[str, int] | None = _key("n_queries_", prefix=True)
    """queries per length bucket (PosIR), stored as ``n_queries_<bucket>``."""
    empty: list[str] | None = _key("empty_groups")
    """position groups no query falls in."""
    skipped: dict[str, int] | None = _key("skipped_queries")
    """queries left out, by reason."""


QUERIES = "queries"
CLUSTERS = "queries by relevant document"
"""What a retrieval entry's bootstrap draws (`Settings.resampled`): queries one by one, or each relevant document
with all its queries (`mteb_fairpos.retrieval_intervals`)."""
SETS = "segment sets"
SETS_AND_TOPICS = "segment sets and topics"
"""What a probe entry's bootstrap draws: segment sets, or sets and topics where sets share topics
(`mteb_fairpos.permutation.intervals`)."""


@dataclass
class Settings:
    """The settings an entry records that change its numbers (the permutation probe writes them), so that a
    reader can tell two results apart. ``None``: not recorded."""

    corpus: str | None = _key("corpus")
    hash: str | None = _key("corpus_fingerprint")
    sets: int | None = _key("num_segment_sets")
    orders: int | None = _key("orders_per_set")
    window_low: int | None = _key("segment_window_low")
    window_high: int | None = _key("segment_window_high")
    mode: str | None = _key("segment_mode")
    tolerance: float | None = _key("length_tolerance")
    document_tokens: int | None = _key("max_document_tokens")
    model_length: int | None = _key("model_max_length")
    seed: int | None = _key("seed")
    resamples: int | None = _key("bootstrap_resamples")
    """bootstrap resamples behind the entry's intervals and paired tests (`mteb_fairpos.resampling`)."""
    resampling_seed: int | None = _key("bootstrap_seed")
    resampled: str | None = _key("bootstrap_units")
    """what the bootstrap draws: `QUERIES`, `CLUSTERS`, `SETS`, `SETS_AND_TOPICS`."""

    def stored(self) -> dict[str, Any]:
        """The recorded settings under their stored keys (what a page shows)."""
        return _stored(self)


def _stored(record: Counts | Settings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    shapes = _shapes(type(record))
    for name, key, prefix in _keys(type(record)):
        value = getattr(record, name)
        if value is not None:
            fits, words = shapes[name]
            if not fits(value):  # a reader would take it out as damaged: it is refused where it is written
                floor = " of at least 0" if words == "an integer" or words == "a mapping of counts" else ""
                raise TypeError(f"{type(record).__name__}.{name} ({key}) must be {words}{floor}, got {value!r}.")
            out.update({f"{key}{label}": count for label, count in value.items()} if prefix else {key: value})
    return out


def _typed(record: Counts | Settings, scores: Mapping[str, Any]) -> tuple[set[str], list[str]]:
    """Fill ``record`` from the stored keys it defines; the keys it took (a stored ``null`` stays in
    ``details``, so that it is written back as it was), and those whose value is not of the field's type (left in
    ``details``, read by nothing: a count stored as text would fail far from the file, or weigh wrongly)."""
    taken, wrong = set(), []
    for name, key, prefix in _keys(type(record)):
        if prefix:
            found = {k: v for k, v in scores.items() if k.startswith(key) and k != key and _is_count(v)}
            wrong += [k for k, v in scores.items() if k.startswith(key) and k != key and _below_zero(v)]  # not another key's
            if found:
                setattr(record, name, {k[len(key):]: v for k, v in found.items()})
                taken.update(found)
        elif scores.get(key) is not None:
            if _shapes(type(record))[name][0](scores[key]):
                setattr(record, name, scores[key])
                taken.add(key)
            else:
                wrong.append(key)
    return taken, wrong


@functools.cache
def _keys(kind: type) -> tuple[tuple[str, str, bool], ...]:
    """(field, stored key, prefix) of a typed record, looked up once per type (a sweep loads ~40,000 entries)."""
    return tuple((f.name, f.metadata["key"], f.metadata["prefix"]) for f in fields(kind))


def stored_key(kind: type[Counts] | type[Settings], name: str) -> str:
    """The key the field ``name`` of a typed record is stored under (``stored_key(Counts, "queries")``)."""
    return next(key for field_name, key, _ in _keys(kind) if field_name == name)


def stored_keys(kind: type[Counts] | type[Settings]) -> tuple[str, ...]:
    """The keys (or key prefixes) a typed record is stored under: what no other module spells."""
    return tuple(key for _, key, _ in _keys(kind))


def _shape(hint: Any) -> tuple[Callable[[Any], bool], str]:
    """(whether a stored value has the type ``hint`` names, that type in words) for a typed record's field."""
    kind = next(arg for arg in get_args(hint) if arg is not type(None))
    if kind is int:
        return _is_count, "an integer"
    if kind is float:
        return (lambda v: _is_value(v) and v is not None), "a number"
    if kind is str:
        return (lambda v: isinstance(v, str)), "text"
    if get_origin(kind) is dict:
        return (lambda v: isinstance(v, Mapping) and all(isinstance(k, str) and _is_count(c) for k, c in v.items())), \
            "a mapping of counts"
    return (lambda v: isinstance(v, list) and all(isinstance(item, str) for item in v)), "a list of text"


@functools.cache
def _shapes(kind: type) -> dict[str, tuple[Callable[[Any], bool], str]]:
    """Each typed field's check and its type in words, made once from the annotations."""
    return {name: _shape(hint) for name, hint in get_type_hints(kind).items()}


@functools.cache
def _expected() -> dict[str, str]:
    """Stored key of a typed field -> its type in words."""
    return {key: _shapes(kind)[name][1] for kind in (Counts, Settings) for name, key, _ in _keys(kind)}


@dataclass
class ScoreEntry:
    """The position part of one score entry (one split x subset) and everything else beside it."""

    profiles: dict[str, Profile] = field(default_factory=dict)
    """family (``""`` the main profile, ``"tau"``) -> profile."""
    terms: dict[str, Estimate] = field(default_factory=dict)
    """``beta_0``, ``beta_<p>``, ``tau_beta_<p>``, ``lead_vs_later``, ``language_effect``."""
    psi: float | None = None
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    """headline figure (one of :data:`HEADLINES`) -> its 95 % interval (an end may be ``nan``: undefined)."""
    changes: dict[str, Estimate] = field(default_factory=dict)
    """figure -> its paired difference against the baseline model, with interval and p-value."""
    counts: Counts = field(default_factory=Counts)
    settings: Settings = field(default_factory=Settings)
    details: dict[str, Any] = field(default_factory=dict)
    """Main scores, statuses and notes, under the names the task gives them."""
    unread: list[str] = field(default_factory=list)
    """Keys whose value is of another type than the key's (a position, a count, a setting): kept in ``details``,
    read by nothing (`faults`)."""

    def profile(self, family: str = "") -> Profile:
        """The profile ``family``, created empty when absent."""
        return self.profiles.setdefault(family, Profile())

    def update(self, other: ScoreEntry) -> None:
        """Add ``other``'s profiles, terms, psi and details (its keys win)."""
        self.profiles.update(other.profiles)
        self.terms.update(other.terms)
        self.intervals.update(other.intervals)
        self.changes.update(other.changes)
        self.details.update(other.details)
        self.unread += [key for key in other.unread if key not in self.unread]
        for mine, theirs in ((self.counts, other.counts), (self.settings, other.settings)):
            for name, value in vars(theirs).items():
                if value is not None:
                    setattr(mine, name, value)
        if other.psi is not None:
            self.psi = other.psi


def dump(entry: ScoreEntry) -> dict[str, Any]:
    """The flat mapping mteb stores for ``entry`` (``nan`` becomes ``null``)."""
    out: dict[str, Any] = {}
    for family, profile in entry.profiles.items():
        prefix = f"{family}_position_" if family else "position_"
        if profile.fairness is not None:
            out[f"{prefix}fairness"] = _defined(profile.fairness)
        for label, point in profile.points.items():
            out.update(_estimate(f"{prefix}{label}", point))
        if profile.counts is not None:
            out[f"{prefix}counts"] = dict(profile.counts)
    for name, term in entry.terms.items():
        out.update(_estimate(name, term))
    if entry.psi is not None:
        out["psi"] = _defined(entry.psi)
    for figure, (low, high) in entry.intervals.items():
        out.update({f"{figure}_ci_low": _defined(low), f"{figure}_ci_high": _defined(high)})
    for figure, change in entry.changes.items():
        out.update(_estimate(f"change_{figure}", change))
    if clash := sorted(set(entry.details) & set(out)):  # the measured value would be overwritten unseen
        raise ValueError(f"details repeat measured keys ({', '.join(clash)}); a figure is written once, where it belongs.")
    out.update(entry.details)
    out.update(_stored(entry.counts))
    out.update(_stored(entry.settings))
    return out


def load(scores: Mapping[str, Any]) -> ScoreEntry:
    """A stored score entry (of this or an earlier release) as a :class:`ScoreEntry`."""
    if not isinstance(scores, Mapping):
        raise TypeError(f"a score entry is a mapping of score names to values, got {type(scores).__name__}.")
    entry = ScoreEntry()
    (counts, wrong), (settings, unfit) = _typed(entry.counts, scores), _typed(entry.settings, scores)
    typed = counts | settings
    entry.unread += wrong + unfit
    for key, raw in scores.items():
        if key in typed:
            continue
        read = _read_key(entry, key, raw)
        if not read:
            entry.details[key] = raw
            if read is False:
                entry.unread.append(key)
    return entry


def faults(entry: ScoreEntry) -> list[str]:
    """What in a loaded entry is not a score: a position key whose value is of another type (left in ``details``,
    where nothing reads it), a position value or PSI that is infinite or ``NaN`` (``null`` is how a value is
    stored as empty or undefined), an interval whose low end lies above its high one. The values are taken out,
    so that no profile, mean, PSI or interval is computed or drawn from them; each is named."""
    found = [_unfit(key, entry.details[key]) for key in entry.unread]
    for family, profile in entry.profiles.items():
        for label, point in profile.points.items():
            if point.value is not None and not math.isfinite(point.value):
                found.append(f"{family + '_' if family else ''}position_{label} is {point.value}, not a finite number")
                point.value = None
    if entry.psi is not None and not math.isfinite(entry.psi):
        found.append(f"psi is {entry.psi}, not a finite number")
        entry.psi = None
    estimates = [(f"{family + '_' if family else ''}position_{label}", point)
                 for family, profile in entry.profiles.items() for label, point in profile.points.items()]
    estimates += [*entry.terms.items(), *((f"change_{figure}", change) for figure, change in entry.changes.items())]
    for name, estimate in estimates:  # an interval whose ends are reversed would be drawn and read as it stands
        if (ends := estimate.interval) is not None and ends[0] > ends[1]:
            found.append(f"{name}'s interval [{ends[0]}, {ends[1]}] has its ends reversed")
            estimate.ci_low = estimate.ci_high = None
    for figure, (low, high) in list(entry.intervals.items()):
        if low > high:  # NaN ends (undefined) compare False and stay
            found.append(f"{figure}'s interval [{low}, {high}] has its ends reversed")
            del entry.intervals[figure]
    return found


def _unfit(key: str, raw: Any) -> str:
    """Why a stored value is not what its key holds, in words."""
    if _below_zero(raw):
        return f"{key} is {raw}, below 0: no count, size or seed is"
    return f"{key} is {_article(type(raw).__name__)}, not " + (
        _expected().get(key) or f"a number{' or a mapping' if _MAPPING.match(key) else ''}")


def _article(noun: str) -> str:
    return ("an " if noun[:1] in "aeiou" else "a ") + noun


def _read_key(entry: ScoreEntry, key: str, raw: Any) -> bool | None:
    """Store one key in ``entry``; ``None`` when it is none of the position keys, False when it is one whose value
    is of another type."""
    if key == "psi":
        if _is_value(raw):
            entry.psi = _read(raw)
        return _is_value(raw)
    if bound := _INTERVAL.match(key):
        if _is_value(raw):
            low, high = entry.intervals.get(bound.group("figure"), (math.nan, math.nan))
            entry.intervals[bound.group("figure")] = (_read(raw), high) if bound.group("end") == "low" else (low, _read(raw))
        return _is_value(raw)
    if change := _CHANGE.match(key):
        return _is_value(raw) and _set(entry.changes, change.group("figure"), change.group("stat"), raw)
    if mapping := _MAPPING.match(key):
        if isinstance(raw, Mapping):
            points = entry.profile(mapping.group("family") or "").points
            points.update({str(label): Estimate(_value(v)) for label, v in raw.items() if _is_value(v)})
        return isinstance(raw, Mapping)
    if point := _POINT.match(key):
        family, label, stat = point.group("family") or "", point.group("label"), point.group("stat")
        if stat is None and label == "fairness":
            if _is_value(raw):
                entry.profile(family).fairness = _read(raw)
            return _is_value(raw)
        if stat is None and label == "counts":
            if isinstance(raw, Mapping):
                entry.profile(family).counts = {str(k): v for k, v in raw.items()}
            return isinstance(raw, Mapping)
        return _is_value(raw) and _set(entry.profile(family).points, label, stat, raw)
    if term := _TERM.match(key):
        return _is_value(raw) and _set(entry.terms, term.group("term"), term.group("stat"), raw)
    return None


def _set(estimates: dict[str, Estimate], name: str, stat: str | None, raw: Any) -> bool:
    estimate = estimates.setdefault(name, Estimate(None))
    setattr(estimate, stat or "value", _read(raw) if stat else _value(raw))
    return True


def _estimate(key: str, estimate: Estimate) -> dict[str, Any]:
    out = {key: _defined(estimate.value)}
    for stat in STATISTICS:
        value = getattr(estimate, stat)
        if value is not None:
            out[f"{key}_{stat}"] = _defined(value)
    return out


def _below_zero(raw: Any) -> bool:
    """An integer below 0: of a count's type, yet no count, size or seed."""
    return isinstance(raw, int) and not isinstance(raw, bool) and raw < 0


def _is_count(raw: Any) -> bool:
    """Every integer a record holds counts something, or is a size or seed: none is below 0."""
    return isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0


def _is_value(raw: Any) -> bool:
    return raw is None or (isinstance(raw, (int, float)) and not isinstance(raw, bool))


def _value(raw: Any) -> float | None:
    """A stored value: ``null`` is an empty group (no value)."""
    return None if raw is None else float(raw)


def _read(raw: Any) -> float:
    """A stored statistic: ``null`` means reported but undefined."""
    return math.nan if raw is None else float(raw)


def reported(value: float | None) -> float:
    """A statistic a writer reports, ``None`` (undefined) as ``nan``, so that it is stored as ``null``."""
    return math.nan if value is None else value


def _defined(value: float | None) -> float | None:
    """``None`` for a statistic that is missing or undefined, else the number (also what JSON stores)."""
    return None if value is None or math.isnan(value) else value
