"""One convention for the probe's language codes: BCP-47 tags, mapped to mteb's codes.

A corpus names its languages with BCP-47 tags (``en``, ``de``, ``zh-cn``, ``pt-BR``,
``sr-Latn``); :func:`language_tag` puts them in canonical form (``zh-CN``, ``pt-BR``) with
``langcodes``, so one language has one spelling everywhere: corpus keys, subset names, scores.
mteb declares languages as ISO 639-3 plus ISO 15924 script (``zho-Hans``);
:func:`mteb_language` derives that from the tag, the script from the tag when it has one and from
the language's likely script in the tag's region otherwise (``zh-TW`` -> ``zho-Hant``).

Subset names keep the canonical case, which is what makes them readable without a table:
``n3_zh-CN`` is one language (a region subtag is upper case), ``n3_en-de`` is ``en`` first and
``de`` later (a lower-case subtag starts a language), ``n3_en-zh-Hant`` is ``en`` then ``zh-Hant``.
"""

from __future__ import annotations

import functools
import re


class LanguageTagError(ValueError):
    """A language code that is not a BCP-47 tag, or that mteb cannot name; the message says what to write."""

_LANGUAGE_SUBTAG = re.compile(r"[a-z]{2,3}")
_EXTENSION_SUBTAG = re.compile(r"[A-Z][a-z]{3}|[A-Z]{2}|\d{3}|[a-z0-9]{5,8}")


@functools.lru_cache(maxsize=None)
def language_tag(code: str) -> str:
    """The canonical BCP-47 form of ``code`` (``zh-cn`` -> ``zh-CN``); :class:`LanguageTagError` if it is not one."""
    import langcodes

    if not isinstance(code, str) or not code.strip():
        raise LanguageTagError(f"{code!r} is not a language code; use BCP-47 tags such as 'en', 'de', 'zh-CN' or 'pt-BR'.")
    try:
        language = langcodes.Language.get(code.strip())
    except (ValueError, LookupError) as err:
        raise LanguageTagError(f"{code!r} is not a language code ({err}); use BCP-47 tags such as 'en', 'zh-CN' or 'pt-BR'.") from None
    if not language.language or not language.is_valid():
        raise LanguageTagError(f"{code!r} is not a language code (no known BCP-47 language); use tags such as 'en', 'de', 'zh-CN' or 'pt-BR'.")
    return language.to_tag()


@functools.lru_cache(maxsize=None)
def mteb_language(tag: str) -> str:
    """mteb's ``<ISO 639-3>-<script>`` code for a BCP-47 tag (``ja`` -> ``jpn-Jpan``).

    The script is the tag's own when it has one; else the region's, where the region changes it
    (``zh-TW`` -> ``Hant``); else the script mteb uses for the language (``ko`` -> ``Hang``).
    """
    import langcodes
    from mteb.languages import check_language_code

    language = langcodes.Language.get(language_tag(tag))
    try:
        alpha3 = language.to_alpha3()
        script = language.script
        if script is None:
            regional = language.maximize().script
            general = langcodes.Language.get(language.language).maximize().script
            script = regional if regional != general else _mteb_default_scripts().get(alpha3, regional)
        code = f"{alpha3}-{script}"
        check_language_code(code)
    except (ValueError, LookupError) as err:
        raise LanguageTagError(
            f"the language tag {tag!r} has no ISO 639-3 + script code that mteb knows ({err}); mteb needs one per subset. "
            "Give the corpus text a tag with a registered language and, where the script is ambiguous, a script "
            "subtag (e.g. 'sr-Latn')."
        ) from None
    return code


@functools.lru_cache(maxsize=1)
def _mteb_default_scripts() -> dict[str, str]:
    """mteb's own table of each ISO 639-3 language's usual script (shipped as package data)."""
    import json
    from importlib.resources import files

    return json.loads(files("mteb.languages").joinpath("iso_639_3_to_default_script.json").read_text(encoding="utf-8"))


def split_languages(text: str, where: str) -> list[str]:
    """The canonical tags in a ``-``-joined list written in canonical case (``en-zh-CN`` -> ``[en, zh-CN]``)."""
    groups: list[list[str]] = []
    for subtag in text.split("-"):
        if _LANGUAGE_SUBTAG.fullmatch(subtag):
            groups.append([subtag])
        elif groups and _EXTENSION_SUBTAG.fullmatch(subtag):
            groups[-1].append(subtag)
        else:
            raise LanguageTagError(_case_hint(text, subtag, where))
    tags = []
    for group in groups:
        written = "-".join(group)
        try:
            tag = language_tag(written)
        except LanguageTagError:
            raise LanguageTagError(_case_hint(text, written, where)) from None
        if tag != written:
            raise LanguageTagError(f"{where}: write the language {written!r} as {tag!r} (canonical BCP-47 form).")
        tags.append(tag)
    return tags


def _case_hint(text: str, subtag: str, where: str) -> str:
    guess = ""
    try:
        guess = language_tag(text)
    except LanguageTagError:
        pass
    hint = f" (one language? write {guess!r})" if guess else ""
    return (f"{where}: {subtag!r} is not a language tag{hint}. Languages in subset names are BCP-47 tags in canonical "
            "case: lower-case language, Title-case script, upper-case region, e.g. n3_zh-CN or n3_en-zh-Hant.")
