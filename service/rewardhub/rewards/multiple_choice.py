"""``multiple_choice``: extract the chosen option letter from the response and compare it to the key.

Strategies, tried in the configured order (default below); within one strategy the *last* occurrence
that yields an allowed letter wins, since models restate and correct themselves before concluding:

1. ``boxed``        ``\\boxed{B}``, ``\\boxed{(B)}``, ``\\boxed{\\text{B}}``, and with the option's text
   ``\\boxed{B. Paris}``, ``\\boxed{\\text{(B) Paris}}``, ``\\boxed{\\textbf{(B)}\\ 42}``;
2. ``answer_is``    "the (correct) answer is (B)", "the answer would be **B**", "the best option is B",
   "the answer must be B", "the answer is therefore / most likely B";
3. ``answer_colon`` "Answer: B", "**Final Answer:** (B)";
   (in both, the letter may sit in math mode, ``\\text{}`` or quotes: "$B$", "\\(\\mathrm{B}\\)", '"B"',
   "`B`", or follow an option word: "**Option B**"; a wrapped expression, "$B+C$", is no letter)
4. ``answer_tag``   ``<answer>B</answer>``, ``<answer>B) Paris</answer>``, ``<answer>$B$</answer>``,
   ``<answer>Option B</answer>``;
5. ``line``         a line that is only "(B)", "B.", "B)", "**B**" or "B";
6. ``last_letter``  fallback: the last standalone capital allowed letter anywhere that is not ruled
   out ("not B", "isn't (C)", "except A": "The answer is not B." picks nothing).

A prose answer ("answer_is", "answer_colon", a letter line) that the text takes back after it, "Answer: B
... Wait, actually it's C.", "Hmm, no, make that D.", "等等，应该是C。", is the revision's letter (strategy
``revision``), unless an explicit answer follows the revision. A box or an ``<answer>`` tag is a declared
answer: prose after it does not change it.

The pronoun I before a verb ("I think", "I'm", "Answer: I believe it is B") is not option I, in any
strategy; "I is correct", "the answer is I because", "option I" and "(I)" are.

Explicit forms are case-insensitive ("answer: b" is B), but a lowercase letter counts only when it is
bracketed or followed by punctuation (``b.``, ``b)``, ``b。``) or a line end: "the answer is a prime" is
not option A, and a lone lowercase "a" in prose never is (``line`` and ``last_letter`` accept bare
letters only in capitals).
No extractable letter is the model's failure: a valid 0.0 with reason ``no_answer``.

The text is NFKC-normalised first, so full-width forms ("Answer：Ｂ", common in CJK output) and a
no-break space read as their ASCII counterparts, and its invisible format characters are dropped
(:func:`~.text.drop_invisible`: a zero-width space in "Answer: \u200bB" hid the letter). Chinese answers are read as English ones: "答案是B",
"答案为 (B)", "答案应该是选项B" as ``answer_is``, "答案：B" as ``answer_colon``, "B和C" / "B或C" a list; and a
letter written against Chinese, Japanese or Korean text ("选B", "答えはBです", "정답은 B입니다") stands alone
for every strategy, though CJK characters are word characters to a regex.

Only the answer of a reasoning model is read: the text after its last ``</think>``, up to a ``<think>``
that never closes (:func:`~rewardhub.rewards.text.answer_text`). A letter in the reasoning is a draft
("the answer is (A)... wait"), and a response cut off inside its reasoning has no answer.

Reference: the letter (``"B"``, ``"(b)"``), ``{"answer": "B"}``, or a list / ``{"answers": [...]}``
of acceptable letters. A reference that is not an allowed letter is unreadable (``parse_error``); a
blank one (``""``, ``[""]``, ``{"answer": ""}``, or invisible characters only: :func:`~.text.blank`) is
no reference (``missing_reference``).

An answer that names several options where one is asked, "\\boxed{A, C}", "\\boxed{A \\text{ or } C}",
"\\boxed{A} or \\boxed{C}", "Answer: either A or C.", "<answer>A/C</answer>", a last line "(A) or (C)", a
text ending "... A or C.", is a hedge: it scores 0.0 (detail ``several``), unless each letter it names is
an acceptable one. Scoring one of its letters would teach a policy to list options. A list followed by
prose ("Answer: A, and C is wrong", "A or C? The answer is C") or by a line that picks one is no hedge.
(There is no multi-select key: a list reference holds alternatives, each a whole answer.)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, Reward, RewardConfig, ScoreContext, register
from rewardhub.rewards.exact_match import reference_strings
from rewardhub.rewards.text import CJK_CLASS, answer_text, blank, fold_forms

__all__ = ["DEFAULT_STRATEGIES", "MultipleChoiceConfig", "MultipleChoiceReward", "extract_choice"]

Strategy = Literal["boxed", "answer_is", "answer_colon", "answer_tag", "line", "last_letter"]
DEFAULT_STRATEGIES: tuple[Strategy, ...] = (
    "boxed",
    "answer_is",
    "answer_colon",
    "answer_tag",
    "line",
    "last_letter",
)


class MultipleChoiceConfig(RewardConfig):
    choices: str = Field(
        "ABCD", description="The allowed option letters, e.g. 'ABCDEFGHIJ' for MMLU-Pro (case-insensitive)."
    )
    strategies: tuple[Strategy, ...] = Field(
        DEFAULT_STRATEGIES, min_length=1, description="Extraction strategies, tried in this order."
    )

    @field_validator("choices")
    @classmethod
    def _letters(cls, v: str) -> str:
        v = v.strip().upper()
        if len(v) < 2 or not all("A" <= c <= "Z" for c in v):
            raise ValueError("choices must be at least two ASCII letters, e.g. 'ABCD'")
        if len(set(v)) != len(v):
            raise ValueError("choices must not repeat a letter")
        return v

    @field_validator("strategies")
    @classmethod
    def _unique(cls, v: tuple[Strategy, ...]) -> tuple[Strategy, ...]:
        if len(set(v)) != len(v):
            raise ValueError("strategies must not repeat")
        return v


# A letter token: "(B)", "[ b ]" or a bare letter, optionally in markdown bold/italics.
_TOKEN = re.compile(
    r"(?:\*\*|__|\*|_)?\s*(?:(?P<open>[(\[])\s*(?P<inner>[A-Za-z])\s*[)\]]|(?P<bare>[A-Za-z]))(?:\*\*|__|\*|_)?"
)
# Content of a box / tag / line that is only a letter: "B", "(b)", "B.", "**B**".
_ONLY = re.compile(r"(?:\*\*)?[(\[]?\s*([A-Za-z])\s*[)\]]?[.:]?(?:\*\*)?")
# ... or a letter with its option text: "B) Paris", "b. Paris".
_LEADING = re.compile(r"[(\[]?([A-Za-z])[)\].:]\s")
# CJK ideographs, kana and Hangul, which Chinese, Japanese and Korean write a letter against ("答案是B",
# "选B", "答えはBです", "정답은 B입니다"): word characters to ``\b`` and ``str.isalnum``, so such a letter
# was read as the start of a word, not an answer
_CJK = CJK_CLASS + "\uac00-\ud7af"  # and Hangul syllables (Korean writes a letter against them too)
_CJK_CHAR = re.compile(f"[{_CJK}]")
# "the option word" before a letter: English, or Chinese 选项 / 選項 (no space before the letter)
_OPTION_NEXT = r"(?:(?:option|choice)\s++|(?:选项|選項)\s*+)?"
# Possessive quantifiers (``*+``) keep these linear on long runs of whitespace.
_ANSWER_IS = re.compile(
    r"(?:\b(?:answer|option|choice)\s++(?:is|would\s++be|should\s++be|will\s++be|must\s++be|has\s++to\s++be)\b"
    r"(?:\s++(?:therefore|thus|hence|(?:most\s++)?likely|probably|clearly|definitely|indeed)\b)?+"
    # Chinese: 答案是 / 答案为 / 答案应该是 / 答案應為 ("the answer is")
    r"|答案\s*+(?:应该|應該|应|應)?(?:是|为|為))\s*+:?\s*+" + _OPTION_NEXT,
    re.IGNORECASE,
)
_ANSWER_COLON = re.compile(r"(?:\banswer|答案)\s*+(?:\*\*\s*+)?:\s*+" + _OPTION_NEXT, re.IGNORECASE)
_BOX_START = re.compile(r"\\boxed\s*+\{")
# A box's start with its wrappers ("\text{", "{") dropped and LaTeX spaces ("\ ", "~") made spaces ...
_BOX_WRAPPERS = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mathit|mbox)\s*+\{|\{")
_BOX_SPACES = re.compile(r"\\[ ,;:!]|~")
# ... is a letter alone ("B}", "(B)}", "B.}") or one with its option text ("B. Paris", "(B) 42").
_BOX_LETTER = re.compile(r"\s*+[(\[]?\s*+([A-Za-z])\s*+(?:[)\]][.:]?|[.:])?(?:\s*+\}|(?<=[)\].:])\s)")
_BOX_WINDOW = 96  # characters of a box read: enough for wrappers and a letter; bounds the work per box
# What wraps a letter in a short tag or reference ("$B$", "\\text{B}", "`B`", "Option B"), dropped to read it.
_WRAPPERS = re.compile(
    r"\$\$?|\\[()\[\]]|\\(?:text|textbf|textit|textrm|mathrm|mathbf|mathit|mbox)\s*\{|[{}\"'`“”‘’«»]"
)
_OPTION_WORD = re.compile(r"((?:\*\*)?)\s*(?:option|choice)\s+", re.IGNORECASE)
_LINE_BRACKETED = re.compile(r"(?:\*\*)?[(\[]\s*([A-Za-z])\s*[)\]](?:\*\*)?[.:]?")
_LINE_PUNCT = re.compile(r"(?:\*\*)?([A-Za-z])[.):](?:\*\*)?")
_LINE_BARE = re.compile(r"(?:\*\*)?([A-Z])(?:\*\*)?")
_STANDALONE = re.compile(rf"(?<![^\W{_CJK}])([A-Z])(?![^\W{_CJK}])(?!['’]\w)")  # CJK beside it: standalone
# "I think": the pronoun I before a verb ("The answer is I because ..." is option I)
_PRONOUN_NEXT = re.compile(
    r"(?:[ \t]++(?:am|was|think|thought|believe|guess|hope|feel|would|will|can|could|should|must|might|"
    r"need|have|had|do|did|don['’]t|choose|chose|select|pick|go|went|see|know|agree|suspect|conclude|"
    r"double|also|just|really|now|still)|['’](?:m|d|ll|ve))\b"
)
_OPTION_BEFORE = re.compile(r"(?:option|choice)\s+$", re.IGNORECASE)
_HARD_STOP = re.compile(r"[ \t]*(?:[.,;:!?)\]。\r\n]|$)")
# Before the letter in prose: markdown, an "option" word, and math or quote wrappers ("**Option B**",
# "$B$", "\(\mathrm{B}\)", "$\text{(B)}$", '"B"', "`B`").
_PREFIX = re.compile(
    r"(?:\*\*|__)?\s*+(?:(?:option|choice)\s++)?"
    r"(?P<wrap>(?:(?:\$\$?+|\\[(\[]|\\(?:text|textbf|textit|texttt|mathrm|mathbf|mathit)\s*+\{|\{|[\"'`“‘«])\s*+)++)?",
    re.IGNORECASE,
)
# ... and what must close a wrapped letter ("$B+C$" is an expression, not the letter B).
_WRAP_CLOSE = re.compile(r"\s*+(?:\$|\\[)\]]|\}|[\"'`”’»])")
_OPTION_TEXT = re.compile(r"[.:)](?:\s|\\ |~)")  # ... or its option text follows: "$\text{B. Paris}$"
# Several options named as the answer: "A, C", "A and C", "(A) or (C)", "A/C".
_LIST_SEP = re.compile(  # ... and in Chinese, "A和C", "A或C"
    r"[ \t]*+(?:[,;/&、，][ \t]*+(?:(?:and|or)\b[ \t]*+)?|(?:and|or)\b[ \t]*+|[和或及与與][ \t]*+)",
    re.IGNORECASE,
)
_LIST_END = re.compile(r"[ \t]*+(?:[.!?)\]}$。\r\n]|$)")  # ... ending the sentence, not "A, and C is wrong"
_LIST_ITEM = r"[(\[]?\s*+[A-Za-z](?:\s*+[)\]])?"
_LIST_BODY = rf"{_LIST_ITEM}(?:(?:\s*+[,;/&、，]\s*+(?:(?:and|or)\b\s*+)?|\s++(?:and|or)\s++){_LIST_ITEM})+"
_EITHER = re.compile(r"either\s++", re.IGNORECASE)  # "either A or C": the word that opens a hedge
_LIST_ONLY = re.compile(  # a whole <answer> or box: "A, C", "either A or C"
    rf"(?:\*\*)?\s*+(?:either\s++)?({_LIST_BODY})[.:]?(?:\*\*)?", re.IGNORECASE
)
# A whole line, or the end of the text, that names options: "either A or C.", "(A) or (C)", "A and C?".
# Capitals only, or bracketed letters, as a lone letter line reads them: "a or b" is prose.
_CAPS_ITEM = r"(?:[(\[]\s*+[A-Za-z]\s*+[)\]]|[A-Z])"
_CAPS_BODY = rf"{_CAPS_ITEM}(?:(?:[ \t]*+[,;/&、，][ \t]*+(?:(?:and|or)\b[ \t]*+)?|[ \t]++(?:and|or)[ \t]++){_CAPS_ITEM})+"
_LINE_LIST = re.compile(rf"(?:\*\*)?(?:[Ee]ither[ \t]++)?({_CAPS_BODY})(?:\*\*)?[.!?。]?(?:\*\*)?")
_TAIL_LIST = re.compile(rf"(?<![A-Za-z])({_CAPS_BODY})(?:\*\*)?[ \t]*+[.!?。]?(?:\*\*)?\s*+\Z")
# Between two boxes that list options: "\boxed{A} or \boxed{C}", "$\boxed{A}$, $\boxed{C}$".
_BOX_JOIN = re.compile(r"[\s$]*+(?:[,;/&][\s$]*+(?:(?:and|or)\b[\s$]*+)?|(?:and|or)\b[\s$]*+)", re.IGNORECASE)
_TAIL = 256  # characters at the end of a text searched for a list of options: bounds the search
_LIST_LETTER = re.compile(r"(?<![A-Za-z])[A-Za-z](?![A-Za-z])")  # a list's letters, not its "and" / "or"


def _letter_span(text: str, pos: int, allowed: str) -> tuple[str, int] | None:
    """The answer letter at ``text[pos]`` in prose ("the answer is ...") and where it ends, or None
    (see module docstring)."""
    pre = _PREFIX.match(text, pos)
    m = _TOKEN.match(text, pre.end() if pre is not None else pos)
    if m is None:
        return None
    letter = m.group("inner") or m.group("bare")
    if letter.upper() not in allowed:
        return None
    if pre is not None and pre.group("wrap"):
        closed = _WRAP_CLOSE.match(text, m.end())
        if closed is not None:
            return letter.upper(), closed.end()
        return (letter.upper(), m.end()) if m.group("open") or _OPTION_TEXT.match(text, m.end()) else None
    if m.group("open"):
        return letter.upper(), m.end()
    nxt = text[m.end() : m.end() + 1]
    if (nxt.isalnum() and _CJK_CHAR.match(nxt) is None) or nxt == "_":
        return None  # the start of a word ("Bob", "a prime"); not "B因为" (Chinese: "B because")
    if letter == "I" and _PRONOUN_NEXT.match(text, m.end()):
        return None  # "Answer: I think it is B": the pronoun
    if letter.isupper() or _HARD_STOP.match(text, m.end()):
        return letter.upper(), m.end()
    return None


def _letters_at(text: str, pos: int, allowed: str) -> str | None:
    """The answer at ``text[pos]`` in prose: its letter, or the sorted letters of a list of options that
    ends the sentence ("the answer is A or C.", "the answer is either A or C."), or None."""
    either = _EITHER.match(text, pos)
    if either is not None:
        pos = either.end()
    first = _letter_span(text, pos, allowed)
    if first is None:
        return None
    letters, end = {first[0]}, first[1]
    while (sep := _LIST_SEP.match(text, end)) is not None and (
        more := _letter_span(text, sep.end(), allowed)
    ) is not None:
        letters.add(more[0])
        end = more[1]
    if end == first[1] or _LIST_END.match(text, end) is None:
        return first[0]  # "the answer is B, and C is wrong": one letter, then prose
    return "".join(sorted(letters))


def _list_letters(body: str, allowed: str) -> str | None:
    """The sorted letters of a list of options ("A, C", "(a) or (c)"), None if one is not allowed."""
    letters = {c.upper() for c in _LIST_LETTER.findall(body)}
    return "".join(sorted(letters)) if letters <= set(allowed) else None


def _letter_only(content: str, allowed: str) -> str | None:
    """The letter when ``content`` (a box, a tag) holds just a letter, or a letter with its option text."""
    content = content.strip()
    m: re.Match[str] | None = None
    if len(content) <= 64:  # bounds the work on a long <answer> that cannot be a lone letter anyway
        flat = _OPTION_WORD.sub(r"\1", _WRAPPERS.sub("", content).strip(), count=1)
        m = _ONLY.fullmatch(flat.strip()) or _LEADING.match(flat)
        several = _LIST_ONLY.fullmatch(flat.strip()) if m is None else None
        if several is not None:
            return _list_letters(several.group(1), allowed)
    m = m or _LEADING.match(content)
    if m is None or m.group(1).upper() not in allowed:
        return None
    return m.group(1).upper()


def _last(candidates: list[str | None]) -> str | None:
    return next((c for c in reversed(candidates) if c is not None), None)


def _box_body(start: str) -> str | None:
    """What a box holds, up to the brace that closes it (None if it does not close in ``start``)."""
    depth = 1
    for i, c in enumerate(start):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return start[:i]
    return None


def _box_letter(start: str, allowed: str) -> str | None:
    body = _box_body(start)
    if body is not None:
        # a list of options, wrapped or spliced with text ("\boxed{A \text{ or } C}"): the box without
        # its wrappers and braces
        listed = _BOX_SPACES.sub(" ", _BOX_WRAPPERS.sub("", body)).replace("}", "").strip()
        several = _LIST_ONLY.fullmatch(listed)
        if several is not None:
            return _list_letters(several.group(1), allowed)
    flat = _BOX_SPACES.sub(" ", _BOX_WRAPPERS.sub("", start))
    m = _BOX_LETTER.match(flat)
    return m.group(1).upper() if m is not None and m.group(1).upper() in allowed else None


def _boxed(text: str, allowed: str) -> str | None:
    """The last box's letter. A box is read up to the next box's start, so that each character is read
    once: a fixed window alone read ``\\boxed{`` repeated (a degenerate rollout) 14 times over."""
    boxes = [(m.start(), m.end()) for m in _BOX_START.finditer(text)]
    following = len(text)
    for k in range(len(boxes) - 1, -1, -1):
        start, end = boxes[k]
        content = text[end : min(end + _BOX_WINDOW, following)]
        following = start
        if content and (letter := _box_letter(content, allowed)) is not None:
            return _joined_boxes(text, boxes[: k + 1], letter, allowed)
    return None


def _joined_boxes(text: str, boxes: list[tuple[int, int]], letter: str, allowed: str) -> str:
    """``letter``, the last box's, with the letters of the boxes joined to it as a list of options
    ("\boxed{A} or \boxed{C}", "$\boxed{A}$, $\boxed{C}$"): one hedge, not the answer C."""
    letters = set(letter)
    for (_, prev_end), (start, _) in zip(reversed(boxes[:-1]), reversed(boxes[1:]), strict=True):
        content = text[prev_end : min(prev_end + _BOX_WINDOW, start)]
        body = _box_body(content)
        if body is None or _BOX_JOIN.fullmatch(text, prev_end + len(body) + 1, start) is None:
            break
        prev = _box_letter(content, allowed)
        if prev is None:
            break
        letters.update(prev)
    return "".join(sorted(letters))


def _answer_is(text: str, allowed: str) -> str | None:
    return _last([_letters_at(text, m.end(), allowed) for m in _ANSWER_IS.finditer(text)])


def _answer_colon(text: str, allowed: str) -> str | None:
    return _last([_letters_at(text, m.end(), allowed) for m in _ANSWER_COLON.finditer(text)])


def _answer_tag(text: str, allowed: str) -> str | None:
    found: list[str | None] = []
    start = text.find("<answer>")
    while start != -1:
        close = text.find("</answer>", start + 8)
        if close == -1:
            break
        found.append(_letter_only(text[start + 8 : close], allowed))
        start = text.find("<answer>", close + 9)
    return _last(found)


def _line(text: str, allowed: str) -> str | None:
    """The last line that is only a letter; or the last line of the text, if it only names several
    options ("either A or C", "(A) or (C)"): a conclusion that hedges. A list on an earlier line is
    where the model narrowed the options down, before the line that picks one, or the prose that does."""
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if lines and (several := _LINE_LIST.fullmatch(lines[-1].strip())) is not None:
        letters = _list_letters(several.group(1), allowed)
        if letters is not None:
            return letters
    for raw in reversed(lines):
        line = raw.strip()
        m = _LINE_BRACKETED.fullmatch(line) or _LINE_PUNCT.fullmatch(line) or _LINE_BARE.fullmatch(line)
        if m is not None and m.group(1).upper() in allowed:
            return m.group(1).upper()
    return None


def _pronoun(text: str, m: re.Match[str]) -> bool:
    """ "I think", "I hope": the pronoun, not option I (unless after "option" / "choice")."""
    return (
        m.group(1) == "I"
        and _PRONOUN_NEXT.match(text, m.end()) is not None
        and _OPTION_BEFORE.search(text[max(0, m.start() - 8) : m.start()]) is None
    )


# A letter ruled out, not picked: "not B", "isn't (C)", "except option A", "rather than D".
_NEGATION_BEFORE = re.compile(
    r"\b(?:not|isn['’]?t|never|except|excluding|rather\s+than|instead\s+of)\s+"
    r"(?:(?:option|choice|answer)\s+)?[(\[*\"'“‘]*$",
    re.IGNORECASE,
)


def _negated(text: str, m: re.Match[str]) -> bool:
    return _NEGATION_BEFORE.search(text[max(0, m.start() - 32) : m.start()]) is not None


def _last_letter(text: str, allowed: str) -> str | None:
    """The last allowed capital letter; the letters of a list of options if the text ends with one ("It
    could be A or C."): its last letter alone would reward the hedge."""
    tail = _TAIL_LIST.search(text, max(0, len(text) - _TAIL))
    if tail is not None and (letters := _list_letters(tail.group(1), allowed)) is not None:
        return letters
    return _last(
        [
            m.group(1) if m.group(1) in allowed and not _pronoun(text, m) and not _negated(text, m) else None
            for m in _STANDALONE.finditer(text)
        ]
    )


# A prose answer taken back after it: "Answer: B ... Wait, actually it's C.", "Hmm, no, make that D.",
# "On second thought, it should be A.", "等等，应该是C。". The letter must end its sentence: "Actually, C is
# wrong" is prose about C, "No, C or D cannot be" a list.
_REVISION = re.compile(
    r"(?:\b(?:wait|actually|hmm+|no|oops|sorry|correction|scratch\s++that|on\s++second\s++thought)\b"
    r"|等等|等一下|不对|其实|更正)"
    r"(?:[ \t]*+[,.!:;，。！：；]?[ \t\r\n]*+(?:wait|actually|no|hmm+|I\s++mean|等等|不对|其实)\b)*+"
    r"[ \t]*+[,.!:;，。！：；]?\s*+"
    r"(?:(?:it['’]s|it\s++is|it\s++should\s++be|it\s++must\s++be|make\s++(?:that|it)|I\s++mean|rather"
    r"|应该是|應該是|应是|是|选)\s*+)?",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[ \t]*+(?:[.!。！\r\n]|$)")
_PROSE: frozenset[Strategy] = frozenset({"answer_is", "answer_colon", "line"})


def _revision(text: str, letter: str, strategies: Sequence[Strategy], allowed: str) -> str | None:
    """The letter of a revision after a prose answer ``letter`` ("Answer: B ... Wait, actually it's C."),
    or None. The last revision counts, and only if no explicit answer (a box, "the answer is", a tag, a
    letter line) follows it: that is the answer then, and the strategies have read it."""
    last: tuple[str, int] | None = None
    for m in _REVISION.finditer(text):
        span = _letter_span(text, m.end(), allowed)
        if span is not None and _SENTENCE_END.match(text, span[1]) is not None:
            last = span
    if last is None or last[0] == letter:
        return None
    tail = text[last[1] :]
    if any(_STRATEGIES[s](tail, allowed) is not None for s in strategies if s != "last_letter"):
        return None
    return last[0]


_STRATEGIES: dict[Strategy, Callable[[str, str], str | None]] = {
    "boxed": _boxed,
    "answer_is": _answer_is,
    "answer_colon": _answer_colon,
    "answer_tag": _answer_tag,
    "line": _line,
    "last_letter": _last_letter,
}


def extract_choice(
    text: str, choices: str, strategies: Sequence[Strategy]
) -> tuple[str, Strategy | Literal["revision"]] | None:
    """(letter, strategy) of the first strategy that finds an allowed letter, or None.

    Where the answer names several options ("\\boxed{A, C}", "Answer: A or C.") the letter is their sorted
    letters, "AC". A prose answer the text takes back ("Answer: B ... Wait, actually it's C.") is the
    revision's letter, strategy ``"revision"``."""
    text = fold_forms(text)
    for strategy in strategies:
        letter = _STRATEGIES[strategy](text, choices)
        if letter is not None:
            if strategy in _PROSE and (revised := _revision(text, letter, strategies, choices)) is not None:
                return revised, "revision"
            return letter, strategy
    return None


@register
class MultipleChoiceReward(Reward[MultipleChoiceConfig]):
    name: ClassVar[str] = "multiple_choice"
    # 1.1.1: a letter in math mode or quotes after "answer is" / "Answer:" is read (it fell to the last
    # capital letter anywhere), and so is a box with the option's text, \boxed{B. Paris}, and an
    # <answer> holding $B$ or "Option B"; "the answer must be / is therefore B" is the answer_is form;
    # the pronoun I ("B is right. I think.", "Answer: I think it is B") is not option I
    # 1.1.2: an answer naming several options ("\boxed{A, C}", "Answer: A or C.") scores 0 unless every
    # one is an accepted letter (it scored its last or first letter, which rewarded hedging)
    # 1.1.3: "either A or C", a box spliced with text (\boxed{A \text{ or } C}) or boxes joined by "or",
    # a last line "(A) or (C)" and a text ending "... A or C." are hedges too (they scored the last letter)
    # 1.1.4: a blank reference ("", [""], {"answer": ""}) is missing_reference (it was parse_error)
    # 1.1.5: a letter against CJK text ("答案是B", "选C", "B입니다") is read (it was the start of a word: no
    # answer, or the last capital letter elsewhere); 答案是 / 答案为 / 答案： are answer_is / answer_colon
    # 1.1.6: a reference of invisible characters only ("\u200b", a BOM) is blank: missing_reference (it
    # was parse_error, an unreadable letter); invisible format characters are dropped before reading:
    # "Answer: \u200bB" was no answer_colon letter, and the last capital letter elsewhere scored
    # 1.1.8: a prose answer taken back after it ("Answer: B\n\nWait, actually it's C.") is the revision's
    # letter (it read B)
    version: ClassVar[str] = "1.1.8"
    description: ClassVar[str] = (
        "1 if the option letter extracted from the response (boxed / 'answer is' / 'Answer:' / <answer> / "
        "a lone letter line / last capital letter) equals the reference letter."
    )
    config_model = MultipleChoiceConfig
    reads = ("response", "reference")

    async def score(
        self, items: Sequence[ScoreItem], config: MultipleChoiceConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        out: list[Outcome] = []
        for item in items:
            strings = reference_strings(item.reference)
            # a blank ("", [""], {"answer": ""}) holds no answer: missing, as exact_match, f1 and regex
            # say, not an unreadable letter (parse_error); among letters it is dropped
            # (text.blank: whitespace and invisible characters such as a zero-width space)
            refs = [r for r in strings if not blank(r)] if strings is not None else []
            if not refs:
                said = " (the reference is blank)" if strings is not None else ""
                out.append(
                    Outcome.invalid(
                        Reason.MISSING_REFERENCE, f"multiple_choice needs a reference letter{said}"
                    )
                )
                continue
            keys = {k for k in (_letter_only(fold_forms(r), config.choices) for r in refs) if k is not None}
            if not keys:
                out.append(
                    Outcome.invalid(
                        Reason.PARSE_ERROR,
                        # a reference can be a whole passage: its start says which, its size is no use
                        f"reference {_excerpt(repr(refs))} is not one of the letters {config.choices!r}",
                    )
                )
                continue
            found = extract_choice(answer_text(item.response), config.choices, config.strategies)
            if found is None:
                out.append(Outcome(0.0, Reason.NO_ANSWER, details={"extracted": None, "strategy": None}))
                continue
            letters, strategy = found
            details: dict[str, object] = {
                "extracted": letters,
                "strategy": strategy,
                "reference": sorted(keys),
            }
            if len(letters) > 1:
                details["extracted"] = ",".join(letters)
                if not set(letters) <= keys:
                    details["several"] = (
                        "the answer names several options where one is asked: a hedge scores 0"
                    )
            out.append(Outcome(1.0 if set(letters) <= keys else 0.0, details=details))
        return out


def _excerpt(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"
