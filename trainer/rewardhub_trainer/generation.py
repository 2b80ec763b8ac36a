"""Sampling completions with their token ids and the sampling policy's logprobs.

Two backends behind one interface, :class:`Generator`:

* :class:`HFGenerator` — transformers ``generate`` (CPU or GPU): ancestral sampling with temperature,
  top-p and top-k, stopping at EOS. The raw next-token logits of every step come back
  (``output_logits=True``) and the logprob of the sampled token is taken under the *tempered, untruncated*
  distribution, ``log softmax(z / T)[y]`` — exactly the quantity the loss computes for the current policy,
  so the PPO ratio is 1 (up to float noise) before the first update. (Top-p/top-k truncation is a sampling
  device, not part of the policy being optimised; TRL and verl make the same choice.)
* :class:`VLLMGenerator` — vLLM, when the ``vllm`` extra is installed (GPU). Weights are pushed into the
  engine after every optimizer step (:meth:`Generator.sync_weights`).

A completion is the tokens up to and including the first EOS; a completion without EOS within
``max_new_tokens`` is *truncated* (DAPO's overlong shaping and ``mask_truncated`` use this flag).
"""

from __future__ import annotations

import importlib
import logging
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from rewardhub_trainer.config import GenerationConfig

__all__ = [
    "Completion",
    "Generator",
    "HFGenerator",
    "VLLMGenerator",
    "make_generator",
    "prompt_seeds",
    "vllm_completions",
]

logger = logging.getLogger(__name__)

VLLM_HINT = (
    "vLLM is not installed (GPU machines): scripts/bootstrap service,trainer,vllm in the clone "
    "(or, in its venv, pip install -c constraints.txt -e '.[service,trainer,vllm]')"
)


@dataclass
class Completion:
    """One sampled completion of one prompt."""

    prompt_ids: list[int]
    completion_ids: list[int]
    # log pi_sampler(y_t | ...), one per completion token; all NaN when the sampler did not report them
    # all (the trainer then takes this sequence's old logprobs from the policy's first-epoch forward)
    logprobs: list[float]
    text: str
    truncated: bool
    extra: dict[str, Any] = field(default_factory=dict)


class Generator(Protocol):
    def generate(self, prompts: list[list[int]], n: int) -> list[list[Completion]]:
        """``n`` completions for each tokenised prompt, grouped per prompt, in order."""
        ...

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Make the sampler use the trainer's current weights (no-op when they are the same object)."""
        ...


def eos_ids(tokenizer: Any, model: torch.nn.Module | None = None) -> list[int]:
    """Every token id that ends a completion: the tokenizer's EOS and the model's generation EOS ids."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    gen_cfg = getattr(model, "generation_config", None)
    extra = getattr(gen_cfg, "eos_token_id", None)
    if isinstance(extra, int):
        ids.add(extra)
    elif isinstance(extra, list):
        ids.update(int(i) for i in extra)
    if not ids:
        raise ValueError("the tokenizer has no eos_token_id; generation would never stop")
    return sorted(ids)


def split_completion(tokens: list[int], eos: set[int]) -> tuple[list[int], bool]:
    """Tokens up to and including the first EOS, and whether there was none (truncated)."""
    for i, t in enumerate(tokens):
        if t in eos:
            return tokens[: i + 1], False
    return tokens, True


class HFGenerator:
    """transformers ``generate`` on the training model itself (no weight copy, no sync needed)."""

    def __init__(self, model: torch.nn.Module, tokenizer: Any, config: GenerationConfig):
        from transformers import GenerationConfig as HFGenConfig

        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.eos = eos_ids(tokenizer, model)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos[0]
        self.pad_id = int(pad)
        # The checkpoint's own defaults (top_k, min_p, repetition penalties, bad_words_ids, sequence_bias,
        # forced_bos/eos_token_id...) must not silently change the sampling distribution: the loss takes
        # the recorded logprobs as the sampler's, log softmax(z / T) of the raw logits. transformers fills
        # every field left None here from the model's generation_config, and several fields are off only
        # when None (forced_eos_token_id, sequence_bias, watermarking_config...), so no value set here can
        # shut them off: generate() runs with the model's generation_config swapped for transformers' own
        # (see _without_checkpoint_defaults). What is left is transformers' global defaults (top_k=50):
        # each knob that reshapes the distribution is set explicitly to its neutral value (top_k=0 is
        # "off": no TopK warper), and so is each one that reshapes the rows (num_return_sequences
        # multiplies them, num_beams searches).
        self._neutral = HFGenConfig()  # type: ignore[no-untyped-call]
        self.gen_config = HFGenConfig(  # type: ignore[no-untyped-call]
            do_sample=True,
            num_beams=1,
            num_return_sequences=1,
            suppress_tokens=[],
            begin_suppress_tokens=[],
            temperature=config.temperature,
            top_p=config.top_p,
            top_k=config.top_k,
            min_p=0.0,
            typical_p=1.0,
            epsilon_cutoff=0.0,
            eta_cutoff=0.0,
            repetition_penalty=1.0,
            encoder_repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            min_new_tokens=0,
            guidance_scale=1.0,
            max_new_tokens=config.max_new_tokens,
            eos_token_id=self.eos,
            pad_token_id=self.pad_id,
            bos_token_id=None,
            return_dict_in_generate=True,
            output_logits=True,
        )

    @torch.no_grad()
    def generate(self, prompts: list[list[int]], n: int) -> list[list[Completion]]:
        device = next(self.model.parameters()).device
        rows = [p for p in prompts for _ in range(n)]
        width = max(len(p) for p in rows)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        for i, p in enumerate(rows):  # left padding: every prompt ends at the same column
            input_ids[i, width - len(p) :] = torch.tensor(p)
            attention[i, width - len(p) :] = 1
        was_training = self.model.training
        self.model.eval()
        try:
            with _without_checkpoint_defaults(self.model, self._neutral):
                out = self.model.generate(  # type: ignore[operator]
                    input_ids=input_ids.to(device),
                    attention_mask=attention.to(device),
                    generation_config=self.gen_config,
                )
        finally:
            if was_training:
                self.model.train()
        new = out.sequences[:, width:].cpu()
        logprobs = _sampled_logprobs(out.logits, new, self.config.temperature)
        eos = set(self.eos)
        result: list[list[Completion]] = []
        for i, prompt in enumerate(rows):
            toks, truncated = split_completion(new[i].tolist(), eos)
            comp = Completion(
                prompt_ids=list(prompt),
                completion_ids=toks,
                logprobs=logprobs[i, : len(toks)].tolist(),
                text=self.tokenizer.decode(toks, skip_special_tokens=True),
                truncated=truncated,
            )
            if i % n == 0:
                result.append([])
            result[-1].append(comp)
        return result

    def sync_weights(self, model: torch.nn.Module) -> None:
        return None


@contextmanager
def _without_checkpoint_defaults(model: torch.nn.Module, neutral: Any) -> Iterator[None]:
    """Run ``generate`` with ``neutral`` in place of the checkpoint's generation_config, which is back
    afterwards (``save_pretrained`` writes it with the model, for whoever serves the trained model).

    The swap is on the transformers model that ``generate`` reads it from: under a peft wrapper, the base
    model (peft's ``generate`` copies the wrapper's view of it, which is the base model's, onto it).
    """
    get_base = getattr(model, "get_base_model", None)
    host = get_base() if callable(get_base) else model
    checkpoint = host.generation_config
    host.generation_config = neutral
    try:
        yield
    finally:
        host.generation_config = checkpoint


def _sampled_logprobs(
    step_logits: tuple[torch.Tensor, ...], tokens: torch.Tensor, temperature: float
) -> torch.Tensor:
    """``log softmax(z_t / T)[y_t]`` for every step t, shape [rows, steps] (float32)."""
    out = torch.empty(tokens.shape, dtype=torch.float32)
    for t, z in enumerate(step_logits):
        zt = z.float().cpu() / temperature
        out[:, t] = zt.gather(1, tokens[:, t : t + 1]).squeeze(1) - torch.logsumexp(zt, dim=1)
    return out


def prompt_seeds(count: int) -> list[int]:
    """One sampling seed per prompt for vLLM, drawn from torch's global generator.

    vLLM's sampler keeps a random state of its own that a checkpoint does not hold, so a resumed run
    sampled other completions than the run it continues. torch's CPU generator is in every checkpoint
    (:mod:`rewardhub_trainer.checkpoint`), so seeds drawn from it are the same after a resume, and vLLM's
    seeded sampling (``SamplingParams(seed=...)``, a generator per request) draws the same tokens from the
    same logits. One seed per prompt, not one for the call: a shared seed would give every prompt the same
    uniform draws, correlating the samples of different prompts."""
    return [int(x) for x in torch.randint(0, 2**31 - 1, (count,)).tolist()]


class VLLMGenerator:  # pragma: no cover - needs a GPU and the vllm extra
    """vLLM sampling; the trainer's weights are loaded into the engine after every optimizer step.

    vLLM reports logprobs of its own forward (different kernels, maybe another dtype), so the PPO ratio
    should use recomputed logprobs: set ``algorithm.old_logprobs: recompute`` with this backend. With
    top-p < 1 or top-k > 0 it must: ``processed_logprobs`` are taken after the truncation (and vLLM has no
    mode with the temperature but without the truncation), so they are not the policy's logprobs and
    the config refuses ``old_logprobs: sampler`` there (:class:`~rewardhub_trainer.config.TrainConfig`).
    (Checked against vLLM's v1 ``Sampler``: the ``raw_*`` modes are read from the logits before penalties
    and temperature; the ``processed_*`` ones after temperature, min-p and top-k/top-p.)

    The checkpoint's generation_config.json (``LLM(generation_config="auto")``, vLLM's default) does not
    reshape this sampling: ``LLM.generate`` turns it into default ``SamplingParams`` only for a call given
    none, and merges only its EOS ids into explicit ones (``SamplingParams.update_from_generation_config``),
    which :meth:`generate` passes as stop ids anyway; the knobs left unset here (repetition, presence and
    frequency penalties, min_p, min_tokens) keep vLLM's neutral defaults.

    Its outputs become completions in :func:`vllm_completions` (what happens when vLLM reports fewer
    logprobs than tokens is documented there).
    """

    def __init__(self, model_path: str, tokenizer: Any, config: GenerationConfig, dtype: str, eos: list[int]):
        try:
            vllm: Any = importlib.import_module("vllm")
        except ImportError as exc:
            raise ImportError(VLLM_HINT) from exc
        self.tokenizer = tokenizer
        self.config = config
        # the same ids as transformers' sampler (tokenizer + the checkpoint's generation_config): vLLM
        # stops on the generation_config ones too, and a completion ending in one is not truncated
        self.eos = set(eos)
        # The weights are loaded into the engine's model after every optimizer step (sync_weights), which
        # needs the engine core in this process. vLLM >= 0.11 is V1 only, and its LLM runs the engine core
        # in a child process by default, where llm_engine has no model_executor at all (set only when
        # VLLM_ENABLE_V1_MULTIPROCESSING is off, read when the engine is built): the first sync failed.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        self.llm = vllm.LLM(
            model=model_path,
            dtype=dtype,
            gpu_memory_utilization=config.vllm_gpu_memory_utilization,
            enable_prefix_caching=True,
            logprobs_mode="processed_logprobs",
        )
        self._params = vllm.SamplingParams

    def generate(self, prompts: list[list[int]], n: int) -> list[list[Completion]]:
        c = self.config
        params = [
            self._params(
                n=n,
                temperature=c.temperature,
                top_p=c.top_p,
                top_k=c.top_k if c.top_k > 0 else -1,
                max_tokens=c.max_new_tokens,
                logprobs=0,
                stop_token_ids=sorted(self.eos),
                seed=seed,  # from the checkpointed torch generator: a resumed run samples the same
            )
            for seed in prompt_seeds(len(prompts))
        ]
        outs = self.llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
        return vllm_completions(prompts, outs, self.eos, self.tokenizer)

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Load the current (LoRA-merged) weights into the in-process engine."""
        merge = getattr(model, "merge_adapter", None)
        if merge is not None:
            merge()
        try:
            state = {
                k.replace("base_model.model.", "").replace(".base_layer", ""): v
                for k, v in model.state_dict().items()
                if "lora_" not in k
            }
            executor = getattr(self.llm.llm_engine, "model_executor", None)
            if executor is None:
                raise RuntimeError(
                    "the vLLM engine runs out of process, so the trained weights cannot be loaded into it "
                    "(VLLM_ENABLE_V1_MULTIPROCESSING must be 0 when the engine is built)"
                )
            runner = executor.driver_worker.worker.model_runner
            runner.model.load_weights(weights=list(state.items()))
            # Prefix caching keeps KV blocks the old weights computed, and every prompt shares the chat
            # template's head: without this the next step samples from a mix of old and new policy.
            self.llm.reset_prefix_cache()
        finally:
            unmerge = getattr(model, "unmerge_adapter", None)
            if unmerge is not None:
                unmerge()


def vllm_completions(
    prompts: list[list[int]], outs: list[Any], eos: set[int], tokenizer: Any
) -> list[list[Completion]]:
    """The trainer's completions from vLLM's ``RequestOutput`` list (one per prompt, in order).

    A sample whose logprobs vLLM did not report for every kept token (``logprobs`` None or shorter than
    the tokens, or a position without the sampled token) gets NaN for all of them, with a warning. The
    old code padded the gap with 0.0, i.e. probability 1 under the sampler, which under
    ``old_logprobs: sampler`` made the importance ratio exp(logp) for those tokens, silently. Stopping
    the run would lose it for a defect of a few samples that the trainer can make good: NaN tells it to
    use the policy's own first-epoch logprobs for that sequence, as ``old_logprobs: recompute`` does
    for all (the weights that sampled it, up to vLLM's kernels), and to leave it out of
    ``logprob_mismatch``. Mixing vLLM's values with recomputed ones inside one sequence is avoided:
    the two differ by kernel noise, which would then differ from token to token.
    """
    result: list[list[Completion]] = []
    incomplete = 0
    for prompt, out in zip(prompts, outs, strict=True):
        group = []
        for o in out.outputs:
            toks, truncated = split_completion(list(o.token_ids), eos)
            reported = list(o.logprobs or [])
            if len(reported) >= len(toks) and all(
                d is not None and t in d for d, t in zip(reported, toks, strict=False)
            ):
                lps = [float(d[t].logprob) for d, t in zip(reported, toks, strict=False)]
            else:
                incomplete += 1
                lps = [math.nan] * len(toks)
            group.append(
                Completion(
                    prompt_ids=list(prompt),
                    completion_ids=toks,
                    logprobs=lps,
                    text=tokenizer.decode(toks, skip_special_tokens=True),
                    truncated=truncated,
                )
            )
        result.append(group)
    if incomplete:
        logger.warning(
            "vLLM reported logprobs for fewer tokens than it sampled in %d completion(s); their old "
            "logprobs are recomputed with the policy",
            incomplete,
        )
    return result


def make_generator(
    backend: str,
    model: torch.nn.Module,
    tokenizer: Any,
    config: GenerationConfig,
    model_path: str,
    dtype: str,
) -> Generator:
    if backend == "vllm":
        return VLLMGenerator(model_path, tokenizer, config, dtype, eos_ids(tokenizer, model))
    return HFGenerator(model, tokenizer, config)
