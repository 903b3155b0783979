"""PosIR (docs/method.md#s3-4): position-aware retrieval in 10 languages (14 selectable) and 31 domains.

The dataset ``infgrad/PosIR-Benchmark-v1`` is laid out ``{language}/{domain}/`` with
``queries.parquet`` (``_id, text, pos_char_span, pos_char_length, pos_token_length``),
``corpus.parquet`` (``_id, text``) and ``qrels/test.parquet`` (``query-id, corpus-id, score``);
every (language, domain) pair is its own retrieval problem with its own corpus.

Two tasks, one mteb subset per (query language, domain), named ``"{language}.{domain}"``
(``"deu-Latn.law_judiciary"``):

* ``PosIR``: multilingual setting, queries and corpus in the same language (10 x 31 subsets);
* ``PosIRCrossLingual``: queries in a language other than English against the same domain's
  English corpus (8 x 31 subsets: the parallel languages the retrieval paper reports; Chinese and
  English are not among them).

The paper's ten (eight cross-lingual) languages are the default, so results stay comparable with
the paper. The dataset holds four more, ``hin-Deva``, ``pol-Latn``, ``ben-Beng`` and ``jpn-Jpan``
(`EXTRA_LANGUAGES`), in both settings; they run when named: ``PosIR(languages=["hin"])``, mteb's
``-l hin`` / ``get_task(..., languages=["hin"])``, or by subset name. They were uploaded after the
pinned revision, so they need ``revision="main"``.

The 31 domains are IndustryCorpus2's 30 English-named industry categories (the source of most
documents: corpus ids read ``IndustryCorpus2_<category>_<n>``) plus ``fineweb``, the web-text
domain, as the PosIR authors list them. A domain folder may carry the ``IndustryCorpus2_`` prefix or
not. Loading lists each language folder once and reconciles it with the declared subsets: a declared
domain the data lacks is skipped and named in a warning, a folder that matches no declared domain is
named in a warning too; nothing is dropped silently.

Subsets are read lazily: ``load_data`` only lists folders, and each subset's files are read,
embedded, scored and freed when mteb evaluates that subset, so memory does not grow with the
number of subsets (and mteb caches every finished subset, so an interrupted run resumes).

Selecting: one language with mteb's own filter (``mteb.get_task("PosIR", languages=["deu"])``)
or ``PosIR(languages=[...])``; one domain with ``PosIR(domains=[...])`` or the environment
variable ``MTEB_FAIRPOS_POSIR_DOMAINS=finance_economics,law_judiciary`` (so ``mteb run`` can too).
The choice survives mteb's own ``filter_languages``, which mteb calls on every task it hands out.

Comparability with the paper: the PosIR authors prepend one instruction to the queries of every
model (`PAPER_QUERY_INSTRUCTION`) and run at 8,192 tokens. ``PosIR(query_instruction=True)`` (or a
string of your own) prepends it to every query text, in front of which a model still puts its own
query prompt, if it has one; ``PosIRInstructed`` and ``PosIRCrossLingualInstructed`` are the
registered tasks with the paper's instruction, so their results never mix with the default's.

Dataset revision: `LAST_KNOWN_REVISION` is the commit the authors' mteb pull request pinned,
made before the four extra languages were uploaded; it is the default, and
``PosIR(revision="main")`` (or ``MTEB_FAIRPOS_POSIR_REVISION=main``) reads the newest files. The
revision in use is the one recorded in every result.

Scores of a subset: mteb's retrieval metrics (``ndcg_at_10`` is the main score) plus

* ``ndcg_at_10_Q1`` .. ``_Q4`` and ``psi_Q1`` .. ``_Q4``: per length bucket of the positive
  document (``pos_token_length`` in [0,512), [512,1024), [1024,1536), [1536,inf)), the unweighted
  mean over its non-empty relative-position bins and the PSI over them;
* ``position_<bin>`` for the 20 relative-position bins ``[k/20, (k+1)/20)`` (the span midpoint
  over the document length, clipped to [0, 1]; 1.0 falls in the last bin), pooled over the length
  buckets, with ``psi`` and ``harmonic_mean`` over them;
* ``cells``: per (bucket, bin) query count and nDCG@10 sum, from which the per-language pooling
  is recomputed exactly; ``n_queries``, ``unplaced_queries``, ``skipped_queries``;
  ``language``, ``domain``, ``corpus_language``.

The papers report per language, pooled across domains: `language_figures` does that pooling
from a TaskResult (nDCG@10 query-weighted over the domains, PSI over the 20 bins pooled across
domains and lengths) and `average_over_languages` the final means; `summarize_scores` gives both
and is what ``mteb-fairpos compare`` shows for these tasks.

The PosIR authors' analysis bins with right-closed intervals (``(0,512]``, ``[0,0.05]``,
``(0.05,0.1]``, ...); docs/method.md#s3-4 asks for the half-open ones above, which differ only for values
exactly on a boundary.

The package, by concern: `dataset` (the dataset's identity and subset names), `source` (reading a
local copy or the hub), `domain` (one subset's files and their contents), `selection` (languages,
domains and the query instruction a task is asked for), `metadata`, `corpus_cache` (one English
corpus embedded once across cross-lingual subsets), `task` (the four tasks) and `pooling` (the
papers' per-language figures).
"""

from __future__ import annotations

from .dataset import (
    CROSS_LINGUAL_LANGUAGES,
    DOMAINS_ENV,
    EXTRA_LANGUAGES,
    LAST_KNOWN_REVISION,
    PAPER_QUERY_INSTRUCTION,
    POSIR_DOMAINS,
    POSIR_HUB_ID,
    POSIR_LANGUAGES,
    REVISION_ENV,
    split_subset,
    subset_name,
)
from .domain import DomainData, DomainRef, load_domain
from .pooling import average_over_languages, language_figures, summarize_scores
from .source import PosIRSource
from .task import PosIR, PosIRCrossLingual, PosIRCrossLingualInstructed, PosIRInstructed

__all__ = [
    "CROSS_LINGUAL_LANGUAGES",
    "DOMAINS_ENV",
    "EXTRA_LANGUAGES",
    "LAST_KNOWN_REVISION",
    "PAPER_QUERY_INSTRUCTION",
    "POSIR_DOMAINS",
    "POSIR_HUB_ID",
    "POSIR_LANGUAGES",
    "REVISION_ENV",
    "DomainData",
    "DomainRef",
    "PosIR",
    "PosIRCrossLingual",
    "PosIRCrossLingualInstructed",
    "PosIRInstructed",
    "PosIRSource",
    "average_over_languages",
    "language_figures",
    "load_domain",
    "split_subset",
    "subset_name",
    "summarize_scores",
]
