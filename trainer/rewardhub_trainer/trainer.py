"""The training loop: sample groups, score them over HTTP (overlapped), estimate advantages, optimise.

One step::

    repeat (more than once only with dynamic sampling or the accuracy filter, at most
            max_sampling_rounds, and not after a round in which every reward request failed):
        take the prompts still needed from the indexed data source
        for each chunk of prompts_per_generate prompts:            # main thread
            generate G completions each (token ids + sampling logprobs)
            submit the chunk's whole groups to the reward service  # in flight while the next chunk generates
        wait for the answers                                       # the only time the loop blocks on rewards
        dynamic sampling: keep groups whose valid rewards differ (gdpo: whose components differ)
        accuracy filter: keep groups whose accuracy is within [low, high] (with dynamic sampling: both)
    rewards (NaN = invalid, or its request failed) [+ overlong shaping] → advantages + mask (advantages.py)
        (process credit: per-token advantages from the PRM step scores in the results' details, their
        character spans placed on completion tokens by process.py)
    for epoch in 1..num_epochs:                                    # one optimizer step per epoch
        for each micro-batch: PPO-clip (token or sequence ratio; optional dual clip) (+ β·KL) per token,
                              aggregated with global normalisers, backward
        clip gradients, step (skipped, weights unchanged, when a loss input or the gradient is not finite)

Old logprobs: ``sampler`` uses the logprobs recorded during sampling (the sampling policy's own);
``recompute`` uses the policy's logprobs from the first epoch's forward, which is free here because the
weights do not change until the end of that epoch (one optimizer step per epoch).

Sequences whose advantage is exactly 0 carry no policy gradient (ρ·0 = 0); when the KL term is off they
are counted in the loss normalisers but not run through the model, which is mathematically identical and
saves the forward/backward of every zero-variance group. The per-token policy metrics (``entropy``,
``logprob_mismatch``, ``clip_frac``, ``dual_clip_frac``, ``ratio_mean``) are therefore means over the
tokens of the sequences that were run (``seqs_forwarded``, against ``seqs_in_loss``): with the KL off, over
the sequences with a non-zero advantage only, so they are not comparable with a KL-on run's token for
token. At ``importance_sampling_level: sequence`` they stay per token: a clipped completion counts once per
token in ``clip_frac`` and its ratio ``s_i`` once per token in ``ratio_mean`` (the GSPO paper's clipped-token
fraction, and verl's and TRL's), so token and sequence runs share one denominator.
"""

from __future__ import annotations

import importlib
import json
import logging
import math
import random
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import torch

from rewardhub_client import ItemResult, RewardClient, RewardHubClientError
from rewardhub_client._core import shadow_rates
from rewardhub_trainer.advantages import (
    Advantages,
    component_matrix,
    dr_grpo_advantages,
    gdpo_advantages,
    grpo_advantages,
    grpo_process_advantages,
    mc_grpo_advantages,
    overlong_penalty,
    prime_advantages,
    pure_min_advantages,
    rloo_advantages,
    zero_variance_groups,
)
from rewardhub_trainer.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from rewardhub_trainer.config import TrainConfig, to_dict
from rewardhub_trainer.data import Problem, encode_prompt, make_source
from rewardhub_trainer.generation import Completion, make_generator
from rewardhub_trainer.losses import (
    LossNorm,
    aggregate,
    kl_estimate,
    nonfinite_tokens,
    policy_loss,
    token_logprobs,
)
from rewardhub_trainer.metrics import MetricsWriter
from rewardhub_trainer.modeling import load_policy, reference_context
from rewardhub_trainer.process import read_steps, step_key, step_scores
from rewardhub_trainer.rewards import (
    Group,
    RewardDispatcher,
    check_service,
    request_failed,
    retry_after_note,
)

__all__ = ["Trainer", "train"]

logger = logging.getLogger(__name__)


@dataclass
class _Seq:
    completion: Completion
    advantage: float
    weight: float = 0.0  # bnpo: 1 / (micro-batches · tokens of its micro-batch)
    tokens: torch.Tensor | None = None  # process credit: its per-token advantages ([|y|])

    @property
    def signal(self) -> bool:
        """Whether it has a non-zero advantage (one that gives a policy gradient)."""
        return bool(self.tokens.any()) if self.tokens is not None else self.advantage != 0.0


@dataclass
class _Collected:
    groups: list[Group]  # the groups trained on
    scored: list[Group]  # every group scored this step (metrics are over these)
    rounds: int
    # answered groups dropped, by dynamic sampling for no signal or by the accuracy filter (not those
    # whose request failed)
    dropped: int
    gen_s: float
    filtered: int = 0  # of those, the ones the accuracy filter dropped (dynamic sampling may drop them too)


class Trainer:
    """GRPO-family trainer; rewards come from a rewardhub service through ``rewardhub_client`` only.

    ``reward_transport``: the httpx transport the reward requests go through (default: httpx's own);
    tests put failures at this boundary.
    """

    def __init__(self, config: TrainConfig, *, reward_transport: httpx.AsyncBaseTransport | None = None):
        self.config = config
        self.reward_transport = reward_transport
        # made when the run starts (run()), not here: a start that fails (no model) leaves nothing behind
        self.run_dir = Path(config.output.run_dir)
        torch.manual_seed(config.training.seed)
        random.seed(config.training.seed)
        if config.model.torch_threads:
            torch.set_num_threads(config.model.torch_threads)
        alg = config.algorithm
        self.model, self.tokenizer, self.reference = load_policy(config.model, need_reference=alg.kl_coef > 0)
        self.model.train()
        params = [p for p in self.model.parameters() if p.requires_grad]
        t = config.training
        self.optimizer = torch.optim.AdamW(
            params, lr=t.learning_rate, betas=t.adam_betas, weight_decay=t.weight_decay
        )
        self.generator = make_generator(
            config.generation.backend,
            self.model,
            self.tokenizer,
            config.generation,
            config.model.path,
            config.model.dtype,
        )
        self.source = make_source(config.data)
        self.n_per_prompt = config.generation.group_size + (1 if alg.estimator == "mc_grpo" else 0)
        self.step = 0
        # steps that stepped the optimizer; the learning-rate schedule follows these, not the steps
        self.updates = 0
        self.data_pos = 0
        self._gdpo_weights_checked = False
        self._accuracy_key_checked = False
        self._process_steps_checked = False
        self.totals = {"reward_wait_s": 0.0, "wall_s": 0.0}
        self.failed_steps = 0  # consecutive steps in which no reward request was answered
        self.invalid_steps = 0  # consecutive steps in which every answered item was valid: false
        self.skipped_steps = 0  # consecutive steps in which every optimizer step was skipped (non-finite)
        # reward requests sent, failed (in part or whole) and unanswered (failed whole: nothing of them
        # answered) over the whole run, a resumed one's earlier steps included (summary.json; the
        # dispatcher counts only those of this process)
        self.requests = {"reward_requests": 0, "reward_requests_failed": 0, "reward_requests_unanswered": 0}

    # ---- data ----
    def _encode(self, problem: Problem) -> list[int]:
        return encode_prompt(self.config.data, problem.question, self.tokenizer)

    def _take(self, n: int) -> list[Problem]:
        problems = [self.source.problem(self.data_pos + i) for i in range(n)]
        self.data_pos += n
        return problems

    # ---- sampling + rewards ----
    def _collect(self, dispatcher: RewardDispatcher) -> _Collected:
        cfg, alg = self.config, self.config.algorithm
        want = cfg.training.prompts_per_step
        # both drop groups and sample more prompts in their place, in the same rounds
        refill = alg.resolved_dynamic_sampling or alg.accuracy_filter is not None
        rounds = alg.max_sampling_rounds if refill else 1
        kept: list[Group] = []
        scored: list[Group] = []
        dropped = filtered = 0
        gen_s = 0.0
        used_rounds = 0
        for _ in range(rounds):
            used_rounds += 1
            problems = self._take(want - len(kept))
            pending = []
            chunk = cfg.generation.prompts_per_generate
            for start in range(0, len(problems), chunk):
                part = problems[start : start + chunk]
                t0 = time.perf_counter()
                completions = self.generator.generate([self._encode(p) for p in part], self.n_per_prompt)
                gen_s += time.perf_counter() - t0
                groups = [
                    Group(
                        dispatcher.group_id(self.step, p.index),
                        p,
                        comps,
                        response_prefix=self.config.data.response_prefix,
                    )
                    for p, comps in zip(part, completions, strict=True)
                ]
                pending.append((groups, dispatcher.submit(groups)))  # scored while the next chunk generates
            new: list[Group] = []
            for groups, fut in pending:
                results = dispatcher.wait(fut)
                for k, g in enumerate(groups):
                    g.results = results[k * self.n_per_prompt : (k + 1) * self.n_per_prompt]
                new.extend(groups)
            scored.extend(new)
            if refill:
                if alg.accuracy_filter is not None:
                    # before the filter reads it: a misspelt key would leave every group without an
                    # accuracy, none judged, with nothing said (the check is once, on a valid item)
                    self._check_accuracy_key(new)
                zero = self._no_signal(new).tolist() if alg.resolved_dynamic_sampling else [False] * len(new)
                outside = self._outside_accuracy(new)
                for g, z, o in zip(new, zero, outside, strict=True):
                    if not (z or o):
                        kept.append(g)
                    elif not _group_failed(g):
                        # a failed group (all NaN) is not kept by dynamic sampling either, but counted as
                        # failed (groups_failed), not as a prompt with no signal: an outage must not read
                        # as too easy or too hard a batch (the accuracy filter never judges one)
                        dropped += 1
                        filtered += o
            else:
                kept.extend(new)
            if len(kept) >= want:
                break
            if all(request_failed(r) for g in new for r in g.results):
                # the service answered nothing: another round's prompts would be lost the same way
                break
        return _Collected(
            groups=kept[:want],
            scored=scored,
            rounds=used_rounds,
            dropped=dropped,
            gen_s=gen_s,
            filtered=filtered,
        )

    def _outside_accuracy(self, groups: list[Group]) -> list[bool]:
        """The groups the accuracy filter (``algorithm.accuracy_filter``, PRIME's) drops: those whose
        accuracy is outside ``[low, high]`` (all False when it is off).

        A group's accuracy is over its valid items, as the ``accuracy`` metric's: the share of them whose
        ``reward.accuracy_key`` (else score) is at least ``reward.accuracy_threshold``. A group with no
        such value (its request failed, every item invalid, or the key's component null in all of its
        valid items) has none and is not judged: it is what it would be without the filter (failed,
        masked, or kept on its score), not a too-easy or too-hard prompt.

        MC-GRPO: over all G+1 samples, the pivot (left out of the loss) included. The accuracy estimates
        the prompt's pass rate and the G+1 are i.i.d. draws of it; the pivot is picked by its reward
        (the median), so leaving it out would pull the estimate toward the middle and keep prompts the
        filter is there to drop. It is also the baseline every trained member's advantage is taken to.
        """
        bounds = self.config.algorithm.accuracy_filter
        if bounds is None:
            return [False] * len(groups)
        low, high = bounds
        out = []
        for g in groups:
            values = [a for r in g.results if (a := self._accurate(r)) is not None]
            acc = sum(values) / len(values) if values else None
            out.append(acc is not None and not low <= acc <= high)
        return out

    def _accurate(self, result: ItemResult) -> float | None:
        """1.0 if the item is accurate, 0.0 if not, None if it says nothing (invalid, or without the
        value): its ``reward.accuracy_key`` component, else its score, against ``accuracy_threshold``."""
        rc = self.config.reward
        if not result.valid:
            return None
        v = result.score if rc.accuracy_key is None else result.components.get(rc.accuracy_key)
        return None if v is None else (1.0 if v >= rc.accuracy_threshold else 0.0)

    def _no_signal(self, groups: list[Group]) -> torch.Tensor:
        """``[B]`` bool: the groups dynamic sampling drops (their valid rewards are all equal).

        For GDPO "rewards" are the service's components, which it normalises one by one (those of weight
        0 left out): a group whose components differ carries signal even when their weighted totals tie.
        Overlong shaping is no reason to keep a group, for any estimator: as in DAPO, the filter is on
        what the service scored, not on lengths. MC-GRPO: over its G+1 valid rewards, the pivot's
        included, which is exactly "no member left in the loss has a non-zero advantage" (the pivot is at
        the median: a member that differs from it is not the pivot, and its ``r − median`` is not 0).
        """
        scores = torch.tensor([g.scores() for g in groups], dtype=torch.float64)
        if self.config.algorithm.estimator != "gdpo":
            return zero_variance_groups(scores)
        # with the checks of the components the advantages make: dynamic sampling looks first, and a
        # misspelt or absent component, no signal in any group, would have every group dropped before
        # the advantages ever saw one (all-invalid groups without components: no signal, no error)
        comps, weights = self._gdpo_components(groups)
        comps = torch.where(torch.isnan(scores).unsqueeze(-1), math.nan, comps)  # invalid: no signal
        return zero_variance_groups(comps[..., [k for k, w in enumerate(weights) if w != 0]])

    def _gdpo_components(self, groups: list[Group]) -> tuple[torch.Tensor, list[float]]:
        """GDPO's ``[B, G, K]`` reward components and their weights."""
        alg = self.config.algorithm
        names = alg.gdpo_components or _top_level_components(groups)
        returned = sorted({k for g in groups for r in g.results for k in r.components})
        answered = bool(returned) or any(r.valid for g in groups for r in g.results)
        if answered and not self._gdpo_weights_checked:
            # Once, on the first batch the service answered with components (or with a valid item): a
            # misspelt name would silently be "null in every item" for the whole run: an explicit
            # component no signal at all (every one misspelt: every advantage 0, nothing trained on),
            # a weight left at 1 on its component (and the intended one at its default). That the
            # weights name listed components is checked when the config loads; that the listed
            # components exist, only here.
            missing = sorted(set(alg.gdpo_components or ()) - set(returned))
            if missing:
                raise ValueError(
                    f"algorithm.gdpo_components names {missing}, which the reward service does not "
                    f"return; its components are {returned}"
                )
            unknown = sorted(set(alg.gdpo_weights) - set(names))
            if unknown:
                raise ValueError(
                    f"algorithm.gdpo_weights names {unknown}, which the reward service does not return; "
                    f"its components are {names}"
                )
            self._gdpo_weights_checked = True
        comps = component_matrix([[r.components for r in g.results] for g in groups], names)
        return comps, [alg.gdpo_weights.get(n, 1.0) for n in names]

    # ---- advantages ----
    def _shaping(self, groups: list[Group]) -> torch.Tensor:
        """``[B, G]`` DAPO's overlong shaping of the groups' completions, added to their rewards (0 when
        it is off)."""
        alg, gen = self.config.algorithm, self.config.generation
        lengths = torch.tensor([[len(c.completion_ids) for c in g.completions] for g in groups])
        if not alg.resolved_overlong:
            return torch.zeros(lengths.shape, dtype=torch.float64)
        o = alg.overlong
        return overlong_penalty(lengths, o.max_length or gen.max_new_tokens, o.cache_length, o.penalty_factor)

    def _process_steps(self, groups: list[Group]) -> list[list[list[tuple[int, float]] | None]]:
        """Per group, per member: its step values on the completion's tokens (process.py), None where the
        result has none to read (masked). A valid item must have them somewhere in the first batch with
        a valid item: else the place read (algorithm.process_steps_from) is wrong, and every item of the
        run would be masked.

        The value is what ``algorithm.process_step_value`` reads: for ``pure_min`` the step reward
        ``r_k`` (a score ``s`` becomes PURE's ``2s − 1``, the ``p(+) − p(−)`` of a two-class PRM; an
        implicit PRM's ``process_reward`` is already a reward and is taken as is), for ``grpo_process``
        the score or process reward itself (it normalises them over the group), for ``prime`` the
        process reward only (a score is no reward to sum: steps without one are masked)."""
        alg = self.config.algorithm
        where = alg.process_steps_from
        value = "process_reward" if alg.process_credit == "prime" else alg.process_step_value
        out: list[list[list[tuple[int, float]] | None]] = []
        found = False
        for g in groups:
            row: list[list[tuple[int, float]] | None] = []
            for c, r in zip(g.completions, g.results, strict=True):
                steps = read_steps(r, where) if r.valid else None
                key = None if steps is None else step_key(steps, value)
                # an empty list carries no process_reward to tell an implicit PRM's from another's
                found = found or (key is not None and (bool(steps) or value != "process_reward"))
                if steps is None or key is None:
                    row.append(None)
                    continue
                placed = step_scores(self.tokenizer, steps, c.completion_ids, c.text, g.response_prefix, key)
                if alg.process_credit == "pure_min" and key == "score":
                    placed = [(t, 2.0 * x - 1.0) for t, x in placed]
                row.append(placed)
            out.append(row)
        valid = any(r.valid for g in groups for r in g.results)
        if valid and not found and not self._process_steps_checked:
            place = f"details.parts.{where}...details.steps" if where else "details.steps"
            if value == "process_reward":
                # (prime reads process rewards only: a score is no way out for it)
                asked, instead = (
                    ("process_credit prime", "use process_credit pure_min or grpo_process for step scores")
                    if alg.process_credit == "prime"
                    else ("process_step_value process_reward", "set process_step_value auto or score")
                )
                raise ValueError(
                    f"algorithm.{asked}: no valid item of reward "
                    f"{self.config.reward.name!r} has steps with a process_reward in {place} (an implicit "
                    f"PRM's: prm with convention implicit); {instead}, or set process_steps_from to the "
                    "component that has them"
                )
            raise ValueError(
                f"algorithm.process_steps_from: no valid item of reward {self.config.reward.name!r} has step "
                f"scores in {place}; process credit needs a reward that returns them (prm, judge in steps "
                "mode), or set process_steps_from to the composite component that does"
            )
        self._process_steps_checked = self._process_steps_checked or found
        return out

    def _advantages(self, groups: list[Group]) -> tuple[Advantages, torch.Tensor]:
        alg = self.config.algorithm
        raw = torch.tensor([g.scores() for g in groups], dtype=torch.float64)
        shaping = self._shaping(groups)
        rewards = raw + shaping  # NaN (invalid) stays NaN
        lengths = [[len(c.completion_ids) for c in g.completions] for g in groups]
        if alg.process_credit == "pure_min":
            adv = pure_min_advantages(
                self._process_steps(groups),
                raw,
                lengths,
                temperature=alg.process_temperature,
                outcome_coef=alg.process_outcome_coef,
            )
        elif alg.process_credit == "grpo_process":
            adv = grpo_process_advantages(self._process_steps(groups), raw, lengths, alg.std_eps)
        elif alg.process_credit == "prime":
            truncated = torch.tensor([[c.truncated for c in g.completions] for g in groups])
            adv = prime_advantages(
                self._process_steps(groups),
                raw,
                lengths,
                outcome_coef=alg.process_outcome_coef,
                norm=alg.process_norm,
                # whitened over the completions left in the loss (mask_truncated takes some out below)
                whiten_over=~truncated if alg.mask_truncated else None,
            )
        elif alg.estimator in ("grpo", "dapo"):
            adv = grpo_advantages(rewards, alg.std_eps, alg.resolved_scale_rewards)
        elif alg.estimator == "dr_grpo":
            adv = dr_grpo_advantages(rewards)
        elif alg.estimator == "rloo":
            adv = rloo_advantages(rewards)
        elif alg.estimator == "mc_grpo":
            adv = mc_grpo_advantages(rewards, mad_scaling=alg.mc_mad_scaling, mad_floor=alg.mc_mad_floor)
        else:
            comps, weights = self._gdpo_components(groups)
            if alg.resolved_overlong:
                # a component of its own, normalised within its group like the others, which divides any
                # scale away: penalty_factor is its weight instead (unscaled shaping, same ramp)
                factor = alg.overlong.penalty_factor
                comps = torch.cat([comps, (shaping / factor if factor else shaping).unsqueeze(-1)], dim=-1)
                weights.append(factor)
            adv = gdpo_advantages(comps, ~torch.isnan(raw), weights, alg.std_eps)
        if alg.mask_truncated:
            truncated = torch.tensor([[c.truncated for c in g.completions] for g in groups])
            tokens = adv.tokens
            if tokens is not None:
                tokens = [
                    [torch.zeros_like(a) if t else a for a, t in zip(row, cut, strict=True)]
                    for row, cut in zip(tokens, truncated.tolist(), strict=True)
                ]
            adv = Advantages(
                values=torch.where(truncated, 0.0, adv.values), mask=adv.mask & ~truncated, tokens=tokens
            )
        return adv, rewards

    # ---- optimisation ----
    def _collate(self, seqs: list[_Seq]) -> dict[str, torch.Tensor]:
        p_len = max(len(s.completion.prompt_ids) for s in seqs)
        c_len = max(len(s.completion.completion_ids) for s in seqs)
        pad = int(self.tokenizer.pad_token_id)
        ids = torch.full((len(seqs), p_len + c_len), pad, dtype=torch.long)
        attn = torch.zeros_like(ids)
        old = torch.zeros((len(seqs), c_len), dtype=torch.float32)
        for i, s in enumerate(seqs):
            p, c = s.completion.prompt_ids, s.completion.completion_ids
            ids[i, p_len - len(p) : p_len] = torch.tensor(p)  # left-padded prompt, as in generation
            ids[i, p_len : p_len + len(c)] = torch.tensor(c)
            attn[i, p_len - len(p) : p_len + len(c)] = 1
            old[i, : len(c)] = torch.tensor(s.completion.logprobs)
        device = next(self.model.parameters()).device
        return {
            "input_ids": ids.to(device),
            "attention_mask": attn.to(device),
            "position_ids": (attn.cumsum(-1) - 1).clamp(min=0).to(device),
            "tokens": ids[:, p_len:].to(device),
            "mask": attn[:, p_len:].to(device),
            "sampler_logprobs": old.to(device),
            "advantages": self._collate_advantages(seqs, c_len).to(device),
            "weights": torch.tensor([s.weight for s in seqs], dtype=torch.float32, device=device),
        }

    @staticmethod
    def _collate_advantages(seqs: list[_Seq], c_len: int) -> torch.Tensor:
        """``[B]`` one advantage per sequence, or with process credit ``[B, c_len]`` per token (0 on the
        padding, which the completion mask leaves out anyway)."""
        if all(s.tokens is None for s in seqs):
            return torch.tensor([s.advantage for s in seqs], dtype=torch.float32)
        adv = torch.zeros((len(seqs), c_len), dtype=torch.float32)
        for i, s in enumerate(seqs):
            if s.tokens is not None:
                adv[i, : len(s.tokens)] = s.tokens.to(torch.float32)
        return adv

    def _logprobs(
        self, model: torch.nn.Module, b: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        c_len = b["tokens"].shape[1]
        out = model(
            input_ids=b["input_ids"],
            attention_mask=b["attention_mask"],
            position_ids=b["position_ids"],
            logits_to_keep=c_len + 1,
            use_cache=False,
        )
        logits = out.logits[:, :-1]
        return token_logprobs(logits, b["tokens"], self.config.generation.temperature), logits

    def _optimize(self, groups: list[Group], adv: Advantages) -> dict[str, float]:
        """One optimizer step per epoch on the sequences in the loss; returns the step's loss metrics.

        **Non-finite values skip the step.** An epoch in which a loss token of any micro-batch has a
        non-finite log-prob, old log-prob, reference log-prob or advantage (:func:`nonfinite_tokens`,
        checked before the loss), or whose accumulated gradient norm is not finite, steps no optimizer:
        its gradient is dropped, the weights and the optimizer state stay as they were, a warning is
        logged, and ``updates_skipped`` counts it (``nonfinite_tokens`` the tokens). The ratio clamps
        bound ±inf but keep NaN, and one NaN gradient entry makes every weight NaN in one AdamW step.

        Skipped rather than the tokens masked out of the loss: a NaN log-prob is the mark of a bad
        forward pass (an fp16/bf16 activation past its range), and masking its token does not keep the
        gradient finite: the backward through the layer that overflowed still multiplies a zero by
        inf (NaN), into weights shared by every token; and the finite log-probs computed with it are
        suspect. It is also what the large trainers do: verl's actor skips the optimizer step when the
        gradient norm is not finite (with a warning), as PyTorch's GradScaler and DeepSpeed's fp16 loss
        scaling skip a step that overflowed; TRL steps on (a NaN loss is even filtered out of its logged
        loss). The input check finds what the norm alone could miss (a NaN ratio whose clamp passes no
        gradient) and counts it; the norm check what no input shows (a backward that overflowed).
        ``updates`` (and with it the learning-rate warmup) advances only when an epoch stepped.
        """
        cfg, alg = self.config, self.config.algorithm
        in_loss = [
            _Seq(c, float(adv.values[i, j]), tokens=adv.tokens[i][j] if adv.tokens is not None else None)
            for i, g in enumerate(groups)
            for j, c in enumerate(g.completions)
            if bool(adv.mask[i, j])
        ]
        norm = LossNorm(
            num_seqs=len(in_loss),
            num_tokens=sum(len(s.completion.completion_ids) for s in in_loss),
            max_len=cfg.generation.max_new_tokens,
        )
        mb = cfg.training.micro_batch_size
        if alg.resolved_loss_agg == "bnpo":
            # the micro-batches TRL would form, of every sequence in the loss: the zero-advantage ones
            # skipped below still count in their micro-batch's tokens and in the number of micro-batches
            chunks = [in_loss[i : i + mb] for i in range(0, len(in_loss), mb)]
            for chunk in chunks:
                tokens = max(sum(len(s.completion.completion_ids) for s in chunk), 1)
                for s in chunk:
                    s.weight = 1.0 / (len(chunks) * tokens)
        run = in_loss if alg.kl_coef > 0 else [s for s in in_loss if s.signal]
        batches = [self._collate(run[i : i + mb]) for i in range(0, len(run), mb)]
        stats: dict[str, float] = {"seqs_in_loss": float(len(in_loss)), "seqs_forwarded": float(len(run))}
        if not batches:
            return stats
        mode = alg.resolved_loss_agg
        ref_lp: list[torch.Tensor | None] = [None] * len(batches)
        first_lp: list[torch.Tensor] = []
        sums = {
            "loss": 0.0,
            "kl": 0.0,
            "clip": 0.0,
            "dual_clip": 0.0,
            "ratio": 0.0,
            "mismatch": 0.0,
            "mismatch_tokens": 0.0,
            "entropy": 0.0,
            "tokens": 0.0,
        }
        grad_norm = 0.0
        stepped = skipped = nonfinite = 0
        for epoch in range(alg.num_epochs):
            self.optimizer.zero_grad(set_to_none=True)
            poisoned = 0  # this epoch's loss tokens with a non-finite input
            for k, b in enumerate(batches):
                if alg.kl_coef > 0 and epoch == 0:
                    with torch.no_grad(), reference_context(self.model, self.reference) as ref:
                        ref_lp[k] = self._logprobs(ref, b)[0]
                logp, logits = self._logprobs(self.model, b)
                m = b["mask"].float()
                if epoch == 0:
                    first_lp.append(logp.detach())
                    with torch.no_grad():
                        # NaN: the sampler did not report this sequence's logprobs (vllm_completions)
                        known = m * ~torch.isnan(b["sampler_logprobs"])
                        gap = (logp - b["sampler_logprobs"]).abs().nan_to_num(0.0)
                        sums["mismatch"] += float((gap * known).sum())
                        sums["mismatch_tokens"] += float(known.sum())
                        sums["entropy"] += float((_entropy(logits, cfg.generation.temperature) * m).sum())
                        sums["tokens"] += float(m.sum())
                old = first_lp[k]
                if alg.old_logprobs == "sampler":  # but the policy's own where the sampler's are unknown
                    old = torch.where(torch.isnan(b["sampler_logprobs"]), old, b["sampler_logprobs"])
                ref_k = ref_lp[k]
                inputs = [logp, old, b["advantages"], *([ref_k] if ref_k is not None else [])]
                poisoned += int(nonfinite_tokens(b["mask"], *inputs).sum())
                pol = policy_loss(
                    logp,
                    old,
                    b["advantages"],
                    b["mask"],
                    level=alg.importance_sampling_level,
                    eps_low=alg.resolved_clip_low,
                    eps_high=alg.resolved_clip_high,
                    dual_clip_c=alg.dual_clip_c,
                )
                per_tok = pol.per_token
                if alg.kl_coef > 0:
                    assert ref_k is not None
                    kl = kl_estimate(logp, ref_k, alg.kl_estimator)
                    per_tok = per_tok + alg.kl_coef * kl
                    if epoch == alg.num_epochs - 1:
                        sums["kl"] += float((kl.detach() * m).sum())
                loss = aggregate(per_tok, b["mask"], mode, norm, b["weights"])
                if not poisoned:  # else the epoch's gradient is dropped: no backward for it
                    loss.backward()  # type: ignore[no-untyped-call]
                if epoch == alg.num_epochs - 1:
                    sums["loss"] += float(loss.detach())
                    sums["clip"] += float((pol.clipped.float() * m).sum())
                    sums["dual_clip"] += float((pol.dual_clipped.float() * m).sum())
                    sums["ratio"] += float((pol.ratio.detach() * m).sum())
            grad_norm = math.nan  # of a gradient that was not taken whole
            if not poisoned:
                params = [p for p in self.model.parameters() if p.requires_grad]
                max_norm = cfg.training.max_grad_norm
                grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm else math.inf))
            if poisoned or not math.isfinite(grad_norm):
                why = (
                    f"{poisoned} loss token(s) with a non-finite log-prob, old log-prob, reference log-prob "
                    "or advantage"
                    if poisoned
                    else f"gradient norm {grad_norm}"
                )
                logger.warning(
                    "step %d, epoch %d: %s; optimizer step skipped (the weights are unchanged)",
                    self.step + 1,
                    epoch + 1,
                    why,
                )
                self.optimizer.zero_grad(set_to_none=True)
                skipped += 1
                nonfinite += poisoned
                continue
            self.optimizer.step()
            stepped += 1
        if stepped:
            self.updates += 1
            self.generator.sync_weights(self.model)
        ntok = max(sums["tokens"], 1.0)
        stats.update(
            loss=sums["loss"],
            kl=sums["kl"] / ntok if alg.kl_coef > 0 else math.nan,
            clip_frac=sums["clip"] / ntok,
            dual_clip_frac=sums["dual_clip"] / ntok if alg.dual_clip_c is not None else math.nan,
            ratio_mean=sums["ratio"] / ntok,
            logprob_mismatch=sums["mismatch"] / sums["mismatch_tokens"]
            if sums["mismatch_tokens"]
            else math.nan,
            entropy=sums["entropy"] / ntok,
            grad_norm=grad_norm,
            # the optimizer steps (epochs) skipped for a non-finite loss input or gradient, and the loss
            # tokens with a non-finite input (counted in each epoch that had them)
            updates_skipped=float(skipped),
            nonfinite_tokens=float(nonfinite),
        )
        return stats

    # ---- the loop ----
    def _set_lr(self) -> float:
        """Linear warmup over the first ``warmup_steps`` updates, then constant.

        A function of the updates made so far (saved with the checkpoint), not of the step: a step that
        steps no optimizer (every reward request failed, every item masked, every group dropped or with
        no signal) must not move the schedule ahead of the weights.
        """
        t = self.config.training
        lr = t.learning_rate * (min(1.0, (self.updates + 1) / t.warmup_steps) if t.warmup_steps else 1.0)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def _resume(self) -> None:
        ckpt = latest_checkpoint(self.run_dir) if self.config.output.resume else None
        if ckpt is None:
            return
        # checked before anything is loaded: another LoRA setup would otherwise fail on parameter names
        saved = json.loads((ckpt / "state.json").read_text()).get("run")  # absent in older checkpoints
        if saved is not None:
            mine = self._identity()
            changed = sorted(k for k in saved.keys() | mine.keys() if saved.get(k) != mine.get(k))
            if changed:
                diff = "; ".join(f"{k}: {saved.get(k)!r} -> {mine.get(k)!r}" for k in changed[:4])
                raise ValueError(
                    f"{ckpt} is a checkpoint of another run ({diff}): set output.resume: false to start "
                    "this one over in that directory, or use another output.run_dir"
                )
        state = load_checkpoint(ckpt, self.model, self.optimizer)
        # a separate sampler (vLLM) was loaded from model.path and is otherwise synced only after a step
        self.generator.sync_weights(self.model)
        self.step = int(state["step"])
        self.updates = int(state.get("updates", self.step))  # older checkpoints: one update a step
        self.data_pos = int(state["data_position"])
        # a streak cut by a stop goes on: a run restarted after each failed step would never end
        self.failed_steps = int(state.get("failed_steps", 0))  # older checkpoints: none saved
        self.invalid_steps = int(state.get("invalid_steps", 0))
        self.skipped_steps = int(state.get("skipped_steps", 0))
        self.totals = {k: float(v) for k, v in state.get("totals", self.totals).items()}
        # older checkpoints: counted from here on (no requests saved at all, or no unanswered count)
        saved_requests = state.get("requests", {})
        self.requests = {k: int(saved_requests.get(k, 0)) for k in self.requests}

    def _identity(self) -> dict[str, Any]:
        """What makes a checkpoint this run's: the model, the problems at each data position, the reward.

        Resume picks up whatever the run directory holds (``output.resume`` is on by default, and so is
        ``output.run_dir``); another experiment there would continue the old one's weights and data
        position. What may change between a run and its continuation (steps, learning rate, sampling,
        output) is left out.
        """
        c = to_dict(self.config)
        data = {k: v for k, v in c["data"].items() if k in _DATA_IDENTITY}
        run = {"model.path": c["model"]["path"], "model.lora": c["model"]["lora"], "data": data}
        run |= {"reward.name": c["reward"]["name"], "reward.config": c["reward"]["config"]}
        return _flatten(run)

    def _save(self) -> None:
        save_checkpoint(
            self.run_dir,
            self.step,
            self.model,
            self.optimizer,
            {
                "data_position": self.data_pos,
                "updates": self.updates,
                "failed_steps": self.failed_steps,
                "invalid_steps": self.invalid_steps,
                "skipped_steps": self.skipped_steps,
                "requests": self.requests,
                "totals": self.totals,
                "run": self._identity(),
            },
            keep=self.config.output.keep_checkpoints,
        )

    def _check_failures(self, dispatcher: RewardDispatcher, sent: int, unanswered: int) -> None:
        """End the run once ``reward.max_failed_steps`` steps in a row had no reward request answered.

        A step with some answers trains on them (the failed items are masked); a step with none is a
        no-op (every item masked: no loss term, no optimizer step). Training on nothing for long is a
        service that is down, not a blip, and must not pass for a run. ``unanswered``: the step's
        requests of which nothing was answered; one that failed only in part (a chunk of it) gave the
        step rewards to train on, so it does not make a failed step.
        """
        if sent == 0 or unanswered < sent:
            self.failed_steps = 0
            return
        self.failed_steps += 1
        limit = self.config.reward.max_failed_steps
        if self.failed_steps >= limit:
            raise RuntimeError(
                f"every reward request to the service at {self.config.reward.url} failed for {limit} "
                f"consecutive steps (reward.max_failed_steps); last error: {dispatcher.last_error}"
                f"{retry_after_note(dispatcher.last_error)}"
            ) from dispatcher.last_error

    def _check_invalid(self, col: _Collected) -> None:
        """End the run once ``reward.max_invalid_steps`` steps in a row had every answered item invalid.

        Such items are masked (never trained on as 0), so a step of them trains on nothing; a reward that
        cannot score this run's items (references under another field, a model the service lacks, a
        sandbox that times out every test) made a run that went through all its steps on no signal,
        visible only as ``invalid_frac`` 1.0. A step with nothing answered is the failed-step rule's and
        leaves this streak as it was.
        """
        answered = [r for g in col.scored for r in g.results if not request_failed(r)]
        if not answered:
            return
        if any(r.valid and r.score is not None for r in answered):
            self.invalid_steps = 0
            return
        self.invalid_steps += 1
        limit = self.config.reward.max_invalid_steps
        if self.invalid_steps >= limit:
            reasons = Counter(r.reason or "none" for r in answered).most_common()
            counted = ", ".join(f"{reason} x{n}" for reason, n in reasons)
            raise RuntimeError(
                f"the service at {self.config.reward.url} could not score any item of {limit} consecutive "
                f"steps (reward.max_invalid_steps): every answered item was valid: false ({counted} in "
                "the last step); check the reward config and the data's references"
            )

    def _check_skipped(self, stats: Mapping[str, float]) -> None:
        """End the run once ``training.max_skipped_steps`` steps in a row skipped every optimizer step
        for a non-finite loss input or gradient (:meth:`_optimize`).

        One such step is a bad forward pass, skipped at no cost to the weights; every step of a run
        skipped is a run that trains on nothing (a model whose forward overflows in its dtype on these
        inputs, weights loaded already NaN) while it looks alive but for ``updates_skipped``. A step
        with nothing to train on (no sequence in the loss) leaves the streak as it was.
        """
        if "updates_skipped" not in stats:
            return
        if stats["updates_skipped"] < self.config.algorithm.num_epochs:
            self.skipped_steps = 0
            return
        self.skipped_steps += 1
        limit = self.config.training.max_skipped_steps
        if self.skipped_steps >= limit:
            raise RuntimeError(
                f"every optimizer step of {limit} consecutive steps was skipped for a non-finite loss input "
                f"or gradient (training.max_skipped_steps; {stats['nonfinite_tokens']:g} non-finite loss "
                "tokens in the last step): the policy's forward or backward overflows; check model.dtype "
                "and the model's weights"
            )

    def _check_accuracy_key(self, groups: list[Group]) -> None:
        """Once, on the first batch with a valid item: ``reward.accuracy_key`` is a component the service
        returns. A misspelt one was read as "absent in every item": the ``accuracy`` metric stayed NaN for
        the whole run with nothing said (the run itself trains on the score, so nothing else showed it).

        A name counts as returned when any answered item of the batch has it, valid or not and null or
        not: an invalid item may lack its components (``missing_reference``, a sandbox error), so a batch
        without a valid item says nothing yet. A sub-component ``a.b`` of a part ``a`` that scored no
        valid item of the batch (a part skipped or zeroed over a timeout has no sub-components) waits
        for a batch in which ``a`` has a value."""
        key = self.config.reward.accuracy_key
        if key is None or self._accuracy_key_checked:
            return
        answered = [r for g in groups for r in g.results if not request_failed(r)]
        valid = [r for r in answered if r.valid]
        if not valid:
            return
        returned = sorted({k for r in answered for k in r.components})
        if key not in returned:
            part = key.rpartition(".")[0]
            if part and part in returned and all(r.components.get(part) is None for r in valid):
                return
            # (a composite's score is no accuracy: config.py requires the key there)
            unset = (
                ""
                if self.config.reward.name == "composite"
                else " (leave accuracy_key unset for the score itself)"
            )
            raise ValueError(
                f"reward.accuracy_key {key!r} is not a component the reward service returns for "
                f"{self.config.reward.name!r}; its components are {returned}{unset}: the accuracy "
                "metric would be empty for the whole run"
            )
        self._accuracy_key_checked = True

    def _step_metrics(self, col: _Collected, adv: Advantages) -> dict[str, float]:
        """The step's metrics. Those of the reward (``reward``, ``accuracy``, ``invalid_frac``,
        ``frac_zero_std_groups``, ``reward/*``, ``shaped_reward``) are over what the service answered: an
        item whose request failed says nothing about the reward, only about the service
        (``request_failed_frac``). A request carries whole groups, so a group is answered or failed as a
        whole. They are over every group scored, dynamic sampling's dropped ones too: ``shaped_reward``
        beside ``reward`` is then the mean overlong shaping, not that plus the difference between the
        groups kept and all."""
        rc = self.config.reward
        results = [r for g in col.scored for r in g.results]
        failed = sum(request_failed(r) for r in results)
        answered = [g for g in col.scored if not _group_failed(g)]
        raw = [
            s for g in answered for s, r in zip(g.scores(), g.results, strict=True) if not request_failed(r)
        ]
        valid = [s for s in raw if not math.isnan(s)]
        acc_vals = [a for g in col.scored for r in g.results if (a := self._accurate(r)) is not None]
        comps = [c for g in col.scored for c in g.completions]
        lengths = [len(c.completion_ids) for c in comps]
        mask_vals = adv.values[adv.mask]
        if adv.tokens is not None:  # process credit: over the tokens of the completions in the loss
            kept = [
                a
                for row, m in zip(adv.tokens, adv.mask.tolist(), strict=True)
                for a, k in zip(row, m, strict=True)
                if k
            ]
            mask_vals = torch.cat(kept) if kept else torch.zeros(0)
        # the rewards with their overlong shaping, NaN where invalid or failed (as for `reward`)
        shaped = (
            torch.tensor([g.scores() for g in col.scored], dtype=torch.float64) + self._shaping(col.scored)
            if col.scored
            else torch.zeros(0)
        )
        out = {
            "reward": _mean(valid),
            "reward_std": float(torch.tensor(valid).std()) if len(valid) > 1 else 0.0,
            "accuracy": _mean(acc_vals),
            # of the items the service answered, those it answered valid: false
            "invalid_frac": 1.0 - len(valid) / len(raw) if raw else math.nan,
            "request_failed_frac": failed / len(results) if results else 0.0,
            # what dynamic sampling drops (GDPO: groups none of whose weighted components vary), of the
            # groups answered (dynamic sampling drops a failed one too, counted in groups_failed)
            "frac_zero_std_groups": float(self._no_signal(answered).float().mean()) if answered else math.nan,
            "completion_len": _mean([float(n) for n in lengths]),
            "truncated_frac": _mean([float(c.truncated) for c in comps]),
            "shaped_reward": float(torch.nanmean(shaped)) if shaped.numel() else math.nan,
            "adv_abs_mean": float(mask_vals.abs().mean()) if mask_vals.numel() else 0.0,
            # the groups with an item in the loss: without dynamic sampling a failed group (or one with
            # no valid or untruncated item) stays in the batch but is masked out, so counting the batch
            # would report it trained on, as dynamic sampling (which drops it) does not
            "groups_trained": float(adv.mask.any(dim=1).sum()) if adv.mask.numel() else 0.0,
            # by dynamic sampling for no signal, or by the accuracy filter (answered groups only)
            "groups_dropped": float(col.dropped),
            # those of them the accuracy filter dropped (null while it is off)
            "groups_accuracy_filtered": float(col.filtered)
            if self.config.algorithm.accuracy_filter is not None
            else math.nan,
            # whose reward request failed (not trained on: dropped with dynamic sampling, else masked)
            "groups_failed": float(len(col.scored) - len(answered)),
            "sampling_rounds": float(col.rounds),
        }
        if rc.shadow is not None:
            out.update(_shadow_metrics(results))
        for name in sorted({k for g in col.scored for r in g.results for k in r.components if "." not in k}):
            vals = [  # valid items only, as for `reward`: an invalid item's parts are not its score
                float(v)
                for g in col.scored
                for r in g.results
                if r.valid and (v := r.components.get(name)) is not None
            ]
            out[f"reward/{name}"] = _mean(vals)
        return out

    def _canaries(self) -> None:
        """``reward.canaries``: the service's reward-hacking canaries against the run's first questions."""
        rc = self.config.reward
        if rc.canaries == "off":
            return
        problems = [self.source.problem(i) for i in range(4)]
        items = [{"prompt": p.question, "reference": p.reference} for p in problems]
        with RewardClient(rc.url, api_key=rc.api_key, timeout=rc.timeout_s) as client:
            try:
                report = client.canaries(
                    rc.name, rc.config, items=items, max_false_positive_rate=rc.canary_max_rate
                )
            except RewardHubClientError as exc:
                if rc.canaries == "stop":
                    raise ValueError(f"reward.canaries: the canaries could not run: {exc}") from None
                logger.warning("reward.canaries: the canaries could not run: %s", exc)
                return
        passed = sorted(k for k, v in report.by_canary.items() if v.get("false_positives"))
        said = (
            f"reward {rc.name!r}: {report.false_positives} of {report.scored} scored reward-hacking canaries "
            f"passed ({', '.join(passed) or 'none'}; {report.invalid} not scored)"
        )
        if report.ok:
            logger.info("reward.canaries: %s", said)
        elif rc.canaries == "stop":
            raise ValueError(
                f"reward.canaries: {said}, over canary_max_rate {rc.canary_max_rate:g}: a policy could learn to "
                "give such answers; harden the reward (or set reward.canaries: warn)"
            )
        else:
            logger.warning("reward.canaries: %s", said)

    def run(self) -> dict[str, Any]:
        cfg = self.config
        check_service(cfg.reward)
        self._canaries()
        self._resume()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "config.json").write_text(json.dumps(to_dict(cfg), indent=2) + "\n")
        writer = MetricsWriter(self.run_dir, tensorboard=cfg.output.tensorboard, resume_step=self.step)
        dispatcher = RewardDispatcher(
            cfg.reward,
            self.n_per_prompt,
            transport=self.reward_transport,
            include_details=cfg.algorithm.process_credit != "none",  # the step scores are details
        )
        bar = _progress(cfg, self.step)
        last: dict[str, float] = {}
        try:
            while self.step < cfg.training.steps:
                t0 = time.perf_counter()
                lr = self._set_lr()
                wait0, sent0 = dispatcher.wait_s, dispatcher.requests
                failed0, unanswered0 = dispatcher.failed_requests, dispatcher.unanswered_requests
                col = self._collect(dispatcher)
                wait = dispatcher.wait_s - wait0
                failed = dispatcher.failed_requests - failed0
                unanswered = dispatcher.unanswered_requests - unanswered0
                self.requests["reward_requests"] += dispatcher.requests - sent0
                self.requests["reward_requests_failed"] += failed
                self.requests["reward_requests_unanswered"] += unanswered
                self._check_failures(dispatcher, dispatcher.requests - sent0, unanswered)
                self._check_invalid(col)
                self._check_accuracy_key(col.scored)
                adv = self._advantages(col.groups)[0] if col.groups else _empty_adv()
                t1 = time.perf_counter()
                # also with no group kept (dynamic sampling dropped or lost them all): it trains on
                # nothing then, but logs seqs_in_loss and seqs_forwarded (0) as every other step does
                stats = self._optimize(col.groups, adv)
                train_s = time.perf_counter() - t1
                self.step += 1
                step_s = time.perf_counter() - t0
                self.totals["reward_wait_s"] += wait
                self.totals["wall_s"] += step_s
                last = {
                    **self._step_metrics(col, adv),
                    **stats,
                    "lr": lr,
                    "updates": float(self.updates),
                    "gen_s": col.gen_s,
                    "reward_wait_s": wait,
                    # every failed request, and those of them nothing of which was answered (the rest
                    # lost a chunk and kept the other chunks' rewards)
                    "reward_requests_failed": float(failed),
                    "reward_requests_unanswered": float(unanswered),
                    "train_s": train_s,
                    "step_s": step_s,
                    "reward_wait_frac_step": wait / step_s,
                    "reward_wait_frac": self.totals["reward_wait_s"] / self.totals["wall_s"],
                    "data_position": float(self.data_pos),
                }
                writer.log(self.step, last)
                self._check_skipped(stats)  # after the log: the step's nonfinite_tokens are in it
                if cfg.output.log_samples:
                    writer.samples(self.step, _samples(col.scored, cfg.output.log_samples))
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(
                        reward=f"{last['reward']:.3f}", acc=f"{last['accuracy']:.2f}", refresh=False
                    )
                every = cfg.output.save_every
                if (every and self.step % every == 0) or self.step == cfg.training.steps:
                    self._save()
        finally:
            if bar is not None:
                bar.close()
            dispatcher.close()
            writer.close()
        if cfg.output.save_final_model:
            final = self.run_dir / "final"
            self.model.save_pretrained(final)  # type: ignore[operator]
            self.tokenizer.save_pretrained(final)
        summary = {
            "steps": self.step,
            **self.requests,
            **self.totals,
            "last": last,
        }
        summary["reward_wait_frac"] = self.totals["reward_wait_s"] / max(self.totals["wall_s"], 1e-9)
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        return summary


# the data settings that decide which problem sits at each data position
_DATA_IDENTITY = ("source", "path", "prompt_field", "reference_field", "shuffle", "seed", "arithmetic")


def _group_failed(group: Group) -> bool:
    """Whether the group's reward request failed (a request carries whole groups: all or none)."""
    return all(request_failed(r) for r in group.results)


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            out |= _flatten(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def _top_level_components(groups: list[Group], required: bool = True) -> list[str]:
    """GDPO's default components: the service's top-level ones (``a.b`` sub-components are left out).

    A component that is null in every item of this batch is still one (the service returns it; a part
    that timed out for all of them is no signal here, not a name that does not exist: gdpo_weights may
    name it). None at all is an error when ``required`` and some item is valid (GDPO cannot train on a reward
    without components), else an empty list: a batch or a dynamic-sampling round whose items all came
    back invalid, without components, just has no signal (every item is masked, as for any estimator).
    """
    names = {k for g in groups for r in g.results for k in r.components if "." not in k}
    if not names and required and any(r.valid for g in groups for r in g.results):
        raise ValueError("gdpo needs reward components, and the service returned none")
    return sorted(names)


def _entropy(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    z = logits.float() / temperature
    logp = torch.log_softmax(z, dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


def _shadow_metrics(results: Sequence[ItemResult]) -> dict[str, float]:
    """Shadow verification's figures for a step, over the items both rewards scored (NaN when none was):
    how often they agree, and the two directions of disagreement (``shadow_only_frac``: possible false
    negatives of the training reward)."""
    rates = shadow_rates(results) or dict.fromkeys(("agreement", "shadow_only", "primary_only"), math.nan)
    return {
        "shadow_agreement": rates["agreement"],
        "shadow_only_frac": rates["shadow_only"],
        "primary_only_frac": rates["primary_only"],
    }


def _empty_adv() -> Advantages:
    return Advantages(values=torch.zeros(0, 0), mask=torch.zeros(0, 0, dtype=torch.bool))


def _samples(groups: list[Group], n: int) -> list[dict[str, Any]]:
    rows = []
    for g in groups[:n]:
        c, r = g.completions[0], g.results[0]
        rows.append(
            {
                "question": g.problem.question,
                "reference": g.problem.reference,
                "completion": c.text,
                "score": r.score,
                # why there is none: the service's reason, or request_failed (it never answered)
                "reason": r.reason,
            }
        )
    return rows


def _progress(cfg: TrainConfig, start: int) -> Any:
    if not cfg.output.progress:
        return None
    tqdm: Any = importlib.import_module("tqdm.auto").tqdm  # (no type stubs needed)
    return tqdm(
        total=cfg.training.steps, initial=start, desc="rewardhub-train", unit="step", dynamic_ncols=True
    )


def train(config: TrainConfig) -> dict[str, Any]:
    """Run training to ``config.training.steps``; returns the summary (also in RUN_DIR/summary.json)."""
    return Trainer(config).run()
