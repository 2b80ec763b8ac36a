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


@pytest.fixture(scope="module")
def prm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    from tiny_models import build_tiny_qwen_prm

    prm = build_tiny_qwen_prm(tmp_path_factory.mktemp("prm") / "qwen-prm")
    env = {"REWARDHUB_CPU_WORKERS": "1", "REWARDHUB_PRM_MODEL": str(prm)}
    with serve(env, tmp=tmp_path_factory.mktemp("server")) as server:
        yield server


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


@pytest.mark.integration
def test_one_pure_min_step_against_a_live_prm(
    prm_server: LiveServer, tiny_model_dir: Path, tmp_path: Path
) -> None:
    cfg = TrainConfig.model_validate(
        {
            "model": {"path": str(tiny_model_dir), "device": "cpu", "torch_threads": 1},
            "reward": {"url": prm_server.url, "name": "prm", "config": {"separator": "\n"}},
            "data": {"use_chat_template": False, "prompt_template": "{question}"},
            "generation": {"group_size": 4, "max_new_tokens": 12},
            "algorithm": {"process_credit": "pure_min"},
            "training": {"steps": 1, "prompts_per_step": 2, "learning_rate": 0.01},
            "output": {
                "run_dir": str(tmp_path / "run"),
                "progress": False,
                "tensorboard": False,
                "save_final_model": False,
            },
        }
    )
    transport = _Recording()
    placed: list[list[tuple[int, float]] | None] = []

    class Recording(Trainer):  # the real trainer, keeping the step scores it placed on tokens
        def _process_steps(self, groups: list[Group]) -> list[list[list[tuple[int, float]] | None]]:
            out = super()._process_steps(groups)
            placed.extend(s for row in out for s in row)
            return out

    trainer = Recording(cfg, reward_transport=transport)
    summary = trainer.run()
    assert summary["steps"] == 1
    assert transport.bodies and all(b["options"]["include_details"] for b in transport.bodies)
    row = read_metrics(Path(cfg.output.run_dir))[0]
    assert row["invalid_frac"] == 0.0 and row["seqs_in_loss"] == 8
    assert row["seqs_forwarded"] > 0 and math.isfinite(row["loss"]) and row["adv_abs_mean"] > 0
    assert trainer.updates == 1
    # every completion was read with its PRM step scores (none masked for want of them), some placed
    assert len(placed) == 8 and all(p is not None for p in placed) and any(placed)


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
