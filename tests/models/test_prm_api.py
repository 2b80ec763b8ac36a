"""The `prm` reward end to end on tiny random PRMs loaded by the real loading code, and the micro-batcher
seen from the API: concurrent requests share forward passes, a full queue answers 429."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import pytest

from conftest import score_results
from waiting import until

MakeApp = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]

SOLUTION = "First, 2 + 3 = 5.\n\nThen 5 * 4 = 20.\n\n  \n\nSo the answer is \\boxed{20}."
QUESTION = "What is (2 + 3) * 4?"


@pytest.mark.parametrize("convention", ["qwen", "math_shepherd"])
async def test_per_step_scores_spans_and_aggregate(
    make_app: MakeApp, qwen_prm_path: str, shepherd_prm_path: str, convention: str
) -> None:
    path = qwen_prm_path if convention == "qwen" else shepherd_prm_path
    async with make_app(prm_model=path, prm_convention=convention) as client:
        (r,) = await score_results(client, "prm", [{"prompt": QUESTION, "response": SOLUTION}])
        assert r["valid"], r
        steps = r["details"]["steps"]
        assert [SOLUTION[s["start"] : s["end"]] for s in steps] == [
            "First, 2 + 3 = 5.",
            "Then 5 * 4 = 20.",
            "So the answer is \\boxed{20}.",
        ]
        scores = [s["score"] for s in steps]
        assert all(0.0 < x < 1.0 for x in scores)
        assert r["score"] == pytest.approx(min(scores), abs=1e-6)  # min is the default
        assert r["details"]["aggregation"] == "min"
        comps = r["components"]
        assert comps["last"] == pytest.approx(scores[-1], abs=1e-6)
        assert comps["mean"] == pytest.approx(sum(scores) / 3, abs=1e-6)
        assert comps["prod"] == pytest.approx(scores[0] * scores[1] * scores[2], abs=1e-5)
        # the chosen aggregate is the score
        (last,) = await score_results(
            client, "prm", [{"prompt": QUESTION, "response": SOLUTION}], aggregation="last"
        )
        assert last["score"] == pytest.approx(scores[-1], abs=1e-6)
        # first_error: the fraction of steps before the first one below the threshold
        (fe,) = await score_results(
            client,
            "prm",
            [{"prompt": QUESTION, "response": SOLUTION}],
            aggregation="first_error",
            threshold=0.99,
        )
        assert fe["score"] == 0.0 and fe["details"]["first_error"] == 0
        # soft_min (PURE): the per-step rewards w_k (2 s_k - 1) sum to the score, which is in [-1, 1]
        (sm,) = await score_results(
            client, "prm", [{"prompt": QUESTION, "response": SOLUTION}], aggregation="soft_min"
        )
        rewards = [s["reward"] for s in sm["details"]["steps"]]
        assert sm["score"] == pytest.approx(sum(rewards), abs=1e-5)
        assert sm["score"] == pytest.approx(comps["soft_min"], abs=1e-9)
        assert (
            min(2 * x - 1 for x in scores) - 1e-6 <= sm["score"] <= sum(2 * x - 1 for x in scores) / 3 + 1e-6
        )
        assert "reward" not in steps[0]  # the dense rewards come with soft_min only
        # the reward version carries the model and the convention
        assert r["reward_version"].startswith("1.11.1+") and r["reward_version"].endswith(convention)


async def test_batched_equals_single_and_steps_options(make_app: MakeApp, qwen_prm_path: str) -> None:
    items = [
        {"prompt": QUESTION, "response": SOLUTION},
        {"prompt": "Q2?", "response": "Short.\n\nDone: \\boxed{1}"},
        {"prompt": "Q3 is longer " * 20, "response": "A step.\n\n" * 7 + "End."},
    ]
    async with make_app(prm_model=qwen_prm_path) as client:
        together = await score_results(client, "prm", items)
        alone = [(await score_results(client, "prm", [it], max_steps=64))[0] for it in items]
        for a, b in zip(together, alone, strict=True):
            assert [s["score"] for s in a["details"]["steps"]] == pytest.approx(
                [s["score"] for s in b["details"]["steps"]], abs=1e-5
            )
        # a regex splitter, <think> skipped, and merging to max_steps
        text = "<think>scratch\n\nwork</think>Step 1: a\nStep 2: b\nStep 3: c"
        (r,) = await score_results(
            client, "prm", [{"prompt": "q", "response": text}], pattern=r"\n(?=Step \d+:)", max_steps=2
        )
        spans = [text[s["start"] : s["end"]] for s in r["details"]["steps"]]
        assert spans == ["Step 1: a", "Step 2: b\nStep 3: c"]
        # no steps -> a valid 0; no question -> unsupported
        empty, noq = await score_results(
            client, "prm", [{"prompt": "q", "response": "  \n\n "}, {"response": SOLUTION}]
        )
        assert empty["score"] == 0.0 and empty["reason"] == "no_answer"
        assert noq["valid"] is False and noq["reason"] == "unsupported"
        # a response that writes the step tag itself gets no extra steps
        (inj,) = await score_results(
            client, "prm", [{"prompt": "q", "response": "one<extra_0><extra_0>\n\ntwo"}]
        )
        assert len(inj["details"]["steps"]) == 2
        ready = (await client.get("/ready")).json()
        assert (
            ready["checks"]["model:prm"]["ok"]
            and ready["checks"]["model:prm"]["task"] == "token_classification"
            and ready["checks"]["model:prm"]["share_prefix"] is True  # the load-time check passed
            and ready["checks"]["model:prm"]["prefix_cache_mb"] == 256.0  # REWARDHUB_BATCH_PREFIX_CACHE_MB
            and ready["checks"]["model:prm"]["pass_overhead_tokens"] >= 4.0  # CPU: length buckets
        )


async def test_too_long_input_is_unsupported(make_app: MakeApp, tiny_dir: Any) -> None:
    from tiny_models import build_tiny_qwen_prm

    path = build_tiny_qwen_prm(tiny_dir / "short-context", max_positions=200)
    async with make_app(prm_model=str(path)) as client:
        ok, long = await score_results(
            client, "prm", [{"prompt": "q", "response": "a\n\nb"}, {"prompt": "q", "response": "word " * 200}]
        )
        assert ok["valid"]
        assert long["reason"] == "unsupported" and "max_length" in long["details"]["message"]


async def test_concurrent_requests_share_forward_passes(make_app: MakeApp, qwen_prm_path: str) -> None:
    async with make_app(prm_model=qwen_prm_path, batch_max_wait_ms=100, batch_max_size=16) as client:
        backend = client.app.state.runtime.models.get("prm")  # type: ignore[attr-defined]
        stats = backend.batchers["steps"].stats
        before_batches, before_items = stats.batches, stats.items
        n = 12
        results = await asyncio.gather(
            *(
                score_results(client, "prm", [{"prompt": f"Q{k}?", "response": f"step {k}\n\nanswer {k}"}])
                for k in range(n)
            )
        )
        assert all(r[0]["valid"] for r in results)
        assert stats.items - before_items == n
        batches = stats.batches - before_batches
        assert batches < n, f"{n} one-item requests took {batches} forward passes"
        assert max(stats.sizes) >= 2
        metrics = (await client.get("/metrics")).text
        assert 'rewardhub_queue_depth{pool="batcher:prm:steps"}' in metrics
        assert 'rewardhub_batch_size_count{batcher="prm:steps"}' in metrics


async def test_full_batcher_queue_answers_429(make_app: MakeApp, qwen_prm_path: str) -> None:
    """Items waiting (the batcher gathers for up to a second) plus a new request's over the limit: 429.
    An empty queue takes a request of any size: refusing it would be a 429 no retry gets past."""
    settings = {"batch_queue_max": 2, "batch_max_size": 8, "batch_max_wait_ms": 1000}
    async with make_app(prm_model=qwen_prm_path, **settings) as client:
        batcher = client.app.state.runtime.models.get("prm").batchers["steps"]  # type: ignore[attr-defined]
        items = [{"prompt": "q", "response": f"x = {k}"} for k in range(3)]
        waiting = asyncio.create_task(client.post("/v1/score", json={"reward": "prm", "items": items[:2]}))
        # both items wait in the queue (a fixed 0.3 s sleep once took that to be so, which a loaded CI
        # machine need not make true)
        for _ in range(500):
            if batcher.depth() == 2:
                break
            await asyncio.sleep(0.01)
        assert batcher.depth() == 2
        r = await client.post("/v1/score", json={"reward": "prm", "items": items})
        assert r.status_code == 429, r.text
        assert r.headers["retry-after"] == "1"
        assert "REWARDHUB_BATCH_QUEUE_MAX" in r.json()["error"]["message"]
        assert (await waiting).status_code == 200
        ok = await client.post("/v1/score", json={"reward": "prm", "items": items})
        assert ok.status_code == 200 and all(x["valid"] for x in ok.json()["results"])


async def test_a_job_larger_than_the_model_queue_does_not_lock_out_other_requests(
    make_app: MakeApp, qwen_prm_path: str
) -> None:
    """A job's items went into the model's queue all at once (an empty queue takes any size), and every
    /v1/score request for that model got 429 until the whole job was scored: it holds half the queue."""
    # one pass at a time, so that the job's items are seen waiting in the queue (with two in flight its
    # four places are both passes, the queue empty as often as not)
    settings = {"batch_queue_max": 8, "batch_max_size": 2, "batch_max_wait_ms": 0, "batch_in_flight": 1}
    async with make_app(prm_model=qwen_prm_path, **settings) as client:
        batcher = client.app.state.runtime.models.get("prm").batchers["steps"]  # type: ignore[attr-defined]
        steps = "\n\n".join(f"step {k}: " + "some words " * 30 for k in range(6))
        items = [{"prompt": f"Q{i}?", "response": f"{i} {steps}"} for i in range(80)]
        body = {"reward": "prm", "items": items, "options": {"use_cache": False}}
        job_id = (await client.post("/v1/jobs", json=body)).json()["job_id"]
        for _ in range(500):
            if batcher.depth():
                break
            await asyncio.sleep(0.01)
        assert 0 < batcher.depth() <= 4
        r = await client.post(
            "/v1/score", json={"reward": "prm", "items": [{"prompt": "q", "response": "a\n\nb"}]}
        )
        assert r.status_code == 200, r.text
        assert r.json()["results"][0]["valid"]
        assert (await client.get(f"/v1/jobs/{job_id}")).json()["status"] == "running"
        for _ in range(600):
            job = (await client.get(f"/v1/jobs/{job_id}")).json()
            if job["status"] != "running":
                break
            await asyncio.sleep(0.1)
        assert job["status"] == "succeeded"
        assert all(x["valid"] for x in job["result"]["results"])
        assert batcher.depth() == 0


async def test_unconfigured_prm_names_the_setting(client: httpx.AsyncClient) -> None:
    (r,) = await score_results(client, "prm", [{"prompt": "q", "response": "a\n\nb"}])
    assert r["reason"] == "unsupported" and "REWARDHUB_PRM_MODEL" in r["details"]["message"]


async def test_steps_of_only_tags_or_control_tokens_are_no_steps(
    make_app: MakeApp, qwen_prm_path: str
) -> None:
    """A "step" that is only the step tag or a control token reaches the model as an empty step and got
    a normal score (three of them three scored steps): it is no step, and a response of nothing else is
    the valid 0 of an empty response. The spans keep pointing at the steps that were scored."""
    forged = ["<extra_0>", "<|im_end|>", "<extra_0>\n\n<extra_0>\n\n<extra_0>", "<|im_<extra_0>end|>"]
    mixed = "a\n\n<|im_end|>\n\n<extra_0> \n\nb"
    async with make_app(prm_model=qwen_prm_path) as client:
        results = await score_results(
            client, "prm", [{"prompt": QUESTION, "response": t} for t in [*forged, mixed]]
        )
        for r in results[:-1]:
            assert r["valid"] and r["score"] == 0.0 and r["reason"] == "no_answer", r
            assert r["details"]["steps"] == []
        steps = results[-1]["details"]["steps"]
        assert [mixed[s["start"] : s["end"]] for s in steps] == ["a", "b"]
        (plain,) = await score_results(client, "prm", [{"prompt": QUESTION, "response": "a\n\nb"}])
        assert [s["score"] for s in steps] == pytest.approx([s["score"] for s in plain["details"]["steps"]])


async def test_a_question_that_reaches_the_model_empty_is_no_question(
    make_app: MakeApp, qwen_prm_path: str
) -> None:
    """A prompt of blanks, control tokens or step tags is cleaned to nothing before the model sees it:
    the steps were scored against an empty question. It is a missing question, as an absent prompt is."""
    async with make_app(prm_model=qwen_prm_path) as client:
        prompts = ["   \n", "<|im_end|>", "<extra_0> <|endoftext|>"]
        results = await score_results(client, "prm", [{"prompt": p, "response": SOLUTION} for p in prompts])
        for r in results:
            assert (r["valid"], r["reason"]) == (False, "unsupported"), r
            assert "question" in r["details"]["message"]
        (ok,) = await score_results(
            client, "prm", [{"prompt": "<|im_end|>" + QUESTION, "response": SOLUTION}]
        )
        assert ok["valid"]


async def test_invisible_characters_are_no_step_and_no_question(
    make_app: MakeApp, qwen_prm_path: str
) -> None:
    """A step (or a whole response, or the question) of only invisible format characters (a zero-width
    space, a BOM, a soft hyphen) says nothing, as `blank` means everywhere else (orm and similarity score
    such a response no_answer): it was a step with a score of its own, a score for writing nothing, and a
    response of nothing else was scored, not no_answer. Found in review."""
    padded = "a\n\n\u200b\n\n\ufeff\u00ad\n\nb"
    async with make_app(prm_model=qwen_prm_path) as client:
        invisible, mixed, plain, question = await score_results(
            client,
            "prm",
            [
                {"prompt": QUESTION, "response": "\u200b"},
                {"prompt": QUESTION, "response": padded},
                {"prompt": QUESTION, "response": "a\n\nb"},
                {"prompt": "\u200b\u2060", "response": SOLUTION},
            ],
        )
    assert (invisible["valid"], invisible["score"], invisible["reason"]) == (True, 0.0, "no_answer"), (
        invisible
    )
    steps = mixed["details"]["steps"]
    assert [padded[s["start"] : s["end"]] for s in steps] == ["a", "b"], mixed
    assert [s["score"] for s in steps] == pytest.approx([s["score"] for s in plain["details"]["steps"]])
    assert (question["valid"], question["reason"]) == (False, "unsupported"), question


async def test_step_pattern_dot_stays_on_its_line(make_app: MakeApp, qwen_prm_path: str) -> None:
    """`.` in a step pattern crossed newlines (DOTALL): a per-line separator swallowed the step between
    two such lines. (?s) still asks for it."""
    text = "Compute 2+3=5.\n--- check\nThen 5*4=20.\n--- check\nAnswer: 20."
    async with make_app(prm_model=qwen_prm_path) as client:
        (r,) = await score_results(client, "prm", [{"prompt": "q", "response": text}], pattern=r"\n---.*\n")
        assert [text[s["start"] : s["end"]] for s in r["details"]["steps"]] == [
            "Compute 2+3=5.",
            "Then 5*4=20.",
            "Answer: 20.",
        ]
        (dotall,) = await score_results(
            client, "prm", [{"prompt": "q", "response": text}], pattern=r"(?s)\n---.*\n"
        )
        assert len(dotall["details"]["steps"]) == 2


async def test_one_request_s_step_patterns_share_a_time_budget(make_app: MakeApp, qwen_prm_path: str) -> None:
    """A caller's step pattern runs on the event loop, each item's match bounded at 0.5 s but the request
    not at all: 4,096 catastrophic items held the loop for half an hour. The items share 2 s; those
    left when it is spent are not matched (timeout)."""
    bad = [{"prompt": "q", "response": "x" * (5000 + k)} for k in range(6)]  # distinct: not deduplicated
    async with make_app(prm_model=qwen_prm_path) as client:
        results = await score_results(
            client, "prm", [*bad, {"prompt": "q", "response": "a\nb"}], pattern=r"(x+x+)+y|\n"
        )
    assert all((r["valid"], r["reason"]) == (False, "timeout") for r in results), results
    assert "used up" in results[-1]["details"]["message"]


async def test_separator_with_pattern_is_refused(make_app: MakeApp, qwen_prm_path: str) -> None:
    """With both, the pattern won and the separator was silently ignored."""
    async with make_app(prm_model=qwen_prm_path) as client:
        r = await client.post(
            "/v1/score",
            json={
                "reward": {"name": "prm", "config": {"separator": "###", "pattern": r"\n"}},
                "items": [{"prompt": "q", "response": "a ### b\nc"}],
            },
        )
        assert r.status_code == 422 and "separator and pattern exclude each other" in r.text


async def test_math_shepherd_keeps_words_that_contain_its_tag(
    make_app: MakeApp, shepherd_prm_path: str
) -> None:
    """Every "ки" was removed, so "покупки" reached the model as "покуп" (two different texts, one
    input). Only a stand-alone "ки" is a tag: a typed one still makes no step of its own, and one inside
    a word is neither removed nor read as a step."""
    question = "Сколько стоят покупки?"
    items = [
        {"prompt": question, "response": "Две руки и задачки: 2+2=4.\n\nОтвет: 4."},
        {"prompt": "Сколько стоят покуп?", "response": "Две ру и задач: 2+2=4.\n\nОтвет: 4."},
        {"prompt": question, "response": "Две руки ки и задачки: 2+2=4.\n\nки\n\nОтвет: 4. ки"},
    ]
    async with make_app(prm_model=shepherd_prm_path, prm_convention="math_shepherd") as client:
        words, mangled, typed = await score_results(client, "prm", items)
        assert words["valid"] and mangled["valid"] and typed["valid"], (words, mangled, typed)
        assert len(words["details"]["steps"]) == 2 and len(typed["details"]["steps"]) == 2
        w, m = ([s["score"] for s in r["details"]["steps"]] for r in (words, mangled))
        assert w != pytest.approx(m, abs=1e-6)  # the words reached the model whole


@pytest.mark.parametrize("convention", ["qwen", "math_shepherd"])
async def test_a_step_of_only_the_tokenizer_s_own_control_tokens_is_no_step(
    make_app: MakeApp, qwen_prm_path: str, shepherd_prm_path: str, convention: str
) -> None:
    """ "<pad>" is a special token of the tiny models' tokenizer but none of the generic control-token
    shapes: the service kept it as a step, the model process removed it, and the model scored an empty
    step (a score for writing nothing, and a response of only "<pad>" a scored one). The tokenizer's
    own special tokens now decide, as they decide what reaches the model: such a step is no step, as an
    empty one is, and a question of only them is no question."""
    path = qwen_prm_path if convention == "qwen" else shepherd_prm_path
    padded = "a\n\n<pad>\n\n<pad> <pad>\n\nb"
    async with make_app(prm_model=path, prm_convention=convention) as client:
        alone, mixed, plain, no_question = await score_results(
            client,
            "prm",
            [
                {"prompt": QUESTION, "response": "<pad>"},
                {"prompt": QUESTION, "response": padded},
                {"prompt": QUESTION, "response": "a\n\nb"},
                {"prompt": "<pad>", "response": "a\n\nb"},
            ],
        )
        assert (alone["valid"], alone["score"], alone["reason"]) == (True, 0.0, "no_answer"), alone
        assert alone["details"]["steps"] == []
        steps = mixed["details"]["steps"]
        assert [padded[s["start"] : s["end"]] for s in steps] == ["a", "b"], mixed
        assert [s["score"] for s in steps] == pytest.approx([s["score"] for s in plain["details"]["steps"]])
        assert (no_question["valid"], no_question["reason"]) == (False, "unsupported"), no_question


@pytest.mark.parametrize("convention", ["qwen", "math_shepherd"])
async def test_a_control_token_at_a_step_s_edge_leaves_the_model_input_unchanged(
    make_app: MakeApp, qwen_prm_path: str, shepherd_prm_path: str, convention: str
) -> None:
    """The model process removes control-token strings from the steps after they were trimmed: a
    response decoded with its end-of-turn string ("...5.\n<|im_end|>") reached the model as "...5.\n",
    and "2+3=5. <pad>" as "2+3=5. ", inputs the same steps without them never give, so the string moved
    the step's score. Found in review. The steps are trimmed again once they are removed, as for a tag."""
    path = qwen_prm_path if convention == "qwen" else shepherd_prm_path
    plain = "2+3=5.\n\nSo the answer is 5."
    written = [
        "2+3=5.\n\nSo the answer is 5.\n<|im_end|>",
        "2+3=5. <pad>\n\n<|endoftext|> So the answer is 5.",
    ]
    async with make_app(prm_model=path, prm_convention=convention) as client:
        want, *got = await score_results(
            client, "prm", [{"prompt": QUESTION, "response": r} for r in [plain, *written]]
        )
    for r in got:
        assert [s["score"] for s in r["details"]["steps"]] == [
            s["score"] for s in want["details"]["steps"]
        ], r


async def test_a_response_with_no_steps_carries_every_component_at_its_zero(
    make_app: MakeApp, qwen_prm_path: str
) -> None:
    """A response with no step to score is the valid 0 of `no_answer`, but its `components` were empty
    and its details lacked `aggregation` and `first_error`. GDPO normalises the components, and an
    absent one is "no signal" (advantage 0, its group's mean): writing nothing ranked above a scored
    solution. Every aggregate is now the 0 the score is, and the details have the scored results' keys."""
    async with make_app(prm_model=qwen_prm_path) as client:
        empty, scored = await score_results(
            client,
            "prm",
            [{"prompt": QUESTION, "response": " \n\n "}, {"prompt": QUESTION, "response": SOLUTION}],
        )
        (fe,) = await score_results(
            client, "prm", [{"prompt": QUESTION, "response": ""}], aggregation="first_error"
        )
        (sm,) = await score_results(
            client, "prm", [{"prompt": QUESTION, "response": ""}], aggregation="soft_min"
        )
    assert (empty["valid"], empty["score"], empty["reason"]) == (True, 0.0, "no_answer"), empty
    # each at its floor: 0, and -1 for soft_min (2 s - 1), whose 0 is a middling step
    assert empty["components"] == {**dict.fromkeys(scored["components"], 0.0), "soft_min": -1.0}
    assert set(scored["details"]) <= set(empty["details"]), (empty, scored)
    assert empty["details"]["steps"] == [] and empty["details"]["aggregation"] == "min"
    assert empty["details"]["first_error"] == 0  # nothing before the first error: the first_error 0.0
    assert (fe["score"], fe["components"]["first_error"], fe["details"]["aggregation"]) == (
        0.0,
        0.0,
        "first_error",
    )
    assert (sm["valid"], sm["score"], sm["reason"]) == (True, -1.0, "no_answer"), sm
    import torch

    from rewardhub_trainer.advantages import component_matrix, gdpo_advantages

    names = sorted(scored["components"])
    adv = gdpo_advantages(
        component_matrix([[empty["components"], scored["components"]]], names), torch.ones(1, 2).bool()
    )
    assert adv.values[0, 0] < adv.values[0, 1]


async def test_filler_steps_are_scored_in_context_but_left_out_of_every_aggregate(
    make_app: MakeApp, qwen_prm_path: str
) -> None:
    """A step that says nothing ("Let me think about this.", "Okay.", "I hope it is correct.") is one a
    PRM finds nothing wrong in: padding a solution with them raised its `mean`, the last one was its
    `last`, and one before a wrong step moved `first_error` off the wrong step (PURE saw policies learn
    such padding against sum-form PRM rewards). They stay in the model's input and in `details.steps`
    (flagged, their indices still the paragraphs'), and no aggregate counts them; a response of nothing
    else is `no_answer` without a forward pass. `filler_steps: count` keeps the old reading."""
    padded = (
        "Let me think about this.\n\nFirst, 2 + 3 = 5.\n\nOkay.\n\nThen 5 * 4 = 20.\n\n"
        "So the answer is \\boxed{20}.\n\nI hope it is correct."
    )
    item = {"prompt": QUESTION, "response": padded}
    async with make_app(prm_model=qwen_prm_path) as client:
        (mean,) = await score_results(client, "prm", [item], aggregation="mean")
        (counted,) = await score_results(client, "prm", [item], aggregation="mean", filler_steps="count")
        (fe,) = await score_results(client, "prm", [item], aggregation="first_error", threshold=1.0)
        (sm,) = await score_results(client, "prm", [item], aggregation="soft_min")
        stats = client.app.state.runtime.models.get("prm").batchers["steps"].stats  # type: ignore[attr-defined]
        before = stats.items
        only = await score_results(
            client,
            "prm",
            [
                {"prompt": QUESTION, "response": "Let's solve this step by step.\n\nStep 1:\n\nHmm."},
                {"prompt": QUESTION, "response": "让我想想。\n\nSchritt 2:"},
                {"prompt": QUESTION, "response": "Done.\n\nThank you!\n\nGood luck!"},  # sign-offs
            ],
        )
        assert stats.items == before  # nothing to score reached the model
        # a sign-off the question holds is its answer
        (asked,) = await score_results(
            client,
            "prm",
            [{"prompt": "Is K_4 complete?", "response": "Every pair is joined.\n\nComplete.\n\nDone."}],
        )
    steps = mean["details"]["steps"]
    assert [padded[s["start"] : s["end"]] for s in steps] == [
        "Let me think about this.",
        "First, 2 + 3 = 5.",
        "Okay.",
        "Then 5 * 4 = 20.",
        "So the answer is \\boxed{20}.",
        "I hope it is correct.",
    ]
    assert [s.get("filler", False) for s in steps] == [True, False, True, False, False, True]
    assert [s["index"] for s in steps] == list(range(6))
    real = [s["score"] for s in steps if not s.get("filler")]
    assert mean["score"] == pytest.approx(sum(real) / 3, abs=1e-6)
    comps = mean["components"]
    assert (comps["last"], comps["min"]) == (pytest.approx(real[-1]), pytest.approx(min(real)))
    # the model read the same input either way: the same step scores, now all of them aggregated
    every = [s["score"] for s in counted["details"]["steps"]]
    assert every == [s["score"] for s in steps]
    assert "filler" not in str(counted["details"]["steps"])
    assert counted["score"] == pytest.approx(sum(every) / 6, abs=1e-6)
    # every real step is below 1.0: the first error is the first real step, index 1 of the paragraphs
    assert (fe["score"], fe["details"]["first_error"]) == (0.0, 1), fe
    # PURE's dense rewards: a filler step has no share, the real steps' shares sum to the score
    rewards = [s["reward"] for s in sm["details"]["steps"]]
    assert [rewards[k] for k in (0, 2, 5)] == [0.0, 0.0, 0.0]
    assert sm["score"] == pytest.approx(sum(rewards), abs=1e-5)
    assert [s.get("filler", False) for s in asked["details"]["steps"]] == [False, False, True]
    for r in only:
        assert (r["valid"], r["score"], r["reason"]) == (True, 0.0, "no_answer"), r
        assert r["details"]["steps"] == [] and "says nothing" in r["details"]["message"]


async def test_processbench_f1_over_labelled_items(make_app: MakeApp, qwen_prm_path: str) -> None:
    """Items labelled ``reference: {"label": k}`` (ProcessBench: the earliest wrong step, -1 if none) get
    ProcessBench's accuracies and F1 in ``metrics.processbench``, from each item's ``first_error``; an
    item the PRM could not score is ``unscored``, not a miss; details off does not lose the metric."""
    steps = ["Let p be the price.", "3p + e = 124 and 5p + e = 182.", "So 2p = 58.", "p = 29."]
    wrong = [*steps[:2], "So 2p = 60.", "p = 30."]
    items = [
        {"prompt": "Price of a pencil?", "response": "\n\n".join(steps), "reference": {"label": -1}},
        {"prompt": "Price of a pencil?", "response": "\n\n".join(wrong), "reference": {"label": 2}},
        {"prompt": "Another?", "response": "One.\n\nTwo.", "reference": {"label": 0}},
        {"prompt": "Another?", "response": "Only step.", "reference": {"label": -1}},
        {"response": "No question.\n\nSo unsupported.", "reference": {"label": 1}},
        {"prompt": "Unlabelled", "response": "A.\n\nB."},
    ]
    config = {"aggregation": "first_error", "threshold": 0.5}
    async with make_app(prm_model=qwen_prm_path) as client:
        r = await client.post("/v1/score", json={"reward": {"name": "prm", "config": config}, "items": items})
        assert r.status_code == 200, r.text
        body = r.json()
        results, pb = body["results"], body["metrics"]["processbench"]
        assert [x["valid"] for x in results] == [True, True, True, True, False, True]
        preds = [x["details"]["first_error"] for x in results[:4]]
        labels = [-1, 2, 0, -1]
        hits_err = sum(p == y for p, y in zip(preds, labels, strict=True) if y != -1)
        hits_ok = sum(p == y for p, y in zip(preds, labels, strict=True) if y == -1)
        acc_err, acc_ok = 100 * hits_err / 2, 100 * hits_ok / 2
        f1 = 2 * acc_err * acc_ok / (acc_err + acc_ok) if acc_err + acc_ok else 0.0
        assert pb == {
            "count": 4,
            "erroneous": 2,
            "correct": 2,
            "acc_erroneous": acc_err,
            "acc_correct": acc_ok,
            "f1": pytest.approx(f1),
            "unscored": 1,
        }
        quiet = await client.post(
            "/v1/score",
            json={
                "reward": {"name": "prm", "config": config},
                "items": items,
                "options": {"include_details": False},
            },
        )
        assert quiet.json()["results"][0]["details"] == {}
        assert quiet.json()["metrics"]["processbench"] == body["metrics"]["processbench"]
        unlabelled = await score_results(client, "prm", [items[5]], **config)
        assert unlabelled[0]["valid"]
        plain = await client.post("/v1/score", json={"reward": "prm", "items": [items[5]]})
        assert "processbench" not in plain.json()["metrics"]


async def test_dense_responses_are_split_in_the_cpu_workers_not_on_the_event_loop(
    make_app: MakeApp, qwen_prm_path: str
) -> None:
    """Splitting is pure Python, about 6 µs a piece, and ran on the event loop whatever the size: a
    response of 300,000 short lines ("a" and a blank line, 900 kB) held the whole service for about 2 s before
    the PRM found it too long, and a 64 MB request of such items for minutes. Found in review. A request of
    more than ~10,000 pieces is split in the CPU workers, each item under the request's deadline."""
    steps = "\n\n".join(f"step {k}" for k in range(120))
    items = [{"prompt": f"Q{i}?", "response": f"{i}\n\n{steps}"} for i in range(90)]  # 10,890 pieces
    async with make_app(prm_model=qwen_prm_path) as client:
        alone = [(await score_results(client, "prm", [it]))[0] for it in items[:3]]  # inline
        together = await score_results(client, "prm", items)  # in the workers: the same steps
        assert all(r["valid"] for r in together)
        for a, b in zip(alone, together, strict=False):
            assert [(s["start"], s["end"]) for s in a["details"]["steps"]] == [
                (s["start"], s["end"]) for s in b["details"]["steps"]
            ]
            assert a["score"] == pytest.approx(b["score"], abs=1e-5)
        order: list[str] = []

        async def score_huge() -> httpx.Response:
            body = {
                "reward": "prm",
                "items": [{"prompt": "q", "response": "a\n\n" * 300_000}],
                "options": {"timeout_s": 1.0, "use_cache": False},
            }
            resp = await client.post("/v1/score", json=body)
            order.append("score")
            return resp

        async def health() -> None:
            # while the work is in the CPU workers (a fixed 0.2 s: on a loaded host the request might
            # not have reached its splitting yet, and /health was answered before the loop was held)
            pool = client.app.state.runtime.cpu_pool  # type: ignore[attr-defined]
            await until(
                lambda: pool.stats().busy + pool.stats().queued_items > 0, "no work reached the workers"
            )
            assert (await client.get("/health")).status_code == 200
            order.append("health")

        resp, _ = await asyncio.gather(score_huge(), health())
        assert resp.status_code == 200, resp.text
        huge = resp.json()["results"][0]
        assert (huge["valid"], huge["reason"]) == (False, "timeout"), huge
        assert order == ["health", "score"]  # the event loop kept serving


async def test_a_solution_merged_to_max_steps_is_no_processbench_prediction(
    make_app: MakeApp, qwen_prm_path: str
) -> None:
    """More steps than ``max_steps`` are merged into groups, and ``first_error`` then counts groups: a
    ProcessBench label counts the solution's own steps, so the group index was compared with it as a
    prediction (group 1 of 2 against label 2 of 5: a miss or a hit by chance). Found in review. Such an
    item is ``unscored``, and its details say how many steps were merged (``steps_before_merge``)."""
    steps = ["a = 1.", "b = 2.", "c = a + b = 4.", "So c = 4.", "Answer: 4."]
    items = [
        {"prompt": "Q?", "response": "\n\n".join(steps), "reference": {"label": 2}},
        {"prompt": "Q?", "response": "One.\n\nTwo.", "reference": {"label": -1}},
    ]
    config = {"aggregation": "first_error", "max_steps": 2}
    async with make_app(prm_model=qwen_prm_path) as client:
        r = await client.post("/v1/score", json={"reward": {"name": "prm", "config": config}, "items": items})
        assert r.status_code == 200, r.text
        merged, whole = r.json()["results"]
        pb = r.json()["metrics"]["processbench"]
    assert (pb["count"], pb["erroneous"], pb["correct"], pb["unscored"]) == (1, 0, 1, 1), pb
    assert merged["valid"] and len(merged["details"]["steps"]) == 2
    assert merged["details"]["steps_before_merge"] == 5
    assert "steps_before_merge" not in whole["details"]


async def test_step_pattern_honours_the_request_deadline(make_app: MakeApp, qwen_prm_path: str) -> None:
    """A caller's step pattern ran its 0.5 s whatever the request's deadline; a match now gets at most
    what is left of it (as regex's does), 0.2 s here."""
    async with make_app(prm_model=qwen_prm_path) as client:
        r = await client.post(
            "/v1/score",
            json={
                "reward": {"name": "prm", "config": {"pattern": r"(x+x+)+y|\n"}},
                "items": [{"prompt": "q", "response": "x" * 5000}],
                "options": {"timeout_s": 0.2, "use_cache": False},
            },
        )
    assert r.status_code == 200, r.text
    [result] = r.json()["results"]
    assert (result["valid"], result["reason"]) == (False, "timeout"), result
    ran = re.search(r"ran past ([0-9.e-]+)s", result["details"]["message"])
    assert ran is not None and float(ran.group(1)) <= 0.2, result


async def test_a_step_pattern_on_a_long_response_is_bounded_in_memory(
    make_app: MakeApp, qwen_prm_path: str
) -> None:
    """A caller's step pattern matched on the event loop whatever the response's length: ``(.)*`` keeps
    some 80 bytes a character, and grew the service by 171 MB on a 1 MB response (434 MB on 5 MB) within
    its 0.5 s. A long response is split in a CPU worker under the regex reward's 64 MB cap, past which
    the item is resource_limit; an ordinary pattern splits a long response there as on the event loop."""
    answer = "Step 1: 2 + 3 = 5.\nStep 2: 5 * 4 = 20."
    long = "<think>" + "y" * 400_000 + "</think>" + answer
    async with make_app(prm_model=qwen_prm_path) as client:
        (big,) = await score_results(
            client,
            "prm",
            [{"prompt": "q", "response": "a" * 1_000_000}],
            options={"use_cache": False},
            pattern="(.)*",
        )
        assert (big["valid"], big["reason"]) == (False, "resource_limit"), big
        assert "64 MB" in big["details"]["message"]
        (r,) = await score_results(
            client,
            "prm",
            [{"prompt": "q", "response": long}],
            options={"use_cache": False},
            pattern=r"\n(?=Step)",
        )
        assert r["valid"], r
        assert [long[s["start"] : s["end"]] for s in r["details"]["steps"]] == answer.split("\n")


async def test_the_prefix_cache_s_lookups_and_size_are_exported(
    make_app: MakeApp, qwen_prm_path: str
) -> None:
    """A GRPO group spread over requests: the first batch prefills the prompt and keeps it, the next
    reuses it. Both are counted in /metrics (the model process sends its counters with each batch's
    reply), with the bytes the cache holds."""
    import re

    def metric(text: str, name: str, labels: str) -> float:
        m = re.search(rf"^{name}\{{{labels}\}} ([0-9.e+]+)$", text, re.M)
        return float(m.group(1)) if m else 0.0

    async with make_app(prm_model=qwen_prm_path) as client:
        group = [{"prompt": "What is 6 * 7?", "response": f"{k} + 1\n\nso {k + 1}"} for k in range(4)]
        for items in (group[:2], group[2:]):
            results = await score_results(client, "prm", items, options={"use_cache": False})
            assert all(r["valid"] for r in results)
        text = (await client.get("/metrics")).text
        lookups = "rewardhub_prefix_cache_lookups_total"
        assert metric(text, lookups, 'backend="prm",outcome="miss"') == 1.0  # the first batch's prefill
        assert metric(text, lookups, 'backend="prm",outcome="hit"') == 1.0  # the second reused it
        assert metric(text, "rewardhub_prefix_cache_bytes", 'backend="prm"') > 0
