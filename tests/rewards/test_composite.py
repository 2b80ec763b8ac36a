"""``composite`` and ``noisy_corrected`` through the real app: gates, weights, formulas, invalid
propagation, flattened components, versions and caching."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import pytest

import rewardhub.sandbox.pool as sandbox_pool
from rewardhub.rewards import text_similarity
from rewardhub.rewards.math_answer import MathReward

FORMAT_GATE = {
    "reward": {"name": "format", "config": {"tags": ["answer", "confidence"], "strict": False}},
    "gate": True,
}
RLCR_COMPOSITE = {
    "name": "composite",
    "config": {"components": [FORMAT_GATE, {"reward": "math"}, {"reward": "calibration", "weight": 0.5}]},
}


async def post(
    c: httpx.AsyncClient, reward: Any, items: list[dict[str, Any]], **options: Any
) -> httpx.Response:
    return await c.post("/v1/score", json={"reward": reward, "items": items, "options": options})


async def results(
    c: httpx.AsyncClient, reward: Any, items: list[dict[str, Any]], **options: Any
) -> list[Any]:
    resp = await post(c, reward, items, **options)
    assert resp.status_code == 200, resp.text
    out: list[Any] = resp.json()["results"]
    return out


def composite(*components: dict[str, Any], **config: Any) -> dict[str, Any]:
    return {"name": "composite", "config": {"components": list(components), **config}}


async def test_format_gate_math_calibration(client: httpx.AsyncClient) -> None:
    items = [
        {"response": "<answer>42</answer><confidence>0.9</confidence>", "reference": "42"},
        {"response": "<answer>41</answer><confidence>0.3</confidence>", "reference": "42"},
        {"response": "The answer is 42.", "reference": "42"},  # no tags: the gate fails
    ]
    resp = await post(client, RLCR_COMPOSITE, items)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    good, wrong, ungated = body["results"]
    # math 1 + 0.5 * calibration (1 - (0.9 - 1)^2 = 0.99)
    assert good["score"] == pytest.approx(1.0 + 0.5 * 0.99)
    # math 0 + 0.5 * (0 - 0.3^2)
    assert wrong["score"] == pytest.approx(0.5 * -0.09)
    assert (ungated["score"], ungated["reason"]) == (0.0, "format")
    assert ungated["details"]["gate_failed"] == ["format"]
    comps = good["components"]
    assert comps["format"] == 1.0 and comps["math"] == 1.0
    assert comps["calibration"] == pytest.approx(0.99)
    assert comps["math.correct"] == 1.0
    assert comps["calibration.confidence"] == 0.9 and comps["calibration.correct"] == 1.0
    assert comps["calibration.brier"] == pytest.approx(0.01)
    assert comps["calibration.format_ok"] == 1.0
    assert comps["format.answer:present"] == 1.0 and comps["format.confidence:once"] == 1.0
    # the failed gate still reports every component: math found "42" by the answer phrase
    assert ungated["components"]["format"] == 0.0 and ungated["components"]["math"] == 1.0
    assert ungated["components"]["calibration"] == 0.0
    assert ungated["components"]["calibration.format_ok"] == 0.0
    # the calibration metrics see through the composite (prefix calibration.)
    m = body["metrics"]["calibration"]
    assert m["count"] == 2 and m["brier"] == pytest.approx((0.01 + 0.09) / 2)
    assert m["auroc"] == 1.0


async def test_formula(client: httpx.AsyncClient) -> None:
    reward = composite(
        {"reward": "math"},
        {"reward": "calibration", "name": "cal"},
        formula="math * (1 + 0.5 * cal) - 0.1 * max(0, -cal)",
    )
    items = [
        {"response": "<answer>7</answer><confidence>0.5</confidence>", "reference": "7"},
        {"response": "<answer>8</answer><confidence>0.5</confidence>", "reference": "7"},
    ]
    right, wrong = await results(client, reward, items)
    assert right["score"] == pytest.approx(1 * (1 + 0.5 * 0.75) - 0.1 * 0)  # cal = 1 - 0.25
    assert wrong["score"] == pytest.approx(0 * (1 + 0.5 * -0.25) - 0.1 * 0.25)  # cal = -0.25
    assert right["components"]["cal.confidence"] == 0.5


async def test_formula_runtime_fault_is_invalid(client: httpx.AsyncClient) -> None:
    reward = composite({"reward": "exact_match", "name": "em"}, formula="1 / em")
    ok, zero = await results(
        client, reward, [{"response": "a", "reference": "a"}, {"response": "b", "reference": "a"}]
    )
    assert ok["score"] == 1.0
    assert (zero["score"], zero["reason"]) == (None, "unsupported")
    assert "division by zero" in zero["details"]["message"]
    assert zero["components"] == {"em": 0.0}


async def test_weights_past_the_float_range(client: httpx.AsyncClient) -> None:
    # weights whose magnitudes cannot be summed are a bad config (422), not an internal error per item
    huge = composite({"reward": "exact_match", "weight": 1e308}, {"reward": "f1", "weight": 1e308})
    resp = await post(client, huge, [{"response": "a", "reference": "a"}])
    assert resp.status_code == 422, resp.text
    assert "weights" in resp.json()["error"]["message"]
    # a weighted sum that overflows on one item makes that item invalid, like a formula's overflow
    noise = {"fp_rate": 0.1, "fn_rate": 0.2}  # a right answer scores 1.2857: times 1.5e308 overflows
    reward = composite({"reward": "exact_match", "name": "em", "weight": 1.5e308, "noise": noise})
    right, wrong = await results(
        client, reward, [{"response": "a", "reference": "a"}, {"response": "b", "reference": "a"}]
    )
    assert (right["score"], right["reason"]) == (None, "unsupported")
    assert "not a finite number" in right["details"]["message"]
    assert right["components"]["em.observed"] == 1.0
    assert wrong["score"] == pytest.approx(1.5e308 * (0.0 - 0.1) / (1.0 - 0.1 - 0.2))


NO_REF = {"response": "<answer>Paris</answer>"}  # exact_match: missing_reference (invalid)
EM_TAG = {"name": "exact_match", "config": {"extract": "<answer>(.*?)</answer>"}}


@pytest.mark.parametrize(
    ("on_invalid", "score", "reason", "detail"),
    [
        ("invalid", None, "missing_reference", None),  # propagate the component's reason
        ("zero", 2.0 * 1.0 + 3.0 * 0.0, None, {"zeroed": ["em"]}),
        ("skip", (2.0 + 3.0) / 2.0 * (2.0 * 1.0), None, {"skipped": ["em"]}),  # renormalise the weights
    ],
)
async def test_invalid_component_rules(
    client: httpx.AsyncClient, on_invalid: str, score: float | None, reason: str | None, detail: Any
) -> None:
    reward = composite(
        {"reward": {"name": "format", "config": {"preset": "answer"}}, "weight": 2.0},
        {"reward": EM_TAG, "name": "em", "weight": 3.0},
        on_invalid=on_invalid,
    )
    [r] = await results(client, reward, [NO_REF])
    assert (r["score"], r["reason"]) == (score, reason)
    assert r["components"]["format"] == 1.0 and r["components"]["em"] is None
    if detail is not None:
        assert r["details"] == {**r["details"], **detail}
    else:
        assert "component 'em' could not be scored" in r["details"]["message"]


async def test_per_component_on_invalid_and_all_skipped(client: httpx.AsyncClient) -> None:
    reward = composite(
        {"reward": EM_TAG, "name": "a", "on_invalid": "zero"},
        {"reward": "format", "weight": 0.0},
        on_invalid="invalid",
    )
    [r] = await results(client, reward, [NO_REF])
    assert r["score"] == 0.0
    only_skipped = composite({"reward": EM_TAG, "name": "a"}, on_invalid="skip")
    [r] = await results(client, only_skipped, [NO_REF])
    assert (r["score"], r["reason"]) == (None, "missing_reference")


async def test_gates(client: httpx.AsyncClient) -> None:
    # An invalid gate makes the composite invalid; a failed gate wins over anything invalid.
    reward = composite(
        {"reward": EM_TAG, "name": "em", "gate": True},
        {"reward": "math", "weight": 1.0},
        gate_score=-1.0,
    )
    no_ref, failed, passed = await results(
        client,
        reward,
        [
            {"response": "<answer>5</answer>"},
            {"response": "<answer>5</answer>", "reference": "6"},
            {"response": "<answer>6</answer>", "reference": "6"},
        ],
    )
    assert (no_ref["score"], no_ref["reason"]) == (None, "missing_reference")
    assert "gate component 'em' could not be scored" in no_ref["details"]["message"]
    assert (failed["score"], failed["details"]["gate_failed"]) == (-1.0, ["em"])
    # a gate has weight 0 by default: the composite is math alone
    assert passed["score"] == 1.0
    # gate_threshold: partial-credit format passes at 0.5
    lenient = composite(
        {
            "reward": {"name": "format", "config": {"preset": "think_answer", "partial_credit": True}},
            "gate": True,
            "gate_threshold": 0.5,
            "weight": 1.0,
        },
    )
    [r] = await results(client, lenient, [{"response": "<think>x</think><answer>y</answer> tail"}])
    assert r["score"] == pytest.approx(r["components"]["format"]) and 0.5 <= r["score"] < 1.0


async def test_noise_on_a_component(client: httpx.AsyncClient) -> None:
    reward = composite({"reward": "exact_match", "name": "em", "noise": {"fp_rate": 0.1, "fn_rate": 0.2}})
    right, wrong = await results(
        client, reward, [{"response": "a", "reference": "a"}, {"response": "b", "reference": "a"}]
    )
    assert right["score"] == (1.0 - 0.1) / (1.0 - 0.1 - 0.2)  # 1.2857142857142858
    assert wrong["score"] == (0.0 - 0.1) / (1.0 - 0.1 - 0.2)  # -0.14285714285714288
    assert right["components"] == {"em": right["score"], "em.observed": 1.0}


async def test_noisy_corrected_wrapper(client: httpx.AsyncClient) -> None:
    reward = {"name": "noisy_corrected", "config": {"reward": "math", "fp_rate": 0.05, "fn_rate": 0.25}}
    right, wrong, invalid = await results(
        client,
        reward,
        [
            {"response": "\\boxed{2}", "reference": "2"},
            {"response": "\\boxed{3}", "reference": "2"},
            {"response": "1"},
        ],
    )
    c1, c0 = (1 - 0.05) / 0.7, (0 - 0.05) / 0.7
    assert right["score"] == pytest.approx(c1) and wrong["score"] == pytest.approx(c0)
    assert right["components"] == {"correct": 1.0, "observed": 1.0}
    assert wrong["components"] == {"correct": 0.0, "observed": 0.0}
    assert (invalid["score"], invalid["reason"]) == (None, "missing_reference")
    # unbiased: E[r̂ | correct] = (1 − fn)·c1 + fn·c0 = 1 and E[r̂ | wrong] = fp·c1 + (1 − fp)·c0 = 0
    assert 0.75 * c1 + 0.25 * c0 == pytest.approx(1.0)
    assert 0.05 * c1 + 0.95 * c0 == pytest.approx(0.0, abs=1e-15)
    assert right["reward_version"].startswith("1.0.1+")


async def test_nested_composite_flattens(client: httpx.AsyncClient) -> None:
    inner = composite({"reward": "exact_match", "name": "em"}, {"reward": "f1"})
    outer = composite({"reward": inner, "name": "inner"}, {"reward": "exact_match", "weight": 2.0})
    [r] = await results(client, outer, [{"response": "the cat", "reference": "cat"}])
    assert r["score"] == (1.0 + 1.0) + 2.0 * 1.0
    assert r["components"]["inner"] == 2.0
    assert r["components"]["inner.em"] == 1.0 and r["components"]["inner.f1"] == 1.0


@pytest.mark.parametrize(
    ("config", "status", "message"),
    [
        (
            {"components": [{"reward": "math"}], "formula": "math + nope"},
            422,
            "unknown name 'nope'; the components are: math",
        ),
        (
            {"components": [{"reward": "math"}], "formula": "__import__('os')"},
            422,
            "not allowed: calling '__import__'",
        ),
        ({"components": [{"reward": "math"}], "formula": "math.real"}, 422, "not allowed: attribute access"),
        ({"components": [{"reward": "math"}], "formula": "math ** 9**9**9"}, 422, "too large"),
        ({"components": [{"reward": "math", "weight": 2}], "formula": "math"}, 422, "`weight` has no effect"),
        (
            {"components": [{"reward": "math"}], "formula": "math", "on_invalid": "skip"},
            422,
            "needs the weighted sum",
        ),
        ({"components": [{"reward": "math"}, {"reward": "math"}]}, 422, "'math' is used twice"),
        ({"components": [{"reward": "math", "name": "max"}]}, 422, "must be an identifier"),
        ({"components": [{"reward": "math", "name": "a.b"}]}, 422, "must be an identifier"),
        ({"components": []}, 422, "components"),
        (
            {"components": [{"reward": "nope"}]},
            404,
            "composite: reward.config.components.0.reward: unknown reward 'nope'",
        ),
        (
            {
                "components": [
                    {"reward": "math"},
                    {"reward": {"name": "math", "config": {"bogus": 1}}, "name": "m2"},
                ]
            },
            422,
            "composite: reward.config.components.1.reward.config.bogus: Extra inputs are not permitted",
        ),
        (
            {"components": [{"reward": "math", "noise": {"fp_rate": 0.6, "fn_rate": 0.4}}]},
            422,
            "fp_rate + fn_rate must be < 1",
        ),
    ],
)
async def test_config_errors(
    client: httpx.AsyncClient, config: dict[str, Any], status: int, message: str
) -> None:
    resp = await post(client, {"name": "composite", "config": config}, [{"response": "x"}])
    assert resp.status_code == status, resp.text
    assert message in resp.json()["error"]["message"], resp.json()


async def test_noisy_rates_rejected(client: httpx.AsyncClient) -> None:
    reward = {"name": "noisy_corrected", "config": {"reward": "math", "fp_rate": 0.5, "fn_rate": 0.5}}
    resp = await post(client, reward, [{"response": "x"}])
    assert resp.status_code == 422 and "fp_rate + fn_rate must be < 1" in resp.text


async def test_noisy_corrected_of_a_noisy_corrected_reward_is_refused(client: httpx.AsyncClient) -> None:
    """The wrapper took a noisy_corrected reward as its verifier and corrected its score again:
    (r̂ − fp)/(1 − fp − fn) of an already unbiased r̂ is biased again (a right answer 1.69, not 1.29),
    and the outer `observed` overwrote the inner raw score. As a composite's `noise` on such a component,
    a 422. Found in review."""
    inner = {"name": "noisy_corrected", "config": {"reward": "exact_match", "fp_rate": 0.1, "fn_rate": 0.2}}
    twice = {"name": "noisy_corrected", "config": {"reward": inner, "fp_rate": 0.1, "fn_rate": 0.2}}
    resp = await post(client, twice, [{"response": "a", "reference": "a"}])
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["param"] == "reward.config.reward"
    assert "correcting it twice" in resp.json()["error"]["message"]


async def test_nesting_is_bounded(client: httpx.AsyncClient) -> None:
    reward: dict[str, Any] = {"name": "exact_match", "config": {}}
    for _ in range(6):
        reward = composite({"reward": reward, "name": "c"})
    resp = await post(client, reward, [{"response": "x", "reference": "x"}])
    assert resp.status_code == 422 and "nest more than 4 levels" in resp.text


async def test_fan_out_is_bounded(client: httpx.AsyncClient) -> None:
    # 16 composites of 16 (and so on, 4 levels deep) would score 65,536 rewards per item and answer
    # with every one in each item's components: the whole tree's size is bounded, not only its depth
    def fan(depth: int, width: int) -> dict[str, Any]:
        if depth == 0:
            return {"name": "exact_match", "config": {}}
        return composite(*({"reward": fan(depth - 1, width), "name": f"c{i}"} for i in range(width)))

    resp = await post(client, fan(2, 16), [{"response": "x", "reference": "x"}])
    assert resp.status_code == 422, resp.text
    assert "at most 64" in resp.json()["error"]["message"]
    [r] = await results(client, fan(2, 7), [{"response": "x", "reference": "x"}])  # 7 + 49 = 56 parts
    assert r["score"] == 49.0 and len(r["components"]) == 56


async def test_version_and_cache_follow_the_components(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = uuid.uuid4().hex  # fresh items, so earlier tests' cache entries don't interfere
    reward = composite({"reward": "math"}, {"reward": "exact_match", "name": "em"})
    items = [{"response": f"\\boxed{{{tag}}}", "reference": tag}]
    [first] = await results(client, reward, items)
    [again] = await results(client, reward, items)
    assert first["cached"] is False and again["cached"] is True
    assert again["reward_version"] == first["reward_version"]
    assert first["reward_version"].startswith("1.1.1+")
    # bump a component's version: the composite's version changes and the stale entry is not served
    monkeypatch.setattr(MathReward, "version", "9.9.9")
    [bumped] = await results(client, reward, items)
    assert bumped["cached"] is False
    assert bumped["reward_version"] != first["reward_version"]


async def test_group_component_makes_it_uncacheable(client: httpx.AsyncClient) -> None:
    group = f"g-{uuid.uuid4().hex}"
    reward = composite({"reward": "majority_vote", "name": "mv"}, {"reward": "exact_match", "name": "em"})
    items = [{"response": "\\boxed{1}", "reference": "\\boxed{1}", "group": group}] * 2
    first = await results(client, reward, items)
    again = await results(client, reward, items)  # identical resend: allowed, and not cached
    assert [r["score"] for r in first] == [2.0, 2.0]
    assert [r["cached"] for r in first + again] == [False] * 4


async def test_a_part_this_server_lacks_is_zeroed_but_not_cached(
    make_app: Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """meteor without the WordNet corpus and code in a language not installed are ``unsupported`` because
    of this server, not the item: a composite zeroing them cached a 0.0, still served once WordNet or the
    runtime was installed. Found in review (as for a model reward whose backend is unavailable)."""
    real = sandbox_pool.available_languages
    monkeypatch.setattr(
        sandbox_pool, "available_languages", lambda: {k: v for k, v in real().items() if k != "javascript"}
    )
    monkeypatch.setattr(text_similarity, "_wordnet_available", lambda: False)
    meteor = {"reward": {"name": "text_similarity", "config": {"metric": "meteor"}}, "on_invalid": "zero"}
    js = {
        "response": "```javascript\nconsole.log(1)\n```",
        "reference": {"language": "javascript", "cases": [{"stdin": "", "stdout": "1"}]},
    }
    cases = [
        (composite(meteor), {"response": "the cat sat", "reference": "the cat sat on the mat"}),
        (composite({"reward": "code", "on_invalid": "zero"}), js),
    ]
    async with make_app() as c:
        for reward, item in cases:
            [first] = await results(c, reward, [item])
            [again] = await results(c, reward, [item])
            assert first["score"] == 0.0 and first["details"]["zeroed"], first
            assert again["cached"] is False, again


async def test_a_nested_part_this_server_lacks_is_zeroed_but_not_cached(
    make_app: Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An inner composite made invalid by a part this server lacks (meteor without WordNet) is invalid
    for this server's reason, not the item's: the outer composite zeroing it must not cache the 0.0.
    The inner's invalid outcome dropped the part's ``transient`` flag (its reason, ``unsupported``, does
    not say so alone), so the outer cached the stand-in. Found in review."""
    monkeypatch.setattr(text_similarity, "_wordnet_available", lambda: False)
    inner = composite(
        {"reward": {"name": "text_similarity", "config": {"metric": "meteor"}}},
        {"reward": "exact_match", "name": "em"},
    )
    outer = composite({"reward": inner, "name": "inner", "on_invalid": "zero"}, {"reward": "f1"})
    item = {"response": "the cat sat", "reference": f"the cat sat on the mat {uuid.uuid4().hex}"}
    async with make_app() as c:
        [first] = await results(c, outer, [item])
        [again] = await results(c, outer, [item])
    assert first["details"]["zeroed"] == ["inner"], first
    assert first["details"]["parts"]["inner"]["reason"] == "unsupported"
    assert again["cached"] is False, again


async def test_every_component_skipped_is_invalid_even_at_weight_zero(client: httpx.AsyncClient) -> None:
    """With only zero-weight components (logged, not summed), all of them skipped left nothing scored,
    yet the composite came back a valid 0.0: the all-skipped rule looked only at the weight sums.
    Found in review."""
    reward = composite(
        {"reward": EM_TAG, "name": "a", "weight": 0.0},
        {"reward": EM_TAG, "name": "b", "weight": 0.0},
        on_invalid="skip",
    )
    [r] = await results(client, reward, [NO_REF])
    assert (r["score"], r["reason"]) == (None, "missing_reference"), r
    assert r["details"]["skipped"] == ["a", "b"]
    assert "every component was skipped" in r["details"]["message"]
    # one of them scored: the (zero-weight) sum is a real 0.0
    [r] = await results(
        client,
        composite(
            *reward["config"]["components"][:1], {"reward": "format", "weight": 0.0}, on_invalid="skip"
        ),
        [NO_REF],
    )
    assert (r["score"], r["details"]["skipped"]) == (0.0, ["a"]), r


async def test_a_gates_own_on_invalid(client: httpx.AsyncClient) -> None:
    """A gate's own on_invalid was ignored: an invalid gate always made the composite invalid. Found in
    review. zero fails the gate (gate_score), skip leaves it out (as if passed)."""
    items = [{"response": "<answer>6</answer>"}]  # no reference: the exact-match gate is invalid
    zero = composite(
        {"reward": EM_TAG, "name": "em", "gate": True, "on_invalid": "zero"},
        {"reward": {"name": "format", "config": {"preset": "answer"}}, "name": "fmt"},
        gate_score=-1.0,
    )
    [r] = await results(client, zero, items)
    assert (r["score"], r["details"]["gate_failed"]) == (-1.0, ["em"]), r
    # a valid score carries no invalid-class reason (a trainer masks by those): the gate's own
    # missing_reference stays in details.parts
    assert (r["valid"], r["reason"]) == (True, None), r
    assert r["details"]["parts"]["em"]["reason"] == "missing_reference"
    skip = composite(
        {"reward": EM_TAG, "name": "em", "gate": True, "on_invalid": "skip"},
        {"reward": {"name": "format", "config": {"preset": "answer"}}, "name": "fmt"},
    )
    [r] = await results(client, skip, items)
    assert r["valid"] and r["score"] == 1.0 and r["details"]["skipped"] == ["em"], r
    default = composite({"reward": EM_TAG, "name": "em", "gate": True}, {"reward": "format", "name": "fmt"})
    [r] = await results(client, default, items)
    assert (r["score"], r["reason"]) == (None, "missing_reference")


async def test_noise_on_a_noisy_corrected_component_is_refused(client: httpx.AsyncClient) -> None:
    twice = composite(
        {
            "reward": {
                "name": "noisy_corrected",
                "config": {"reward": "exact_match", "fp_rate": 0.1, "fn_rate": 0.1},
            },
            "name": "em",
            "noise": {"fp_rate": 0.1, "fn_rate": 0.1},
        }
    )
    resp = await post(client, twice, [{"response": "a", "reference": "a"}])
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["param"] == "reward.config.components.0.noise"
    assert "correcting it twice" in resp.json()["error"]["message"]


async def test_each_part_scores_under_its_own_default_deadline(client: httpx.AsyncClient) -> None:
    """Without options.timeout_s every part got the composite's deadline, the longest of its parts' (a
    model reward's 60 s), so a stuck math item held a CPU worker for a minute. Found in review."""
    from rewardhub.rewards.base import ScoreContext
    from rewardhub.rewards.composed import part_deadline

    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    reward = runtime.reward_registry().get("composite")
    config = reward.parse_config({"components": [{"reward": "math"}, {"reward": "orm", "weight": 0.5}]})
    math_part, orm_part = reward.parts(config)
    longest = reward.timeout_for(config)
    assert longest == 60.0
    default = ScoreContext(deadline_s=longest)
    assert part_deadline(math_part, default) == runtime.settings.item_timeout_s < longest
    assert part_deadline(orm_part, default) == longest
    explicit = ScoreContext(deadline_s=3.0, explicit_deadline=True)
    assert part_deadline(math_part, explicit) == part_deadline(orm_part, explicit) == 3.0


@pytest.mark.parametrize(
    ("name", "config", "at", "part", "differs"),
    [
        (
            "composite",
            lambda p: {"components": [{"reward": "exact_match"}, {"reward": p}]},
            ("components", 1, "reward"),
            "math",
            {"wrong_score": 0.5},
        ),
        ("calibration", lambda p: {"verifier": p}, ("verifier",), "math", {"wrong_score": 0.5}),
        (
            "noisy_corrected",
            lambda p: {"reward": p, "fp_rate": 0.1, "fn_rate": 0.2},
            ("reward",),
            "math",
            {"wrong_score": 0.5},
        ),
        ("group_length", lambda p: {"verifier": p}, ("verifier",), "math", {"wrong_score": 0.5}),
        ("verpo", lambda p: {"code": p}, ("code",), "code", {"timeout_s": 2}),
        ("judge", lambda p: {"mode": "reference", "rule": p}, ("rule",), "math", {"wrong_score": 0.5}),
    ],
)
def test_a_parts_spec_is_keyed_by_its_validated_config(
    client: httpx.AsyncClient,
    name: str,
    config: Callable[[Any], dict[str, Any]],
    at: tuple[Any, ...],
    part: str,
    differs: dict[str, Any],
) -> None:
    """Every reward built on others keys its part as a top-level spec is (name, version, validated
    config): the part's place in the config (Part.where) must be found in its dump, or its spec stays as
    written and equivalent specs ("math", {"name": "math", "config": {}}) miss each other."""
    registry = client.app.state.runtime.reward_registry()  # type: ignore[attr-defined]
    reward = registry.get(name)
    bare = reward.parse_config(config(part))
    key = reward.cache_config(bare)
    spec = key
    for step in at:
        spec = spec[step]
    (p,) = [p for p in reward.parts(bare) if p.where == ".".join(map(str, ("reward.config", *at)))]
    assert spec == {
        "name": part,
        "version": p.reward.version_for(p.config),
        "config": p.reward.cache_config(p.config),
    }
    assert reward.cache_config(reward.parse_config(config({"name": part, "config": {}}))) == key
    assert reward.cache_config(reward.parse_config(config({"name": part, "config": differs}))) != key
