"""``multiple_choice``: option-letter extraction strategies, their priority, and scoring."""

from __future__ import annotations

import time
from typing import Any

import pytest

from reward_calls import score_text
from rewardhub.errors import InvalidRequest
from rewardhub.protocol import Reason
from rewardhub.rewards.multiple_choice import DEFAULT_STRATEGIES, MultipleChoiceReward, extract_choice

REWARD = MultipleChoiceReward(runtime=None)  # type: ignore[arg-type]  # text rewards don't use the runtime


@pytest.mark.parametrize(
    ("response", "letter", "strategy"),
    [
        # plain box
        (r"So the result is \boxed{B}.", "B", "boxed"),
        # box with parentheses and lowercase (explicit form: case-insensitive)
        (r"\boxed{(c)}", "C", "boxed"),
        # box with \text{}
        (r"\boxed{\text{D}}", "D", "boxed"),
        # 'answer is (B)'
        ("Therefore, the answer is (B).", "B", "answer_is"),
        # lowercase letter followed by punctuation counts in an explicit form
        ("the correct answer is b.", "B", "answer_is"),
        # a lowercase letter with its option text ('b) Paris') is the letter
        ("The correct answer is b) Paris", "B", "answer_is"),
        ("Answer: c) 42", "C", "answer_colon"),
        # ... and so is one before an ideographic full stop
        ("the answer is d。", "D", "answer_is"),
        # markdown bold
        ("The answer is **C** because it is blue.", "C", "answer_is"),
        # a letter in math mode, \text{} or quotes after 'answer is' / 'Answer:' is that letter, not a
        # later capital picked by the last-letter fallback
        ("The answer is $B$. Option A is a distractor.", "B", "answer_is"),
        (r"Answer: \(\mathrm{B}\). A is wrong.", "B", "answer_colon"),
        (r"The answer is $\textbf{(B)}$ 42, not A.", "B", "answer_is"),
        ('The answer is "B" because A is wrong.', "B", "answer_is"),
        ("The answer is `b`. A is wrong.", "B", "answer_is"),
        ("The correct answer is **Option B**. A is wrong.", "B", "answer_is"),
        # ... with its option text inside the wrapper too
        (r"The answer is $\text{(B) Paris}$, not A.", "B", "answer_is"),
        ('The answer is "B. Paris", not A.', "B", "answer_is"),
        # ... but a wrapped expression is not a letter
        ("The answer is $B+C$, so D", "D", "last_letter"),
        # 'option is' variant
        ("The best option is A", "A", "answer_is"),
        # the last 'answer is' wins (the model corrected itself)
        ("The answer is B. Wait, actually the answer is D.", "D", "answer_is"),
        # a box with the option's text, or its letter wrapped inside, is that letter
        (r"\boxed{B. Paris}, not A", "B", "boxed"),
        (r"\boxed{\text{(B) Paris}}, not A", "B", "boxed"),
        (r"$\boxed{(\text{B})}$, not A", "B", "boxed"),
        (r"\boxed{{B}}, not A", "B", "boxed"),
        (r"\boxed{\textbf{(B)}\ 42}, not A", "B", "boxed"),
        # ... but a box holding an expression is not a letter
        (r"\boxed{A \cup B}, so C", "C", "last_letter"),
        # 'Answer: D'
        ("Some reasoning.\nAnswer: D", "D", "answer_colon"),
        # bold 'Final Answer:' with a bracketed lowercase letter
        ("**Final Answer:** (a)", "A", "answer_colon"),
        # answer tag with the letter only
        ("<think>hmm</think><answer>B</answer>", "B", "answer_tag"),
        # answer tag with the letter and its option text
        ("<answer>c) Paris</answer>", "C", "answer_tag"),
        # ... or with the letter in math mode, \text{}, backticks or after an option word
        ("<answer>$B$</answer> A is wrong", "B", "answer_tag"),
        (r"<answer>\text{B}</answer> A is wrong", "B", "answer_tag"),
        ("<answer>`b`</answer> A is wrong", "B", "answer_tag"),
        ("<answer>**Option B**</answer> A is wrong", "B", "answer_tag"),
        # a line that is only '(B)'
        ("Let me think.\n(B)\n", "B", "line"),
        # a line that is only 'C.'
        ("Reasoning goes here\nC.", "C", "line"),
        # a line that is only a capital letter
        ("Reasoning goes here\n  D  \n", "D", "line"),
        # fallback: the last standalone capital allowed letter
        ("It is between A and C, and C fits best", "C", "last_letter"),
        # priority: a box beats 'answer is' and a later letter
        (r"A is wrong. \boxed{B}. The answer is C", "B", "boxed"),
        # priority: 'answer is' beats 'Answer:' even when that comes later
        ("the answer is A\nAnswer: B", "A", "answer_is"),
    ],
)
def test_extraction_table(response: str, letter: str, strategy: str) -> None:
    assert extract_choice(response, "ABCD", DEFAULT_STRATEGIES) == (letter, strategy)


@pytest.mark.parametrize(
    "response",
    [
        # 'a' here is an article, not option A
        "the answer is a prime number",
        # a lone lowercase letter in prose is not an answer
        "i think a is right",
        # 'Bob' starts with B but is a word
        "The answer is Bob",
        # E is not an allowed letter (choices ABCD), also not as a fallback
        "The answer is E",
        # no letter at all
        "I don't know.",
        # a bare lowercase line is not taken
        "hmm\nb\n",
    ],
)
def test_no_extraction(response: str) -> None:
    assert extract_choice(response, "ABCD", DEFAULT_STRATEGIES) is None


def test_more_choices_allow_more_letters() -> None:
    # MMLU-Pro has ten options
    assert extract_choice("The answer is J", "ABCDEFGHIJ", DEFAULT_STRATEGIES) == ("J", "answer_is")


@pytest.mark.parametrize(
    ("response", "letter"),
    [
        # the pronoun I is not option I in the last-letter fallback ...
        ("Therefore, B is the correct answer. I think.", "B"),
        ("Hence, option B is correct. I double-checked it.", "B"),
        # ... but option I still is
        ("B looks close, but I is correct", "I"),
        ("B looks close; it must be (I)", "I"),
        ("B looks close, but option I fits", "I"),
    ],
)
def test_last_letter_skips_the_pronoun_i(response: str, letter: str) -> None:
    assert extract_choice(response, "ABCDEFGHIJ", DEFAULT_STRATEGIES) == (letter, "last_letter")


@pytest.mark.parametrize(
    ("response", "found"),
    [
        # 'Answer: I think ...' is the pronoun, not option I: the letter comes from further on
        ("Answer: I think it's B.", ("B", "last_letter")),
        ("Answer: I'm fairly sure it is B", ("B", "last_letter")),
        # ... while option I before a word that is not a verb of the pronoun is option I
        ("The answer is I because the others fail.", ("I", "answer_is")),
        ("Answer: I", ("I", "answer_colon")),
    ],
)
def test_explicit_forms_skip_the_pronoun_i(response: str, found: tuple[str, str]) -> None:
    assert extract_choice(response, "ABCDEFGHIJ", DEFAULT_STRATEGIES) == found


@pytest.mark.parametrize(
    "response",
    [
        # 'must be', 'has to be' and an adverb after 'is' are the 'answer is' form: with ten options
        # the last-letter fallback would read the pronoun in the sign-off as option I
        "The answer must be B. I hope this helps!",
        "The answer has to be B. I double-checked.",
        "The answer is therefore B. I hope that helps.",
        "The answer is most likely (b). I am fairly sure.",
    ],
)
def test_answer_is_variants(response: str) -> None:
    assert extract_choice(response, "ABCDEFGHIJ", DEFAULT_STRATEGIES) == ("B", "answer_is")


@pytest.mark.parametrize(
    ("response", "letter", "strategy"),
    [
        # full-width letter in prose (CJK output)
        ("The answer is Ｂ", "B", "answer_is"),
        # full-width letter in a box
        ("\\boxed{Ｃ}", "C", "boxed"),
        # full-width colon and bracket: 'Answer:' is found, not the last-letter fallback
        ("Answer：（Ｄ） Paris. A and B are cities.", "D", "answer_colon"),
    ],
)
def test_full_width_forms(response: str, letter: str, strategy: str) -> None:
    assert extract_choice(response, "ABCD", DEFAULT_STRATEGIES) == (letter, strategy)


async def test_full_width_reference() -> None:
    out = await score_text(REWARD, "The answer is (B).", "Ｂ")
    assert (out.score, out.reason) == (1.0, None)


def test_long_whitespace_is_fast() -> None:
    # no pathological backtracking on long runs of spaces after an anchor
    assert extract_choice("Answer" + " " * 200_000 + "x", "ABCD", DEFAULT_STRATEGIES) is None
    assert extract_choice("answer is" + " " * 200_000 + "z", "ABCD", DEFAULT_STRATEGIES) is None


def test_repeated_box_starts_are_read_once() -> None:
    """A degenerate rollout repeating ``\\boxed{`` (4 MB here): each box was read through a 96-character
    window holding the next 13, 2.2 s of CPU; read up to the next box it takes about 0.27 s. The bound is
    CPU time, 5x that, so a loaded host does not fail it."""
    text = r"\boxed{B} " + r"\boxed{" * (4_000_000 // 7)
    cpu = time.process_time()
    assert extract_choice(text, "ABCD", ["boxed"]) == ("B", "boxed")
    assert time.process_time() - cpu < 1.35


@pytest.mark.parametrize(
    ("response", "reference", "score", "reason"),
    [
        # correct letter
        ("The answer is (B).", "B", 1.0, None),
        # wrong letter: a valid 0 without a reason
        ("The answer is (C).", "B", 0.0, None),
        # {"answer": ...} reference, lowercase and bracketed
        ("Answer: B", {"answer": "(b)"}, 1.0, None),
        # several acceptable letters
        ("Answer: C", ["B", "C"], 1.0, None),
        # nothing extractable: valid 0, no_answer
        ("I am not sure.", "B", 0.0, Reason.NO_ANSWER),
    ],
)
async def test_scoring(response: str, reference: Any, score: float, reason: Reason | None) -> None:
    out = await score_text(REWARD, response, reference)
    assert (out.score, out.reason) == (score, reason)


@pytest.mark.parametrize(
    ("response", "score", "reason"),
    [
        # a draft answer in the reasoning is not the answer: the lone line after </think> is
        ("<think>The answer is (A). Hmm, wait, A ignores the units.</think>\nB", 1.0, None),
        # the draft is right, the answer after </think> is wrong: the answer counts
        ("<think>Answer: B</think>\nSo I pick (C).\nC", 0.0, None),
        # the prompt opened <think>: only its closing tag is in the response
        ("The answer is A? No, the units are off.</think> B", 1.0, None),
        # cut off inside an unclosed reasoning block that follows the answer text: the draft is not read
        ("The answer is B.\n<think>Actually the answer is C", 1.0, None),
        # cut off inside the reasoning: there is no answer
        ("<think>The answer is (B), let me double-check", 0.0, Reason.NO_ANSWER),
    ],
)
async def test_reasoning_is_not_the_answer(response: str, score: float, reason: Reason | None) -> None:
    out = await score_text(REWARD, response, "B")
    assert (out.score, out.reason) == (score, reason)


async def test_details_name_letter_and_strategy() -> None:
    out = await score_text(REWARD, r"\boxed{A}", "A")
    assert out.details == {"extracted": "A", "strategy": "boxed", "reference": ["A"]}


async def test_custom_choices_and_strategies() -> None:
    # choices given in lowercase; only the box strategy is enabled, so the prose 'answer is' is ignored
    out = await score_text(
        REWARD, r"the answer is E but \boxed{F}", "F", choices="abcdef", strategies=["boxed"]
    )
    assert (out.score, out.details["strategy"]) == (1.0, "boxed")
    out = await score_text(REWARD, "the answer is E", "E", choices="abcdef", strategies=["boxed"])
    assert (out.score, out.reason) == (0.0, Reason.NO_ANSWER)


@pytest.mark.parametrize(
    ("reference", "reason"),
    [
        (None, Reason.MISSING_REFERENCE),  # no reference
        ({"key": "B"}, Reason.MISSING_REFERENCE),  # an object without answer/answers
        # a blank reference holds no answer: missing, as exact_match, f1 and regex say (it was parse_error)
        ("", Reason.MISSING_REFERENCE),
        (" \n", Reason.MISSING_REFERENCE),
        ([""], Reason.MISSING_REFERENCE),
        ({"answer": ""}, Reason.MISSING_REFERENCE),
        ({"answers": ["", " "]}, Reason.MISSING_REFERENCE),
        # ... and so is one of invisible characters only (text.blank, as the other rewards read it; a
        # zero-width space or a BOM was an unreadable letter, parse_error)
        ("\u200b", Reason.MISSING_REFERENCE),
        (["\ufeff", " "], Reason.MISSING_REFERENCE),
        (["Paris", ""], Reason.PARSE_ERROR),  # a blank dropped, the rest still names no letter
        ("E", Reason.PARSE_ERROR),  # not one of the allowed letters
        ("Paris", Reason.PARSE_ERROR),  # not a letter
    ],
)
async def test_bad_reference_is_invalid(reference: Any, reason: Reason) -> None:
    out = await score_text(REWARD, "Answer: B", reference)
    assert (out.score, out.reason) == (None, reason)


async def test_a_long_bad_reference_is_not_repeated_in_the_error() -> None:
    """The error quoted the whole reference: a passage given by mistake came back in every item's error."""
    out = await score_text(REWARD, "Answer: B", "Paris " * 20_000)
    message = out.details["message"]
    assert out.reason == Reason.PARSE_ERROR and len(message) < 300 and "120,004 characters" in message


@pytest.mark.parametrize(
    "config",
    [
        {"choices": "A"},  # fewer than two letters
        {"choices": "AB1"},  # not a letter
        {"choices": "AAB"},  # repeated letter
        {"strategies": []},  # no strategy
        {"strategies": ["guess"]},  # unknown strategy
        {"strategies": ["boxed", "boxed"]},  # repeated strategy
        {"letters": "ABCD"},  # unknown key
    ],
)
def test_bad_config_is_rejected(config: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest):
        REWARD.parse_config(config)


@pytest.mark.parametrize(
    "response",
    [
        r"\boxed{A, C}",
        r"\boxed{\text{A and C}}",
        "Answer: A and C",
        "The answer is (A) or (C).",
        "Answer: $A$ or $C$",
        "<answer>A/C</answer>",
        "Answer: A, C, and D.",
        # found in review: these scored their last letter, C (the fallback or the box's last letter)
        "either A or C",
        "Answer: either A or C.",
        "The answer is either (A) or (C).",
        "A or C",
        "(A) or (C)",
        "Let me weigh them.\n\nEither A or C.\n",
        "It could be A or C.",
        r"\boxed{A \text{ and } C}",
        r"\boxed{A \text{ or } C}",
        r"\boxed{\text{either A or C}}",
        r"$\boxed{A}$ or $\boxed{C}$",
        "<answer>either A or C</answer>",
    ],
)
async def test_several_options_are_a_hedge(response: str) -> None:
    """A single-answer question answered with several options scores 0 (scored, wrong), whichever of them
    is the key: scoring the first or the last one would reward listing options (a hedge) in RL."""
    out = await score_text(REWARD, response, "C")
    assert (out.score, out.reason) == (0.0, None)
    assert "several" in out.details
    assert out.details["extracted"] in ("A,C", "A,C,D")


async def test_several_options_each_acceptable_score() -> None:
    # each letter named is an acceptable key (a list reference holds alternatives): not a hedge
    out = await score_text(REWARD, r"\boxed{B, C}", ["B", "C"])
    assert (out.score, out.reason) == (1.0, None)
    assert "several" not in out.details


@pytest.mark.parametrize(
    ("response", "letter"),
    [
        # one letter then prose about another: not a list of answers
        ("The answer is B, and C is wrong.", "B"),
        ("The answer is B and I think C is wrong", "B"),
        # a list of options is read only where it is the whole answer: prose falls back as before
        ("It is between A and C, and C fits best", "C"),
        # a letter, then prose naming another option
        ("Answer: A. Option C is wrong because it ignores the units.", "A"),
        # options narrowed down, then one picked: by an answer form, a lone letter line, or prose
        ("A or C? The answer is C", "C"),
        ("A or C?\nC", "C"),
        ("Narrowed to A or C.\nC fits the units best.", "C"),
        # an option text holding the word "or", after the letter
        ("Answer: B) Black or white", "B"),
        (r"\boxed{B. Black or white}", "B"),
        ("<answer>B) Black or white</answer>", "B"),
        # a box corrected by a later one is not joined to it
        (r"\boxed{A}. Wait, no: \boxed{C}", "C"),
    ],
)
def test_one_letter_then_prose_is_not_a_list(response: str, letter: str) -> None:
    found = extract_choice(response, "ABCD", DEFAULT_STRATEGIES)
    assert found is not None and found[0] == letter


@pytest.mark.parametrize(
    "response",
    [
        "Answer: \u200bB. (C is wrong, D too)",
        "<answer>\u200bB</answer> C",
        "The answer is \u2060(B)\u200d, not C.",
    ],
)
async def test_invisible_characters_do_not_hide_the_letter(response: str) -> None:
    """A zero-width space or joiner, or a word joiner, beside the letter (tokenizer artefacts) made the
    explicit answer unreadable, and the last capital letter elsewhere scored (D, C): the text is read
    without its invisible format characters, as exact_match and f1 read theirs."""
    out = await score_text(REWARD, response, "B")
    assert (out.score, out.details["extracted"]) == (1.0, "B"), out


@pytest.mark.parametrize(
    ("response", "found"),
    [
        # a letter ruled out is no pick: "The answer is not B." was extracted as B by the fallback, and
        # a response that only excludes the key scored 1
        ("The answer is not B.", None),
        ("It isn't C, I'm sure of that.", None),
        ("Certainly not option (D).", None),
        ("Anything except A.", None),
        # the pick beside a ruled-out letter is still read
        ("It is not B; it is C", ("C", "last_letter")),
        ("Not A, so C", ("C", "last_letter")),
        ("C, not B", ("C", "last_letter")),
        # "not" before another word is no negation of the letter
        ("Not sure, but D", ("D", "last_letter")),
    ],
)
def test_a_negated_letter_is_no_pick(response: str, found: tuple[str, str] | None) -> None:
    assert extract_choice(response, "ABCD", DEFAULT_STRATEGIES) == found


@pytest.mark.parametrize(
    ("response", "found"),
    [
        # a prose answer taken back after it: the model's last word is its answer
        ("Answer: B\n\nWait, actually it's C.", ("C", "revision")),
        ("The answer is B. Hmm, no, make that D.", ("D", "revision")),
        ("B\n\nWait, actually, (C).", ("C", "revision")),
        ("Answer: B. On second thought, it should be A.", ("A", "revision")),
        ("答案是B。等等，应该是C。", ("C", "revision")),
        # ... not a revision: the same letter, a letter in prose, or a later explicit answer
        ("Answer: B\n\nWait, actually it's B.", ("B", "answer_colon")),
        ("Answer: B\n\nActually, C is wrong because it ignores friction.", ("B", "answer_colon")),
        ("Answer: B. No, C or D cannot be right.", ("B", "answer_colon")),
        ("The answer is A. Wait, actually it's C.\nAnswer: B", ("A", "answer_is")),
        # ... and a box or an <answer> tag is a declared answer: prose after it does not change it
        ("\\boxed{B}\n\nWait, actually it's C.", ("B", "boxed")),
        ("<answer>B</answer> Wait, actually it's C.", ("B", "answer_tag")),
    ],
)
def test_revision_after_the_answer(response: str, found: tuple[str, str]) -> None:
    assert extract_choice(response, "ABCD", DEFAULT_STRATEGIES) == found
