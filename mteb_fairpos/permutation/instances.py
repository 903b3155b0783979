"""Experiment instances ``(n, L)`` of the permutation probe (docs/method.md#s2-2).

A :class:`LanguageConfig` is ``n`` and a language configuration: monolingual ``(l, ..., l)``
or mixed ``(l_lead, l_later, ..., l_later)``. Its subset name shows both: ``n3_de`` and
``n3_en-de`` (lead ``en``, later positions ``de``).

An :class:`Instance` draws segment sets of ``n`` distinct topics with a fixed seed and builds
every one of the ``n!`` orders of each set (or a seeded sample of orders when asked). The
permutation decides which *topic* sits at which position; the configuration decides the
*language* at each position, so position 1 is always in ``l_lead``.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..spans import join_segments
from .corpus import CorpusError
from .languages import language_tag, split_languages

MAX_ORDERS = 720
"""The most orders per set built without an explicit sample size (6! = 720)."""

SegmentKey = tuple[str, str]
"""``(topic_id, language)``: one standalone segment."""


@dataclass(frozen=True)
class LanguageConfig:
    """``n`` segments; position 1 in ``lead``, positions 2..n in ``later`` (equal: monolingual)."""

    n: int
    lead: str
    later: str

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 2:
            raise ValueError(f"n must be an integer >= 2 (the paper uses 3..6), got {self.n!r}.")
        for field_name in ("lead", "later"):
            tag = language_tag(getattr(self, field_name))
            object.__setattr__(self, field_name, tag)

    @classmethod
    def monolingual(cls, n: int, language: str) -> LanguageConfig:
        return cls(n, language, language)

    @classmethod
    def parse(cls, name: str) -> LanguageConfig:
        """Inverse of :attr:`name`: ``n3_de``, ``n3_en-de``, ``n3_zh-CN`` or ``n3_en-zh-CN``
        (BCP-47 tags in canonical case, see :mod:`.languages`)."""
        match = re.fullmatch(r"n(\d+)_(.+)", name) if isinstance(name, str) else None
        if not match:
            raise ValueError(f"cannot read the configuration {name!r}; expected n<N>_<lang> or n<N>_<lead>-<later>, e.g. n3_de or n3_en-de.")
        n = int(match.group(1))
        tags = split_languages(match.group(2), f"subset {name!r}")
        if len(tags) > 2:
            raise ValueError(f"subset {name!r} names {len(tags)} languages {tags}; a configuration has one (n3_de) or a lead "
                             "and a later language (n3_en-de).")
        if len(tags) == 2 and tags[0] == tags[1]:
            raise ValueError(f"{name!r}: a mixed configuration needs two different languages; write n{n}_{tags[0]}.")
        return cls(n, tags[0], tags[-1])

    @property
    def mixed(self) -> bool:
        return self.lead != self.later

    @property
    def name(self) -> str:
        return f"n{self.n}_{self.lead}-{self.later}" if self.mixed else f"n{self.n}_{self.lead}"

    @property
    def languages(self) -> tuple[str, ...]:
        """The language at each position."""
        return (self.lead,) + (self.later,) * (self.n - 1)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class OrderedDocument:
    """One ordering of one segment set, joined into a document."""

    set_index: int
    order: tuple[int, ...]
    """Indices into the set's topics, position by position."""
    keys: tuple[SegmentKey, ...]
    """The standalone segment at each position."""
    text: str
    char_spans: tuple[tuple[int, int], ...]
    """``[start, end)`` of each position's segment in :attr:`text`."""


@dataclass
class Instance:
    """All documents of one configuration."""

    config: LanguageConfig
    sets: list[tuple[str, ...]]
    documents: list[OrderedDocument]
    orders_per_set: int
    requested_sets: int
    notes: list[str] = field(default_factory=list)

    @property
    def segment_keys(self) -> set[SegmentKey]:
        return {key for doc in self.documents for key in doc.keys}


def orders(n: int, orders_per_set: int | None = None, rng: np.random.Generator | None = None,
           max_orders: int = MAX_ORDERS) -> list[tuple[int, ...]]:
    """Every order of ``n`` items, or a seeded sample of ``orders_per_set`` distinct orders.

    Without a sample size, ``n!`` above ``max_orders`` is an error rather than a silent explosion.
    """
    total = math.factorial(n)
    if orders_per_set is None:
        if total > max_orders:
            raise ValueError(
                f"n={n} gives {total:,} orders per segment set; pass orders_per_set=<k> to sample k orders "
                f"per set (all orders are built only up to {max_orders:,})."
            )
        return list(itertools.permutations(range(n)))
    if orders_per_set <= 0:
        raise ValueError(f"orders_per_set must be positive, got {orders_per_set}.")
    if orders_per_set >= total:
        return list(itertools.permutations(range(n)))
    rng = rng if rng is not None else np.random.default_rng(0)
    chosen: dict[tuple[int, ...], None] = {}
    while len(chosen) < orders_per_set:
        chosen.setdefault(tuple(int(i) for i in rng.permutation(n)), None)
    return list(chosen)


def draw_sets(topic_ids: Sequence[str], n: int, num_sets: int, rng: np.random.Generator,
              fits: Callable[[tuple[str, ...]], bool] | None = None) -> list[tuple[str, ...]]:
    """Up to ``num_sets`` distinct sets of ``n`` distinct topics, seeded; ``fits`` filters sets.

    Returns fewer sets only when fewer distinct fitting sets exist (or none was found in many
    attempts); the caller reports the shortfall.
    """
    if len(topic_ids) < n:
        raise CorpusError(f"only {len(topic_ids)} usable topic(s) for documents of n={n} segments; need at least {n}.")
    if len(set(topic_ids)) != len(topic_ids):
        raise ValueError("topic ids must be distinct.")
    if num_sets <= 0:
        raise ValueError(f"the number of segment sets must be positive, got {num_sets}.")
    fits = fits or (lambda _: True)
    total = math.comb(len(topic_ids), n)
    chosen: dict[tuple[int, ...], None] = {}
    if total <= 50_000:  # small pools: a seeded shuffle of every combination
        combos = list(itertools.combinations(range(len(topic_ids)), n))
        for index in rng.permutation(len(combos)):
            combo = combos[int(index)]
            if fits(tuple(topic_ids[i] for i in combo)):
                chosen[combo] = None
                if len(chosen) == num_sets:
                    break
    else:
        attempts = 0
        while len(chosen) < num_sets and attempts < 200 * num_sets:
            attempts += 1
            combo = tuple(sorted(int(i) for i in rng.choice(len(topic_ids), size=n, replace=False)))
            if combo not in chosen and fits(tuple(topic_ids[i] for i in combo)):
                chosen[combo] = None
    return [tuple(topic_ids[i] for i in combo) for combo in chosen]


def assemble(segments: Sequence[str], separator: str = " ") -> tuple[str, tuple[tuple[int, int], ...]]:
    """Join segments into a document (`join_segments`): the text and each segment's ``[start, end)``;
    a set whose texts repeat is refused, since two positions of one document would hold the same text."""
    if len(set(segments)) != len(segments):
        raise ValueError("duplicate segments in a set: the same text appears at two positions of one document.")
    return join_segments(segments, separator)


def build_instance(
    config: LanguageConfig,
    topic_ids: Sequence[str],
    texts: Mapping[SegmentKey, str],
    *,
    num_sets: int,
    seed: int = 42,
    orders_per_set: int | None = None,
    separator: str = " ",
    fits: Callable[[tuple[str, ...]], bool] | None = None,
    max_orders: int = MAX_ORDERS,
) -> Instance:
    """Draw the segment sets of ``config`` and build their documents (see module docstring).

    The sets depend only on ``seed``, ``n`` and ``topic_ids``, so configurations sharing a
    topic pool share their sets; every set's orders are the same list of permutations.
    """
    perms = orders(config.n, orders_per_set, np.random.default_rng([seed, config.n, 1]), max_orders)
    sets = draw_sets(topic_ids, config.n, num_sets, np.random.default_rng([seed, config.n]), fits)
    instance = Instance(config=config, sets=sets, documents=[], orders_per_set=len(perms), requested_sets=num_sets)
    if not sets:
        raise CorpusError(
            f"{config.name}: no set of {config.n} usable topics fits the maximum document length; "
            "use a smaller n, a larger max_document_tokens or a narrower segment_window."
        )
    if len(sets) < num_sets:
        instance.notes.append(f"only {len(sets)} of {num_sets} requested segment sets exist (distinct and fitting).")
    languages = config.languages
    for set_index, topics in enumerate(sets):
        for perm in perms:
            keys = tuple((topics[t], lang) for t, lang in zip(perm, languages))
            held = Counter(texts[key] for key in keys)
            if len(held) < len(keys):  # a text repeated across languages (corpus.py)
                same = [f"{topic!r} ({lang})" for topic, lang in keys if held[texts[topic, lang]] > 1]
                raise CorpusError(f"{config.name}: duplicate segments in a set: topics {' and '.join(same)} hold the "
                                  "same text, which one document would hold twice; give each topic its own text (an "
                                  "untranslated page?).")
            text, spans = assemble([texts[key] for key in keys], separator)
            instance.documents.append(OrderedDocument(set_index, tuple(perm), keys, text, spans))
    return instance
