"""PosIR's dataset: its hub id and revisions, languages, domains, files and columns, and how a
(language, domain) pair is named as an mteb subset."""

from __future__ import annotations

POSIR_HUB_ID = "infgrad/PosIR-Benchmark-v1"
POSIR_LANGUAGES: tuple[str, ...] = (
    "ara-Arab", "cmn-Hans", "deu-Latn", "eng-Latn", "fra-Latn",
    "ita-Latn", "kor-Kore", "por-Latn", "rus-Cyrl", "spa-Latn",
)
"""The paper's ten query languages: the default selection of `PosIR`."""
CROSS_LINGUAL_LANGUAGES: tuple[str, ...] = (
    "ara-Arab", "deu-Latn", "fra-Latn", "ita-Latn", "kor-Kore", "por-Latn", "rus-Cyrl", "spa-Latn",
)
"""The paper's eight cross-lingual query languages: the default selection of `PosIRCrossLingual`."""
EXTRA_LANGUAGES: tuple[str, ...] = ("hin-Deva", "pol-Latn", "ben-Beng", "jpn-Jpan")
"""Languages the dataset holds beyond the paper's: declared in both settings, run only when named."""
POSIR_DOMAINS: tuple[str, ...] = (
    "accommodation_catering_hotel", "aerospace", "agriculture_forestry_animal_husbandry_fishery",
    "artificial_intelligence_machine_learning", "automobile", "biomedicine", "computer_communication",
    "computer_programming_code", "current_affairs_government_administration", "electric_power_energy",
    "film_entertainment", "finance_economics", "fire_safety_food_safety", "game", "law_judiciary",
    "literature_emotion", "mathematics_statistics",
    "medicine_health_psychology_traditional_chinese_medicine", "mining", "news_media",
    "other_information_services_information_security", "other_manufacturing", "petrochemical",
    "real_estate_construction", "sports", "subject_education_education", "technology_scientific_research",
    "tourism_geography", "transportation", "water_resources_ocean", "fineweb",
)
"""PosIR's 31 domain folders: IndustryCorpus2's 30 categories by their English names, plus
``fineweb`` (the list of the authors' mteb pull request; their aggregation asserts 31 domains)."""
DOMAIN_FOLDER_PREFIX = "IndustryCorpus2_"
ENGLISH = "eng-Latn"
DOMAINS_ENV = "MTEB_FAIRPOS_POSIR_DOMAINS"
REVISION_ENV = "MTEB_FAIRPOS_POSIR_REVISION"
LAST_KNOWN_REVISION = "8faa66a19e4b2cf5764bc2e2adb19e9eca503d63"
"""The dataset commit pinned by the authors' mteb pull request (before the extra languages)."""
PAPER_QUERY_INSTRUCTION = "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: "
"""What the PosIR authors prepend to every query of every model."""
SPLIT = "test"

QUERY_COLUMNS = ("_id", "text", "pos_char_span", "pos_char_length", "pos_token_length")
CORPUS_COLUMNS = ("_id", "text")
QRELS_COLUMNS = ("query-id", "corpus-id", "score")
COLUMN_KINDS = {"text": "strings", "pos_char_span": "lists of numbers", "pos_char_length": "numbers",
                "pos_token_length": "numbers", "score": "numbers"}
"""What a column must hold: texts are embedded, the rest is arithmetic (ids are read as text whatever they hold)."""
QUERIES_FILE = "queries.parquet"
CORPUS_FILE = "corpus.parquet"
QRELS_FILE = "qrels/test.parquet"

POSIR_CITATION = r"""@misc{zeng2026posir,
  title = {PosIR: Position-Aware Heterogeneous Information Retrieval Benchmark},
  author = {Zeng, Ziyang and Zhang, Dun and Yan, Yu and Sun, Xu and Pan, Cuiqiaoshu and Zhou, Yudong and Yang, Yuqing},
  year = {2026},
  eprint = {2601.08363},
  archivePrefix = {arXiv},
}"""


def subset_name(language: str, domain: str) -> str:
    """The mteb subset of one (language, domain) pair: ``"deu-Latn.law_judiciary"``."""
    return f"{language}.{domain}"


def split_subset(subset: str) -> tuple[str, str]:
    """``(language, domain)`` of a subset name."""
    language, _, domain = subset.partition(".")
    return language, domain


def domain_of_folder(folder: str) -> str:
    """The domain a dataset folder holds: its name without the ``IndustryCorpus2_`` prefix."""
    return folder.removeprefix(DOMAIN_FOLDER_PREFIX)

