"""Comparable corpora: the same topics written independently in several languages (docs/method.md#s2-1).

A :class:`ComparableCorpus` is a list of topics, each with one text per language it exists in.
Three sources:

* the Hugging Face dataset :data:`HF_DATASET` (one split per language, rows aligned across
  splits by ``aligned_id``), read by :func:`load_hf_corpus`;
* the same layout saved locally with ``DatasetDict.save_to_disk`` (how the authors distribute
  it: a folder with ``dataset_dict.json``), read by :func:`load_saved_corpus`;
* a local JSONL or Parquet file with **one row per topic**, read by :func:`load_corpus_file`::

      {"id": "lighthouse", "texts": {"en": "A lighthouse is ...", "de": "Ein Leuchtturm ist ..."}}

  ``id`` (string or integer) is unique per file; ``texts`` maps a BCP-47 language tag (``en``,
  ``de``, ``zh-CN``, ``pt-br`` ...; stored in canonical form, see :mod:`.languages`) to that
  topic's text in that language. Instead of ``texts`` a row may
  carry one column per language named ``text_<lang>`` (handy for Parquet). Other fields
  (``title`` ...) are ignored. A missing or empty text means the topic does not exist in that
  language;
* the small sample bundled with the package, :func:`sample_corpus` (see :data:`SAMPLE_PATH`).

Problems in the data are errors (:class:`CorpusError`, naming the file and line) when the input
is malformed, and reported skips (:attr:`ComparableCorpus.skipped`) when a text is merely
unusable: a text identical to an earlier topic's text in the same language is dropped, so no
segment set of one language can contain the same segment twice. A text that another topic holds in
another language is named in a warning (and a mixed set that would hold it twice is an error).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..jsonl import jsonl_lines
from .languages import LanguageTagError, language_tag

logger = logging.getLogger(__name__)

HF_DATASET = "impresso-project/wiki_comparable_corpus_en_de_hi_it_ko_zh"
"""The paper's comparable Wikipedia corpus on the Hugging Face hub."""
HF_LANGUAGES = ("en", "de", "hi", "it", "ko", "zh")
HF_REQUIRED_COLUMNS = ("aligned_id", "text")
HF_EXPECTED_COLUMNS = ("wiki_pageid", "language", "url", "title", "text", "aligned_id", "id")
"""The columns the authors' build script writes (docs/method.md#s2-1); only ``aligned_id`` and ``text`` are read."""

MANPAGES_PATH = Path(__file__).resolve().parent.parent / "data" / "manpages_corpus.jsonl"
"""The bundled real-text corpus: 164 pages of the Linux man-pages project (NAME line and leading
DESCRIPTION paragraphs) with Debian's translations; same page = same topic. Built by
``scripts/build_manpages_corpus.py``; sources, versions and licences in ``manpages_corpus.NOTICE.md``."""
MANPAGES_FINGERPRINT = "91093d3222e5"
""":meth:`ComparableCorpus.fingerprint` of the shipped file: the dataset revision of its results."""
SAMPLE_PATH = Path(__file__).resolve().parent.parent / "data" / "comparable_sample.jsonl"
"""The bundled sample: short encyclopedic texts on everyday topics in en, de, fr and it,
written for this project (not Wikipedia, not translations of any published text)."""



class CorpusError(ValueError):
    """A corpus that cannot be used as given; the message says what is wrong and where."""


@dataclass(frozen=True)
class Topic:
    """One topic and its text in each language it exists in."""

    id: str
    texts: Mapping[str, str]


@dataclass
class ComparableCorpus:
    """Topics with parallel (comparable) texts in several languages."""

    topics: list[Topic]
    source: str = "<memory>"
    skipped: dict[str, int] = field(default_factory=dict)
    """Reported skips at load time, by reason (e.g. ``duplicate_text:de``)."""

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for topic in self.topics:
            if topic.id in seen:
                raise CorpusError(f"{self.source}: topic id {topic.id!r} occurs more than once; ids must be unique.")
            seen.add(topic.id)
        self._by_id = {topic.id: topic for topic in self.topics}

    def __len__(self) -> int:
        return len(self.topics)

    def __iter__(self) -> Iterator[Topic]:
        return iter(self.topics)

    def topic(self, topic_id: str) -> Topic:
        return self._by_id[topic_id]

    @property
    def languages(self) -> tuple[str, ...]:
        """Every language that at least one topic has, sorted."""
        return tuple(sorted({lang for topic in self.topics for lang in topic.texts}))

    def coverage(self) -> dict[str, int]:
        """Number of topics with a text, per language."""
        counts = Counter(lang for topic in self.topics for lang in topic.texts)
        return {lang: counts[lang] for lang in sorted(counts)}

    def fingerprint(self) -> str:
        """A short content hash of the topics and texts: two corpora with the same one give the same numbers."""
        if "_fingerprint" not in self.__dict__:
            digest = hashlib.sha256()
            for topic in self.topics:
                for lang in sorted(topic.texts):
                    digest.update(json.dumps([topic.id, lang, topic.texts[lang]], ensure_ascii=False).encode("utf-8"))
            self.__dict__["_fingerprint"] = digest.hexdigest()[:12]
        return self.__dict__["_fingerprint"]

    def require_languages(self, languages: Iterable[str]) -> None:
        """Raise :class:`CorpusError` if any of ``languages`` has no text at all in this corpus."""
        missing = [lang for lang in dict.fromkeys(map(language_tag, languages)) if lang not in self.coverage()]
        if missing:
            raise CorpusError(
                f"{self.source}: no topic has a text in {missing}; the corpus covers {list(self.languages)}."
            )


def build_corpus(rows: Iterable[tuple[str, Mapping[str, str]]], source: str = "<memory>") -> ComparableCorpus:
    """A corpus from ``(topic_id, {language: text})`` pairs, with the load-time checks.

    Texts are stripped of surrounding whitespace; empty texts count as missing; a text equal to
    an earlier topic's text in the same language is dropped and reported as
    ``duplicate_text:<lang>`` in :attr:`ComparableCorpus.skipped`.
    """
    topics: list[Topic] = []
    skipped: Counter[str] = Counter()
    seen_texts: dict[str, dict[str, str]] = {}
    for topic_id, texts in rows:
        kept: dict[str, str] = {}
        for lang, text in texts.items():
            try:
                lang = language_tag(lang)
            except LanguageTagError as err:
                raise CorpusError(f"{source}: topic {topic_id!r}: {err}") from None
            if text is None:  # missing, as a file's null is
                continue
            if not isinstance(text, str):
                raise CorpusError(f"{source}: topic {topic_id!r}: the {lang!r} text must be a string, got {type(text).__name__}.")
            text = text.strip()
            if not text:
                skipped[f"empty_text:{lang}"] += 1
                continue
            first = seen_texts.setdefault(lang, {}).setdefault(text, topic_id)
            if first != topic_id:
                skipped[f"duplicate_text:{lang}"] += 1
                logger.warning("%s: topic %r repeats the %s text of topic %r; dropped.", source, topic_id, lang, first)
                continue
            kept[lang] = text
        topics.append(Topic(id=topic_id, texts=kept))
    _name_repeats_across_languages(topics, source)
    return ComparableCorpus(topics=topics, source=source, skipped=dict(skipped))


def _name_repeats_across_languages(topics: list[Topic], source: str) -> None:
    """Warn about texts two topics hold in different languages (an untranslated page): kept, since a set of one
    language never meets both, but a mixed configuration's set may."""
    holders: dict[str, list[tuple[str, str]]] = {}
    for topic in topics:
        for lang, text in topic.texts.items():
            holders.setdefault(text, []).append((topic.id, lang))
    repeats = [found for found in holders.values() if len({topic for topic, _ in found}) > 1]
    for found in repeats[:5]:
        logger.warning("%s: topics %s hold the same text in different languages; a mixed set with both is refused.",
                       source, ", ".join(f"{topic!r} ({lang})" for topic, lang in found))
    if len(repeats) > 5:
        logger.warning("%s: %d more texts are held by several topics in different languages.", source, len(repeats) - 5)


# --------------------------------------------------------------------------- local files
def load_corpus_file(path: str | Path) -> ComparableCorpus:
    """Read a local comparable corpus: ``.jsonl`` (one JSON object per line) or ``.parquet``.

    See the module docstring for the row format. Raises :class:`CorpusError` naming the line
    (JSONL) or row (Parquet) of the first malformed row.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"corpus file {path} does not exist.")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        records = _jsonl_records(path)
    elif suffix == ".parquet":
        records = _parquet_records(path)
    else:
        raise CorpusError(f"{path}: unknown corpus format {suffix!r}; use .jsonl or .parquet (one row per topic).")
    return build_corpus(records, source=str(path))


def load_local_corpus(path: str | Path, *, languages: Iterable[str] | None = None) -> ComparableCorpus:
    """A local corpus of either kind: a ``save_to_disk`` folder or a JSONL / Parquet file."""
    path = Path(path)
    if path.is_dir():
        return load_saved_corpus(path, languages=languages)
    return load_corpus_file(path)


def load_saved_corpus(path: str | Path, *, languages: Iterable[str] | None = None) -> ComparableCorpus:
    """Read a corpus written by ``DatasetDict.save_to_disk`` (one split per language).

    ``load_dataset`` on such a folder would merge the splits into one ``train`` split and lose the
    languages, so the folder is read with ``load_from_disk``, as its authors do.
    """
    path = Path(path)
    if not (path / "dataset_dict.json").is_file():
        hint = " (it holds a single Dataset, not one split per language)" if (path / "dataset_info.json").is_file() else ""
        raise CorpusError(
            f"{path} is a folder but not a DatasetDict saved with save_to_disk (no dataset_dict.json){hint}; "
            "pass such a folder with one split per language, or a .jsonl / .parquet file with one row per topic."
        )
    from datasets import load_from_disk

    return corpus_from_splits(load_from_disk(str(path)), languages=languages, source=str(path))


def _jsonl_records(path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    for number, row, malformed in jsonl_lines(path):
        where = f"{path}:{number}"
        if malformed:
            raise CorpusError(f"{where}: not valid JSON ({malformed}).")
        yield _parse_row(row, where)


def _parquet_records(path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    import pyarrow.parquet as pq

    import pyarrow as pa

    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as err:
        raise CorpusError(f"{path}: not a readable Parquet file ({err}).") from None
    for number, row in enumerate(table.to_pylist(), start=1):
        if isinstance(row.get("texts"), list):  # a Parquet map column arrives as [(key, value), ...]
            row = {**row, "texts": dict(row["texts"])}
        yield _parse_row(row, f"{path}: row {number}")


def _parse_row(row: Any, where: str) -> tuple[str, dict[str, str]]:
    if not isinstance(row, dict):
        raise CorpusError(f"{where}: expected an object like {{\"id\": ..., \"texts\": {{\"en\": ...}}}}, got {type(row).__name__}.")
    topic_id = row.get("id")
    if isinstance(topic_id, bool) or not isinstance(topic_id, (str, int)) or (isinstance(topic_id, str) and not topic_id.strip()):
        raise CorpusError(f"{where}: missing or invalid 'id' (a non-empty string or an integer), got {topic_id!r}.")
    texts: dict[str, Any] = {}
    if "texts" in row and row["texts"] is not None:
        if not isinstance(row["texts"], dict):
            raise CorpusError(f"{where}: 'texts' must map language codes to texts, got {type(row['texts']).__name__}.")
        texts.update(row["texts"])
    for key, value in row.items():
        if key.startswith("text_") and value is not None:
            lang = key[len("text_"):]
            if texts.get(lang) not in (None, value):  # one of the two would be dropped unseen
                raise CorpusError(f"{where}: two texts for the language {lang!r} ('texts'.{lang} and the column {key!r}); "
                                  "give one.")
            texts[lang] = value
    if not texts:
        raise CorpusError(f"{where}: no texts; give 'texts': {{\"en\": ..., ...}} or columns 'text_<lang>'.")
    clean: dict[str, str] = {}
    for lang, text in texts.items():
        try:
            tag = language_tag(lang)
        except LanguageTagError as err:
            raise CorpusError(f"{where}: {err}") from None
        if tag in clean:
            raise CorpusError(f"{where}: two texts for the language {tag!r} (written {lang!r} and another spelling).")
        if text is None:
            continue
        if not isinstance(text, str):
            raise CorpusError(f"{where}: the {lang!r} text must be a string, got {type(text).__name__}.")
        clean[tag] = text
    return str(topic_id), clean


def manpages_corpus() -> ComparableCorpus:
    """The bundled corpus of translated Linux manual pages (real text, offline; see :data:`MANPAGES_PATH`)."""
    return load_corpus_file(MANPAGES_PATH)


def sample_corpus() -> ComparableCorpus:
    """The small comparable sample bundled with the package (offline demo and tests)."""
    return load_corpus_file(SAMPLE_PATH)


# --------------------------------------------------------------------------- Hugging Face
def load_hf_corpus(
    path: str = HF_DATASET,
    *,
    revision: str | None = None,
    languages: Iterable[str] | None = None,
    **load_kwargs: Any,
) -> ComparableCorpus:
    """Read the comparable corpus from the Hugging Face hub (needs network or a local hub cache).

    The dataset must have one split per language and the columns ``aligned_id`` and ``text``
    (docs/method.md#s2-1); anything else is a :class:`CorpusError` listing what was expected and found.
    """
    from datasets import load_dataset

    from ..hub import hub_access

    with hub_access(
        f"the comparable corpus {path}",
        "To run without the hub, pass a local corpus file (corpus='my_corpus.jsonl', one row per topic) "
        "or use the bundled sample (PermutationFairnessSample, `mteb-fairpos demo`).",
    ):
        dataset = load_dataset(path, revision=revision, **load_kwargs)
    return corpus_from_splits(dataset, languages=languages, source=f"{path}@{revision or 'main'}")


def corpus_from_splits(
    dataset: Mapping[str, Any],
    *,
    languages: Iterable[str] | None = None,
    source: str = HF_DATASET,
) -> ComparableCorpus:
    """A corpus from a ``DatasetDict``-like mapping ``{language: split}``, validated (see :func:`load_hf_corpus`)."""
    if not isinstance(dataset, Mapping):
        raise CorpusError(
            f"{source}: expected one split per language (a DatasetDict), got {type(dataset).__name__}; "
            f"the expected layout has splits {list(HF_LANGUAGES)}."
        )
    available = list(dataset.keys())
    wanted = list(dict.fromkeys(languages)) if languages is not None else available
    missing = [lang for lang in wanted if lang not in dataset]
    if missing:
        raise CorpusError(
            f"{source}: no split for language(s) {missing}. The dataset has splits {available}; "
            f"expected one split per language such as {list(HF_LANGUAGES)}."
        )
    by_topic: dict[str, dict[str, str]] = {}
    skipped: Counter[str] = Counter()
    for lang in wanted:
        split = dataset[lang]
        columns = list(getattr(split, "column_names", None) or [])
        absent = [c for c in HF_REQUIRED_COLUMNS if c not in columns]
        if absent:
            raise CorpusError(
                f"{source}: split {lang!r} lacks column(s) {absent}. Expected the columns {list(HF_EXPECTED_COLUMNS)} "
                f"(rows aligned across languages by 'aligned_id'), found {columns}."
            )
        unexpected = [c for c in HF_EXPECTED_COLUMNS if c not in columns]
        if unexpected:
            logger.warning("%s: split %r has no column(s) %s (not needed, but the schema differs from docs/method.md#s2-1).",
                           source, lang, unexpected)
        ids = split["aligned_id"]
        texts = split["text"]
        if "language" in columns:
            codes = set(split["language"])
            if codes and codes != {lang}:
                raise CorpusError(
                    f"{source}: split {lang!r} holds rows whose 'language' is {sorted(map(str, codes))[:5]}; "
                    "expected every row of a split to be in that split's language."
                )
        for number, (aligned_id, text) in enumerate(zip(ids, texts)):
            if aligned_id is None or not isinstance(text, str):
                raise CorpusError(f"{source}: split {lang!r} row {number}: 'aligned_id' is {aligned_id!r} and "
                                  f"'text' is {type(text).__name__}; expected an id and a string.")
            slot = by_topic.setdefault(str(aligned_id), {})
            if lang in slot:
                skipped[f"duplicate_aligned_id:{lang}"] += 1
                continue
            slot[lang] = text
    corpus = build_corpus(((tid, texts) for tid, texts in by_topic.items()), source=source)
    for reason, count in skipped.items():
        logger.warning("%s: %d row(s) skipped (%s): only the first row of an aligned_id is used.", source, count, reason)
        corpus.skipped[reason] = corpus.skipped.get(reason, 0) + count
    return corpus
