"""Reading a judge's verdict: last decision wins; logprob expectation; missing-label bound; fallback."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

from rewardhub.judging.decision import DecisionError, Scale, last_of, read_decision, read_token_decision
from rewardhub.models.base import Completion, TokenLogprob
from rewardhub.models.openai_backend import parse_chat_completion

SCORE = re.compile(r"score\s*:\s*(\d+)", re.IGNORECASE)
YESNO = re.compile(r"final decision\s*:\s*(yes|no)\b", re.IGNORECASE)


def find(rx: re.Pattern[str]):  # type: ignore[no-untyped-def]
    return lambda text: last_of(rx, text)


def tokens(*pieces: tuple[str, dict[str, float] | None]) -> tuple[TokenLogprob, ...]:
    out = []
    for tok, top in pieces:
        alts = tuple((k, math.log(p)) for k, p in (top or {tok: 0.99}).items())
        out.append(TokenLogprob(tok, dict(alts).get(tok, math.log(0.99)), alts))
    return tuple(out)


def test_parse_takes_the_last_decision() -> None:
    c = Completion("Score: 2 ... no wait. Score: 4")
    d = read_decision(c, find(SCORE), Scale.scores(1, 5), "parse")
    assert d.value == 0.75 and d.label == "4" and d.method == "parse"
    with pytest.raises(DecisionError):
        read_decision(Completion("Score: 9"), find(SCORE), Scale.scores(1, 5), "parse")
    with pytest.raises(DecisionError):
        read_decision(Completion("no verdict"), find(SCORE), Scale.scores(1, 5), "parse")


def test_logprob_expectation_over_valid_labels() -> None:
    toks = tokens(("Score", None), (":", None), (" 4", {" 4": 0.5, " 5": 0.3, " great": 0.2}))
    d = read_decision(Completion("Score: 4", toks), find(SCORE), Scale.scores(1, 5), "logprobs")
    # renormalised over {4, 5}: 0.625·4 + 0.375·5 = 4.375 -> (4.375 - 1) / 4
    assert d.method == "logprobs" and d.value == pytest.approx(3.375 / 4)


def test_a_decimal_decision_is_not_read_as_its_first_digit_s_expectation() -> None:
    """ "Score: 4.5" starts at the token "4", itself a label: the expectation there (0.9·4 + 0.1·5 = 4.1)
    is not the judge's 4.5. A decision that is no single label is read as written."""
    rx = re.compile(r"score\s*:\s*(\d+(?:\.\d+)?)", re.IGNORECASE)
    toks = tokens(("Score", None), (":", None), (" 4", {" 4": 0.9, " 5": 0.1}), (".", None), ("5", None))
    d = read_decision(Completion("Score: 4.5", toks), find(rx), Scale.scores(1, 5), "logprobs")
    assert d.value == pytest.approx(0.875) and d.method == "parse_fallback"


def test_binary_sums_case_variants_and_bounds_a_missing_label() -> None:
    toks = tokens(("Final Decision:", None), (" Yes", {" Yes": 0.6, "Yes": 0.2, " maybe": 0.1}))
    d = read_decision(
        Completion("Final Decision: Yes", toks),
        find(YESNO),
        Scale({"yes": 1.0, "no": 0.0}, complete=("yes", "no")),
        "logprobs",
    )
    # P(yes) = 0.8; "no" is missing: bounded by the smallest top-k probability, 0.1
    assert d.value == pytest.approx(0.8 / 0.9)


def test_no_label_in_top_k_falls_back_to_parse() -> None:
    toks = tokens(("Final Decision:", None), (" Yes", {" Yes": 0.0001, " Ja": 0.9}))
    toks = (toks[0], TokenLogprob(" Yes", math.log(0.0001), ((" Ja", math.log(0.9)),)))
    d = read_decision(
        Completion("Final Decision: Yes", toks), find(YESNO), Scale({"yes": 1.0, "no": 0.0}), "logprobs"
    )
    # the chosen token is always counted, so this is still logprobs-based: P(yes) = 1 among {yes}
    assert d.value == 1.0
    toks2 = (TokenLogprob("Final Decision: Yes", -0.1, (("x", -0.1),)),)  # the label is not its own token
    d2 = read_decision(
        Completion("Final Decision: Yes", toks2), find(YESNO), Scale({"yes": 1.0, "no": 0.0}), "logprobs"
    )
    assert d2.method == "parse_fallback" and d2.value == 1.0


def test_logprobs_that_underflow_fall_back_to_the_label() -> None:
    """vLLM writes a -inf logprob as -9999.0: exp() underflows to 0 for every label, and dividing by the
    total raised ZeroDivisionError, which failed every item of the request."""
    toks = (TokenLogprob("Final Decision: ", -0.1, ()), TokenLogprob("Yes", -9999.0, (("Yes", -9999.0),)))
    d = read_decision(
        Completion("Final Decision: Yes", toks), find(YESNO), Scale({"yes": 1.0, "no": 0.0}), "logprobs"
    )
    assert d.method == "parse_fallback" and d.value == 1.0


def test_one_alternative_does_not_halve_a_confident_verdict() -> None:
    """With top_logprobs 1 only the chosen token is listed: the missing label is bounded by the mass the
    top-k leave over (0.01), not by the chosen token's own probability (which read 0.99/0.99 as 0.5)."""
    binary = Scale({"yes": 1.0, "no": 0.0}, complete=("yes", "no"))
    toks = tokens(("Final Decision:", None), (" Yes", {" Yes": 0.99}))
    d = read_decision(Completion("Final Decision: Yes", toks), find(YESNO), binary, "logprobs")
    assert d.method == "logprobs" and d.value == pytest.approx(0.99 / 1.0)
    # every alternative a form of "yes": "no" has at most 1 - 0.99 = 0.01
    toks = tokens(("Final Decision:", None), (" Yes", {" Yes": 0.7, "Yes": 0.2, " yes": 0.09}))
    d = read_decision(Completion("Final Decision: Yes", toks), find(YESNO), binary, "logprobs")
    assert d.value == pytest.approx(0.99 / 1.0)


def test_byte_level_token_strings_are_read_as_text() -> None:
    toks = tokens(("Score", None), (":", None), ("\u01204", {"\u01204": 0.6, "\u01205": 0.4}))
    d = read_decision(Completion("Score: 4", toks), find(SCORE), Scale.scores(1, 5), "logprobs")
    assert d.method == "logprobs" and d.value == pytest.approx((0.6 * 3 + 0.4 * 4) / 4)
    toks = tokens(
        ("\u2581Final", None), ("\u2581Decision", None), (":", None), ("\u2581Yes", {"\u2581Yes": 0.9})
    )
    d = read_decision(
        Completion("Final Decision: Yes", toks),
        find(YESNO),
        Scale({"yes": 1.0, "no": 0.0}, complete=("yes", "no")),
        "logprobs",
    )
    assert d.method == "logprobs" and d.value == pytest.approx(0.9)


def test_logprobs_asked_but_not_sent_is_reported_as_a_fallback() -> None:
    d = read_decision(Completion("Score: 4"), find(SCORE), Scale.scores(1, 5), "logprobs")
    assert d.method == "parse_fallback" and d.value == 0.75


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("<think>Score: 2 looks right.</think>After all, Score: 4", 0.75),
        ("Draft: Score: 2\n</think>\nScore: 5", 1.0),  # the template opened the block: only the close
        ("<think>Score: 2</think>I cannot decide.", None),  # the draft was never the verdict
        ("<think>first</think>Score: 3\n<think>Score: 5, maybe", 0.5),  # an unclosed block after it
    ],
)
def test_a_reasoning_judge_s_draft_is_not_its_verdict(text: str, want: float | None) -> None:
    """A draft "Score: N" inside a judge's <think> block was read as its decision when the answer after
    the block had none: the draft became the score."""
    if want is None:
        with pytest.raises(DecisionError):
            read_decision(Completion(text), find(SCORE), Scale.scores(1, 5), "parse")
        return
    assert read_decision(Completion(text), find(SCORE), Scale.scores(1, 5), "parse").value == want


def test_logprobs_are_read_at_the_decision_after_the_reasoning() -> None:
    toks = tokens(
        ("<think>", None),
        ("Score", None),
        (":", None),
        (" 2", {" 2": 0.9, " 3": 0.1}),
        ("</think>", None),
        ("Score", None),
        (":", None),
        (" 4", {" 4": 0.5, " 5": 0.5}),
    )
    c = Completion("".join(t.token for t in toks), toks)
    d = read_decision(c, find(SCORE), Scale.scores(1, 5), "logprobs")
    assert d.method == "logprobs" and d.value == pytest.approx((4.5 - 1) / 4)
    no_answer = Completion("".join(t.token for t in toks[:5]), toks[:5])
    with pytest.raises(DecisionError):
        read_decision(no_answer, find(SCORE), Scale.scores(1, 5), "logprobs")


def test_a_draft_in_reasoning_returned_apart_is_not_read_from_the_logprobs() -> None:
    """vLLM/SGLang with a reasoning parser put the thinking in reasoning_content (content null when the
    model never closed it), but the logprobs cover every generated token: logprobs mode read the
    reasoning's draft "Score: 2" as the verdict (0.25) where parse mode said parse_error."""
    toks = ["Okay", ",", " it", " looks", " like", " Score", ":", " 2", " but", " let", " me", " check"]
    answer = {
        "choices": [
            {
                "message": {"role": "assistant", "content": None, "reasoning_content": "".join(toks)},
                "finish_reason": "stop",
                "logprobs": {
                    "content": [
                        {"token": t, "logprob": -0.1, "top_logprobs": [{"token": t, "logprob": -0.1}]}
                        for t in toks
                    ]
                },
            }
        ]
    }
    c = parse_chat_completion("judge", answer)
    for scoring in ("parse", "logprobs"):
        with pytest.raises(DecisionError):
            read_decision(c, find(SCORE), Scale.scores(1, 5), scoring)  # type: ignore[arg-type]
    # with a verdict in the content (its tokens after the reasoning's), that one is read at its token
    choice: dict[str, Any] = answer["choices"][0]  # type: ignore[index]
    choice["message"]["content"] = "Score: 4"
    half = math.log(0.5)
    choice["logprobs"]["content"] += [
        {"token": "Score", "logprob": -0.1, "top_logprobs": []},
        {"token": ":", "logprob": -0.1, "top_logprobs": []},
        {
            "token": " 4",
            "logprob": half,
            "top_logprobs": [{"token": " 4", "logprob": half}, {"token": " 5", "logprob": half}],
        },
    ]
    d = read_decision(parse_chat_completion("judge", answer), find(SCORE), Scale.scores(1, 5), "logprobs")
    assert d.method == "logprobs" and d.value == pytest.approx(0.875)


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_a_thinking_returned_apart_is_kept_apart_from_the_answer(field: str) -> None:
    """vLLM's ``reasoning_content`` (``reasoning`` in newer versions and OpenRouter) is the completion's
    ``reasoning``: never the verdict, but part of the whole output (``full_text``), written back inline."""
    message: dict[str, Any] = {"role": "assistant", "content": "Score: 4", field: "\nDraft: Score: 2"}
    c = parse_chat_completion("judge", {"choices": [{"message": message, "finish_reason": "stop"}]})
    assert (c.text, c.reasoning) == ("Score: 4", "\nDraft: Score: 2")
    assert c.full_text == "<think>\nDraft: Score: 2</think>Score: 4"
    assert read_decision(c, find(SCORE), Scale.scores(1, 5), "parse").parsed == 0.75
    message["content"] = None  # the thinking never closed (or the answer is empty)
    c = parse_chat_completion("judge", {"choices": [{"message": message, "finish_reason": "stop"}]})
    assert c.full_text == "<think>\nDraft: Score: 2"
    with pytest.raises(DecisionError):
        read_decision(c, find(SCORE), Scale.scores(1, 5), "parse")
    message[field] = None  # null, as a server without a parser may send it
    assert parse_chat_completion("judge", {"choices": [{"message": message}]}).reasoning is None


YES_NO = Scale({"yes": 1.0, "no": 0.0}, complete=("yes", "no"))


@pytest.mark.parametrize(
    ("token", "top", "scoring", "want", "method"),
    [
        ("\u0120Yes", {"\u0120Yes": 0.6, "\u0120No": 0.4}, "logprobs", 0.6, "logprobs"),  # BPE marks
        (" No", {" No": 0.99}, "logprobs", 0.01, "logprobs"),  # "Yes" missing: bounded, not 0
        ("**", {"**": 0.5, " Yes": 0.3, " No": 0.1}, "logprobs", 0.75, "logprobs"),  # the labels below it
        (" yes", {" yes": 0.6, " no": 0.4}, "parse", 1.0, "parse"),  # the word itself
        (" No", {" No": 0.9}, "parse", 0.0, "parse"),
        ("No", {}, "logprobs", 0.0, "parse_fallback"),  # a server that sent no logprobs
        ("**", {"**": 0.9}, "logprobs", None, None),
        ("Maybe", {"Maybe": 0.9}, "parse", None, None),
    ],
)
def test_a_one_token_verdict(
    token: str, top: dict[str, float], scoring: str, want: float | None, method: str | None
) -> None:
    """ThinkPRM's second call: the token that continues "Is the solution correct?" is the verdict, or
    P(yes) over its top-k alternatives."""
    alts = tuple((t, math.log(p)) for t, p in top.items())
    c = Completion(token, (TokenLogprob(token, alts[0][1], alts),) if alts else None)
    if want is None:
        with pytest.raises(DecisionError):
            read_token_decision(c, YES_NO, scoring)  # type: ignore[arg-type]
        return
    d = read_token_decision(c, YES_NO, scoring)  # type: ignore[arg-type]
    assert (d.value, d.method) == (pytest.approx(want, abs=1e-3), method)
    # a reasoning parser that saw no </think> files the token as thinking
    apart = Completion("", c.tokens, reasoning=token)
    assert read_token_decision(apart, YES_NO, scoring).value == d.value  # type: ignore[arg-type]


def test_content_as_parts_and_null_logprobs_are_read() -> None:
    """Mistral's reasoning models answer ``content`` as a list of parts (thinking, then text), and
    llama.cpp writes ``"logprob": null`` for a probability of 0: both were a malformed completion, so
    every item was a backend_error."""
    answer = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": [{"type": "text", "text": "Score: 1 maybe"}]},
                        {"type": "text", "text": "Score: "},
                        {"type": "text", "text": "4"},
                        {"type": "text", "text": None},  # not the text "None"
                    ],
                },
                "finish_reason": "stop",
                "logprobs": {
                    "content": [
                        {"token": "Score", "logprob": None, "top_logprobs": [{"token": "x", "logprob": None}]}
                    ]
                },
            }
        ]
    }
    c = parse_chat_completion("judge", answer)
    assert c.text == "Score: 4" and c.tokens is not None and c.tokens[0].logprob == -math.inf
    assert read_decision(c, find(SCORE), Scale.scores(1, 5), "parse").value == pytest.approx(0.75)


def test_a_label_split_into_several_tokens_counts_at_its_first_token() -> None:
    """A pairwise "tie" that the tokenizer splits ("t" + "ie") was left out of the expectation: the judge
    said tie with probability 0.9, and the score was the A/B split of the other 0.1 (0.8 here, not about
    0.53). Found in review."""
    rx = re.compile(r"winner\s*:\s*(a|b|tie)\b", re.IGNORECASE)
    pairwise = Scale({"a": 1.0, "b": 0.0, "tie": 0.5}, complete=("a", "b"))
    toks = tokens(("Winner: ", None), (" t", {" t": 0.9, " A": 0.08, " B": 0.02}), ("ie", None))
    d = read_decision(Completion("Winner: tie", toks), find(rx), pairwise, "logprobs")
    assert d.method == "logprobs" and d.probs is not None
    assert d.probs["tie"] == pytest.approx(0.9) and d.value == pytest.approx(0.9 * 0.5 + 0.08)
    # a numeric scale keeps whole labels only: "1" is a label, not the start of "10"
    assert Scale.scores(1, 10).token_label("1") == "1"
    assert Scale({"yes": 1.0, "no": 0.0}).token_label("Y") == "yes"
    assert Scale({"a": 1.0, "b": 0.0, "tie": 0.5}).token_label("x") is None


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Score: 4/10", None),
        ("Score: **4** / 10", None),
        ("Score: 4 out of 10", None),
        ("Score: 2 out of 3", None),
        ("Score: 4/5", 0.75),
        ("Score: 4 out of 5.", 0.75),
        ("Score: 4 (out of 10)", None),  # was 0.75: the denominator in brackets went unseen
        ("Score: 4 (/10)", None),
        ("Score: 4 (out of 5)", 0.75),
        ("Score: 5/5", 1.0),
        ("Score: 4", 0.75),
    ],
)
def test_a_score_out_of_another_maximum_is_not_read_on_this_scale(text: str, want: float | None) -> None:
    """A judge asked for 1-5 that answers "Score: 4/10" meant 4 of 10; read as 4 on 1-5 it was 0.75, a
    good score for a poor answer. A denominator that is not the scale's maximum is no decision on this
    scale (parse_error); one that is ("4/5") reads as before. Found in review."""
    from rewardhub.judging.templates import DECISION_PATTERNS

    rx = re.compile(DECISION_PATTERNS["pointwise"], re.IGNORECASE)
    for scoring in ("parse", "logprobs"):
        c = Completion(text, tokens(*((t, None) for t in re.findall(r"\S+|\s+", text))))
        if want is None:
            with pytest.raises(DecisionError, match="out of"):
                read_decision(c, find(rx), Scale.scores(1, 5), scoring)  # type: ignore[arg-type]
        else:
            assert read_decision(c, find(rx), Scale.scores(1, 5), scoring).parsed == want  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Score: 3,5", 0.625),  # was 0.5: the decimal comma ended the number at 3
        ("**Score:** 4,5 / 5", 0.875),
        ("Score: 3,5/10", None),  # out of another maximum, as "3.5/10" is
        ("Score: 3, because the answer is incomplete", 0.5),  # a comma after the number ends it
        ("Score: 3,5,4", 0.5),  # a list, not a decimal
        ("Score: 6,5", None),  # off the scale, as 6.5 is
    ],
)
def test_a_decimal_comma_is_a_decimal_point(text: str, want: float | None) -> None:
    """A judge that writes a decimal comma ("Score: 3,5", common outside English) was read as 3 (0.5) for
    its 3.5 (0.625); logprobs read it as written too (a decimal is no single-token label)."""
    from rewardhub.judging.templates import DECISION_PATTERNS

    rx = re.compile(DECISION_PATTERNS["pointwise"], re.IGNORECASE)
    for scoring in ("parse", "logprobs"):
        c = Completion(text, tokens(*((t, None) for t in re.findall(r"\d|\S|\s+", text))))
        if want is None:
            with pytest.raises(DecisionError):
                read_decision(c, find(rx), Scale.scores(1, 5), scoring)  # type: ignore[arg-type]
        else:
            d = read_decision(c, find(rx), Scale.scores(1, 5), scoring)  # type: ignore[arg-type]
            assert d.value == pytest.approx(want), (text, scoring, d)


@pytest.mark.parametrize(
    "text",
    [
        "A first look says Score: 4. But the answer is harmful, so Score: -1",
        "Score: 5\n\nOn reflection the response is wrong.\n**Score:** −2",
    ],
)
def test_a_negative_last_score_is_no_decision_not_the_draft_before_it(text: str) -> None:
    """The judge's last decision is off the scale (a parse_error), and its sign is part of it: without
    the sign the last line was no match, and the draft "Score: 4" (0.75) was read as the verdict."""
    from rewardhub.judging.templates import DECISION_PATTERNS

    for key in ("pointwise", "rubric_implicit"):
        rx = re.compile(DECISION_PATTERNS[key], re.IGNORECASE)
        for scoring in ("parse", "logprobs"):
            c = Completion(text, tokens(*((t, None) for t in re.findall(r"\d|\S|\s+", text))))
            with pytest.raises(DecisionError, match="not on the scale"):
                read_decision(c, find(rx), Scale.scores(1, 5), scoring)  # type: ignore[arg-type]
    rx = re.compile(DECISION_PATTERNS["pointwise"], re.IGNORECASE)
    assert read_decision(Completion("Score: 4 - good"), find(rx), Scale.scores(1, 5), "parse").parsed == 0.75


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Score: 3\nIf the answer were complete it would get Score: 10", "3"),
        ("Score: 3. If the proof were complete, it would get Score: 5.", "3"),
        ("Score: 3\nScore: 5 if the units were given.", "3"),
        ("Score: 3. It would have earned Score: 5 with the units.", "3"),
        ("Score: 3. A complete solution would get Score: 5.", "3"),
        ("Score: 3; otherwise Score: 5", "3"),
        # the last decision, as ever, where the later one is no hypothetical
        ("Score: 2 ... on reflection, Score: 4", "4"),
        ("Score: 3\nEven if it were verbose, Score: 4", "4"),
        ("Score: 3. Hmm, if I had to choose, I would say Score: 4", "4"),
        ("Score: 2\nScore: 4 (it would be 5 if the units were given)", "4"),
        # the condition on the line before the decision (was read as 10)
        ("Score: 3\nIf the answer were complete,\nScore: 10", "3"),
        ("Score: 3\nAssuming the units could be inferred:\nScore: 10", "3"),
        # "if" as a word of code is no condition (the final 5 was taken for a hypothetical, and the
        # draft 3 read)
        ("Initial Score: 3.\nThe code handles the if branch well but could be shorter, Score: 5", "5"),
        ("Score: 3. The `if` check could be simpler, Score: 4", "4"),
        ("Score: 3. Its if-else could be one line, Score: 4", "4"),
        # a line of its own before the decision that is no condition
        ("Score: 3\nMy verdict, if I may:\nScore: 5", "5"),
        ("Score: 3\nOn reflection:\nScore: 5", "5"),
        # a judge reasoning in Chinese (the markers were English only: each hypothetical 10 or 5 was read)
        ("Score: 3。如果答案完整，它会得到 Score: 10", "3"),
        ("Score: 3\n假如证明完整，\nScore: 10", "3"),
        ("Score: 3；否则 Score: 5", "3"),
        ("Score: 3。它本可以得到 Score: 5", "3"),
        ("Score: 3\nScore: 5，如果给出了单位的话", "3"),
        # and its decisions that are none
        ("Score: 3。即使答案冗长，Score: 4", "4"),
        ("Score: 3。如果我必须选择，我会说 Score: 4", "4"),
        ("Score: 2。再想一想，Score: 4", "4"),
        # a modal right after the decision, or a decision in a bracketed remark that a modal qualifies
        # (each later score was read)
        ("Score: 4 (Score: 5 would require units)", "4"),
        ("Score: 3. A Score: 5 answer would show the derivation.", "3"),
        ("Score: 3. A **Score: 5** response must show the derivation.", "3"),
        ("Score: 4. Score: 5 would be too generous.", "4"),
        ("Score: 4. Score: 5 would not be fair.", "4"),
        ("Score: 4 (with units it would be Score: 5)", "4"),
        ("Score: 3. Score: 5 only if the units were given.", "3"),
        ("Score: 3. Score: 5 should be given only if the units are shown.", "3"),
        # the judge's own decision with a modal after it, or a remark without a decision in it
        ("Score: 2 ... on reflection Score: 4 would be fair.", "4"),
        ("Score: 2\n**Score: 4** would be my final answer.", "4"),
        ("Score: 2\nScore: 4 should stand even if it is verbose.", "4"),
        ("Score: 2\nScore: 4 - could be more concise", "4"),
        ("Score: 2\nScore: 4 (it could be shorter)", "4"),
        ("Score: 2\nScore: 4, but it would be 5 if the units were given.", "4"),
        ("Score: 2\nOverall (I would give it Score: 4)", "4"),
        # "'d" after a pronoun is "would" (was read as no modal: the contracted twin of a row above read
        # the hypothetical 5, 10 or 4 its spelled-out form does not), also with the typographic apostrophe
        ("Score: 3\nIf the answer were complete it'd get Score: 10", "3"),
        ("Score: 3. If the proof is complete, it'd get Score: 5.", "3"),
        ("Score: 3. If the proof is complete, it’d get Score: 5.", "3"),
        ("Score: 3. It'd have earned Score: 5 with the units.", "3"),
        ("Score: 3. It'd've earned Score: 5 with the units.", "3"),
        ("Score: 3. It would've earned Score: 5 with the units.", "3"),
        ("Score: 3. It could’ve earned Score: 5 with the units.", "3"),
        ("Score: 3. It’d have earned Score: 5 with the units.", "3"),
        ("Score: 3. They'd not have given it Score: 5 without the units.", "3"),
        ("Score: 4 (with units it'd be Score: 5)", "4"),
        ("Score: 4 (with units it’d be Score: 5)", "4"),
        ("Score: 4 (with units that'd be Score: 5)", "4"),
        ("Score: 3 (on reflection, I would say Score: 4)", "3"),
        ("Score: 3 (on reflection, I'd say Score: 4)", "3"),
        ("Score: 3. Hmm, if I had to choose, I'd say Score: 4", "4"),
        ("Score: 3. Hmm, if I had to choose, I’d say Score: 4", "4"),
        ("Score: 2\nScore: 4 (it'd be 5 if the units were given)", "4"),
        ("Score: 2\nScore: 4, but it'd be 5 if the units were given.", "4"),
        ("Score: 2\nOverall (I'd give it Score: 4)", "4"),
        # a hedge of the judge's own is no condition on the answer ("if anything,", "if you ask me", "unless
        # I'm mistaken", as "if I had to choose"): its decision, contracted or not (the "'d" forms read 4
        # before "'d" was "would", then 2 or 3, as the spelled-out forms did)
        ("Score: 3. If anything, I'd go with Score: 4", "4"),
        ("Score: 3. If anything, I would go with Score: 4", "4"),
        ("Score: 3. If anything, it'd be Score: 4", "4"),
        ("Score: 2. If you ask me, I'd say Score: 4", "4"),
        ("Score: 2. If you ask me, I would say Score: 4", "4"),
        ("Score: 3. Unless I'm mistaken, I'd say Score: 4", "4"),
        ("Score: 3. Unless we missed something, it would get Score: 4", "4"),
        # ... but "if anything" that is the condition's subject, or "if you asked me to be strict", is one
        ("Score: 3. If anything were missing, it would get Score: 2", "3"),
        ("Score: 3. If anything is added, it'd get Score: 5", "3"),
        ("Score: 3. If you asked me to be strict, it would be Score: 2", "3"),
        ("Score: 3. Unless the units are given, it'd never get Score: 5", "3"),
        # a modal right after the decision in Chinese: a score the judge talks about (each later score was
        # read), "会" (would), "将会", "可能" (might), "就太" (would then be too), "需要……才" (only with)
        ("Score: 4。Score: 5 会要求给出单位", "4"),
        ("Score: 4。Score: 5会要求给出单位", "4"),
        ("Score: 4。**Score: 5** 将会过于宽松", "4"),
        ("Score: 4。Score: 5 就太宽松了", "4"),
        ("Score: 4。Score: 5 可能太高了", "4"),
        ("Score: 4。Score: 5 需要给出单位才行", "4"),
        ("Score: 4（Score: 5 会要求单位）", "4"),
        ("Score: 3。Score: 5 的答案会给出推导过程", "3"),
        # and the judge's own, affirmed (as "Score: 4 would be fair"), or with no modal
        ("Score: 2。再想一想，Score: 4 是合理的", "4"),
        ("Score: 2。Score: 4 应该是公平的", "4"),
        ("Score: 2\nScore: 4 会是我的最终答案", "4"),
        ("Score: 2。Score: 4 会比较合理", "4"),
        ("Score: 2。Score: 4 可能更合适", "4"),
        ("Score: 2。Score: 4 会是一个公平的分数", "4"),
        ("Score: 2。Score: 4 就是我的最终评分", "4"),
        ("Score: 2。Score: 4 需要说明理由：答案缺少单位", "4"),
    ],
)
def test_a_hypothetical_score_after_the_decision_is_not_the_decision(text: str, want: str) -> None:
    """A judge that scores 3 and then says what a complete answer would get ("... it would get Score:
    10") was read as 10 on a 1-10 scale (and as a parse_error on 1-5): the last match is a score for
    another answer. The decision is the last one that is not hypothetical, in both modes."""
    from rewardhub.judging.templates import DECISION_PATTERNS

    rx = re.compile(DECISION_PATTERNS["pointwise"], re.IGNORECASE)
    for scoring in ("parse", "logprobs"):
        c = Completion(text, tokens(*((t, None) for t in re.findall(r"\d+|\S|\s+", text))))
        d = read_decision(c, find(rx), Scale.scores(1, 10), scoring)  # type: ignore[arg-type]
        assert d.label == want, (text, scoring, d)
    on_five = read_decision(Completion(text), find(rx), Scale.scores(1, 5), "parse")
    assert on_five.label == want


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("pointwise", "If the answer were complete it would get Score: 5"),
        ("pointwise", "Score: 5 would require units."),
        ("pointwise", "The derivation is missing. A Score: 5 answer would show it."),
        ("pointwise", "It would have earned Score: 5 with the units."),
        ("pointwise", "It'd have earned Score: 5 with the units."),
        ("pointwise", "缺少单位。Score: 5 会要求给出单位。"),
        ("reference", "The units are missing. If they're given, it'd be Final Decision: Yes."),
        ("reference", "The units are missing. If they were given, it would be Final Decision: Yes."),
        ("pairwise", "Both are close. Winner: A only if length mattered."),
    ],
)
def test_only_hypothetical_decisions_are_no_decision(key: str, text: str) -> None:
    """A judge that only says what another answer would get ("A Score: 5 answer would show it") decided
    nothing about this one: the last hypothetical decision was read (a 5). It is a DecisionError (the
    item's parse_error), in both scorings."""
    from rewardhub.judging.templates import DECISION_KEYS, DECISION_PATTERNS

    scale = {
        "pairwise": Scale({"a": 1.0, "b": 0.0, "tie": 0.5}, complete=("a", "b")),
        "pointwise": Scale.scores(1, 5),
    }.get(key, Scale({"yes": 1.0, "no": 0.0}, complete=("yes", "no")))
    rx = re.compile(DECISION_PATTERNS[key], re.IGNORECASE)
    for keys in (None, re.compile(DECISION_KEYS[key], re.IGNORECASE)):
        for scoring in ("parse", "logprobs"):
            c = Completion(text, tokens(*((t, None) for t in re.findall(r"\d|\w+|\S|\s+", text))))
            with pytest.raises(DecisionError, match="hypothetical"):
                read_decision(c, find(rx), scale, scoring, keys)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("contracted", "spelled"),
    [
        ("Score: 4 (with units it'd be Score: 5)", "Score: 4 (with units it would be Score: 5)"),
        ("Score: 3. It'd have earned Score: 5.", "Score: 3. It would have earned Score: 5."),
        ("Score: 3. It would've earned Score: 5.", "Score: 3. It would have earned Score: 5."),
        ("Score: 3. It mightn't've earned Score: 5.", "Score: 3. It might not have earned Score: 5."),
        ("Score: 3. We’d’ve given it Score: 5.", "Score: 3. We would have given it Score: 5."),
        (
            "Score: 3\nIf it is complete, she'd give Score: 5",
            "Score: 3\nIf it is complete, she would give Score: 5",
        ),
        ("Score: 3 (on reflection, I'd say Score: 4)", "Score: 3 (on reflection, I would say Score: 4)"),
        (
            "Score: 3. If I had to choose, I'd say Score: 4",
            "Score: 3. If I had to choose, I would say Score: 4",
        ),
        # "'d" before a past participle is "had" (past perfect), and reads as "had" does
        ("Score: 4 (I'd given it Score: 3 at first)", "Score: 4 (I had given it Score: 3 at first)"),
        ("Score: 4 (it'd been Score: 3 before the fix)", "Score: 4 (it had been Score: 3 before the fix)"),
        (
            "Score: 3. If anything I'd underrated it: Score: 4",
            "Score: 3. If anything I had underrated it: Score: 4",
        ),
    ],
)
def test_a_contracted_would_reads_as_its_spelled_out_form(contracted: str, spelled: str) -> None:
    """ "it'd", "I'd", "that'd" were no modal: "Score: 4 (with units it'd be Score: 5)" read 5 where "...
    it would be Score: 5" reads 4. A contraction reads as the words it stands for: "would" (or "had"
    before a past participle)."""
    from rewardhub.judging.templates import DECISION_PATTERNS

    rx = re.compile(DECISION_PATTERNS["pointwise"], re.IGNORECASE)
    want = read_decision(Completion(spelled), find(rx), Scale.scores(1, 5), "parse").label
    assert read_decision(Completion(contracted), find(rx), Scale.scores(1, 5), "parse").label == want


def test_the_logprobs_are_read_at_the_real_decision_not_the_hypothetical_one() -> None:
    text = "Score: 3\nIf the answer were complete it would get Score: 10"
    toks = tokens(
        *((t, None) for t in re.findall(r"\d+|\S|\s+", "Score:")),
        (" 3", {" 3": 0.6, " 4": 0.4}),
        *(
            (t, None)
            for t in re.findall(r"\d+|\S|\s+", "\nIf the answer were complete it would get Score: 10")
        ),
    )
    d = read_decision(Completion(text, toks), find(SCORE), Scale.scores(1, 5), "logprobs")
    # 0.6·3 + 0.4·4 = 3.4 -> (3.4 - 1) / 4
    assert d.method == "logprobs" and d.label == "3" and d.value == pytest.approx(0.6)


@pytest.mark.parametrize(("text", "want"), [("Winner: a tie", 0.5), ("**Winner:** A tie.", 0.5)])
def test_a_tie_written_with_its_article_is_a_tie_not_response_a(text: str, want: float) -> None:
    """ "Winner: a tie" was read as the label "a" (Response A wins, 1.0): the article of "a tie" matched
    the label A. Found in review."""
    from rewardhub.judging.templates import DECISION_PATTERNS

    rx = re.compile(DECISION_PATTERNS["pairwise"], re.IGNORECASE)
    pairwise = Scale({"a": 1.0, "b": 0.0, "tie": 0.5}, complete=("a", "b"))
    d = read_decision(Completion(text), find(rx), pairwise, "parse")
    assert d.label.casefold() == "tie" and d.value == want
    # Response A named so is still A
    assert read_decision(Completion("Winner: A"), find(rx), pairwise, "parse").value == 1.0
    assert read_decision(Completion("Winner: Response A"), find(rx), pairwise, "parse").value == 1.0


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("pairwise", "Winner: A/B"),
        ("pairwise", "Winner: A or B"),
        ("pairwise", "Winner: A and B"),
        ("pairwise", "Winner: Response A or Response B"),
        ("reference", "Final Decision: Yes/No"),
        ("reference", "Final Decision: Yes or No"),
        ("reference", "Final Decision: **Yes** / **No**"),
        ("rubric", "Decision: Yes | No"),
        ("pointwise", "Score: 3-4"),
        ("pointwise", "Score: 3 to 4"),
        ("pointwise", "Score: 3 or 4"),
        ("pointwise", "Score: 4 – 5"),
    ],
)
def test_a_decision_that_names_two_labels_is_no_decision(key: str, text: str) -> None:
    """A judge that copies the format ("Final Decision: Yes/No") or hedges between two labels ("Winner: A
    or B", "Score: 3-4") made no decision; its first label was read (1.0 for "Yes/No", A for "A or B").
    Now a parse_error, as an unreadable judgement is (and retried when sampling). Found in review."""
    from rewardhub.judging.templates import DECISION_PATTERNS

    scale = {
        "pairwise": Scale({"a": 1.0, "b": 0.0, "tie": 0.5}, complete=("a", "b")),
        "pointwise": Scale.scores(1, 5),
    }.get(key, Scale({"yes": 1.0, "no": 0.0}, complete=("yes", "no")))
    rx = re.compile(DECISION_PATTERNS[key], re.IGNORECASE)
    for scoring in ("parse", "logprobs"):
        c = Completion(text, tokens(*((t, None) for t in re.findall(r"\d|\w+|\S|\s+", text))))
        with pytest.raises(DecisionError, match="two"):
            read_decision(c, find(rx), scale, scoring)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("key", "text", "want"),
    [
        ("pointwise", "Score: 4 - good", 0.75),
        ("pointwise", "Score: 4/5", 0.75),
        ("pointwise", "Score: 4 (1-5 scale)", 0.75),
        ("pointwise", "Score: 4 to be fair", 0.75),
        ("pairwise", "Winner: A, B is worse", 1.0),
        ("pairwise", "Winner: A - B misses the units", 1.0),
        ("pairwise", "Winner: B and it is not close", 0.0),
        ("reference", "Final Decision: Yes/yes", 1.0),
        ("reference", "Final Decision: No - the answers differ", 0.0),
        ("reference", "Final Decision: Yes or, in words, the same", 1.0),
    ],
)
def test_one_label_with_words_after_it_is_still_a_decision(key: str, text: str, want: float) -> None:
    from rewardhub.judging.templates import DECISION_PATTERNS

    scale = {
        "pairwise": Scale({"a": 1.0, "b": 0.0, "tie": 0.5}, complete=("a", "b")),
        "pointwise": Scale.scores(1, 5),
    }.get(key, Scale({"yes": 1.0, "no": 0.0}, complete=("yes", "no")))
    rx = re.compile(DECISION_PATTERNS[key], re.IGNORECASE)
    assert read_decision(Completion(text), find(rx), scale, "parse").value == want


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("pointwise", "Score: 4\n\nOn reflection I cannot score this.\nScore: N/A"),
        ("pointwise", "Draft Score: 4. Final Score: unknown"),
        ("pointwise", "Score: 5\n**Score:** [insert score]"),
        ("pairwise", "Winner: A\nHmm, on reflection neither is right.\nWinner: neither"),
        ("pairwise", "Winner: A ... Winner: both"),
        ("reference", "Final Decision: Yes\nWait, I'm not sure.\nFinal Decision: Unsure"),
        ("rubric", "Decision: Yes ... Decision: Partially"),
        (
            "critique",
            "Step 1 \\boxed{correct}\nIs the solution correct? Yes\nHmm.\nIs the solution correct? Unclear",
        ),
    ],
)
def test_an_unreadable_last_decision_is_no_decision_not_the_draft_before_it(key: str, text: str) -> None:
    """The judge's last decision line holds no label of the scale ("Score: N/A", "Winner: neither",
    "Final Decision: Unsure"): it was skipped, and the draft before it was read (0.75, 1.0). The last
    decision is the judge's; unreadable, it is a parse_error, as a negative last score is. Found in
    review."""
    from rewardhub.judging.templates import DECISION_KEYS, DECISION_PATTERNS

    scale = {
        "pairwise": Scale({"a": 1.0, "b": 0.0, "tie": 0.5}, complete=("a", "b")),
        "pointwise": Scale.scores(1, 5),
    }.get(key, Scale({"yes": 1.0, "no": 0.0}, complete=("yes", "no")))
    rx = re.compile(DECISION_PATTERNS[key], re.IGNORECASE)
    keys = re.compile(DECISION_KEYS[key], re.IGNORECASE)
    for scoring in ("parse", "logprobs"):
        c = Completion(text, tokens(*((t, None) for t in re.findall(r"\d|\w+|\S|\s+", text))))
        with pytest.raises(DecisionError, match="last decision"):
            read_decision(c, find(rx), scale, scoring, keys)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("key", "text", "want"),
    [
        # a readable decision after the last one that is hypothetical, or none after it: as before
        ("pointwise", "Score: 3\nIf the answer were complete it would get Score: full marks", "3"),
        ("pointwise", "Score: 2\nOn reflection, Score: 4", "4"),
        ("pointwise", "Score (1-5): 4", "4"),
        ("pairwise", "Winner: B", "B"),
        ("reference", "The answers match.\nFinal Decision: Yes", "Yes"),
    ],
)
def test_a_readable_last_decision_is_read_with_the_keys_checked(key: str, text: str, want: str) -> None:
    from rewardhub.judging.templates import DECISION_KEYS, DECISION_PATTERNS

    scale = {
        "pairwise": Scale({"a": 1.0, "b": 0.0, "tie": 0.5}, complete=("a", "b")),
        "pointwise": Scale.scores(1, 5),
    }.get(key, Scale({"yes": 1.0, "no": 0.0}, complete=("yes", "no")))
    rx = re.compile(DECISION_PATTERNS[key], re.IGNORECASE)
    keys = re.compile(DECISION_KEYS[key], re.IGNORECASE)
    assert read_decision(Completion(text), find(rx), scale, "parse", keys).label == want
