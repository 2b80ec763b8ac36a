"""Step splitting with spans, conventions and aggregation formulas (docs/algorithms.md §1)."""

from __future__ import annotations

import math

import pytest

from rewardhub.prm import CONVENTIONS, aggregate, split_steps
from rewardhub.prm.aggregate import first_error_index, soft_min_rewards
from rewardhub.rewards.patterns import PatternTimeout


def test_split_keeps_spans_into_the_original_text() -> None:
    text = "  Intro line.\n\n\n\nMiddle\nstill middle.\n\nEnd.  "
    steps = split_steps(text)
    assert [s.text for s in steps] == ["Intro line.", "Middle\nstill middle.", "End."]
    assert all(text[s.start : s.end] == s.text for s in steps)


def test_think_block_is_skipped_and_regex_splitter() -> None:
    text = "<think>a\n\nb\n\nc</think>\n\nStep 1: x\nStep 2: y"
    assert [s.text for s in split_steps(text)] == ["Step 1: x\nStep 2: y"]
    assert len(split_steps(text, skip_think=False)) == 4
    steps = split_steps(text, pattern=r"\n(?=Step \d+:)")
    assert [s.text for s in steps] == ["Step 1: x", "Step 2: y"]
    with pytest.raises(PatternTimeout):
        split_steps("x" * 5000 + "y", pattern=r"(x+x+)+z", timeout_s=0.05)


def test_merge_to_max_steps() -> None:
    text = "\n\n".join(f"s{k}" for k in range(10))
    steps = split_steps(text, max_steps=3)
    assert len(steps) == 3 and steps[0].text.startswith("s0") and steps[-1].text.endswith("s9")
    assert all(text[s.start : s.end] == s.text for s in steps)


def test_conventions_strip_injected_tags() -> None:
    q = CONVENTIONS["qwen"].query("Q <extra_0>", ["a<extra_0>", "b"])
    assert q.messages is not None and q.messages[2].content == "a<extra_0>b<extra_0>" and q.steps == 2
    assert "<extra_0>" not in q.messages[1].content
    m = CONVENTIONS["math_shepherd"].query("Q", ["a ки", "b"])
    assert m.text == "Q Step 1: a ки\nStep 2: b ки" and m.label_tokens == ("+", "-")


@pytest.mark.parametrize(("convention", "tag"), [("qwen", "<extra_0>"), ("math_shepherd", "ки")])
def test_a_tag_written_at_a_step_s_edge_leaves_the_model_input_unchanged(convention: str, tag: str) -> None:
    """Removing a tag a response wrote at the start or end of a step left the space next to it: the
    model read "5. <extra_0>" as the step "5. ", an input the step without the tag never gives (steps are
    trimmed), so writing the tag moved the step's score."""
    conv = CONVENTIONS[convention]
    plain = conv.query("Q", ["2+3=5.", "So the answer is 5."])
    text = f"{tag} 2+3=5. {tag}\n\nSo the answer is 5.\n{tag}"
    steps = split_steps(text, blank=conv.blank)
    assert [text[s.start : s.end] for s in steps] == [f"{tag} 2+3=5. {tag}", f"So the answer is 5.\n{tag}"]
    assert conv.query("Q", [s.text for s in steps]) == plain


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("min", 0.2),
        ("prod", 0.9 * 0.2 * 0.8),
        ("last", 0.8),
        ("mean", (0.9 + 0.2 + 0.8) / 3),
        ("first_error", 1 / 3),
    ],
)
def test_aggregation(how: str, expected: float) -> None:
    assert aggregate([0.9, 0.2, 0.8], how, threshold=0.5) == pytest.approx(expected)  # type: ignore[arg-type]


def test_soft_min_is_pure_s_min_form_credit() -> None:
    """PURE (arXiv 2504.15275): r_k = p(+) - p(-) = 2 s_k - 1, w = softmax(-r / T), reward sum w_k r_k."""
    scores, t = [0.9, 0.2, 0.8], 0.1
    r = [2 * s - 1 for s in scores]
    z = [math.exp(-x / t) for x in r]
    expected = sum(x * w / sum(z) for x, w in zip(r, z, strict=True))
    assert aggregate(scores, "soft_min", temperature=t) == pytest.approx(expected, abs=1e-12)
    assert soft_min_rewards(scores, t) == pytest.approx([x * w / sum(z) for x, w in zip(r, z, strict=True)])
    # a smooth min of 2 s - 1: the hard min as T -> 0, the mean as T grows, never outside [-1, 1]
    assert aggregate(scores, "soft_min", temperature=0.001) == pytest.approx(min(r), abs=1e-9)
    assert aggregate(scores, "soft_min", temperature=1e4) == pytest.approx(sum(r) / 3, abs=1e-4)
    assert aggregate([0.0, 1.0], "soft_min", temperature=0.001) == -1.0
    # a temperature this low overflowed a naive exp(-r / T)
    assert aggregate([1.0, 1.0], "soft_min", temperature=1e-3) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="positive"):
        soft_min_rewards(scores, 0.0)


def test_first_error_index() -> None:
    assert first_error_index([0.9, 0.8], 0.5) == -1
    assert aggregate([0.9, 0.8], "first_error") == 1.0
    assert first_error_index([0.1], 0.5) == 0 and aggregate([0.1], "first_error") == 0.0
    assert math.isclose(aggregate([0.6, 0.7, 0.4, 0.1], "first_error"), 0.5)


def test_windows_line_ends_split_like_unix_ones() -> None:
    """A response written with CRLF has no "\\n\\n" in it: it was one step, with one score."""
    text = "a\r\n\r\nb\r\nstill b\r\n\r\nc"
    steps = split_steps(text)
    assert [s.text for s in steps] == ["a", "b\r\nstill b", "c"]
    assert all(text[s.start : s.end] == s.text for s in steps)


@pytest.mark.parametrize("pattern", [r"(?=Step \d+:)", r"(?m)^(?=Step)", r"(?m)^", r"\n*(?=Step \d+:)"])
def test_a_pattern_that_matches_empty_strings_still_splits(pattern: str) -> None:
    """A lookahead matches only empty strings, and empty matches were skipped: "(?=Step \\d+:)" left the
    whole solution one step with one score. They split as in re.split."""
    text = "<think>Step 0: draft</think>Step 1: a\nStep 2: b\nStep 3: c"
    steps = split_steps(text, pattern=pattern)
    assert [s.text for s in steps] == ["Step 1: a", "Step 2: b", "Step 3: c"]
    assert all(text[s.start : s.end] == s.text for s in steps)


@pytest.mark.parametrize("pattern", [None, r"\n\n"])
def test_a_think_block_that_never_closes_is_skipped_too(pattern: str | None) -> None:
    """A rollout cut off inside its reasoning ("<think>..." and no "</think>") had all its reasoning
    split and scored as solution steps, the literal "<think>" in the first: skip_think skipped only a
    closed block. Nothing was written after the reasoning, so there is no step; text before an opening
    "<think>" that never closes is still the solution (as the judges read it, rewards.text.answer_span)."""
    assert split_steps("<think>Let me see.\n\n2 + 2 = 4.\n\nSo 4", pattern=pattern) == []
    assert split_steps("<think>a\n\nb", skip_think=False, pattern=pattern)[0].text == "<think>a"
    text = "<think>x</think>\n\n2 + 2 = 4.\n\nAnswer: 4.\n\n<think>more\n\nand more"
    steps = split_steps(text, pattern=pattern)
    assert [s.text for s in steps] == ["2 + 2 = 4.", "Answer: 4."]
    assert all(text[s.start : s.end] == s.text for s in steps)
    crlf = "Step 1.\r\n\r\nStep 2.\r\n\r\n<think>cut"
    assert [s.text for s in split_steps(crlf)] == ["Step 1.", "Step 2."]


def test_math_shepherd_steps_that_carry_their_own_labels_are_not_labelled_twice() -> None:
    """Math-Shepherd reads "Step k: ... ки" and the convention writes the labels itself; a response in
    that format (split with the documented pattern "(?=Step \\d+:)") reached the model as
    "Step 1: Step 1: ... ки", an input it was never trained on. A step's own leading label gives way to
    the convention's (a step of nothing but a label keeps it: it is not emptied)."""
    conv = CONVENTIONS["math_shepherd"]
    text = "Step 1: 2+3=5.\nStep 2: 5*4=20.\nStep 3: The answer is 20."
    steps = split_steps(text, pattern=r"(?=Step \d+:)")
    assert [s.text for s in steps] == ["Step 1: 2+3=5.", "Step 2: 5*4=20.", "Step 3: The answer is 20."]
    plain = conv.query("Q", ["2+3=5.", "5*4=20.", "The answer is 20."])
    assert conv.query("Q", [s.text for s in steps]) == plain
    assert plain.text == "Q Step 1: 2+3=5. ки\nStep 2: 5*4=20. ки\nStep 3: The answer is 20. ки"
    assert conv.query("Q", ["Step 7:  a"]).text == "Q Step 1: a ки"  # the convention numbers them
    assert conv.query("Q", ["Step 2:"]).text == "Q Step 1: Step 2: ки"
    assert conv.query("Q", ["Stepping stones: 3"]).text == "Q Step 1: Stepping stones: 3 ки"
    qwen = CONVENTIONS["qwen"].query("Q", ["Step 1: a"])  # Qwen2.5-Math-PRM reads the steps as written
    assert qwen.messages is not None and qwen.messages[2].content == "Step 1: a<extra_0>"


def test_aggregates_and_first_error_agree_with_the_shown_step_scores() -> None:
    """details.steps shows scores to 6 decimals; first_error and the aggregates used the unrounded ones,
    so a step shown as 0.5 could be the first error at threshold 0.5."""
    from rewardhub.prm import Step
    from rewardhub.rewards.prm import PRMConfig, PRMReward

    steps = [Step("a", 0, 1), Step("b", 3, 4)]
    out = PRMReward._outcome(PRMConfig(aggregation="first_error", threshold=0.5), steps, [0.9, 0.4999996])
    assert [s["score"] for s in out.details["steps"]] == [0.9, 0.5]
    assert out.details["first_error"] == -1 and out.score == 1.0
    assert out.components["min"] == 0.5


def test_filler_steps_are_marked_where_the_content_check_reaches_and_merged_groups_keep_it() -> None:
    """The `prm` reward's filler check reads what reaches the model (a Math-Shepherd step's own `ки`
    tag is not a word of it) and only short steps (its cost is per character); a group merged to
    `max_steps` is filler only when every member is."""
    from functools import partial

    from rewardhub.models.specials import GENERIC
    from rewardhub.rewards.prm import FILLER_MAX_CHARS, filler_step

    shepherd = partial(filler_step, conv=CONVENTIONS["math_shepherd"], clean=GENERIC)
    text = "Let me think. ки\n\n2 + 3 = 5 ки\n\nOkay.\n\nHmm.\n\nSo 5."
    steps = split_steps(text, filler=shepherd)
    assert [(s.text, s.filler) for s in steps] == [
        ("Let me think. ки", True),
        ("2 + 3 = 5 ки", False),
        ("Okay.", True),
        ("Hmm.", True),
        ("So 5.", False),
    ]
    # a relation states something whatever its letters ("a" and "I" are filler words); a rule of "=" none
    assert not shepherd("So $\\sin A = a$.") and not shepherd("Thus I = a.") and not shepherd("$A \\le a$")
    assert not shepherd("so x < 3") and not shepherd("2>1") and not shepherd("so I <= a")
    assert not shepherd("So A ＝ a.")  # a full-width sign, read as "=" by the content check (prm 1.11.1)
    # ... which reads a letter's relation with itself as none (the ASCII "So a = a." is never checked)
    assert shepherd("So a ＝ a.") and shepherd("I ＝ I") and not shepherd("So a = a.")
    assert shepherd("======") and shepherd("Okay, so.") and shepherd("<b>Okay.</b>")
    assert shepherd('<span style="x">Okay.</span>')
    long_filler = " ".join(["Let me think."] * (FILLER_MAX_CHARS // 10))
    assert not shepherd(long_filler)  # not checked past FILLER_MAX_CHARS: read as a step
    merged = split_steps(text, filler=shepherd, max_steps=3)
    assert [(s.members, s.filler) for s in merged] == [(1, True), (2, False), (2, False)]
    two = split_steps("Okay.\n\nHmm.\n\nx = 1", filler=shepherd, max_steps=2)
    assert [(s.members, s.filler) for s in two] == [(1, True), (2, False)]
