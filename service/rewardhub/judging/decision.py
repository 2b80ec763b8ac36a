"""Reading a judge's verdict: the last decision in its output, or the expectation under its logprobs.

A judge is asked to end with a fixed line (``Score: 4``, ``Winner: A``, ``Final Decision: Yes``). A
:class:`Scale` says which labels that line may carry and what each is worth in [0, 1].

* ``parse``: the **last** match of the decision pattern wins (a judge that reasons "Score: 2... on
  reflection, Score: 4" means 4), unless it is a hypothetical one, a score the judge would give another
  answer ("Score: 3. If the proof were complete it would get Score: 10", "Score: 5 had it shown its
  work", "otherwise Score: 5", "A Score: 5 answer would show the derivation", "Score: 5 would be too
  generous", "Score: 4 (Score: 5 would require units)"; in the judge's reasoning in English, "it'd"
  and "I'd" read as "it would" and "I would", or Chinese): the last decision is then the last one that is not. When every match is hypothetical the
  judge decided nothing about this answer; that, a label outside the scale, or no match, is
  :class:`DecisionError` (the item becomes ``parse_error``, never a silent 0). So is a score out of
  another maximum than the scale's ("Score: 4/10" or "4 out of 10" on 1-5: the judge scored on its own
  scale); "4/5" reads as 4.
  A decimal comma is a decimal point ("Score: 3,5" is 3.5, not 3). A decision that names two labels
  ("Final Decision: Yes/No", "Winner: A or B", "Score: 3-4": the format copied, or a hedge) is none,
  a :class:`DecisionError`, not its first label; so is a last decision that holds no label of the
  scale ("Score: N/A" after a draft "Score: 4", with the mode's ``keys``): the draft is not read.
* ``logprobs`` (G-Eval, arXiv 2303.16634): at the token where the parsed label starts, the top-k
  alternatives are mapped to labels (case, surrounding spaces and brackets ignored, so ``"Yes"``,
  ``" yes"``, ``"YES"`` all count for ``yes`` and are summed; on a scale of words a token that starts
  exactly one label counts for it, so a "tie" split into "t" + "ie" is not left out), renormalised over
  the labels present, and
  the score is the expected value. For two-label scales (yes/no, A/B) a label missing from the top-k gets
  an upper bound on its probability: the smallest top-k probability (GenPRM's rule), and no more than
  the mass the top-k leave over (with ``top_logprobs: 1`` and "Yes" at 0.99, "No" gets at most 0.01,
  not 0.99), so a missing "no" does not read as certainty and a confident "yes" is not halved. When
  logprobs were asked for but cannot be used (the backend sent none, or no label is among the
  alternatives, or the tokens' last decision is not the text's), the parsed value is used and
  ``method`` says ``parse_fallback``; so is a parsed label that is not one of the scale's own labels
  (``Score: 4.5``: the token where it starts is the label ``4``, and the expectation there would read
  4.1 for a judge that said 4.5). The decision is always the text's: with no decision in the text
  (a server that returns the reasoning apart, with ``content: null``) a draft in the reasoning's tokens
  is not read either.

A reasoning judge's thinking is not its verdict: only the text after its last ``</think>`` is read (and
not an unclosed ``<think>`` after that), so a draft "Score: 2" inside the reasoning of an answer that
ends without a decision is a ``parse_error``, not a 2. (Servers with a reasoning parser return the
thinking apart, and this changes nothing for them.)

A verdict may also be asked for as one token (:func:`read_token_decision`): ThinkPRM's second call
continues the judge's own critique after "Is the solution correct?" with ``max_tokens: 1``, and the
verdict is that token (``parse``) or the expectation over the labels among its top-k alternatives
(``logprobs``, P(yes), with the bound above for a label missing from them).

Token strings are read as text; the byte-level BPE markers some servers leave in them (``Ġ`` for a
space, ``Ċ`` for a newline, SentencePiece's ``▁``) are read as the whitespace they stand for, so
``["Score", ":", "Ġ4"]`` is the decision "Score: 4".
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, Protocol

from rewardhub.models.base import Completion, TokenLogprob
from rewardhub.rewards.base import Outcome
from rewardhub.rewards.patterns import capped_last_match, capped_outcome
from rewardhub.rewards.text import answer_span

__all__ = [
    "Decision",
    "DecisionError",
    "MatchLike",
    "Scale",
    "last_of",
    "read_decision",
    "read_decision_capped",
    "read_token_decision",
]

# "Score: 4/10", "Score: 4 out of 10": the maximum the judge scored against, right after its label
# ("4 (out of 10)": the denominator may stand in brackets)
_OUT_OF = re.compile(r"[ \t*\])(\"']*(?:/|out[ \t]+of\b)[ \t*\[(\"']*(\d+(?:\.\d+)?)", re.IGNORECASE)
# "Score: 3,5": a decimal comma right after the label's digits (not "3, 5" nor a list "3,5,4")
_DECIMAL_COMMA = re.compile(r",(\d{1,3})(?![\d,])")
# A second label right after the decision's, joined to it ("Final Decision: Yes/No", "Winner: A or B",
# "Score: 3-4"): the judge copied the format or hedged, and decided nothing. On a numeric scale "/" is
# the maximum ("4/5", :data:`_OUT_OF`), and a number after a dash, "to", "or" or "and" is the second label.
_SECOND_WORD = re.compile(
    r"""[ \t*\])"'`]*(?:/|\||\bor\b|\band\b)[ \t*\[("'`]*(?:(?:response|assistant)[ \t_]*)?([^\W_]+)\b""",
    re.IGNORECASE,
)
_SECOND_NUMBER = re.compile(
    r"""[ \t*\])"'`]*(?:[-\u2013\u2014]|\bto\b|\bor\b|\band\b)[ \t*\[("'`]*\d""", re.IGNORECASE
)
_LABEL_STRIP = " \t\r\n*:：[](){}\"'`.,!\u2581\u0120"
# one character for one: positions in the joined token text stay positions in the token list
_BPE_SPACES = str.maketrans({"\u0120": " ", "\u2581": " ", "\u010a": "\n"})
_WORD = re.compile(r"[^\W_]+")  # the first word of a one-token verdict


class MatchLike(Protocol):
    """What a ``re`` or ``regex`` match offers: group 1 is the decision label."""

    def group(self, index: int, /) -> Any: ...

    def start(self, index: int = 0, /) -> int: ...

    def end(self, index: int = 0, /) -> int: ...


class DecisionError(Exception):
    """The judge's output has no readable decision."""


@dataclass(frozen=True, slots=True)
class Scale:
    """Labels a decision may take and their value in [0, 1].

    ``numeric=(lo, hi)`` reads any number in [lo, hi] (decimals too) as ``(x - lo) / (hi - lo)``;
    ``labels`` maps the other labels (casefolded) to values; ``complete`` lists the labels whose missing
    logprob is bounded by the top-k minimum.
    """

    labels: dict[str, float] = field(default_factory=dict)
    numeric: tuple[int, int] | None = None
    complete: tuple[str, ...] = ()

    @classmethod
    def scores(cls, lo: int, hi: int) -> Scale:
        return cls({str(k): (k - lo) / (hi - lo) for k in range(lo, hi + 1)}, numeric=(lo, hi))

    def value(self, label: str) -> float | None:
        key = label.strip(_LABEL_STRIP).casefold()
        if self.numeric is not None:
            try:
                x = float(key)
            except ValueError:
                return None
            lo, hi = self.numeric
            return (x - lo) / (hi - lo) if lo <= x <= hi and math.isfinite(x) else None
        return self.labels.get(key)

    def token_label(self, token: str) -> str | None:
        """The label a token at the decision carries: the label itself, or, on a scale of words, the
        start of exactly one label (a tokenizer that splits "tie" into "t" + "ie", or "Yes" into "Y" +
        "es": the first token's probability is the label's, as the rest follows from it). Not on a
        numeric scale, where "1" starts "10" and is a label of its own."""
        key = token.strip(_LABEL_STRIP).casefold()
        if key in self.labels:
            return key
        if self.numeric is None and key:
            starts = [label for label in self.labels if label.startswith(key)]
            if len(starts) == 1:
                return starts[0]
        return None


@dataclass(frozen=True, slots=True)
class Decision:
    value: float  # the score in [0, 1] (parsed, or expected under the logprobs)
    parsed: float  # the value of the last parsed label
    label: str
    method: Literal["parse", "logprobs", "parse_fallback"]
    probs: dict[str, float] | None = None


def last_of(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The last match of ``pattern`` in ``text`` (the judge's final decision), or None."""
    last = None
    for m in pattern.finditer(text):
        last = m
    return last


# A decision the judge gives another answer than this one, in its own sentence: a conditional with a
# modal ("If the answer were complete it would get Score: 10"), a counterfactual ("it would have earned
# Score: 5"), the other case ("otherwise Score: 5"), or a better answer's ("A complete solution would
# get Score: 5"). "Even if it were verbose, Score: 4" and the judge's own choice ("If I had to pick, I
# would say Score: 4") are decisions, and so are its hedges ("If anything, I'd go with Score: 4", "If
# you ask me, I would say Score: 4", "Unless I'm mistaken, I'd say Score: 4": with "'d" read as
# "would", each contracted one read as hypothetical, as its spelled-out form already was).
# ("if" as a word of code is no condition: "the if branch", "an if-else", "`if`", "if statement")
_CONDITIONAL = re.compile(
    r"(?<!\beven )(?<!\bthe )(?<!\ban )(?<!\bthis )(?<!\beach )(?<!\bits )(?<![`'\"])"
    r"\b(?:if(?![ \t]+(?:i|we)\b|[ \t]+anything[ \t]*,|[ \t]+you[ \t]+ask[ \t]+me\b)"
    r"(?![`'\"]|-|[ \t]+(?:statements?|branch(?:es)?|clauses?|blocks?|checks?|"
    r"conditions?|expressions?|tests?|else)\b)|unless(?![ \t]+(?:i|we)\b)|suppos(?:e|ing)|assuming|imagine"
    r"|hypothetical(?:ly)?)\b",
    re.IGNORECASE,
)
# "'d" after a pronoun ("I'd", "it'd", "that'd", with ' or ’) is "would" wherever the word is read: the
# contraction of a hypothetical ("with units it'd be Score: 5") reads as its spelled-out form. It is also
# "had" (past perfect: "I'd given it Score: 3 at first", "it'd been"): before a past participle that
# cannot be a bare verb (a regular one in "-ed", not "-eed": "need", "exceed"; or a listed irregular
# one) it is "had" and no modal. A participle that is also a bare verb ("put", "set", "read", "come")
# reads as "would", the more common reading of "I'd put it at Score: 3". Not after a noun ("the
# answer'd"): rare, and there "'d" is as often "had" or "did". "'d have"/"'d've" is "would have" (no
# "had have"), as "would've", "could've", "mightn't've" are. A decision never takes "'d" (no pronoun),
# so :data:`_MODAL_AFTER` reads none.
_D = r"\b(?:i|you|he|she|it|we|they|that|there)['’]d"
_D_HAD = (
    r"(?:[ \t]+not)?[ \t]+(?:[a-z]*[^\We]ed|agreed|freed|been|had|better|best|done|gone|got|gotten|given|taken|"
    r"seen|shown|known|chosen|written|made|said|thought|found|felt|meant|kept|left|lost|forgotten|"
    r"mistaken|overlooked|begun|brought|bought|caught|taught|sought|fought|held|heard|paid|spent|sent|"
    r"built|understood|won|spoken|broken|proven|grown|drawn|thrown|flown|fallen|risen|driven|ridden)\b"
)
_WOULD_D = rf"{_D}\b(?!{_D_HAD})"
_MODAL = re.compile(rf"\b(?:would|could|might|were)\b|{_WOULD_D}", re.IGNORECASE)
_COUNTERFACTUAL = re.compile(
    r"\b(?:(?:would|could|might)(?:n['’]t|[ \t]+not)?(?:[ \t]+have|['’]ve)|otherwise)\b"
    rf"|{_D}(?:[ \t]+not)?(?:[ \t]+have|['’]ve)\b"
    r"|\b(?:complete|perfect|ideal|flawless|correct|better|stronger|full|fixed|corrected|improved)[ \t]+"
    r"(?:answer|response|solution|proof|version)[ \t]+would\b",
    re.IGNORECASE,
)
# ... or a condition right after it: "Score: 10 if the proof were complete", "Score: 5, had it shown
# its work", "Score: 5 only if the units were given" (not "Score: 4 (it would be 5 if the units were given)", a decision with a remark)
_CONDITION_AFTER = re.compile(
    r"""[ \t*\])"'`]*(?:/[ \t]*\d+)?[ \t*\])"'`]*,?[ \t]*(?:(?:but[ \t]+)?only[ \t]+)?"""
    r"(?:if|unless|had|were|provided|assuming)\b",
    re.IGNORECASE,
)
# The same in Chinese, for a judge that reasons in it while its decision keeps the template's label
# ("Score: 3。如果答案完整，它会得到 Score: 10"): a condition (not the judge's own choice, "如果我必须选择";
# Chinese marks no mood, so a condition alone, without English's "would"/"were"), a counterfactual
# ("本可以", "否则"), or a condition right after the decision ("Score: 5，如果给出了单位的话"). "即使"
# (even if) is no condition.
_IF_ZH = "如果|假如|假设|假若|倘若|要是|若是"
_HYPOTHETICAL_ZH = re.compile(rf"(?:{_IF_ZH})(?!我)|否则|不然|本(?:应|该|可|来)")
_CONDITION_AFTER_ZH = re.compile(rf"""[ \t*\])"'`]*(?:/[ \t]*\d+)?[ \t*\])"'`]*[,，]?[ \t]*(?:{_IF_ZH})""")
_SENTENCE_END = re.compile(r"[.!?;](?=\s)|[。！？；]|\n")
# ... or a modal right after it, the decision its subject ("Score: 5 would require units", "A Score: 5
# answer would show the derivation", "Score: 5 would be too generous"): a score the judge talks about, not
# the one it gives. With a noun between ("a Score: 5 answer should ...") any modal; without one, "would",
# "could" and "might", except where the judge affirms the score ("Score: 4 would be fair": :data:`_AFFIRMED`).
_MODAL_AFTER = re.compile(
    r"""[ \t*\])"'`]*(?:/[ \t]*\d+)?[ \t*\])"'`]*"""
    r"(?:(?P<noun>(?:answer|response|solution|proof|essay|submission|version|work)s?)[ \t]+)?"
    r"(?P<modal>would|could|might|should|must|will)(?P<neg>n['’]t|[ \t]+not)?\b",
    re.IGNORECASE,
)
_AFFIRMED = re.compile(
    r"[ \t]+(?:be|seem|feel)[ \t]+(?:(?:a|an|the|my|most|more|quite|very|entirely|perfectly|about|just)[ \t]+)*"
    r"(?:fair|appropriate|justified|reasonable|right|correct|accurate|warranted|suitable|apt|adequate|proper|"
    r"sensible|deserved|my)\b",
    re.IGNORECASE,
)
# The same in Chinese ("Score: 4。Score: 5 会要求给出单位", "Score: 5 就太宽松了"): "会"/"将会" (would), "可能"
# (might), "就" before "太"/"过于" (would then be too), or "需要"/"必须" with "才" later in its clause (only
# with: "Score: 5 需要给出单位才行"); with a noun between ("Score: 5 的答案会……": a Score-5 answer) any of
# these or "应该"/"应当"/"要". Not "应该" (should) alone, as English "should" is not: "Score: 4 应该是公平的"
# is the judge's; and "会"/"可能" where the judge affirms the score (:data:`_AFFIRMED_ZH`: "Score: 4
# 会是我的最终答案", "会比较合理", "可能更合适"). "是" (is) is no modal ("Score: 4 是合理的").
_MODAL_AFTER_ZH = re.compile(
    r"""[ \t*\])"'`]*(?:/[ \t]*\d+)?[ \t*\])"'`]*"""
    r"(?:(?P<noun>的(?:答案|回答|解答|证明|回复|作答))[ \t]*(?:将会|会|将|可能|应该|应当|必须|需要|要|得)"
    r"|(?P<modal>将会|会|可能|就(?=太|过于))"
    r"|(?:需要|必须)(?=[^，,。；;！？!?\n]{0,40}才))"
)
_AFFIRMED_ZH = re.compile(
    r"[ \t]*(?:是|算是?|显得|看起来|似乎)?[ \t]*(?:(?:一个|比较|较为|更加|更|很|最|相当|非常|较|挺|还)[ \t]*)*"
    r"(?:合理|公平|恰当|合适|适当|适合|准确|正确|公正|妥当|中肯|我的)"
)
# The judge's remark in brackets after its decision: a decision inside it that a modal or a condition
# qualifies is the remark's ("Score: 4 (with units it would be Score: 5)"), not the judge's.
_CLAUSE_END = re.compile(r"[.!?;,](?=\s|$)|[()（）。！？；，]|\n")
_REMARK_MODAL = re.compile(
    rf"\b(?:would|could|might|should|were)\b|{_WOULD_D}|\bif\b|\bunless\b", re.IGNORECASE
)


def _hypothetical(
    text: str, m: MatchLike, find_last: Callable[[str], MatchLike | None] | None = None
) -> bool:
    """The decision ``m`` in ``text`` is one the judge would give another answer (:data:`_CONDITIONAL`
    with :data:`_MODAL`, :data:`_COUNTERFACTUAL` in its sentence before it, :data:`_CONDITION_AFTER` or
    :data:`_MODAL_AFTER` or :data:`_MODAL_AFTER_ZH` right after it, or, with ``find_last``, a remark in brackets after a decision
    that a modal qualifies: :func:`_in_remark`)."""
    begin = max(0, m.start() - 300)
    before = text[begin : m.start()]
    ends = [e.end() for e in _SENTENCE_END.finditer(before)]
    clause = before[ends[-1] :] if ends else before
    if ends and not clause.strip() and before[ends[-1] - 1] == "\n":
        # the decision opens its line: a line before it that ends in a comma or a colon is its
        # condition ("If the answer were complete,\nScore: 10")
        line = before[ends[-2] if len(ends) > 1 else 0 : ends[-1] - 1]
        if line.rstrip().endswith((",", ":", "，", "：")):
            clause = line
    if _COUNTERFACTUAL.search(clause) or (_CONDITIONAL.search(clause) and _MODAL.search(clause)):
        return True
    if _HYPOTHETICAL_ZH.search(clause):
        return True
    if (
        _CONDITION_AFTER.match(text, m.end()) is not None
        or _CONDITION_AFTER_ZH.match(text, m.end()) is not None
    ):
        return True
    return (
        _modal_after(text, m.end())
        or _modal_after_zh(text, m.end())
        or (find_last is not None and _in_remark(text, m, clause, find_last))
    )


def _modal_after(text: str, at: int) -> bool:
    """A modal right after a decision that ends at ``at``, the decision its subject (:data:`_MODAL_AFTER`)."""
    after = _MODAL_AFTER.match(text, at)
    if after is None:
        return False
    if after.group("noun"):
        return True  # "a Score: 5 answer would ...": another answer's score
    if after.group("modal").casefold() not in ("would", "could", "might"):
        # "Score: 4 should stand", "Score: 4 will do": the judge's own, unless a condition follows in the
        # same clause ("Score: 5 should be given only if the units are shown")
        rest = _CLAUSE_END.split(text[after.end() : after.end() + 200], maxsplit=1)[0]
        return _CONDITIONAL.search(rest) is not None
    return bool(after.group("neg")) or _AFFIRMED.match(text, after.end()) is None


def _modal_after_zh(text: str, at: int) -> bool:
    """A Chinese modal right after a decision that ends at ``at`` (:data:`_MODAL_AFTER_ZH`), where the
    judge does not affirm the score (:data:`_AFFIRMED_ZH`)."""
    after = _MODAL_AFTER_ZH.match(text, at)
    if after is None:
        return False
    if after.group("modal") is None:
        return True  # a Score-5 answer's, or one only with a condition ("需要……才")
    return _AFFIRMED_ZH.match(text, after.end()) is None


def _in_remark(text: str, m: MatchLike, clause: str, find_last: Callable[[str], MatchLike | None]) -> bool:
    """``m`` stands in an open bracket of its sentence (``clause``: the sentence up to ``m``), after a
    decision, and the bracket holds a modal or a condition: "Score: 4 (with units it would be Score: 5)"."""
    opened = max(clause.rfind("("), clause.rfind("（"))
    if opened < 0 or ")" in clause[opened:] or "）" in clause[opened:]:
        return False
    if find_last(clause[:opened]) is None:
        return False  # no decision before the bracket: "(I would say Score: 4)" may be the judge's own
    inside = clause[opened:] + text[m.end() : m.end() + 300]
    close = min((i for i in (inside.find(")"), inside.find("）")) if i >= 0), default=len(inside))
    return _REMARK_MODAL.search(inside[:close]) is not None


def _find_in(find_last: Callable[[str], MatchLike | None], text: str) -> tuple[MatchLike | None, int, bool]:
    """The judge's decision in ``text`` (after its reasoning, :func:`answer_span`): the last match of
    ``find_last`` that is not :func:`_hypothetical` (up to eight are looked at), where the text it was
    found in starts, and whether there were matches but each one looked at was hypothetical (the judge
    only said what other answers would get: no decision, not the last of them)."""
    start, end = answer_span(text)
    span = text[start:end]
    m = find_last(span)
    if m is None:
        return None, start, False
    for _ in range(8):
        if not _hypothetical(span, m, find_last):
            return m, start, False
        m = find_last(span[: m.start()])
        if m is None:
            break
    return None, start, True


def read_decision(
    completion: Completion,
    find_last: Callable[[str], MatchLike | None],
    scale: Scale,
    scoring: Literal["parse", "logprobs"],
    keys: re.Pattern[str] | None = None,
) -> Decision:
    """The verdict in ``completion`` (see the module docstring); ``find_last`` finds the last decision.
    ``keys``: where a decision starts, up to its label (``"Score:"``; each match of ``find_last`` starts
    with one): a later one that holds no readable label ("Score: N/A", "Winner: neither") is the judge's
    last decision, and it decided nothing (a default template's; a caller's pattern has none).

    Raises:
        DecisionError: no decision, its label is not on the scale, or the last decision is unreadable.
    """
    # The verdict is the text's, in both modes. A server with a reasoning parser (vLLM, SGLang) returns
    # the thinking apart from ``content`` (``reasoning_content``/``reasoning``, or ``content: null``),
    # yet its logprobs cover every generated token: a draft "Score: 2" in the reasoning was read from
    # the tokens as the verdict of a judgement whose content has none (parse mode: parse_error).
    m, start, hypothetical = _find_in(find_last, completion.text)
    if m is None and hypothetical:
        raise DecisionError(
            "the judge's output holds only hypothetical decisions (what another answer would get)"
        )
    if m is None:
        raise DecisionError("no decision line found in the judge's output (after any <think> block)")
    if keys is not None:
        late = _unreadable_after(completion.text, start, m, find_last, keys)
        if late is not None:
            raise DecisionError(f"the judge's last decision {late!r} holds no label of the scale")
    label = str(m.group(1))
    after = start + m.end(1)
    # "Score: 3,5" (a judge writing a decimal comma) is 3.5, not 3
    comma = _DECIMAL_COMMA.match(completion.text, after) if scale.numeric is not None else None
    if comma is not None and label.isdigit():
        label, after = f"{label}.{comma.group(1)}", comma.end()
    parsed = scale.value(label)
    if parsed is None:
        raise DecisionError(f"the judge's decision {label!r} is not on the scale")
    if _two_labels(completion.text, after, parsed, scale):
        raise DecisionError(
            f"the judge's decision names two labels ({completion.text[start + m.start(1) : after + 30]!r}): "
            "no decision"
        )
    # "Score: 4/10" from a judge asked for 1-5 is 4 of 10, not 4 of 5 (0.75 for a poor answer)
    out_of = _OUT_OF.match(completion.text, after) if scale.numeric is not None else None
    if out_of is not None and scale.numeric is not None and float(out_of.group(1)) != scale.numeric[1]:
        raise DecisionError(
            f"the judge's decision {label!r} is out of {out_of.group(1)}, not of the scale's maximum "
            f"{scale.numeric[1]}"
        )
    tokens = completion.tokens
    if scoring == "parse":
        return Decision(parsed, parsed, label, "parse")
    # The expectation is over the labels one token can carry: a decision that is none of them ("Score:
    # 4.5" on a 1-5 scale, whose first token "4" is another label) is read as written.
    if tokens and scale.token_label(label) is not None:
        joined = "".join(t.token for t in tokens).translate(_BPE_SPACES)
        tm, offset, _ = _find_in(find_last, joined)
        # the tokens' last decision is the text's (same label), not a draft the text does not end with
        if tm is not None and scale.value(str(tm.group(1))) == parsed:
            probs = _label_probs(tokens, _token_at(tokens, offset + tm.start(1)), scale)
            total = sum(probs.values())
            # a server's -inf written as -9999.0 underflows exp() to 0: no distribution, read the label
            if total > 0.0 and math.isfinite(total):
                value = sum(p * scale.labels[lab] for lab, p in probs.items()) / total
                return Decision(value, parsed, label, "logprobs", {k: v / total for k, v in probs.items()})
    return Decision(parsed, parsed, label, "parse_fallback")


def _unreadable_after(
    text: str,
    start: int,
    m: MatchLike,
    find_last: Callable[[str], MatchLike | None],
    keys: re.Pattern[str],
) -> str | None:
    """The judge's last decision when it comes after ``m`` (the decision read, in the span of ``text``
    from ``start``) and holds no readable label: the last match of ``keys`` there, where no decision
    starts and that is not hypothetical (:func:`_hypothetical`: "it would get Score: full marks")."""
    begin, end = answer_span(text)
    span = text[begin:end]
    k = last_of(keys, span)
    if k is None or begin + k.start() <= start + m.start():
        return None
    # a decision starting there would be a later match than m: m was chosen over it (hypothetical)
    if find_last(span[k.start() :]) is not None or _hypothetical(span, k, find_last):
        return None
    return span[k.start() : k.end() + 20].strip()


def _two_labels(text: str, after: int, parsed: float, scale: Scale) -> bool:
    """Whether another label of ``scale`` follows the decision's, joined to it (:data:`_SECOND_WORD`,
    :data:`_SECOND_NUMBER`): a decision between two values is none."""
    if scale.numeric is not None:
        return _SECOND_NUMBER.match(text, after) is not None
    second = _SECOND_WORD.match(text, after)
    if second is None:
        return False
    other = scale.value(second.group(1))
    return other is not None and other != parsed


def read_decision_capped(
    payload: tuple[Completion, str, Scale, Literal["parse", "logprobs"], float],
) -> Decision | Outcome | str:
    """:func:`read_decision` with a caller's decision pattern, in a CPU worker (module level, pickled by
    reference), for a judgement too long to match on the event loop (:func:`.patterns.runs_inline`):
    ``payload`` is the completion, the pattern, the scale, the scoring and each match's timeout. Every
    match is bounded in time and memory (:func:`.patterns.capped_last_match`); past either, the invalid
    outcome (``timeout``, ``resource_limit``). A judgement without a readable decision is the
    :class:`DecisionError`'s message, for the caller to raise."""
    completion, pattern, scale, scoring, timeout_s = payload
    find_last = partial(capped_last_match, pattern, ignorecase=True, timeout_s=timeout_s)
    try:
        return capped_outcome(lambda: read_decision(completion, find_last, scale, scoring))
    except DecisionError as exc:
        return str(exc)


def read_token_decision(
    completion: Completion, scale: Scale, scoring: Literal["parse", "logprobs"]
) -> Decision:
    """The verdict of a judge asked for one token: the continuation of a prompt that ends where the
    label goes ("Is the solution correct?"). ``parse`` reads the generated word; ``logprobs`` the
    expectation over the labels among the first token's top-k alternatives (when none is among them,
    the word is read as in ``parse``, ``method: "parse_fallback"``). The token may come back as the
    thinking (``reasoning``): a reasoning parser that saw no ``</think>`` in a continuation of an open
    thinking files it there.

    Raises:
        DecisionError: the word is no label of the scale, and no label is among the alternatives.
    """
    text = (completion.text or completion.reasoning or "").translate(_BPE_SPACES)
    word = _WORD.search(text)
    label = word.group(0) if word else text.strip()
    parsed = scale.value(label)
    if scoring == "logprobs" and completion.tokens:
        probs = _label_probs(completion.tokens, 0, scale)
        total = sum(probs.values())
        if total > 0.0 and math.isfinite(total):
            dist = {k: v / total for k, v in probs.items()}
            value = sum(p * scale.labels[lab] for lab, p in dist.items())
            if parsed is None:  # the token is no label (a "**" before it): the likeliest one stands for it
                label = max(dist, key=lambda k: dist[k])
                parsed = scale.labels[label]
            return Decision(value, parsed, label, "logprobs", dist)
    if parsed is None:
        raise DecisionError(f"the judge's verdict {text[:40]!r} is none of {', '.join(scale.labels)}")
    return Decision(parsed, parsed, label, "parse" if scoring == "parse" else "parse_fallback")


def _token_at(tokens: tuple[TokenLogprob, ...], char: int) -> int:
    pos = 0
    for i, t in enumerate(tokens):
        pos += len(t.token)
        if char < pos:
            return i
    return len(tokens) - 1


def _label_probs(tokens: tuple[TokenLogprob, ...], i: int, scale: Scale) -> dict[str, float]:
    t = tokens[i]
    alternatives = list(t.top)
    if all(tok != t.token for tok, _ in alternatives):
        alternatives.append((t.token, t.logprob))
    probs: dict[str, float] = {}
    for tok, lp in alternatives:
        label = scale.token_label(tok)
        if label is not None and math.isfinite(lp):
            probs[label] = probs.get(label, 0.0) + math.exp(lp)
    if probs and scale.complete:
        finite = [math.exp(lp) for _, lp in alternatives if math.isfinite(lp)]
        bound = min(min(finite), max(0.0, 1.0 - sum(finite)))
        for label in scale.complete:
            probs.setdefault(label, bound)
    return probs
