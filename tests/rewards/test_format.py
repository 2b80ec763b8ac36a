"""``format``: presets, each check, partial credit, and config validation."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from reward_calls import score_text
from rewardhub.errors import InvalidRequest
from rewardhub.protocol import Reason
from rewardhub.rewards.format import FormatReward

REWARD = FormatReward(runtime=None)  # type: ignore[arg-type]  # text rewards don't use the runtime


@pytest.mark.parametrize(
    ("response", "failed"),
    [
        # the canonical shape
        ("<think>a</think><answer>b</answer>", []),
        # whitespace around and between the sections is fine
        ("\n<think>\na\n</think>\n\n<answer> b </answer>\n", []),
        # text after the answer
        ("<think>a</think><answer>b</answer> extra", ["strict"]),
        # text before the think
        ("Sure! <think>a</think><answer>b</answer>", ["strict"]),
        # text between the sections
        ("<think>a</think> so <answer>b</answer>", ["strict"]),
        # wrong order (nothing outside, so strict still holds)
        ("<answer>b</answer><think>a</think>", ["order"]),
        # an empty answer
        ("<think>a</think><answer> \n</answer>", ["answer:nonempty"]),
        # two answers: not once, and the second is text outside the sections
        ("<think>a</think><answer>b</answer><answer>c</answer>", ["answer:once", "strict"]),
        # the answer nested inside the think
        ("<think>a<answer>b</answer></think>", ["order", "strict"]),
        # no think at all: every check touching it fails
        ("<answer>b</answer>", ["think:present", "think:once", "think:nonempty", "order", "strict"]),
        # an unclosed think
        ("<think>a <answer>b</answer>", ["think:present", "think:once", "think:nonempty", "order", "strict"]),
        # a closing tag before its opening tag does not close it
        ("</think><think>a<answer>b</answer>", ["think:present", "think:nonempty", "order", "strict"]),
    ],
)
async def test_think_answer_default(response: str, failed: list[str]) -> None:
    out = await score_text(REWARD, response)  # no config: preset think_answer
    assert out.details["failed"] == failed
    assert out.score == (0.0 if failed else 1.0)
    assert out.reason == (Reason.FORMAT if failed else None)
    assert all(out.components[name] == 0.0 for name in failed)


async def test_components_name_every_check() -> None:
    out = await score_text(REWARD, "<think>a</think><answer>b</answer>")
    assert out.components == {
        "think:present": 1.0,
        "think:once": 1.0,
        "think:nonempty": 1.0,
        "answer:present": 1.0,
        "answer:once": 1.0,
        "answer:nonempty": 1.0,
        "order": 1.0,
        "strict": 1.0,
    }


@pytest.mark.parametrize(
    ("response", "score"),
    [
        # all 8 checks pass
        ("<think>a</think><answer>b</answer>", 1.0),
        # strict fails: 7/8
        ("<think>a</think><answer>b</answer> extra", 7 / 8),
        # no think: 5 of 8 fail -> 3/8
        ("<answer>b</answer>", 3 / 8),
        # no tags at all: no check passes -> 0
        ("plain text", 0.0),
    ],
)
async def test_partial_credit(response: str, score: float) -> None:
    out = await score_text(REWARD, response, partial_credit=True)
    assert out.score == pytest.approx(score)


_STEPS = {"tags": ["step", "answer"], "exactly_once": False, "strict": True, "order": False}


@pytest.mark.parametrize(
    ("config", "response", "score"),
    [
        # preset answer: one non-empty answer section, text around allowed
        ({"preset": "answer"}, "Reasoning... <answer>42</answer> done", 1.0),
        # preset answer: missing
        ({"preset": "answer"}, "42", 0.0),
        # preset think: one think section
        ({"preset": "think"}, "<think>hmm</think> 42", 1.0),
        # a preset's flags can be overridden: trailing text allowed
        ({"preset": "think_answer", "strict": False}, "<think>a</think><answer>b</answer> bye", 1.0),
        # custom tags without order
        (
            {"tags": ["reasoning", "answer"], "order": False},
            "<answer>x</answer><reasoning>y</reasoning>",
            1.0,
        ),
        # custom tags with order (the default)
        ({"tags": ["reasoning", "answer"]}, "<answer>x</answer><reasoning>y</reasoning>", 0.0),
        # empty sections allowed when require_nonempty is off
        ({"require_nonempty": False}, "<think></think><answer></answer>", 1.0),
        # repeated tags allowed when exactly_once is off (not strict)
        ({"tags": ["step"], "exactly_once": False}, "<step>1</step><step>2</step>", 1.0),
        # ... and strict: every section is a section, not text outside the first (found in review: the
        # second <step> failed strict, so a multi-step shape could never score)
        (_STEPS, "<step>1</step>\n<step>2</step>\n<answer>3</answer>\n", 1.0),
        (_STEPS, "<step>1</step><step>2</step><step>3</step><answer>3</answer>", 1.0),
        (_STEPS, "<step>1</step> so <step>2</step><answer>3</answer>", 0.0),  # text between steps
        (_STEPS, "<step>1</step><step>2<answer>3</answer></step>", 0.0),  # the answer inside a step
        (_STEPS, "<step>1<step>2</step></step><answer>3</answer>", 0.0),  # a step inside a step
        (_STEPS, "<step>1</step><step>2<answer>3</answer>", 0.0),  # a step never closed
        # the prompt opened <think>; the prefix completes the text
        ({"response_prefix": "<think>"}, "a</think><answer>b</answer>", 1.0),
    ],
)
async def test_configs(config: dict[str, Any], response: str, score: float) -> None:
    out = await score_text(REWARD, response, **config)
    assert out.score == score


async def test_adversarial_response_is_fast() -> None:
    response = "<think>" * 100_000 + "</think>" * 100_000 + "<answer>" * 50_000
    # The checks run on this thread, without an await: its CPU time is their cost, whatever else the host
    # runs (a wall-clock bound of 1 s, then 5 s, was tight on a loaded host). Linear: well under 0.1 s;
    # quadratic: hours.
    cpu0 = time.thread_time()
    out = await score_text(REWARD, response)
    assert time.thread_time() - cpu0 < 5.0
    assert out.score == 0.0


@pytest.mark.parametrize(
    "config",
    [
        {"preset": "think_answer", "tags": ["a"]},  # preset and tags together
        {"tags": []},  # no tags
        {"tags": ["a b"]},  # not a tag name
        {"tags": ["<answer>"]},  # brackets are added by the reward
        {"tags": ["a", "a"]},  # repeated tag
        {"preset": "xml"},  # unknown preset
        {"preset": ["think_answer"]},  # not a name: was a TypeError (unhashable), an HTTP 500
        {"preset": {"think_answer": True}},
        {"partial": True},  # unknown key
    ],
)
def test_bad_config_is_rejected(config: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest):
        REWARD.parse_config(config)


def test_default_config_is_think_answer() -> None:
    cfg = REWARD.parse_config({})
    assert (cfg.preset, cfg.tags, cfg.order, cfg.strict, cfg.exactly_once) == (
        "think_answer",
        ("think", "answer"),
        True,
        True,
        True,
    )


@pytest.mark.parametrize(
    "blank",
    [
        "\u200b",  # zero-width space
        "\u200c\u200d",  # zero-width non-joiner and joiner
        " \ufeff \u2060 ",  # BOM and word joiner among spaces
        "\u00ad",  # soft hyphen
        "\u200e\u202e",  # bidi marks
        "\x00",  # NUL
    ],
)
async def test_a_section_of_invisible_characters_is_empty(client: httpx.AsyncClient, blank: str) -> None:
    """``str.strip`` keeps zero-width and other format/control characters, so
    ``<think>\\u200b</think><answer>\\u200b</answer>``, which renders as two empty sections and carries no
    reasoning and no answer, passed every check and scored 1.0 where ``<think> </think><answer> </answer>``
    scored 0: a policy could collect the format reward while saying nothing. Found in review."""
    items = [
        {"response": f"<think>{blank}</think><answer>{blank}</answer>"},
        {"response": f"<think>a</think><answer>{blank}b{blank}</answer>"},  # visible text among them
    ]
    for config in ({}, {"partial_credit": True}):
        resp = await client.post(
            "/v1/score", json={"reward": {"name": "format", "config": config}, "items": items}
        )
        assert resp.status_code == 200, resp.text
        empty, visible = resp.json()["results"]
        assert empty["details"]["failed"] == ["think:nonempty", "answer:nonempty"], empty
        assert (empty["valid"], empty["reason"]) == (True, "format")
        assert empty["score"] == (6 / 8 if config else 0.0)
        assert (visible["score"], visible["reason"]) == (1.0, None), visible
        assert empty["reward_version"] == "1.0.2"
