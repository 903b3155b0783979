"""Build the bundled comparable corpus from translated Linux manual pages (Debian packages).

Topic = one page of the Linux man-pages project (``fifo(7)``, ``pipe(2)`` ...). Its English text
comes from Debian's ``manpages`` / ``manpages-dev`` packages, the other languages from the
translations Debian ships (``manpages-de``, ``-fr``, ``-es``, ``-it``, ``-pl``, ``-pt-br``,
``-ru`` from the manpages-l10n project, ``manpages-ja`` from the JM project). Each text is the
page's NAME line followed by the leading prose paragraphs of its DESCRIPTION section, rendered
to plain text by groff.

Why man pages: many independent, freely licensed translations of the same technical topic,
the kind of multi-part technical document the package is about, and none written by us.

Rules (all recorded in the output):

* Only pages whose English licence permits redistributing modified copies are kept
  (:data:`ACCEPTED_LICENSES`); the licence of every page, its verbatim copyright header and the
  translators' credits go into the NOTICE file beside the corpus.
* English fixes the paragraphs: the first paragraphs of DESCRIPTION until the text reaches
  :data:`TARGET_CHARS`. A translation is used only when it has as many leading prose
  paragraphs, none of them empty (po4a leaves untranslated paragraphs empty) and none a copy
  of the English paragraph.
* A topic is kept when it has English and at least :data:`MIN_TRANSLATIONS` translations.

Usage (Debian or Ubuntu with apt and groff; writes the corpus and its NOTICE)::

    python scripts/build_manpages_corpus.py --download /tmp/manpages-debs \\
        --out mteb_fairpos/data/manpages_corpus.jsonl

``--download`` fetches the pinned package versions with ``apt-get download``; without it the
folder must already hold the ``.deb`` files. The script refuses versions other than the pinned
ones unless ``--any-version`` is given, so a rebuild reproduces the shipped file byte for byte.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

PACKAGES = {
    # language: (Debian package, pinned version, man folder inside the package)
    "en": ("manpages", "6.03-2", "usr/share/man"),
    "en-dev": ("manpages-dev", "6.03-2", "usr/share/man"),
    "de": ("manpages-de", "4.18.1-1", "usr/share/man/de"),
    "fr": ("manpages-fr", "4.18.1-1", "usr/share/man/fr"),
    "es": ("manpages-es", "4.18.1-1", "usr/share/man/es"),
    "it": ("manpages-it", "4.18.1-1", "usr/share/man/it"),
    "pl": ("manpages-pl", "1:4.18.1-1", "usr/share/man/pl"),
    "pt-BR": ("manpages-pt-br", "4.18.1-1", "usr/share/man/pt_BR"),
    "ru": ("manpages-ru", "4.18.1-1", "usr/share/man/ru"),
    "ja": ("manpages-ja", "0.5.0.0.20221215+dfsg-1", "usr/share/man/ja"),
}
SECTION_NAMES = {
    "en": ("NAME", "DESCRIPTION"),
    "de": ("BEZEICHNUNG", "BESCHREIBUNG"),
    "fr": ("NOM", "DESCRIPTION"),
    "es": ("NOMBRE", "DESCRIPCIÓN"),
    "it": ("NOME", "DESCRIZIONE"),
    "pl": ("NAZWA", "OPIS"),
    "pt-BR": ("NOME", "DESCRIÇÃO"),
    "ru": ("ИМЯ", "ОПИСАНИЕ"),
    "ja": ("名前", "説明"),
}
TRANSLATION_LICENSES = {
    lang: "GPL-3.0-or-later (manpages-l10n)" for lang in ("de", "fr", "es", "it", "pl", "pt-BR", "ru")
} | {"ja": "the English page's licence (JM project: no further restriction)"}
ACCEPTED_LICENSES = (
    "GPL-1.0-or-later", "GPL-2.0-or-later", "Linux-man-pages-copyleft", "VERBATIM_ONE_PARA",
    "PUBLIC_DOMAIN", "BSD-3-Clause", "MIT",
)
"""Licences that allow distributing modified copies (with the notice kept, which the NOTICE file does)."""
TARGET_CHARS = 450
MAX_PARAGRAPHS = 6
MIN_TRANSLATIONS = 2
# A paragraph macro starts a new paragraph; the listed structure macros end the leading prose.
_PARAGRAPH = re.compile(r"^\.(PP|P|LP)\s*$")
_END_OF_PROSE = re.compile(r"^\.(SS|SH|TP|IP|HP|nf|EX|TS|in|RS|TQ|sp|ft C|SY)\b")
_MARK = "@@FAIRPOS-PARAGRAPH@@"
MODIFICATION = ("excerpted (NAME line and leading DESCRIPTION paragraphs) and converted to plain text by "
                "scripts/build_manpages_corpus.py of mteb-fairpos, 2026-11-23.")


@dataclass
class Page:
    name: str  # "fifo.7"
    name_line: str
    paragraphs: list[str]
    header: str  # the roff comment block before .TH, verbatim
    credits: str  # rendered translation-credits section ("" for English)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("debs", nargs="?", type=Path, help="folder holding the .deb files")
    parser.add_argument("--download", type=Path, metavar="DIR", help="apt-get download the pinned packages into DIR first")
    parser.add_argument("--out", type=Path, required=True, help="the corpus JSONL to write (NOTICE written beside it)")
    parser.add_argument("--any-version", action="store_true", help="accept package versions other than the pinned ones")
    args = parser.parse_args(argv)
    folder = args.download or args.debs
    if folder is None:
        parser.error("give the folder of .deb files or --download DIR")
    if args.download:
        folder.mkdir(parents=True, exist_ok=True)
        specs = [f"{pkg}={version}" for pkg, version, _ in PACKAGES.values()]
        subprocess.run(["apt-get", "download", *specs], cwd=folder, check=True)
    with tempfile.TemporaryDirectory() as tmp:
        roots, sources = _unpack(folder, Path(tmp), any_version=args.any_version)
        rows, notices = _build(roots)
    _write(args.out, rows, notices, sources)
    counts = {lang: sum(lang in row["texts"] for row in rows) for lang in SECTION_NAMES}
    print(f"{len(rows)} topics -> {args.out}; texts per language: {counts}")
    return 0


def _unpack(folder: Path, tmp: Path, *, any_version: bool) -> tuple[dict[str, Path], list[dict[str, str]]]:
    roots: dict[str, Path] = {}
    sources = []
    for key, (package, version, inner) in PACKAGES.items():
        matches = sorted(folder.glob(f"{package}_*_all.deb"))
        if not matches:
            raise SystemExit(f"no {package}_*.deb in {folder}; run with --download {folder}")
        deb = matches[-1]
        found = subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], capture_output=True, text=True, check=True).stdout.strip()
        if found != version and not any_version:
            raise SystemExit(f"{deb.name} is version {found}, the pinned one is {version} (use --any-version to accept it)")
        target = tmp / package
        subprocess.run(["dpkg-deb", "-x", str(deb), str(target)], check=True)
        roots[key] = target / inner
        sources.append({"package": package, "version": found, "sha256": hashlib.sha256(deb.read_bytes()).hexdigest()})
    return roots, sources



def _build(roots: dict[str, Path]) -> tuple[list[dict], list[str]]:
    english = {**_pages(roots["en"]), **_pages(roots["en-dev"])}
    translated = {lang: _pages(roots[lang]) for lang in SECTION_NAMES if lang != "en"}
    rows, notices = [], []
    for name in sorted(english):
        source = english[name].read_bytes()
        text = gzip.decompress(source).decode("utf-8", errors="replace")
        licence = _licence(text)
        if licence not in ACCEPTED_LICENSES:
            continue
        candidates = {lang: pages[name] for lang, pages in translated.items() if name in pages}
        if len(candidates) < MIN_TRANSLATIONS:
            continue
        en = _parse(name, text, "en")
        if en is None:
            continue
        keep = _leading(en.paragraphs)
        if not keep:
            continue
        texts = {"en": _join(en.name_line, en.paragraphs[:keep])}
        credits = {}
        for lang, path in candidates.items():
            page = _parse(name, gzip.decompress(path.read_bytes()).decode("utf-8", errors="replace"), lang)
            if page is None or len(page.paragraphs) < keep:
                continue
            chosen = page.paragraphs[:keep]
            if any(not p for p in chosen) or any(p == q for p, q in zip(chosen, en.paragraphs) if len(p) > 30):
                continue
            texts[lang] = _join(page.name_line, chosen)
            credits[lang] = page.credits or page.header
        if len(texts) - 1 < MIN_TRANSLATIONS:
            continue
        topic = name.rsplit(".", 1)
        rows.append({"id": name, "page": f"{topic[0]}({topic[1]})", "texts": texts, "license": licence,
                     "translation_licenses": {lang: TRANSLATION_LICENSES[lang] for lang in texts if lang != "en"}})
        notices.append(_notice(name, licence, en.header, credits))
    return rows, notices


def _pages(root: Path) -> dict[str, Path]:
    """Regular page files by name (``fifo.7``); links (aliases of other pages) are left out."""
    return {p.name[:-3]: p for p in sorted(root.glob("man*/*.gz")) if not p.is_symlink()}


def _licence(text: str) -> str | None:
    match = re.search(r"SPDX-License-Identifier:\s*(\S+)", text) or re.search(r"%%%LICENSE_START\(([^)]*)\)", text)
    return match.group(1) if match else None


def _parse(name: str, text: str, lang: str) -> Page | None:
    lines = text.splitlines()
    header = "\n".join(line for line in _before_th(lines))
    sections = _sections(lines)
    name_title, description_title = SECTION_NAMES[lang]
    if name_title not in sections or description_title not in sections:
        return None
    chunks = _prose_paragraphs(sections[description_title])
    rendered = _render([sections[name_title]] + chunks)
    credits = ""
    credit_titles = [t for t in sections if t in ("ÜBERSETZUNG", "TRADUCTION", "TRADUCCIÓN", "TRADUZIONE",
                                                   "TŁUMACZENIE", "TRADUÇÃO", "ПЕРЕВОД")]
    if credit_titles:  # manpages-l10n: the translators and the licence of the translation
        credits = " ".join(_render([sections[credit_titles[0]]]))
    elif lang != "en":  # JM project: the translators' lines follow po4a's banner in the header
        credits = header.split('.\\"' + "*" * 67)[-1].strip()
    name_line = rendered[0]
    if not name_line:
        return None
    return Page(name=name, name_line=name_line, paragraphs=rendered[1:], header=header, credits=credits)


def _before_th(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        if line.startswith(".TH"):
            break
        out.append(line)
    return out


def _sections(lines: list[str]) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        if line.startswith(".SH"):
            title = line[3:].strip().strip('"').strip()
            current = sections.setdefault(title, []) if title not in sections else None
            continue
        if current is not None:
            current.append(line)
    return sections


def _prose_paragraphs(lines: list[str]) -> list[list[str]]:
    """The leading prose paragraphs of a section as roff source, empty ones kept (they mark
    paragraphs a translation left out)."""
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        if _END_OF_PROSE.match(line):
            break
        if _PARAGRAPH.match(line):
            paragraphs.append([])
            continue
        if line.startswith('.\\"'):
            continue
        paragraphs[-1].append(line)
    if not paragraphs[0]:
        paragraphs.pop(0)
    while paragraphs and not paragraphs[-1]:
        paragraphs.pop()
    return paragraphs[:MAX_PARAGRAPHS * 2]


def _render(chunks: list[list[str]]) -> list[str]:
    """Render roff chunks to one plain-text line each with groff, in one call."""
    parts = [".TH X 7", ".SH X"]
    for chunk in chunks:
        parts += [".PP", *chunk, ".PP", _MARK]
    result = subprocess.run(["groff", "-k", "-t", "-man", "-Tutf8", "-P-cbou", "-rLL=20000n", "-rHY=0", "-dAD=l"],
                            input="\n".join(parts) + "\n", capture_output=True, text=True, check=True)
    body = result.stdout.split("\n")
    texts, current = [], []
    started = False
    for line in body:
        stripped = line.strip()
        if not started:
            started = stripped == "X"
            continue
        if stripped == _MARK:
            texts.append(" ".join(current))
            current = []
        elif stripped:
            current.append(stripped)
    return [re.sub(r"\s+", " ", t).strip() for t in texts]


def _leading(paragraphs: list[str]) -> int:
    """How many leading English paragraphs make the text: until TARGET_CHARS, at most MAX_PARAGRAPHS."""
    total = 0
    for count, paragraph in enumerate(paragraphs[:MAX_PARAGRAPHS], start=1):
        if not paragraph:
            return 0
        total += len(paragraph)
        if total >= TARGET_CHARS:
            return count
    return len(paragraphs[:MAX_PARAGRAPHS])


def _join(name_line: str, paragraphs: list[str]) -> str:
    return "\n".join([name_line.rstrip(".") + "."] + paragraphs)


def _notice(name: str, licence: str, header: str, credits: dict[str, str]) -> str:
    lines = [f"## {name}", "", f"Modified: {MODIFICATION}", "",
             f"English original: Linux man-pages, licence {licence}; its header, verbatim:", "", "```"]
    lines += [header.strip() or "(no header)", "```", ""]
    for lang in sorted(credits):
        credit = credits[lang].strip()
        lines += [f"- {lang} ({TRANSLATION_LICENSES[lang]}): " + (credit if "\n" not in credit else ""), ]
        if "\n" in credit:
            lines += ["", "```", credit, "```", ""]
    return "\n".join(lines) + "\n"


def _write(out: Path, rows: list[dict], notices: list[str], sources: list[dict[str, str]]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8", newline="\n") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    notice = out.with_name(out.stem + ".NOTICE.md")
    head = [
        "# Provenance and licences of the bundled man-page corpus",
        "",
        f"`{out.name}` was built by `scripts/build_manpages_corpus.py` from these Debian packages:",
        "",
        "| package | version | sha256 of the .deb |",
        "| --- | --- | --- |",
        *[f"| {s['package']} | {s['version']} | `{s['sha256']}` |" for s in sources],
        "",
        "Each row holds excerpts (the NAME line and the leading DESCRIPTION paragraphs) of one page of the",
        "Linux man-pages project and of its translations. The English texts keep their pages' licences,",
        "listed per page below with the page's header verbatim. The translations from manpages-l10n are",
        "free documentation under the GNU General Public License version 3 or later; those from the JM",
        "project (Japanese) are under the licences of their original pages. The corpus as a whole is",
        "distributed under those terms, separately from the Apache-2.0 licence of the mteb-fairpos code.",
        "",
        "The packages' own copyright files (`/usr/share/doc/<package>/copyright`) give the full terms.",
        "",
    ]
    notice.write_text("\n".join(head) + "\n# Pages\n\n" + "\n".join(notices), encoding="utf-8", newline="\n")


if __name__ == "__main__":
    sys.exit(main())
