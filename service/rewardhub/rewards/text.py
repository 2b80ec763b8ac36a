"""Text helpers shared by rewards: SQuAD normalisation and the part of a response after its reasoning.

``squad_normalize`` is the normalisation of the SQuAD v1.1 evaluation script (lower case, drop
punctuation and the articles a/an/the, collapse whitespace), so scores are comparable with published
EM/F1 numbers; it drops Unicode punctuation too, as MLQA's script does, where SQuAD's drops ASCII's, and
lower-cases by full case folding (:func:`fold_case`: ``str.casefold``, the same as ``lower`` on ASCII, with
the capital dotted I "İ" folded to "i", where casefold adds a combining dot), so "STRASSE" is "Straße" and
"İstanbul" "istanbul", as in exact_match's ``whitespace``. Every text reward that ignores case folds it so.
:func:`squad_pair` normalises an answer and a reference alike, keeping the articles of a reference
that would otherwise be nothing (the option letter "A").

:func:`answer_span` is where a reasoning model's answer lies: after its last ``</think>``, up to a
``<think>`` that never closes; :func:`answer_text` is that text, what the judge, PRM, calibration,
score_model, math, majority_vote, multiple_choice, exact_match, f1, string_check, text_similarity,
code, sql, json_schema and python_grader rewards (and regex comparing a group) read instead of the
reasoning.
Tags match exactly (``<think>``, ``</think>``: the tokens reasoning models emit), in every reward.

:func:`blank` is what "says nothing" means wherever a reward asks (an empty answer, an empty tagged
section, a blank reference): whitespace and invisible format or control characters only.

:func:`drop_invisible` removes the invisible format characters (Unicode category Cf: zero-width space,
joiners, soft hyphen, BOM, word joiner, bidi marks) from a text that is compared or split into words:
they render as nothing, yet "Par\u200bis" was another word than "Paris". Every normalisation that
compares text does it (:func:`squad_normalize`, exact_match's and majority_vote's ``whitespace``, the
repetition reward's and ROUGE's words, multiple_choice's letters); ``none`` and string_check compare as written.

:func:`squad_tokens` splits a normalised text into F1's tokens as MLQA's script does for Chinese (its
``mixed_segmentation``): each CJK ideograph or kana is a token of its own, every other run between spaces
one token. Chinese and Japanese are written without spaces, so whitespace splitting made a whole answer
one token, and F1's partial credit all or nothing ("東京都" against "東京" was 0.0, not 0.8).
:func:`split_cjk` is that split, and :func:`word_count` its length: the words of text_similarity's bleu and
gleu and of the repetition reward. :func:`length_words` is the ``words`` length unit's count (:mod:`.units`):
:func:`word_count`'s, with each letter of Thai, Lao, Khmer or Myanmar a word too. :func:`join_cjk` writes
a text with the spaces beside CJK characters dropped: a key equal exactly when the tokens are (majority_vote's
``squad`` votes).

Thai, Lao, Khmer and Myanmar are written without spaces between words too, but :func:`split_cjk` splits
them at spaces only (a phrase is one token): their letters are an alphabet's, not morphemes as CJK
characters are, and finding their words takes a dictionary. Letter tokens were measured and left out: a
Thai paragraph repeated 30% of its letter trigrams (the same paragraph in English 1% of its word
trigrams, in Chinese 3% of its character trigrams), a repetition penalty for ordinary text, and unrelated
answers shared letters ("กรุงเทพมหานคร" against "เชียงใหม่", Bangkok against Chiang Mai: F1 0.32).
"""

from __future__ import annotations

import re
import string
import unicodedata

import regex

__all__ = [
    "CJK_CLASS",
    "CJK_SCRIPTS",
    "THINK_CLOSE",
    "after_think_at",
    "answer_span",
    "answer_text",
    "blank",
    "drop_invisible",
    "fold_case",
    "fold_forms",
    "join_cjk",
    "length_words",
    "squad_normalize",
    "squad_pair",
    "squad_tokens",
    "split_cjk",
    "word_count",
]

THINK_CLOSE = "</think>"

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_DROP_PUNCT = str.maketrans("", "", string.punctuation)  # one C pass: a Python loop took 85 ms a MB
# Punctuation past ASCII, which NFKC leaves: the curly apostrophe and quotes models write (’ “ ”), the
# CJK full stop and comma (。 、), the dashes. (A translate table of all 819 took 0.4 s to build.)
_UNICODE_PUNCT = regex.compile(r"\p{P}+")
_INVISIBLE = regex.compile(r"\p{Cf}+")
# CJK ideographs (extension A, compatibility forms) and kana as a character-class body for ``re``
# patterns: the scripts written without spaces (multiple_choice's letter boundaries)
CJK_CLASS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# CJK ideographs (and their extensions and compatibility forms), kana: written without spaces, one token
# each (the ranges text_similarity's ROUGE words use, and MLQA's segmentation of Chinese). The prolonged
# sound mark ー (and its half-width ｰ), of script Common, is kana's: outside the class it was glued to a
# Latin word or number after it ("サーバー2台": "ー2"), where ROUGE's range holds it.
# As a character-class body for ``regex`` patterns: ROUGE's words read it too (the range above held the
# punctuation ・ and ゠, and neither 々 nor the ideographs past the BMP).
CJK_SCRIPTS = r"\p{Han}\p{Hiragana}\p{Katakana}\u30fc\uff70"
_CJK_CHAR = regex.compile(f"[{CJK_SCRIPTS}]")
_CJK_RUN = regex.compile(f"[{CJK_SCRIPTS}]+")
_SPACE_BY_CJK = regex.compile(rf"\s+(?=[{CJK_SCRIPTS}])|(?<=[{CJK_SCRIPTS}])\s+")
# Thai, Lao, Khmer and Myanmar (Burmese): written without spaces between words (a space ends a phrase or a
# sentence), so splitting on whitespace made a paragraph a handful of words. A run of their letters and
# marks (not their digits, punctuation or symbols: "๑๒๓" is a number, one word), as a ``regex`` pattern.
_UNSPACED_SCRIPTS = r"\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}"
_UNSPACED_RUN = regex.compile(rf"(?V1)[[{_UNSPACED_SCRIPTS}]--[\p{{N}}\p{{P}}\p{{S}}]]+")
# Those scripts' combining marks (vowel signs above, below or beside a consonant, tone marks, viramas),
# deleted by str.translate (one C pass) to leave the letters: a MB of Thai counted in some 0.05 s
_UNSPACED_MARKS = dict.fromkeys(
    c
    for lo, hi in ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF), (0x19E0, 0x19FF), (0xA9E0, 0xA9FF))
    for c in range(lo, hi + 1)
    if unicodedata.category(chr(c)).startswith("M")
) | dict.fromkeys(c for c in range(0xAA60, 0xAA80) if unicodedata.category(chr(c)).startswith("M"))


def fold_forms(text: str) -> str:
    """``text`` as the text rewards compare it, letter case kept: invisible format characters dropped
    (:func:`drop_invisible`) and compatibility forms folded (NFKC: full-width "Ｐａｒｉｓ" and "４２" are
    "Paris" and "42", the ligature "ﬁ" is "fi"). One definition for every reward that compares so."""
    return unicodedata.normalize("NFKC", drop_invisible(text))


def fold_case(text: str) -> str:
    """``text`` with its letter case folded, as the text rewards ignore case: ``str.casefold`` (full case
    folding: "ß" is "ss"), except that the capital dotted I (Turkish and Azerbaijani "İ", U+0130) is "i".
    Full case folding writes it "i" and a combining dot above (U+0307), so "İstanbul" was another word than
    "istanbul" and "ISTANBUL"; the dot is dropped after an "i" (the text recomposed, NFC, where it was:
    "İ́" is "í")."""
    folded = text.casefold()
    if "i\u0307" in folded:
        folded = unicodedata.normalize("NFC", folded.replace("i\u0307", "i"))
    return folded


def drop_invisible(text: str) -> str:
    """``text`` without its invisible format characters (category Cf: U+200B zero-width space, U+200C/D
    joiners, U+00AD soft hyphen, U+FEFF BOM, U+2060 word joiner, bidi marks...); visible text unchanged.
    ASCII has none, so an ASCII text is returned as it is."""
    return text if text.isascii() else _INVISIBLE.sub("", text)


def _drop_punctuation(text: str) -> str:
    text = text.translate(_DROP_PUNCT)
    return text if text.isascii() else _UNICODE_PUNCT.sub("", text)


def squad_normalize(text: str) -> str:
    """SQuAD's normalisation; punctuation is any Unicode punctuation, not only ASCII's (the answer
    "Ocean’s Eleven" with a curly apostrophe is the reference "Ocean's Eleven", "東京。" is "東京"), and
    invisible format characters are dropped (:func:`drop_invisible`: "Par\u200bis" is "Paris"); case is
    folded (:func:`fold_case`: "ß" is "ss", as ``lower`` left it, and "İ" is "i")."""
    text = fold_case(fold_forms(text))
    text = _drop_punctuation(text)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def split_cjk(text: str) -> list[str]:
    """The tokens of a text: its whitespace-separated words, each CJK ideograph or kana a token
    of its own ("北京是首都" is five tokens, "東京 tower" three); ASCII text is ``text.split()``."""
    if text.isascii():
        return text.split()
    return _CJK_CHAR.sub(r" \g<0> ", text).split()


def join_cjk(text: str) -> str:
    """``text`` without the whitespace beside a CJK ideograph or kana: "東京 タワー" is "東京タワー", "東京 tower"
    "東京tower". Two texts whose whitespace is collapsed (as :func:`squad_normalize` leaves it) are equal so
    exactly when their :func:`split_cjk` tokens are, so it is a key that compares as squad exact_match and f1
    do (MLQA's tokens), written as the answer is."""
    return text if text.isascii() else _SPACE_BY_CJK.sub("", text)


def word_count(text: str) -> int:
    """``len(split_cjk(text))`` without building the list: a run of CJK characters counted by its length
    (a MB of Chinese in 0.06 s, where splitting it took 0.23 s)."""
    if text.isascii():
        return len(text.split())
    cjk = 0

    def run(m: regex.Match[str]) -> str:
        nonlocal cjk
        cjk += m.end() - m.start()
        return " "

    return len(_CJK_RUN.sub(run, text).split()) + cjk


def length_words(text: str) -> int:
    """The words of the ``words`` length unit: :func:`word_count`'s (whitespace-separated, each CJK
    ideograph or kana one), with each letter of Thai, Lao, Khmer or Myanmar one word too, its vowel signs
    and tone marks part of it ("สวัสดีครับ" is seven: ส ว ส ด ค ร บ).

    These scripts put no space between words, and finding the words takes a dictionary (ICU's word
    breaks), so a run of them was one word: a Thai paragraph was a handful of words, never past a
    ``max_length`` in words. A letter is their smallest written unit, as a CJK character is (which is
    about a syllable): like that count it grows with the text and over-counts the words, about three
    letters to a Thai word (1.5 characters to a Chinese one). Where one budget must fit every language,
    count the trainer's ``tokens``."""
    if text.isascii():
        return len(text.split())
    letters = 0

    def run(m: regex.Match[str]) -> str:
        nonlocal letters
        letters += len(m.group().translate(_UNSPACED_MARKS))
        return " "

    return word_count(_UNSPACED_RUN.sub(run, text)) + letters


def squad_tokens(text: str) -> list[str]:
    """F1's tokens of ``text``: SQuAD's normalisation, then :func:`split_cjk`."""
    return split_cjk(squad_normalize(text))


def _keep_articles(text: str) -> str:
    return " ".join(_drop_punctuation(fold_case(fold_forms(text))).split())


def _keep_punctuation(text: str) -> str:
    return " ".join(fold_case(fold_forms(text)).split())


def squad_pair(pred: str, ref: str) -> tuple[str, str]:
    """``pred`` and ``ref`` normalised alike, to compare: SQuAD's normalisation, unless it leaves nothing
    of a reference that has text. The option letter "A" is an article and "The" or "?" normalise to
    nothing, so every response that normalises to nothing too (an empty one, one cut off inside its
    ``<think>``, "An") matched them; such a reference is compared with its articles kept, or failing that
    its punctuation too. An empty reference keeps SQuAD v2's meaning: only an empty answer matches it
    (exact_match and f1 never pass one: they read a blank reference as missing, or as an unanswerable
    question scored apart).
    """
    key = squad_normalize(ref)
    if key or blank(ref):
        return squad_normalize(pred), key
    key = _keep_articles(ref)
    if key:
        return _keep_articles(pred), key
    return _keep_punctuation(pred), _keep_punctuation(ref)


def after_think_at(text: str) -> int:
    """Where the text after the last ``</think>`` starts (0 when there is none)."""
    cut = text.rfind(THINK_CLOSE)
    return cut + len(THINK_CLOSE) if cut >= 0 else 0


def answer_span(text: str) -> tuple[int, int]:
    """Where a grading model's answer lies in its output: after the last ``</think>``, up to an unclosed
    ``<think>`` (a reasoning block the output ended in). A number or verdict in the reasoning is a draft,
    not the answer."""
    start = after_think_at(text)
    opened = text.find("<think>", start)
    return start, (opened if opened >= 0 else len(text))


def answer_text(text: str) -> str:
    """The text of :func:`answer_span`: the answer, without the reasoning before or after it."""
    start, end = answer_span(text)
    return text[start:end]


def blank(text: str) -> bool:
    """Whether a text says nothing: only whitespace and invisible format/control characters (Unicode
    categories Cf and Cc: zero-width space and joiners, soft hyphen, BOM, bidi marks, NUL), which render
    as nothing and which a tokenizer or a reader drops. ``str.strip`` keeps them, so a zero-width space
    passed for an answer where an empty one did not."""
    return all(ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf") for ch in text.strip())
