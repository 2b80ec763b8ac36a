"""Process (dense) credit assignment from a PRM's step scores (algorithms.md §1.8; advantages.py,
process.py): PURE's min-form credit (``pure_min``) and DeepSeekMath's process-supervised GRPO
(``grpo_process``), token by token, on a hand-made group whose ``details.steps`` carry character spans.

The completions are real token ids of the tiny model's tokenizer (digits one token each, ``"\\n\\n"`` two
tokens, ``"€"`` three byte tokens of which only the third completes the character), so the token on which
each step ends is known by hand. With ``old_logprobs: recompute`` and one epoch every ratio is 1 and each
token's loss is ``−A_{i,t}``: the batch loss is a closed form of the token advantages.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from pydantic import ValidationError

from conftest import LiveServer, serve
from rewardhub_client import ItemResult
from rewardhub_trainer.config import AlgorithmConfig, TrainConfig
from rewardhub_trainer.data import Problem
from rewardhub_trainer.generation import Completion
from rewardhub_trainer.metrics import read_metrics
from rewardhub_trainer.rewards import Group
from rewardhub_trainer.trainer import Trainer

os.environ.setdefault("HF_HUB_OFFLINE", "1")

EPS = 1e-4
EOS = 2  # <|im_end|> of tests/tiny_models.py's tokenizer

# "3+5=8." "\n\n" "So 8" EOS: text "3+5=8.\n\nSo 8" (12 chars, 12 tokens); steps [0, 6) and [8, 12) end on
# tokens 5 ('.') and 10 ('8'); the EOS (token 11) writes no text
C0 = [23, 15, 25, 33, 28, 18, 203, 203, 323, 225, 28, EOS]
# "A" "\n\n" "x€" EOS: text "A\n\nx€" (5 chars, 8 tokens); steps [0, 1) and [3, 5) end on tokens 0 ('A')
# and 6, the third byte of '€' (tokens 4 and 5 decode to an incomplete character)
C1 = [37, 203, 203, 92, 163, 229, 110, EOS]
C2 = [38, EOS]  # "B": the invalid member (its step, scored 0.0, must reach nothing)
C3 = [38, EOS]  # "B": a valid member the PRM found no step in


def _steps(*rows: tuple[int, int, float]) -> dict[str, Any]:
    return {
        "aggregation": "min",
        "steps": [{"index": k, "start": a, "end": b, "score": s} for k, (a, b, s) in enumerate(rows)],
    }


STEPS = [
    _steps((0, 6, 0.9), (8, 12, 0.3)),
    _steps((0, 1, 0.8), (3, 5, 0.6)),
    _steps((0, 1, 0.0)),
    _steps(),
]
OUTCOME = [1.0, 0.0, None, 0.0]  # the item's score: the verifiable outcome reward


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_models import build_tiny_causal_lm

    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture
def make_trainer(tiny_model_dir: Path, tmp_path: Path) -> Callable[..., Trainer]:
    def factory(**algorithm: Any) -> Trainer:
        cfg = TrainConfig.model_validate(
            {
                "model": {"path": str(tiny_model_dir), "device": "cpu", "torch_threads": 1},
                "reward": {"name": "prm"},
                "data": {"use_chat_template": False, "prompt_template": "{question}"},
                "generation": {"group_size": 4, "max_new_tokens": 16},
                "algorithm": {"old_logprobs": "recompute", "num_epochs": 1, **algorithm},
                "training": {"prompts_per_step": 1, "micro_batch_size": 8},
                "output": {"run_dir": str(tmp_path / "run"), "progress": False, "tensorboard": False},
            }
        )
        return Trainer(cfg)

    return factory


def make_group(
    tokenizer: Any,
    ids: Sequence[list[int]] = (C0, C1, C2, C3),
    scores: Sequence[float | None] = OUTCOME,
    details: Sequence[dict[str, Any]] = STEPS,
    prefix: str = "",
) -> Group:
    # the text as the generator makes it (generation.py: decode(ids, skip_special_tokens=True))
    comps = [
        Completion([1, 2], c, [-1.0] * len(c), tokenizer.decode(c, skip_special_tokens=True), False)
        for c in ids
    ]
    results = [
        ItemResult(
            id=str(k),
            reward="prm",
            score=s,
            valid=s is not None,
            reason=None if s is not None else "x",
            details=d,
        )
        for k, (s, d) in enumerate(zip(scores, details, strict=True))
    ]
    return Group("g0", Problem(0, "q0", "1"), comps, results, response_prefix=prefix)


def _softmin(scores: Sequence[float], temperature: float) -> list[float]:
    """PURE's w_k · r_k with r_k = 2 s_k − 1 and w = softmax(−r / T), written out."""
    r = [2 * s - 1 for s in scores]
    e = [math.exp(-x / temperature) for x in r]
    return [x * w / sum(e) for x, w in zip(r, e, strict=True)]


def _tokens(adv: Any, g: int) -> list[float]:
    assert adv.tokens is not None
    return adv.tokens[0][g].tolist()


def test_the_texts_are_what_the_spans_point_into(make_trainer: Callable[..., Trainer]) -> None:
    tok = make_trainer(process_credit="pure_min").tokenizer
    assert tok.decode(C0, skip_special_tokens=True) == "3+5=8.\n\nSo 8"
    assert tok.decode(C1, skip_special_tokens=True) == "A\n\nx€"
    assert tok.decode(C1[:6], skip_special_tokens=True) != "A\n\nx€"  # '€' is complete on token 6 only


def test_pure_min_token_advantages_by_hand(make_trainer: Callable[..., Trainer]) -> None:
    """r'_k = w_k r_k on the token where step k ends; the verifiable outcome, times its coefficient,
    minus the mean of the other valid members' (RLOO), on the last token; minus the other valid members'
    process reward per token (PURE's token baseline) on every token; returns with γ = 1."""
    coef, temperature = 0.5, 0.1
    trainer = make_trainer(process_credit="pure_min", process_outcome_coef=coef)
    adv, _ = trainer._advantages([make_group(trainer.tokenizer)])
    p0, p1 = _softmin([0.9, 0.3], temperature), _softmin([0.8, 0.6], temperature)
    big_r = {0: sum(p0), 1: sum(p1), 3: 0.0}  # each valid member's process return (≈ min_k r_k)
    length = {0: 12, 1: 8, 3: 2}
    outcome = {0: 1.0, 1: 0.0, 3: 0.0}

    def baseline(i: int) -> float:  # Σ_{j≠i} R_j / Σ_{j≠i} |y_j| over the valid members
        others = [j for j in big_r if j != i]
        return sum(big_r[j] for j in others) / sum(length[j] for j in others)

    def rloo(i: int) -> float:
        return outcome[i] - sum(outcome[j] for j in outcome if j != i) / 2

    a0 = [
        (p0[0] if t <= 5 else 0.0) + (p0[1] if t <= 10 else 0.0) - baseline(0) * (12 - t) + coef * rloo(0)
        for t in range(12)
    ]
    a1 = [
        (p1[0] if t <= 0 else 0.0) + (p1[1] if t <= 6 else 0.0) - baseline(1) * (8 - t) + coef * rloo(1)
        for t in range(8)
    ]
    a3 = [-baseline(3) * (2 - t) + coef * rloo(3) for t in range(2)]
    assert _tokens(adv, 0) == pytest.approx(a0, abs=1e-12)
    assert _tokens(adv, 1) == pytest.approx(a1, abs=1e-12)
    assert _tokens(adv, 2) == [0.0, 0.0]  # the invalid member: masked, never 0-as-wrong in the others
    assert _tokens(adv, 3) == pytest.approx(a3, abs=1e-12)
    assert adv.mask.tolist() == [[True, True, False, True]]
    # its sequence-level value is its first token's
    assert adv.values[0].tolist() == pytest.approx([a0[0], a1[0], 0.0, a3[0]], abs=1e-12)
    # the soft-min: step 2 of completion 0 (r = −0.4) takes almost all the weight
    assert sum(p0) == pytest.approx(-0.4, abs=1e-4)


def test_grpo_process_normalises_every_step_of_the_group_jointly(
    make_trainer: Callable[..., Trainer],
) -> None:
    """DeepSeekMath §4.1.3: r̃ = (s − mean) / (std + eps) over the 4 steps of the valid members (the
    invalid member's 0.0 is not among them), A_{i,t} = Σ of r̃ of the steps ending at or after t."""
    trainer = make_trainer(process_credit="grpo_process")
    adv, _ = trainer._advantages([make_group(trainer.tokenizer)])
    # steps [0.9, 0.3, 0.8, 0.6]: mean 0.65, deviations .25 −.35 .15 −.05, Σ² = 0.21, sample std √0.07
    s = math.sqrt(0.07) + EPS
    n = {x: (x - 0.65) / s for x in (0.9, 0.3, 0.8, 0.6)}
    a0 = [(n[0.9] if t <= 5 else 0.0) + (n[0.3] if t <= 10 else 0.0) for t in range(12)]
    a1 = [(n[0.8] if t <= 0 else 0.0) + (n[0.6] if t <= 6 else 0.0) for t in range(8)]
    assert _tokens(adv, 0) == pytest.approx(a0, abs=1e-12)
    assert _tokens(adv, 1) == pytest.approx(a1, abs=1e-12)
    assert _tokens(adv, 2) == [0.0, 0.0] and _tokens(adv, 3) == [0.0, 0.0]
    assert adv.mask.tolist() == [[True, True, False, True]]


def test_the_loss_is_minus_the_token_advantages_over_the_tokens(make_trainer: Callable[..., Trainer]) -> None:
    """ρ = 1: ℓ_{i,t} = −A_{i,t}; token_mean divides Σ by the 22 tokens of the three valid members
    (the member with no step has advantage 0 on both tokens: not run, still in the normaliser)."""
    trainer = make_trainer(process_credit="grpo_process", loss_agg="token_mean")
    groups = [make_group(trainer.tokenizer)]
    adv, _ = trainer._advantages(groups)
    assert adv.tokens is not None
    total = sum(float(adv.tokens[0][g].sum()) for g in (0, 1, 3))
    stats = trainer._optimize(groups, adv)
    assert stats["seqs_in_loss"] == 3 and stats["seqs_forwarded"] == 2
    assert stats["ratio_mean"] == pytest.approx(1.0)
    assert stats["loss"] == pytest.approx(-total / (12 + 8 + 2), rel=1e-5)
    assert math.isfinite(stats["grad_norm"]) and stats["grad_norm"] > 0


def test_at_sequence_level_process_credit_is_gspo_token_each_token_keeping_its_advantage(
    make_trainer: Callable[..., Trainer],
) -> None:
    """``importance_sampling_level: sequence`` with per-token advantages is GSPO-token: at s_i = 1
    (recompute, one epoch) its gradient on token t is −A_{i,t}/(N |y_i|), the token level's under
    seq_mean_token_mean, so the two give the same loss and the same gradients; a sequence loss that
    read one advantage per completion (its mean, or its first token's) would not, the advantages
    varying along the completions here."""
    stats, grads = [], []
    for algorithm in (
        {"importance_sampling_level": "sequence"},
        {"importance_sampling_level": "token", "loss_agg": "seq_mean_token_mean"},
    ):
        trainer = make_trainer(process_credit="grpo_process", **algorithm)
        groups = [make_group(trainer.tokenizer)]
        adv, _ = trainer._advantages(groups)
        assert adv.tokens is not None and len(set(adv.tokens[0][0].tolist())) > 1
        stats.append(trainer._optimize(groups, adv))
        grads.append([p.grad.clone() for p in trainer.model.parameters() if p.grad is not None])
    assert stats[0]["loss"] == pytest.approx(stats[1]["loss"], rel=1e-6) and stats[0]["loss"] != 0
    assert (
        stats[0]["grad_norm"] == pytest.approx(stats[1]["grad_norm"], rel=1e-5) and stats[0]["grad_norm"] > 0
    )
    assert len(grads[0]) == len(grads[1]) > 0
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-7) for a, b in zip(grads[0], grads[1], strict=True))


def test_spans_count_from_the_response_sent_with_its_prefix(make_trainer: Callable[..., Trainer]) -> None:
    """The service scored data.response_prefix + completion: a span is shifted back by the prefix's
    length, and a step that ends inside the prefix (the prompt wrote it, not the policy) is no credit."""
    trainer = make_trainer(process_credit="grpo_process")
    ids = [[37, 203, 203, 38, EOS], [37, EOS]]  # "A\n\nB", "A"
    details = [_steps((0, 7, 0.0), (7, 8, 1.0), (10, 11, 0.5)), _steps((7, 8, 0.5))]
    group = make_group(trainer.tokenizer, ids, [1.0, 1.0], details, prefix="<think>")
    adv, _ = trainer._advantages([group])
    # the steps of the completions: [1.0, 0.5] and [0.5]: mean 2/3, sample std √(1/12)
    s = math.sqrt(1 / 12) + EPS
    hi, lo = (1.0 - 2 / 3) / s, (0.5 - 2 / 3) / s
    assert _tokens(adv, 0) == pytest.approx([hi + lo, lo, lo, lo, 0.0], abs=1e-12)
    assert _tokens(adv, 1) == pytest.approx([lo, 0.0], abs=1e-12)


def test_steps_read_from_a_composite_part(make_trainer: Callable[..., Trainer]) -> None:
    """process_steps_from names the composite component whose details.steps hold the step scores."""
    trainer = make_trainer(process_credit="grpo_process", process_steps_from="prm")
    nested = [
        {"parts": {"math": {"reason": None, "details": {}}, "prm": {"reason": None, "details": d}}}
        for d in STEPS
    ]
    adv, _ = trainer._advantages([make_group(trainer.tokenizer, details=nested)])
    plain = make_trainer(process_credit="grpo_process")
    want, _ = plain._advantages([make_group(plain.tokenizer)])
    assert adv.tokens is not None and want.tokens is not None
    for a, b in zip(adv.tokens[0], want.tokens[0], strict=True):
        assert a.tolist() == b.tolist()


def test_no_valid_item_with_steps_there_stops_the_run(make_trainer: Callable[..., Trainer]) -> None:
    """A misspelt process_steps_from would leave every item without step scores: every one masked, a
    run on nothing; the first batch with a valid item says so."""
    trainer = make_trainer(process_credit="pure_min", process_steps_from="prn")
    with pytest.raises(ValueError, match="process_steps_from"):
        trainer._advantages([make_group(trainer.tokenizer)])


def test_a_valid_item_without_steps_is_masked_not_zero(make_trainer: Callable[..., Trainer]) -> None:
    trainer = make_trainer(process_credit="grpo_process")
    details = [STEPS[0], STEPS[1], STEPS[2], {"aggregation": "min"}]  # the last: no steps at all
    adv, _ = trainer._advantages([make_group(trainer.tokenizer, details=details)])
    assert adv.mask.tolist() == [[True, True, False, False]]


def test_process_credit_settings_are_checked() -> None:
    assert AlgorithmConfig().process_credit == "none"
    for bad in (
        {"process_temperature": 0.5},  # process credit off
        {"process_credit": "grpo_process", "process_outcome_coef": 0.5},  # pure_min's
        {"process_credit": "pure_min", "estimator": "gdpo"},
        {"process_credit": "pure_min", "dynamic_sampling": True},
        {"process_credit": "pure_min", "scale_rewards": "batch"},
        {"process_credit": "pure_min", "process_temperature": 0.0},
    ):
        with pytest.raises(ValidationError):
            AlgorithmConfig.model_validate(bad)
    AlgorithmConfig.model_validate(
        {"process_credit": "pure_min", "estimator": "rloo", "process_temperature": 0.2}
    )


# ---- one step against a live service with a tiny PRM ----


def _prm_service(tmp_path_factory: pytest.TempPathFactory, **prm_env: str) -> Iterator[LiveServer]:
    """A live service on one CPU worker, its PRM backend set by ``REWARDHUB_PRM_*`` (``prm_env``); its
    start may take a while on a busy machine (an implicit PRM loads two models, each in its process)."""
    env = {"REWARDHUB_CPU_WORKERS": "1", **{f"REWARDHUB_PRM_{k.upper()}": v for k, v in prm_env.items()}}
    with serve(env, tmp=tmp_path_factory.mktemp("server"), ready_timeout_s=240) as server:
        yield server


@pytest.fixture(scope="module")
def prm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    from tiny_models import build_tiny_qwen_prm

    prm = build_tiny_qwen_prm(tmp_path_factory.mktemp("prm") / "qwen-prm")
    yield from _prm_service(tmp_path_factory, model=str(prm))


@pytest.fixture(scope="module")
def implicit_prm_server(
    tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path
) -> Iterator[LiveServer]:
    """PRIME's implicit PRM (prm convention implicit): π_φ is the policy's own tiny model (PRIME starts
    its PRM from the SFT policy), π_ref another one of the same tokenizer, other weights."""
    from tiny_models import build_tiny_causal_lm

    ref = build_tiny_causal_lm(tmp_path_factory.mktemp("prm") / "implicit-ref", seed=7)
    yield from _prm_service(
        tmp_path_factory, model=str(tiny_model_dir), ref_model=str(ref), convention="implicit"
    )


class _Recording(httpx.AsyncBaseTransport):
    """httpx's own transport, recording each score request's body (the transport boundary)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.bodies: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/score"):
            self.bodies.append(json.loads(await request.aread()))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Step:
    """One training step of the real trainer against a live service, keeping what it placed on tokens."""

    def __init__(self, tiny_model_dir: Path, run_dir: Path, reward: dict[str, Any], **algorithm: Any) -> None:
        self.cfg = TrainConfig.model_validate(
            {
                "model": {"path": str(tiny_model_dir), "device": "cpu", "torch_threads": 1},
                "reward": reward,
                "data": {"use_chat_template": False, "prompt_template": "{question}"},
                "generation": {"group_size": 4, "max_new_tokens": 12},
                "algorithm": algorithm,
                "training": {"steps": 1, "prompts_per_step": 2, "learning_rate": 0.01},
                "output": {
                    "run_dir": str(run_dir),
                    "progress": False,
                    "tensorboard": False,
                    "save_final_model": False,
                },
            }
        )
        self.transport = _Recording()
        self.placed: list[list[tuple[int, float]] | None] = []
        self.advantages: list[Any] = []
        step = self

        class Recording(Trainer):  # the real trainer, keeping the step values it placed and its advantages
            def _process_steps(self, groups: list[Group]) -> list[list[list[tuple[int, float]] | None]]:
                out = super()._process_steps(groups)
                step.placed.extend(s for row in out for s in row)
                return out

            def _advantages(self, groups: list[Group]) -> Any:
                out = super()._advantages(groups)
                step.advantages.append(out[0])
                return out

        self.trainer = Recording(self.cfg, reward_transport=self.transport)

    def run(self) -> dict[str, Any]:
        """Run the step; check what every process-credit run must do, and give its metrics row."""
        assert self.trainer.run()["steps"] == 1
        assert self.transport.bodies and all(b["options"]["include_details"] for b in self.transport.bodies)
        row = read_metrics(Path(self.cfg.output.run_dir))[0]
        assert row["invalid_frac"] == 0.0 and row["seqs_in_loss"] == 8
        assert row["seqs_forwarded"] > 0 and math.isfinite(row["loss"]) and row["adv_abs_mean"] > 0
        assert math.isfinite(row["grad_norm"]) and self.trainer.updates == 1
        # every completion was read with its step values (none masked for want of them), some placed
        assert len(self.placed) == 8 and all(p is not None for p in self.placed) and any(self.placed)
        return row


@pytest.mark.integration
def test_one_pure_min_step_against_a_live_prm(
    prm_server: LiveServer, tiny_model_dir: Path, tmp_path: Path
) -> None:
    reward = {"url": prm_server.url, "name": "prm", "config": {"separator": "\n"}}
    _Step(tiny_model_dir, tmp_path / "run", reward, process_credit="pure_min").run()


def test_without_process_credit_no_details_are_asked_for(make_trainer: Callable[..., Trainer]) -> None:
    from rewardhub_trainer.rewards import RewardDispatcher

    trainer = make_trainer()
    dispatcher = RewardDispatcher(trainer.config.reward, 4)
    try:
        assert dispatcher.include_details is False
    finally:
        dispatcher.close()
    adv, _ = trainer._advantages([make_group(trainer.tokenizer)])
    assert adv.tokens is None  # the sequence-level path, as before


def test_a_per_token_advantage_constant_along_t_is_the_per_sequence_one() -> None:
    """The loss's [B, T] path gives the [B] path's numbers exactly when every token has its sequence's
    advantage (the sequence-level path is unchanged: it still takes [B])."""
    import torch

    from rewardhub_trainer.losses import clipped_surrogate

    gen = torch.Generator().manual_seed(0)
    logp, old = torch.randn(3, 5, generator=gen), torch.randn(3, 5, generator=gen)
    adv = torch.tensor([0.7, -1.3, 0.0])
    per_seq = clipped_surrogate(logp, old, adv, 0.2, 0.28)
    per_tok = clipped_surrogate(logp, old, adv.unsqueeze(-1).expand(3, 5), 0.2, 0.28)
    for a, b in zip(per_seq, per_tok, strict=True):
        assert torch.equal(a, b)


def _implicit(*rows: tuple[int, int, float]) -> dict[str, Any]:
    """An implicit PRM's details (prm's ``implicit`` convention, PRIME): each step's ``process_reward``
    β·Σ log π_φ/π_ref, ``q`` their running sum and ``score`` σ(q), a value, not the step's reward."""
    steps, q = [], 0.0
    for k, (a, b, r) in enumerate(rows):
        q += r
        steps.append(
            {"index": k, "start": a, "end": b, "score": 1 / (1 + math.exp(-q)), "process_reward": r, "q": q}
        )
    return {"aggregation": "last", "steps": steps, "beta": 0.05}


IMPLICIT = [
    _implicit((0, 6, 0.4), (8, 12, -0.3)),
    _implicit((0, 1, 0.1), (3, 5, 0.2)),
    _implicit((0, 1, 0.0)),
    _implicit(),
]


def test_pure_min_on_an_implicit_prm_takes_its_process_rewards_as_the_step_rewards(
    make_trainer: Callable[..., Trainer],
) -> None:
    """PURE's r_k = 2 s_k − 1 reads a two-class PRM's p(+); an implicit PRM's score is σ(q_k), a running
    value (step 2 of completion 0 scores σ(0.1) > 0.5 though its own reward is −0.3), so the step reward
    is its process_reward as is (process_step_value auto), the soft-min taken over those."""
    trainer = make_trainer(process_credit="pure_min", process_outcome_coef=0.0)
    adv, _ = trainer._advantages([make_group(trainer.tokenizer, details=IMPLICIT)])
    want = _pure_tokens([[0.4, -0.3], [0.1, 0.2]])
    assert _tokens(adv, 0) == pytest.approx(want[0], abs=1e-12)
    assert _tokens(adv, 1) == pytest.approx(want[1], abs=1e-12)
    assert _tokens(adv, 3) == pytest.approx(want[3], abs=1e-12)
    assert adv.mask.tolist() == [[True, True, False, True]]
    # process_step_value: score reads σ(q) through PURE's 2s − 1 (what a two-class PRM's score means)
    forced = make_trainer(process_credit="pure_min", process_outcome_coef=0.0, process_step_value="score")
    adv, _ = forced._advantages([make_group(forced.tokenizer, details=IMPLICIT)])
    q = [[0.4, 0.1], [0.1, 0.3]]
    want = _pure_tokens([[2 / (1 + math.exp(-x)) - 1 for x in row] for row in q])
    assert _tokens(adv, 0) == pytest.approx(want[0], abs=1e-12)
    assert _tokens(adv, 1) == pytest.approx(want[1], abs=1e-12)


def _pure_tokens(r: list[list[float]], temperature: float = 0.1) -> dict[int, list[float]]:
    """pure_min's token advantages with no outcome term for step rewards ``r`` of members 0 and 1 (ending
    on the tokens of C0's and C1's steps), member 3 valid with no step, member 2 invalid."""
    p = []
    for row in r:
        e = [math.exp(-x / temperature) for x in row]
        p.append([x * w / sum(e) for x, w in zip(row, e, strict=True)])
    big_r, length = {0: sum(p[0]), 1: sum(p[1]), 3: 0.0}, {0: 12, 1: 8, 3: 2}

    def baseline(i: int) -> float:
        others = [j for j in big_r if j != i]
        return sum(big_r[j] for j in others) / sum(length[j] for j in others)

    return {
        0: [
            (p[0][0] if t <= 5 else 0.0) + (p[0][1] if t <= 10 else 0.0) - baseline(0) * (12 - t)
            for t in range(12)
        ],
        1: [
            (p[1][0] if t <= 0 else 0.0) + (p[1][1] if t <= 6 else 0.0) - baseline(1) * (8 - t)
            for t in range(8)
        ],
        3: [-baseline(3) * (2 - t) for t in range(2)],
    }


def test_grpo_process_on_an_implicit_prm_normalises_its_process_rewards(
    make_trainer: Callable[..., Trainer],
) -> None:
    """grpo_process normalises the step rewards over the group: an implicit PRM's process rewards."""
    trainer = make_trainer(process_credit="grpo_process")
    adv, _ = trainer._advantages([make_group(trainer.tokenizer, details=IMPLICIT)])
    r = [0.4, -0.3, 0.1, 0.2]
    mean = sum(r) / 4
    s = math.sqrt(sum((x - mean) ** 2 for x in r) / 3) + EPS
    n = [(x - mean) / s for x in r]
    assert _tokens(adv, 0) == pytest.approx(
        [(n[0] if t <= 5 else 0.0) + (n[1] if t <= 10 else 0.0) for t in range(12)], abs=1e-12
    )
    assert _tokens(adv, 1) == pytest.approx(
        [(n[2] if t <= 0 else 0.0) + (n[3] if t <= 6 else 0.0) for t in range(8)], abs=1e-12
    )


def test_process_step_value_process_reward_needs_steps_that_carry_one(
    make_trainer: Callable[..., Trainer],
) -> None:
    """process_step_value: process_reward on a two-class PRM's steps (no process_reward): nothing to read,
    and the first batch says so; auto reads their scores."""
    trainer = make_trainer(process_credit="pure_min", process_step_value="process_reward")
    with pytest.raises(ValueError, match="process_reward"):
        trainer._advantages([make_group(trainer.tokenizer)])
    auto = make_trainer(process_credit="pure_min", process_outcome_coef=0.5)
    plain = make_trainer(process_credit="pure_min", process_outcome_coef=0.5, process_step_value="score")
    a, _ = auto._advantages([make_group(auto.tokenizer)])
    b, _ = plain._advantages([make_group(plain.tokenizer)])
    assert a.tokens is not None and b.tokens is not None
    for x, y in zip(a.tokens[0], b.tokens[0], strict=True):
        assert x.tolist() == y.tolist()
    with pytest.raises(ValidationError):
        AlgorithmConfig.model_validate({"process_step_value": "score"})  # process credit off


# ---- prime: PRIME's own credit (implicit process rewards, RLOO per source, whitened) ----

B = [38, EOS]  # "B": one token and the EOS; a step [0, 1) ends on token 0
# two groups of three: (ids, the steps' (start, end, process_reward), outcome; None: invalid), each
# step's end token known: C0's [0, 6) and [8, 12) on tokens 5 and 10, C1's [0, 1) and [3, 5) on 0 and 6
PRIME_GROUPS: list[list[tuple[list[int], list[tuple[int, int, float]], float | None]]] = [
    [
        (C0, [(0, 6, 0.4), (8, 12, -0.3)], 1.0),
        (C1, [(0, 1, 0.1), (3, 5, 0.2)], 0.0),
        (B, [(0, 1, -0.2)], 0.0),
    ],
    [
        (C1, [(0, 1, 0.3), (3, 5, -0.1)], 1.0),
        (C0, [(0, 6, 0.2), (8, 12, 0.2)], 1.0),
        (B, [(0, 1, 0.5)], None),  # invalid: K is 2 in this group, its 0.5 in no baseline or norm
    ],
]
END_TOKEN = {id(C0): {6: 5, 12: 10}, id(C1): {1: 0, 5: 6}, id(B): {1: 0}}


def _prime_groups(tokenizer: Any, truncated: tuple[int, int] | None = None) -> list[Group]:
    groups = []
    for b, rows in enumerate(PRIME_GROUPS):
        ids = [r[0] for r in rows]
        group = make_group(tokenizer, ids, [r[2] for r in rows], [_implicit(*r[1]) for r in rows])
        group.group_id = f"g{b}"
        groups.append(group)
    if truncated is not None:
        groups[truncated[0]].completions[truncated[1]].truncated = True
    return groups


def _prime_by_hand(
    coef: float, batch_norm: bool, whitened: set[tuple[int, int]] | None = None
) -> dict[tuple[int, int], list[float]]:
    """PRIME's token advantages written out: r_s on the token ending its step; over the group's K valid
    members the baselines 1/(K−1) Σ_{j≠i} R_j/|y_j| off every token and 1/(K−1) Σ_{j≠i} o_j off the
    outcome (times c, on the last token); returns with γ = 1; then (A − mean) / sqrt(var + 1e-8) over
    every token of the members ``whitened`` (default all valid), sample variance."""
    # batch_norm: the largest |Σ of the rewards at or after a token| of any valid member: the suffix sums
    # are 0.1, −0.3 | 0.3, 0.2 | −0.2 | 0.2, −0.1 | 0.4, 0.2, so 0.4 (the invalid member's 0.5 is not read)
    scale = 0.4 + 1e-6 if batch_norm else 1.0
    raw: dict[tuple[int, int], list[float]] = {}
    for b, rows in enumerate(PRIME_GROUPS):
        valid = [g for g, r in enumerate(rows) if r[2] is not None]
        k = len(valid)
        for g in valid:
            ids, steps, outcome = rows[g]
            n = len(ids)
            placed = [0.0] * n
            for _, end, r in steps:
                placed[END_TOKEN[id(ids)][end]] += r / scale
            others = [j for j in valid if j != g]
            rate = sum(sum(r for *_, r in rows[j][1]) / scale / len(rows[j][0]) for j in others) / (k - 1)
            out = coef * (outcome - sum(rows[j][2] for j in others) / (k - 1))  # type: ignore[operator,misc]
            raw[b, g] = [sum(placed[t:]) - rate * (n - t) + out for t in range(n)]
    keys = whitened if whitened is not None else set(raw)
    flat = [x for key in sorted(keys) for x in raw[key]]
    mean = sum(flat) / len(flat)
    var = sum((x - mean) ** 2 for x in flat) / (len(flat) - 1)
    return {key: [(x - mean) / math.sqrt(var + 1e-8) for x in a] for key, a in raw.items()}


@pytest.mark.parametrize(("coef", "norm"), [(1.0, "batch_norm"), (0.5, "none")])
def test_prime_token_advantages_by_hand(make_trainer: Callable[..., Trainer], coef: float, norm: str) -> None:
    """Two groups of three: the process rewards (an implicit PRM's process_reward, read as is) on the
    tokens ending their steps, each member's leave-one-out baselines over its group's valid members
    (K = 3, and 2 where one is invalid), returns, the outcome term, and the whitening over the batch."""
    trainer = make_trainer(process_credit="prime", process_outcome_coef=coef, process_norm=norm)
    adv, _ = trainer._advantages(_prime_groups(trainer.tokenizer))
    want = _prime_by_hand(coef, norm == "batch_norm")
    assert adv.tokens is not None
    for (b, g), a in want.items():
        assert adv.tokens[b][g].tolist() == pytest.approx(a, abs=1e-6), (b, g)
    assert adv.tokens[1][2].tolist() == [0.0, 0.0]  # the invalid member
    assert adv.mask.tolist() == [[True, True, True], [True, True, False]]
    # a member's sequence-level value is its first token's
    firsts = [want[0, 0][0], want[0, 1][0], want[0, 2][0], want[1, 0][0], want[1, 1][0], 0.0]
    assert adv.values.flatten().tolist() == pytest.approx(firsts, abs=1e-6)
    tokens = torch.cat([adv.tokens[b][g] for b, g in want])  # whitened: mean 0, sample std 1
    assert float(tokens.mean()) == pytest.approx(0.0, abs=1e-9)
    assert float(tokens.std()) == pytest.approx(1.0, abs=1e-6)


def test_prime_whitens_over_the_completions_left_in_the_loss(make_trainer: Callable[..., Trainer]) -> None:
    """With mask_truncated, a truncated completion is out of the loss: still a member of its group's
    baselines (it was sampled), but not of the whitening statistics (PRIME whitens over what it trains)."""
    trainer = make_trainer(process_credit="prime", mask_truncated=True)
    adv, _ = trainer._advantages(_prime_groups(trainer.tokenizer, truncated=(0, 1)))
    want = _prime_by_hand(1.0, True, whitened={(0, 0), (0, 2), (1, 0), (1, 1)})
    assert adv.tokens is not None
    for b, g in [(0, 0), (0, 2), (1, 0), (1, 1)]:
        assert adv.tokens[b][g].tolist() == pytest.approx(want[b, g], abs=1e-6), (b, g)
    assert adv.tokens[0][1].tolist() == [0.0] * len(C1)
    assert adv.mask.tolist() == [[True, False, True], [True, True, False]]


def test_a_prime_member_with_no_other_valid_member_is_zero_and_not_whitened(
    make_trainer: Callable[..., Trainer],
) -> None:
    """No leave-one-out baseline without another valid member: the lone member's advantage is 0 (in the
    loss, as RLOO's), and its tokens do not move the whitening of the others."""
    trainer = make_trainer(process_credit="prime", process_norm="none")
    groups = _prime_groups(trainer.tokenizer)
    alone = make_group(
        trainer.tokenizer, [C1, C0, B], [1.0, None, None], [_implicit((0, 1, 0.3)), _implicit(), _implicit()]
    )
    adv, _ = trainer._advantages([groups[0], alone])
    want, _ = trainer._advantages([groups[0]])
    assert adv.tokens is not None and want.tokens is not None
    for g in range(3):
        assert adv.tokens[0][g].tolist() == pytest.approx(want.tokens[0][g].tolist(), abs=1e-12)
    assert adv.tokens[1][0].tolist() == [0.0] * len(C1)
    assert adv.mask.tolist() == [[True, True, True], [True, False, False]]


def test_prime_reads_process_rewards_only(make_trainer: Callable[..., Trainer]) -> None:
    """A two-class PRM's steps have no process_reward: nothing for prime to sum (masked), and a first
    batch with none stops the run, naming the mode; a step's score (σ(q_k) of an implicit PRM) is never
    read: the same process rewards under other scores give the same advantages."""
    trainer = make_trainer(process_credit="prime")
    with pytest.raises(ValueError, match="process_credit prime: no valid item"):
        trainer._advantages([make_group(trainer.tokenizer)])
    groups = _prime_groups(trainer.tokenizer)
    a, _ = trainer._advantages(groups)
    for group in groups:
        for r in group.results:
            for step in r.details["steps"]:  # type: ignore[index]
                step["score"] = 1.0 - step["score"]
    b, _ = trainer._advantages(groups)
    assert a.tokens is not None and b.tokens is not None
    for x, y in zip(a.tokens, b.tokens, strict=True):
        assert [t.tolist() for t in x] == [t.tolist() for t in y]


def test_prime_settings_are_checked() -> None:
    """prime takes the outcome weight and PRIME's batch norm; the settings it does not read, and a
    step value that is no process reward, are refused by name."""
    ok = AlgorithmConfig.model_validate({"process_credit": "prime"})
    assert (ok.process_outcome_coef, ok.process_norm, ok.process_step_value) == (1.0, "batch_norm", "auto")
    AlgorithmConfig.model_validate(
        {
            "process_credit": "prime",
            "estimator": "rloo",
            "process_outcome_coef": 0.0,
            "process_norm": "none",
            "process_step_value": "process_reward",
            "process_steps_from": "prm",
        }
    )
    for bad, says in (
        ({"process_credit": "prime", "process_step_value": "score"}, "process_step_value score"),
        ({"process_credit": "prime", "process_temperature": 0.2}, "process_temperature: pure_min only"),
        ({"process_credit": "prime", "std_eps": 1e-6}, "std_eps"),
        ({"process_credit": "prime", "estimator": "gdpo"}, "process_credit prime computes"),
        ({"process_credit": "prime", "dynamic_sampling": True}, "with process_credit prime"),
        ({"process_credit": "pure_min", "process_norm": "none"}, "process_norm: prime only"),
        ({"process_credit": "grpo_process", "process_norm": "none"}, "process_norm: prime only"),
        ({"process_norm": "none"}, "process credit is off"),
    ):
        with pytest.raises(ValidationError, match=says):
            AlgorithmConfig.model_validate(bad)


@pytest.mark.integration
def test_one_prime_step_against_a_live_implicit_prm(
    implicit_prm_server: LiveServer, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """PRIME's setup: a verifier's outcome (here a regex: a digit or not) at weight 1 and the implicit PRM
    at weight 0, its process rewards read from the composite part; one step, finite, whitened."""
    components = [
        {"reward": {"name": "regex", "config": {"pattern": "\\d"}}, "name": "verifier"},
        {"reward": {"name": "prm", "config": {"separator": "\n"}}, "name": "prm", "weight": 0},
    ]
    reward = {
        "url": implicit_prm_server.url,
        "name": "composite",
        "config": {"components": components},
        "accuracy_key": "verifier",
    }
    step = _Step(tiny_model_dir, tmp_path / "run", reward, process_credit="prime", process_steps_from="prm")
    step.run()
    # the values placed are the implicit PRM's process rewards (prime reads nothing else: none masked)
    assert all(math.isfinite(x) for p in step.placed for _, x in p or ())
    (adv,) = step.advantages
    tokens = torch.cat(
        [
            a
            for row, m in zip(adv.tokens, adv.mask.tolist(), strict=True)
            for a, k in zip(row, m, strict=True)
            if k
        ]
    )
    assert float(tokens.mean()) == pytest.approx(0.0, abs=1e-6)
    assert float(tokens.std()) == pytest.approx(1.0, abs=1e-3)
