"""The ``implicit`` PRM convention (PRIME's implicit process reward: ``beta * log pi_phi / pi_ref`` per
step) on two tiny random causal LMs saved with ``save_pretrained`` and loaded by the service's own
loading code: each step's log-likelihood equals a teacher-forced computation written independently,
batching does not move it, the app reports process rewards, running sums and sigmoid scores, and the
misconfigurations fail clearly."""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import make_settings, score_results
from rewardhub.config import ConfigError
from rewardhub.models import hf_compute
from rewardhub.models.hub import specs_from_settings
from rewardhub.prm.conventions import CONVENTIONS
from rewardhub.prm.steps import split_steps

MakeApp = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]

IMPLICIT = CONVENTIONS["implicit"]

ITEMS: list[tuple[str, str]] = [
    ("What is (2 + 3) * 4?", "First, 2 + 3 = 5.\n\nThen 5 * 4 = 20.\n\nSo the answer is \\boxed{20}."),
    ("Solve 3x - 7 = 11.", "<think>move the 7</think>3x = 18\n\nx = 6"),
    ("How many divisors does 36 have?", "36 = 2^2 * 3^2, so (2+1)(2+1) = 9 divisors."),
]


@pytest.fixture(scope="module")
def ref_lm_path(tiny_dir: Path) -> str:
    """The reference model: the same architecture and tokenizer as ``causal_lm_path``, other weights."""
    from tiny_models import build_tiny_causal_lm

    return str(build_tiny_causal_lm(tiny_dir / "implicit-ref", seed=7))


def query(question: str, response: str) -> Any:
    from rewardhub.rewards.prm import _as_written

    return IMPLICIT.query(question, _as_written(response, split_steps(response)))


def teacher_forced(path: str, question: str, continuation: str) -> float:
    """log p(continuation | question), written without the service: the chat template with its
    generation prompt and the continuation tokenized apart (as a policy's rollout is), one forward pass,
    the log-softmax at each continuation token's predicting position."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
    )
    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    c_ids = tok(continuation, add_special_tokens=False)["input_ids"]
    # the service tokenizes prompt and response together: comparable where that changes nothing
    assert tok(prompt + continuation, add_special_tokens=False)["input_ids"] == p_ids + c_ids
    with torch.no_grad():
        logits = model(torch.tensor([p_ids + c_ids])).logits[0].float()
    lp = torch.log_softmax(logits, dim=-1)
    return float(sum(lp[len(p_ids) + j - 1, t] for j, t in enumerate(c_ids)))


def test_step_log_likelihoods_equal_teacher_forcing(causal_lm_path: str) -> None:
    loaded = hf_compute.load(causal_lm_path, "generate", device="cpu", share_prefix=False)
    with hf_compute.inference():
        got = hf_compute.step_probs(loaded, [query(q, r) for q, r in ITEMS[:1]])
    (steps,) = got
    assert isinstance(steps, list) and len(steps) == 3
    question, response = ITEMS[0]
    ends = [s.end for s in split_steps(response)]
    # the running sums are the log-likelihoods of the response up to each step's end, itself included
    want = [teacher_forced(causal_lm_path, question, response[:end]) for end in ends]
    running = [sum(steps[: k + 1]) for k in range(len(steps))]
    assert running == pytest.approx(want, abs=1e-3)
    assert all(x < 0 for x in steps)  # log-probabilities of text that has tokens


def test_batched_shared_prefix_and_mixed_batches_equal_single_passes(causal_lm_path: str) -> None:
    shared = hf_compute.load(causal_lm_path, "generate", device="cpu", share_prefix=True)
    plain = hf_compute.load(causal_lm_path, "generate", device="cpu", share_prefix=False)
    question = "What is 3 + 5 - 2? Think step by step."
    rollouts = ["3 + 5 = 8\n\n8 - 2 = 6\n\n\\boxed{6}", "3 + 5 = 9", "3 + 5 = 8\n\n8 - 2 = 7"]
    queries = [query(question, r) for r in rollouts] + [query(q, r) for q, r in ITEMS]
    # a Math-Shepherd query in the same batch (a request naming another convention): each kind alone
    shepherd = CONVENTIONS["math_shepherd"].query(question, ["3 + 5 = 8", "8 - 2 = 6"])
    with hf_compute.inference():
        together = [hf_compute.step_probs(m, [*queries, shepherd]) for m in (shared, plain)]
        alone = [hf_compute.step_probs(plain, [q])[0] for q in [*queries, shepherd]]
    for batch in together:
        for a, b in zip(batch, alone, strict=True):
            assert isinstance(a, list) and isinstance(b, list)
            assert a == pytest.approx(b, abs=1e-4)
    assert all(0 < p < 1 for p in together[0][-1])  # the shepherd item kept its probabilities


def test_a_token_classifier_cannot_serve_it(qwen_prm_path: str) -> None:
    loaded = hf_compute.load(qwen_prm_path, "token_classification", device="cpu")
    with hf_compute.inference():
        (res,) = hf_compute.step_probs(loaded, [query(*ITEMS[0])])
    assert isinstance(res, hf_compute.BackendUnavailable)
    assert "causal language model" in str(res)


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


async def test_through_the_app_process_rewards_running_sums_and_scores(
    make_app: MakeApp, causal_lm_path: str, ref_lm_path: str
) -> None:
    items = [{"prompt": q, "response": r} for q, r in ITEMS]
    async with make_app(
        prm_model=causal_lm_path, prm_ref_model=ref_lm_path, prm_convention="implicit"
    ) as client:
        results = await score_results(client, "prm", items, aggregation="last", beta=0.5)
        default_beta = await score_results(client, "prm", items[:1])
        same = await score_results(
            client, "prm", items[:1], reference_backend="prm"
        )  # the PRM against itself
    for (question, response), r in zip(ITEMS, results, strict=True):
        assert r["valid"], r
        rows = r["details"]["steps"]
        assert [response[s["start"] : s["end"]] for s in rows] == [s.text for s in split_steps(response)]
        last = rows[-1]["end"]
        ratio = teacher_forced(causal_lm_path, question, response[rows[0]["start"] : last]) - teacher_forced(
            ref_lm_path, question, response[rows[0]["start"] : last]
        )
        if "<think>" not in response:  # the think block is context for both models, never counted
            assert rows[-1]["q"] == pytest.approx(0.5 * ratio, abs=2e-3)
        q = 0.0
        for row in rows:
            q += row["process_reward"]
            assert row["q"] == pytest.approx(q, abs=1e-5)
            assert row["score"] == pytest.approx(sigmoid(row["q"]), abs=1e-5)
        # last: PRIME's outcome probability sigmoid(beta * log pi_phi(y) / pi_ref(y))
        assert r["score"] == pytest.approx(sigmoid(rows[-1]["q"]), abs=1e-5)
        assert r["details"]["beta"] == 0.5
        assert r["reward_version"].split("+")[-2] == "implicit"
    # beta scales every process reward: 0.05 (PRIME's) against 0.5 above
    rewards = [row["process_reward"] for row in results[0]["details"]["steps"]]
    small = [row["process_reward"] for row in default_beta[0]["details"]["steps"]]
    assert small == pytest.approx([x / 10 for x in rewards], abs=1e-5)
    assert default_beta[0]["score"] == pytest.approx(
        min(row["score"] for row in default_beta[0]["details"]["steps"])
    )
    # a model against itself earns nothing: every process reward 0, every score one half
    assert {row["process_reward"] for row in same[0]["details"]["steps"]} == {0.0}
    assert same[0]["score"] == 0.5


async def test_misconfigurations_fail_clearly(make_app: MakeApp, causal_lm_path: str) -> None:
    with pytest.raises(ConfigError, match="REWARDHUB_PRM_REF_MODEL"):
        specs_from_settings(make_settings(prm_model=causal_lm_path, prm_convention="implicit"))
    items = [{"prompt": ITEMS[0][0], "response": ITEMS[0][1]}]
    async with make_app(prm_model=causal_lm_path, prm_convention="math_shepherd") as client:
        # no reference configured: the item is unsupported, and says what to set
        (r,) = await score_results(client, "prm", items, convention="implicit")
        assert not r["valid"] and r["reason"] == "unsupported", r
        assert "REWARDHUB_PRM_REF_MODEL" in r["details"]["message"]
        # beta applies to the implicit convention only
        bad = await client.post(
            "/v1/score",
            json={"reward": {"name": "prm", "config": {"convention": "qwen", "beta": 0.1}}, "items": items},
        )
        assert bad.status_code == 422 and "convention implicit" in bad.text


async def test_the_catalog_says_an_implicit_prm_without_its_reference_cannot_score(
    make_app: MakeApp, causal_lm_path: str, tmp_path: Path
) -> None:
    """A backends file may define the PRM with convention implicit and no 'prm_ref' (the start check
    reads the REWARDHUB_PRM_* shortcuts only): every item of the default config fails, so the catalog
    must say so, as /v1/rewards/check does, rather than list the reward as ready."""
    import json

    spec = {"kind": "transformers", "model": causal_lm_path, "task": "generate", "convention": "implicit"}
    path = tmp_path / "backends.json"
    path.write_text(json.dumps({"backends": {"prm": spec}}))
    async with make_app(backends_file=str(path), embedding_model="off") as client:
        catalog = (await client.get("/v1/rewards")).json()["rewards"]
        (prm,) = [r for r in catalog if r["name"] == "prm"]
        check = (await client.post("/v1/rewards/check", json={"reward": {"name": "prm"}})).json()
    assert check["unavailable"] and "REWARDHUB_PRM_REF_MODEL" in check["unavailable"][0]["message"]
    assert prm["unavailable"] is not None and "REWARDHUB_PRM_REF_MODEL" in prm["unavailable"]


async def test_beta_on_a_backend_of_another_convention_is_refused(
    make_app: MakeApp, causal_lm_path: str
) -> None:
    """``beta`` (or ``reference_backend``) with no ``convention`` given, on a backend that serves another
    one (here math_shepherd), was accepted and ignored: a caller believed it had tuned an implicit PRM's
    beta. It is the same 422 as naming that convention."""
    items = [{"prompt": ITEMS[0][0], "response": ITEMS[0][1]}]
    async with make_app(prm_model=causal_lm_path, prm_convention="math_shepherd") as client:
        for config in ({"beta": 0.1}, {"reference_backend": "prm"}):
            r = await client.post(
                "/v1/score", json={"reward": {"name": "prm", "config": config}, "items": items}
            )
            assert r.status_code == 422 and "convention implicit" in r.text and "math_shepherd" in r.text, (
                r.text
            )
            check = await client.post("/v1/rewards/check", json={"reward": {"name": "prm", "config": config}})
            assert check.status_code == 422, check.text
        (ok,) = await score_results(client, "prm", items)  # the backend's own convention still scores
        assert ok["valid"], ok


async def test_a_failure_of_either_model_names_its_backend(
    make_app: MakeApp, causal_lm_path: str, ref_lm_path: str, tmp_path: Path
) -> None:
    """The two models fail alike ("the input is N tokens, more than the model's max_length M"): the item
    said nothing of which, so a reference with a shorter context than the PRM's sent the caller to the
    wrong setting. ``details.backend`` names the model that failed."""
    import json

    spec = {"kind": "transformers", "model": ref_lm_path, "task": "generate", "max_length": 40}
    path = tmp_path / "backends.json"
    path.write_text(json.dumps({"backends": {"prm_ref": spec}}))
    items = [{"prompt": q, "response": r} for q, r in ITEMS[:1]]
    async with make_app(
        prm_model=causal_lm_path, prm_convention="implicit", backends_file=str(path), embedding_model="off"
    ) as client:
        (r,) = await score_results(client, "prm", items)
        (mine,) = await score_results(
            client, "prm", items, convention="implicit", reference_backend="prm", backend="prm_ref"
        )
    assert not r["valid"] and r["reason"] == "unsupported", r
    assert "max_length 40" in r["details"]["message"] and r["details"]["backend"] == "prm_ref", r
    assert not mine["valid"] and mine["details"]["backend"] == "prm_ref", mine  # the PRM's side this time


@pytest.mark.parametrize(
    "response",
    [
        " The answer is 42.\n\nSo the answer is 42.",  # a completion that starts with a space
        "<think>2+2=4</think> The answer is 4.",
        "<think>2+2=4</think> answer",  # a step of one token
    ],
)
def test_the_first_step_keeps_a_token_that_starts_with_the_blank_before_it(
    causal_lm_path: str, response: str
) -> None:
    """A token belonged to the piece its first character is in, and the blank before the first step is
    the context's (uncounted): " The" (one token, blank included) was left out of the first step's
    log-likelihood, and a first step of one such token (" answer" after "</think>") had no token at all,
    a backend_error. Later steps keep such tokens (their piece starts with the separator). Found in
    review. A token now belongs to the piece of its first non-blank character."""
    loaded = hf_compute.load(causal_lm_path, "generate", device="cpu", share_prefix=False)
    question = "What is 2 + 2?"
    with hf_compute.inference():
        (got,) = hf_compute.step_probs(loaded, [query(question, response)])
    assert isinstance(got, list), got
    steps = split_steps(response)
    start = response.index("</think>") + len("</think>") if "</think>" in response else 0
    context = teacher_forced(causal_lm_path, question, response[:start]) if start else 0.0
    # the running sums: the log-likelihood of the response after the context, up to each step's end
    want = [teacher_forced(causal_lm_path, question, response[: s.end]) - context for s in steps]
    assert [sum(got[: k + 1]) for k in range(len(got))] == pytest.approx(want, abs=1e-3)


async def test_a_refused_pass_withdraws_the_other_models_pass() -> None:
    """The two models' passes ran under plain ``asyncio.gather``: when one model's queue refused the
    request (429, Overloaded), the request answered 429 while the other model's pass stayed queued and
    ran for nobody, holding the places its retry needed. The refusal now cancels the other pass."""
    import asyncio
    import time
    from collections.abc import Sequence

    from rewardhub.errors import Overloaded
    from rewardhub.models.base import ModelBackend
    from rewardhub.models.errors import BackendError
    from rewardhub.rewards.prm import _likelihoods

    cancelled: list[str] = []

    class Queued(ModelBackend):
        kind = "test"
        capabilities = frozenset({"steps"})

        async def step_probs(
            self, queries: Sequence[Any], deadline: float
        ) -> list[list[float] | BackendError]:
            try:
                await asyncio.sleep(30)  # waiting in its model's queue
            except asyncio.CancelledError:
                cancelled.append(self.name)
                raise
            return [[0.0] for _ in queries]

    class Full(ModelBackend):
        kind = "test"
        capabilities = frozenset({"steps"})

        async def step_probs(
            self, queries: Sequence[Any], deadline: float
        ) -> list[list[float] | BackendError]:
            await asyncio.sleep(0.01)
            raise Overloaded("model batcher 'ref' has 8 items waiting", retry_after_s=1.0)

    q = query(*ITEMS[0])
    with pytest.raises(Overloaded):
        await asyncio.wait_for(
            _likelihoods(Queued("policy", "p"), Full("ref", "r"), [q], time.monotonic() + 30), 10
        )
    assert cancelled == ["policy"]
