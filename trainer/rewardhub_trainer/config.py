"""The training configuration: one pydantic model per section, every field documented.

Why pydantic rather than a plain dataclass: the config arrives as YAML or TOML, and the model gives us
type coercion, ``extra="forbid"`` (a misspelt key is an error, not a silently ignored setting) and
per-field descriptions that ``rewardhub-train show-config`` prints, in one place. Cross-field rules
(``clip_eps_high`` defaulting by estimator, the loss aggregation implied by the estimator) are resolved
here so that the rest of the trainer reads plain values.

A config file mirrors the sections::

    model: {path: runs/models/smollm2-135m-instruct, lora: {enabled: true}}
    reward: {url: http://127.0.0.1:8000, name: math}
    data: {source: arithmetic}
    algorithm: {estimator: grpo}
    training: {steps: 40}
    output: {run_dir: runs/smollm2-math}

Relative paths in the file (``model.path``, ``data.path``, ``output.run_dir``) are resolved against the
current working directory, like any CLI argument.
"""

from __future__ import annotations

import string
import tomllib
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "AlgorithmConfig",
    "ArithmeticConfig",
    "DataConfig",
    "GenerationConfig",
    "LoRAConfig",
    "ModelConfig",
    "OutputConfig",
    "OverlongConfig",
    "RewardConfig",
    "TrainConfig",
    "TrainingConfig",
    "apply_overrides",
    "describe_fields",
    "load_config",
    "to_dict",
]

Estimator = Literal["grpo", "dr_grpo", "dapo", "gdpo", "mc_grpo", "rloo"]
Operation = Literal["+", "-", "*", "/"]
LossAgg = Literal["auto", "seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm", "bnpo"]
ProcessCredit = Literal["none", "pure_min", "grpo_process", "prime"]
ProcessNorm = Literal["batch_norm", "none"]
ProcessStepValue = Literal["auto", "score", "process_reward"]
ImportanceSamplingLevel = Literal["token", "sequence"]

# The loss aggregation each estimator's paper uses (algorithms.md §4.8), for ``loss_agg: auto``.
DEFAULT_LOSS_AGG: dict[str, str] = {
    "grpo": "seq_mean_token_mean",
    "dr_grpo": "seq_mean_token_sum_norm",
    "dapo": "token_mean",
    "gdpo": "seq_mean_token_mean",
    "mc_grpo": "seq_mean_token_mean",
    "rloo": "seq_mean_token_mean",
}

# GSPO's clip range (eps_low, eps_high), the paper's §5.1 (as TRL's docs give it): the default at sequence level.
GSPO_CLIP_EPS = (3e-4, 4e-4)


def _default_operations() -> list[Operation]:
    return ["+", "-"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    def _changed(self, names: Collection[str]) -> list[str]:
        """Those of ``names`` whose value is not the field's default: what a setting the run does not
        read is refused on. (By value, not by being given: RUN_DIR/config.json, which lists every
        field, loads back as the config it was written from.)"""
        fields = type(self).model_fields
        return sorted(
            n for n in names if getattr(self, n) != fields[n].get_default(call_default_factory=True)
        )


def _refuse_while_off(
    names: Sequence[str], prefix: str, *, on: bool, given: bool, off: str, switch: str
) -> None:
    """Refuse ``names``, settings of a feature changed from their defaults (:meth:`_Section._changed`),
    while the feature is off by default: the run would not read them, with nothing said. A switch given
    explicitly (``enabled: false``) keeps them: the feature is off on purpose, its settings kept for
    later. The message is ``PREFIX.name, ...: OFF: set SWITCH``."""
    if names and not on and not given:
        raise ValueError(f"{prefix}{f', {prefix}'.join(names)}: {off}: set {switch}")


class LoRAConfig(_Section):
    enabled: bool = Field(
        False,
        description="Train LoRA adapters (peft) instead of all weights. The other LoRA fields changed "
        "without it are refused (enabled: false keeps them).",
    )
    r: int = Field(16, ge=1, description="LoRA rank.")
    alpha: int = Field(32, gt=0, description="LoRA alpha (the update is scaled by alpha / r).")
    dropout: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="Dropout on the LoRA input, in the loss passes only: sampling runs in eval mode, so with "
        "dropout > 0 the sampler's logprobs are not those of the policy the loss sees (prefer old_logprobs: "
        "recompute). 0 keeps runs deterministic.",
    )
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        description="Module names to adapt (Llama/Qwen2 attention and MLP projections by default).",
    )

    @model_validator(mode="after")
    def _off(self) -> LoRAConfig:
        # lora: {r: 8} without enabled: true trained every weight, at a learning rate picked for adapters
        _refuse_while_off(
            self._changed(["r", "alpha", "dropout", "target_modules"]),
            "model.lora.",
            on=self.enabled,
            given="enabled" in self.model_fields_set,
            off="LoRA is off (model.lora.enabled defaults to false, which trains every weight)",
            switch="model.lora.enabled: true (or false, to keep the settings)",
        )
        return self


class ModelConfig(_Section):
    path: str = Field(
        ..., description="Local directory of a transformers causal LM + tokenizer (never a hub id)."
    )
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="Weights dtype. float32 on CPU; bfloat16 halves memory on GPU."
    )
    device: str = Field("auto", description="auto (cuda if available, else cpu), cpu, cuda, cuda:1...")
    lora: LoRAConfig = Field(default_factory=LoRAConfig, description="Optional LoRA adapters.")
    gradient_checkpointing: bool = Field(
        False, description="Recompute activations in backward (less memory, ~30% slower)."
    )
    torch_threads: int | None = Field(
        None, ge=1, description="torch.set_num_threads on CPU (default: torch's choice)."
    )


class RewardConfig(_Section):
    url: str = Field("http://127.0.0.1:8000", description="Base URL of the rewardhub service.")
    name: str = Field("math", description="Reward name (GET /v1/rewards lists them).")
    config: dict[str, Any] = Field(
        default_factory=dict, description="The reward's config (its JSON schema is in GET /v1/rewards)."
    )
    api_key: str | None = Field(None, description="Bearer key when the service requires one.")
    timeout_s: float = Field(
        120.0,
        gt=0,
        description="HTTP timeout of a request (connect, read, write), seconds. A score request's read "
        "waits at least item_timeout_s + max(10, item_timeout_s / 4), so it outlasts its items' "
        "deadline; with item_timeout_s unset, the run refuses to start when this is under the service's own "
        "deadline for the reward (POST /v1/rewards/check's timeout_s) plus that margin.",
    )
    item_timeout_s: float | None = Field(
        None,
        gt=0,
        description="Per-item deadline sent as options.timeout_s (service default if unset); may exceed "
        "timeout_s (see there).",
    )
    use_cache: bool = Field(True, description="Let the service answer from its result cache.")
    overlap: bool = Field(
        True,
        description="Score finished groups in a background thread while the next groups generate; "
        "false scores each chunk synchronously (for comparison).",
    )
    wait_ready_s: float = Field(60.0, gt=0, description="How long to wait for /ready at startup.")
    max_retry_after_s: float = Field(
        120.0,
        ge=0,
        description="The longest Retry-After (429/503) the client sleeps through before a retry; a longer "
        "one fails the request at once (its items masked, as request_failed). Raise it for a gateway "
        "whose rate limit asks for longer waits.",
    )
    max_failed_steps: int = Field(
        3,
        ge=1,
        description="A reward request that fails after the client's retries (unreachable, timeout, 5xx, "
        "429) leaves its items unscored (reason request_failed, masked) and the run goes on; this many "
        "consecutive steps in which no request got any answer (reward_requests_unanswered; one that lost "
        "only some of its chunks keeps the others' rewards) end the run. A 4xx that says the request is "
        "wrong (unknown reward, bad config, auth) ends it at once.",
    )
    max_invalid_steps: int = Field(
        5,
        ge=1,
        description="This many consecutive steps in which the service answered and marked every item it "
        "answered valid: false (missing_reference, unsupported, timeout, parse_error...: masked, so no "
        "reward signal) end the run with the reasons counted; such a run trained on nothing while it "
        "looked alive. A step with any valid item ends the streak.",
    )
    accuracy_key: str | None = Field(
        None,
        description="Component that counts as correctness for the accuracy metric (e.g. 'math' in a "
        "composite; default: the score itself). Required with reward.name: composite, whose score is a "
        "weighted sum (or formula) of its components, not correctness. A name the service does not "
        "return ends the run at the first batch with a valid item (a misspelling would leave the metric "
        "empty all run).",
    )
    accuracy_threshold: float = Field(
        1.0,
        description="An item is accurate iff that value >= this; accuracy is the share of valid items that "
        "are (items without the value left out).",
    )
    canaries: Literal["off", "warn", "stop"] = Field(
        "off",
        description="Before the first step, probe the reward with the service's reward-hacking canaries "
        "(POST /v1/canaries: content-free responses such as 'Thought process:' or a lone ':', and the "
        "question given back) against the run's first 4 questions and references: warn logs how many "
        "passed, stop ends the run when more than canary_max_rate of them pass (a judge a policy can hack).",
    )
    canary_max_rate: float = Field(
        0.01, ge=0.0, le=1.0, description="The share of scored canaries that may pass (canaries: stop)."
    )
    shadow: dict[str, Any] | None = Field(
        None,
        description="A second reward the service runs beside this one to audit it (shadow verification): "
        "{reward: name or {name, config}, threshold: 0.5}. The training signal stays this reward's; each "
        "step logs shadow_agreement and, of the items both scored, shadow_only_frac (the shadow passed, "
        "this reward did not: possible false negatives) and primary_only_frac. Checked at the start as "
        "the reward is.",
    )


def _component_keys(config: Mapping[str, Any]) -> list[str]:
    """A composite config's component keys, as the service names them (``name``, else the reward's
    name), for a message; whatever does not parse is left out (the service judges the config)."""
    keys: list[str] = []
    components = config.get("components")
    for c in components if isinstance(components, list) else []:
        if not isinstance(c, dict):
            continue
        reward = c.get("reward")
        key = c.get("name") or (reward.get("name") if isinstance(reward, dict) else reward)
        if isinstance(key, str):
            keys.append(key)
    return keys


class ArithmeticConfig(_Section):
    seed: int = Field(1234, description="Seed of the problem stream (problem i depends only on seed and i).")
    min_operands: int = Field(2, ge=2, le=6, description="Fewest numbers in a problem.")
    max_operands: int = Field(2, ge=2, le=6, description="Most numbers in a problem.")
    min_value: int = Field(1, ge=0, description="Smallest operand.")
    max_value: int = Field(20, ge=1, description="Largest operand.")
    operations: list[Operation] = Field(
        default_factory=_default_operations,
        description="Operations to draw from ('/' only ever divides exactly).",
    )
    allow_negative: bool = Field(False, description="Allow negative intermediate and final results.")
    word_problems: bool = Field(True, description="Phrase problems as short stories (else bare expressions).")
    curriculum_steps: int = Field(
        0,
        ge=0,
        description="Ramp max_value and max_operands up from their minimum over this many problems "
        "(0: no ramp; easy problems first).",
    )

    @model_validator(mode="after")
    def _ranges(self) -> ArithmeticConfig:
        if self.max_operands < self.min_operands:
            raise ValueError("max_operands < min_operands")
        if self.max_value < self.min_value:
            raise ValueError("max_value < min_value")
        if not self.operations:
            raise ValueError("operations is empty")
        return self


# the data fields only the jsonl source reads (data.path has its own message)
_JSONL_ONLY = ("prompt_field", "reference_field", "shuffle", "seed")


class DataConfig(_Section):
    source: Literal["arithmetic", "jsonl"] = Field(
        "arithmetic", description="arithmetic: the built-in generator; jsonl: a file of {prompt, reference}."
    )
    path: str | None = Field(None, description="jsonl: the file (one JSON object per line).")
    prompt_field: str = Field("prompt", description="jsonl: key of the question text.")
    reference_field: str = Field("reference", description="jsonl: key of the reference answer.")
    shuffle: bool = Field(True, description="jsonl: reshuffle every pass (seeded; resumable).")
    seed: int = Field(
        0,
        description="jsonl: shuffle seed (the generator's is arithmetic.seed). The jsonl-only fields are "
        "refused with the arithmetic source, and arithmetic with jsonl.",
    )
    arithmetic: ArithmeticConfig = Field(default_factory=ArithmeticConfig, description="Generator knobs.")
    system_prompt: str | None = Field(
        None,
        description="Optional system message (through the chat template only: refused without one).",
    )
    prompt_template: str = Field(
        "{question}\nGive the final answer in \\boxed{{}}.",
        description="User message; {question} is replaced by the problem text. The model's prompt only: "
        "the service gets the bare question as each item's prompt (judges template it themselves).",
    )
    response_prefix: str = Field(
        "",
        description="Text that starts the assistant's reply (appended after the chat template's generation "
        "prompt, e.g. '<think>' or '<answer>'); the model continues it, and the service scores prefix + "
        "completion. Small models that never emit a required tag on their own learn from it.",
    )
    use_chat_template: bool = Field(
        True,
        description="Render with the tokenizer's chat template, which writes its own BOS (else the raw "
        "user message, with the BOS the tokenizer adds by default, if it adds one).",
    )
    max_prompt_tokens: int = Field(
        256, ge=8, description="Prompts longer than this are left-truncated (a leading BOS is kept)."
    )

    @model_validator(mode="after")
    def _path(self) -> DataConfig:
        if self.source == "jsonl" and not self.path:
            raise ValueError("data.path is required when data.source is jsonl")
        if self.source != "jsonl" and self.path:
            # the file would be ignored and the run would train on the built-in problems instead
            raise ValueError(
                f"data.path ({self.path}) is read only with data.source: jsonl (the source is {self.source})"
            )
        # Set for the other source, a knob would be ignored with nothing said: data.seed for another
        # stream of arithmetic problems (whose seed is data.arithmetic.seed) changes nothing at all.
        if self.source != "jsonl":
            stray = self._changed(_JSONL_ONLY)
            if stray:
                names = ", ".join(f"data.{name}" for name in stray)
                raise ValueError(
                    f"{names}: read only with data.source: jsonl (the source is {self.source}; the "
                    "generator's own knobs, its seed included, are under data.arithmetic)"
                )
        elif self._changed(["arithmetic"]):
            raise ValueError(
                "data.arithmetic is read only with data.source: arithmetic (the source is jsonl)"
            )
        if self.system_prompt and not self.use_chat_template:
            # the raw prompt is the user message alone: the system message would be dropped
            raise ValueError(
                "data.system_prompt needs data.use_chat_template: true (a raw prompt is the user message "
                "alone; put the text in data.prompt_template instead)"
            )
        return self

    @model_validator(mode="after")
    def _template(self) -> DataConfig:
        # Checked here, not at the first prompt: a template without {question} trains every step on one
        # identical prompt, and a stray brace (\boxed{}) would only fail once the model has loaded.
        try:
            fields = {
                name for _, name, _, _ in string.Formatter().parse(self.prompt_template) if name is not None
            }
            self.prompt_template.format(question="")
        except (ValueError, IndexError, KeyError, AttributeError) as exc:
            raise ValueError(
                f"data.prompt_template {self.prompt_template!r} cannot be filled ({exc!r}): the only field "
                "is {question}; write a literal brace as {{ or }} (e.g. \\boxed{{}})"
            ) from None
        if fields != {"question"}:
            what = "has no {question}" if "question" not in fields else f"has fields {sorted(fields)}"
            raise ValueError(
                f"data.prompt_template {self.prompt_template!r} {what}: it must place the problem with "
                "{question}, its only field (write a literal brace as {{ or }})"
            )
        return self


class GenerationConfig(_Section):
    backend: Literal["transformers", "vllm"] = Field(
        "transformers", description="transformers generate (CPU/GPU) or vLLM (GPU, extra `vllm`)."
    )
    group_size: int = Field(
        4, ge=2, description="G: completions per prompt (MC-GRPO samples G+1 and drops the pivot)."
    )
    max_new_tokens: int = Field(64, ge=1, description="Completion length cap (L_max).")
    temperature: float = Field(
        1.0, gt=0, description="Sampling temperature (also used for training logprobs)."
    )
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling mass.")
    top_k: int = Field(0, ge=0, description="Top-k sampling (0: off).")
    prompts_per_generate: int = Field(
        2,
        ge=1,
        description="Prompts per generate() call; each call's groups are sent to the service as soon as "
        "it finishes, which is what overlaps with the next call.",
    )
    vllm_gpu_memory_utilization: float = Field(
        0.3,
        gt=0,
        le=1,
        description="vLLM: GPU memory fraction (read only with backend: vllm; refused with transformers).",
    )

    @model_validator(mode="after")
    def _backend(self) -> GenerationConfig:
        # Set for the transformers backend, the fraction would be ignored with nothing said (a run that
        # was meant to leave the rest of the GPU to a colocated service takes what transformers takes).
        if self.backend != "vllm" and self._changed(["vllm_gpu_memory_utilization"]):
            raise ValueError(
                f"generation.vllm_gpu_memory_utilization ({self.vllm_gpu_memory_utilization}): read only "
                f"with generation.backend: vllm (the backend is {self.backend}; remove it, or set the backend)"
            )
        return self


class OverlongConfig(_Section):
    enabled: bool | None = Field(
        None, description="Add DAPO's overlong shaping to the reward (default: on for dapo only)."
    )
    max_length: int | None = Field(None, ge=1, description="L_max in tokens (default: max_new_tokens).")
    cache_length: int = Field(
        16, ge=1, description="L_cache: the ramp length before L_max, tokens (must be smaller than L_max)."
    )
    penalty_factor: float = Field(
        1.0,
        ge=0,
        description="Scale of the shaping term (gdpo: the weight of the overlong component, which is "
        "normalised within its group like the service's components).",
    )


class AlgorithmConfig(_Section):
    estimator: Estimator = Field(
        "grpo",
        description="grpo: (r-mean)/(std+eps); dr_grpo: r-mean; dapo: grpo + clip-higher, token-level loss, "
        "dynamic sampling, overlong shaping; gdpo: per-component group normalisation, weighted sum, "
        "batch normalisation; mc_grpo: r-median of G+1, pivot dropped; rloo: r - mean of the other members "
        "(leave-one-out).",
    )
    loss_agg: LossAgg = Field(
        "auto",
        description="seq_mean_token_mean (GRPO), token_mean (DAPO), seq_mean_token_sum_norm (Dr. GRPO: "
        "/(N*L_max)), bnpo (TRL's: each micro-batch's token mean, averaged over the micro-batches); "
        "auto: the estimator's own (seq_mean_token_mean at importance_sampling_level sequence, the only "
        "one it allows).",
    )
    scale_rewards: Literal["group", "batch", "none"] | None = Field(
        None,
        description="grpo/dapo: divide r - group mean by the group's std (group, the default), by the std "
        "of every valid reward in the batch (batch), or by nothing (none); TRL's scale_rewards. The "
        "other estimators have their own scaling.",
    )
    std_eps: float = Field(
        1e-4,
        gt=0,
        description="eps in the std denominators (TRL: 1e-4): grpo and dapo (unless scale_rewards none), gdpo, "
        "process_credit grpo_process; refused where nothing divides by a std.",
    )
    importance_sampling_level: ImportanceSamplingLevel = Field(
        "token",
        description="Where the PPO ratio is taken (TRL's importance_sampling_level): token (one ratio per "
        "token, GRPO/PPO); sequence (GSPO: one ratio per completion, exp of the mean token log-ratio, "
        "clipped per sequence; GSPO-token with process credit's per-token advantages). sequence needs "
        "loss_agg seq_mean_token_mean (auto picks it: GSPO's mean over sequences), takes its clip "
        "defaults from the GSPO paper (clip_eps_low/high), and has no dual clip.",
    )
    clip_eps_low: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="PPO clip: ratio >= 1 - eps_low (default 0.2; 3e-4 at importance_sampling_level "
        "sequence, the GSPO paper's: a sequence ratio is a mean of log-ratios and rarely leaves 1 +- 0.2).",
    )
    clip_eps_high: float | None = Field(
        None,
        gt=0,
        description="PPO clip: ratio <= 1 + eps_high (default: eps_low; 0.28 for dapo; 4e-4 at "
        "importance_sampling_level sequence when clip_eps_low is unset too).",
    )
    dual_clip_c: float | None = Field(
        None,
        gt=1,
        description="Dual-clip PPO (verl's clip_ratio_c, which defaults to 3.0): where the advantage is "
        "negative the token's loss is at most -c*A, so a ratio far above 1 cannot blow it up (the "
        "dual_clip_frac metric counts those tokens); must be > 1; null: off. Token level only.",
    )
    num_epochs: int = Field(
        1, ge=1, description="Optimisation epochs per batch (one optimizer step per epoch; mu in GRPO)."
    )
    old_logprobs: Literal["sampler", "recompute"] = Field(
        "sampler",
        description="Denominator of the ratio: the logprobs recorded while sampling, or the policy's own "
        "logprobs from the first epoch's forward (identical weights; use with vLLM or bf16 sampling, "
        "and required with vLLM when top_p < 1 or top_k > 0: vLLM's logprobs are then of the truncated "
        "distribution).",
    )
    kl_coef: float = Field(
        0.0,
        ge=0,
        description="beta: weight of the per-token KL to the frozen reference, added to the loss (GRPO's "
        "placement, verl's use_kl_loss; never subtracted from the reward) (0: no reference).",
    )
    kl_estimator: Literal["k1", "k2", "k3"] = Field("k3", description="Per-token KL estimator (Schulman).")
    dynamic_sampling: bool | None = Field(
        None,
        description="Drop zero-variance groups (gdpo: groups in which no component varies) and resample "
        "until the batch is full (default: dapo); the groups_dropped metric counts them, groups_failed those "
        "whose reward request failed, groups_trained those with an item in the loss (with or without it).",
    )
    max_sampling_rounds: int = Field(
        3,
        ge=1,
        description="Dynamic sampling and the accuracy filter: generation rounds per step before training "
        "on what survived (a round in which every reward request failed is the last).",
    )
    accuracy_filter: tuple[float, float] | None = Field(
        None,
        description="PRIME's accuracy filter [low, high] (its recipe: [0.2, 0.8]): keep only the groups "
        "whose accuracy, the share of their valid items that are accurate (reward.accuracy_key and "
        "accuracy_threshold, as the accuracy metric), lies within the bounds (inclusive; 0 <= low <= "
        "high <= 1); the others are dropped and replaced by more sampling rounds (max_sampling_rounds), "
        "as dynamic sampling's are. With any estimator and with process_credit; with dynamic_sampling "
        "a group either drops is dropped. A group with no accuracy (no valid item with the value) is "
        "not judged. groups_accuracy_filtered counts the groups it drops, which groups_dropped counts "
        "too. null: off.",
    )
    overlong: OverlongConfig = Field(default_factory=OverlongConfig, description="DAPO overlong shaping.")
    mask_truncated: bool = Field(
        False, description="Leave completions that hit max_new_tokens out of the loss."
    )
    gdpo_components: list[str] | None = Field(
        None,
        description="gdpo: component names to normalise (default: every top-level component the service returns; "
        "'a.b' sub-components are left out).",
    )
    gdpo_weights: dict[str, float] = Field(
        default_factory=dict, description="gdpo: weight per component (default 1)."
    )
    mc_mad_scaling: bool = Field(
        False,
        description="mc_grpo: divide by max(MAD, 0.5*std, mc_mad_floor), a floored form of the official "
        "code's MAD scaling (which divides by MAD + 1e-3, about 1000 when binary rewards make MAD 0, and "
        "rescales by (G+1)/#nonzero; not done here).",
    )
    mc_mad_floor: float = Field(0.1, gt=0, description="mc_grpo: floor of the MAD scale.")
    process_credit: ProcessCredit = Field(
        "none",
        description="Dense credit from a PRM's step scores (details.steps), per token: none (one advantage "
        "per completion); pure_min (PURE's min-form: r_k = 2s_k - 1, or the process reward as is, see process_step_value; w = softmax(-r/T), w_k r_k on the token "
        "ending step k, the outcome reward times process_outcome_coef on the last token, RLOO baselines, "
        "returns with gamma 1); grpo_process (DeepSeekMath's process supervision: step scores normalised "
        "over the group's steps, each token the sum of those ending at or after it; the sum form PURE found "
        "hack-prone); prime (PRIME's: an implicit PRM's process rewards on the tokens ending their steps "
        "and the outcome reward times process_outcome_coef on the last token, each minus its leave-one-out "
        "baseline over the group, returns with gamma 1, summed, whitened over the batch's tokens). "
        "Estimator grpo or rloo only; no dynamic sampling, overlong shaping or scale_rewards (the "
        "accuracy_filter applies: PRIME's own filter).",
    )
    process_steps_from: str | None = Field(
        None,
        description="Where the step scores are: unset, the reward's own details.steps (prm, judge in steps "
        "mode); a composite component's key (e.g. 'prm'; 'a.b' inside a nested composite), its "
        "details.steps. Details are then asked for (include_details).",
    )
    process_step_value: ProcessStepValue = Field(
        "auto",
        description="What of each step is its reward: score (a PRM's step score s in [0, 1]; pure_min maps it "
        "to 2s - 1); process_reward (an implicit PRM's dense reward, prm convention implicit as in PRIME: "
        "beta * sum of log pi_phi/pi_ref over the step, taken as is; its score is sigmoid of the running sum, "
        "a value, not the step's reward); auto (process_reward where every step carries one, else score). "
        "prime reads process_reward only (auto or process_reward; score is refused).",
    )
    process_temperature: float = Field(
        0.1, gt=0, description="pure_min: T of the soft-min weights softmax(-r_k / T) (PURE: 0.1)."
    )
    process_outcome_coef: float = Field(
        1.0,
        ge=0,
        description="pure_min, prime: weight of the outcome reward (the item's score) on the last token, "
        "against the step rewards' 1 (PURE's verifiable_reward_coef; PRIME's verifier reward_coef over its "
        "rm_coef, 5/5 in its recipe; 0: step rewards only).",
    )
    process_norm: ProcessNorm = Field(
        "batch_norm",
        description="prime: PRIME's prime_norm. batch_norm divides every process reward by the largest "
        "|sum of the process rewards at or after a token| over the batch (+1e-6), so the process return "
        "is within [-1, 1] like a 0/1 outcome (and beta cancels out); none takes them as they are.",
    )

    @model_validator(mode="after")
    def _process(self) -> AlgorithmConfig:
        # Process credit replaces the estimator's advantage; the settings of what it replaces, and its own
        # settings while it is off, would be ignored with nothing said.
        if self.process_credit == "none":
            stray = self._changed(
                [
                    "process_steps_from",
                    "process_step_value",
                    "process_temperature",
                    "process_outcome_coef",
                    "process_norm",
                ]
            )
            if stray:
                raise ValueError(
                    f"algorithm.{', algorithm.'.join(stray)}: process credit is off (process_credit: none); "
                    "set algorithm.process_credit"
                )
            return self
        self._process_mode_settings()
        if self.estimator not in ("grpo", "rloo"):
            raise ValueError(
                f"algorithm.process_credit {self.process_credit} computes the advantages itself; estimator "
                f"{self.estimator} would be ignored (leave it at grpo, or rloo)"
            )
        refused = [
            *(["scale_rewards"] if self.scale_rewards is not None else []),
            *(["dynamic_sampling"] if self.dynamic_sampling else []),
            *(["overlong"] if self.overlong.enabled else []),
        ]
        if refused:
            raise ValueError(
                f"algorithm.{', algorithm.'.join(refused)}: not applied with process_credit "
                f"{self.process_credit} (dynamic sampling filters on the outcome score, whose groups may still "
                "differ in their steps; the overlong shaping and scale_rewards act on a sequence-level reward; "
                "algorithm.accuracy_filter, PRIME's filter on group accuracy, does apply)"
            )
        return self

    def _process_mode_settings(self) -> None:
        """Refuse the settings of another process-credit mode, and what ``prime`` cannot read."""
        readers = {
            "process_temperature": ("pure_min",),
            "process_outcome_coef": ("pure_min", "prime"),
            "process_norm": ("prime",),
        }
        stray = [n for n in self._changed(list(readers)) if self.process_credit not in readers[n]]
        if stray:
            read_by = "; ".join(f"{n}: {' and '.join(readers[n])} only" for n in stray)
            raise ValueError(
                f"algorithm.{', algorithm.'.join(stray)}: not read by process_credit {self.process_credit} "
                f"({read_by})"
            )
        if self.process_credit != "prime":
            return
        if self.process_step_value == "score":
            # a two-class PRM's p(+) (or an implicit PRM's sigma(q_k), a value) is no process reward to sum
            raise ValueError(
                "algorithm.process_step_value score: process_credit prime sums each step's process_reward "
                "(an implicit PRM's, prm with convention implicit); use auto or process_reward, or pure_min "
                "or grpo_process for a PRM's step scores"
            )

    @model_validator(mode="after")
    def _scaling(self) -> AlgorithmConfig:
        if self.scale_rewards is not None and self.estimator not in ("grpo", "dapo"):
            raise ValueError(
                f"scale_rewards applies to grpo and dapo; {self.estimator} has its own scaling "
                "(dr_grpo is grpo with scale_rewards: none)"
            )
        # Like scale_rewards: a setting of one estimator (or of a feature that is off) given to a run
        # that does not read it would be ignored with nothing said, e.g. gdpo_weights left in a config
        # switched to grpo, or an overlong ramp set while the shaping is off (it is on for dapo only).
        stray = [
            *(["gdpo_components"] if self.gdpo_components is not None and self.estimator != "gdpo" else []),
            *(["gdpo_weights"] if self.gdpo_weights and self.estimator != "gdpo" else []),
            *(self._changed(["mc_mad_scaling", "mc_mad_floor"]) if self.estimator != "mc_grpo" else []),
        ]
        if stray:
            raise ValueError(
                f"algorithm.{', algorithm.'.join(stray)}: read only by the estimator it is named for, not "
                f"{self.estimator} (remove it, or set the estimator)"
            )
        _refuse_while_off(
            self.overlong._changed(["max_length", "cache_length", "penalty_factor"]),
            "algorithm.overlong.",
            on=self.resolved_overlong,
            given=self.overlong.enabled is not None,
            off=f"the overlong shaping is off ({self.estimator}; it is on by default for dapo only)",
            switch="overlong.enabled: true (or false, to keep the settings)",
        )
        _refuse_while_off(
            self._changed(["max_sampling_rounds"]),
            "algorithm.",
            on=self.resolved_dynamic_sampling or self.accuracy_filter is not None,
            given=self.dynamic_sampling is not None,
            off=f"dynamic sampling is off ({self.estimator}; it is on by default for dapo only) and so is "
            "the accuracy filter, the two that sample more rounds",
            switch="dynamic_sampling: true or an accuracy_filter (or dynamic_sampling: false, to keep the "
            "setting)",
        )
        _refuse_while_off(
            [f"kl_estimator ({self.kl_estimator})"] if self._changed(["kl_estimator"]) else [],
            "algorithm.",
            on=self.kl_coef > 0,
            given="kl_coef" in self.model_fields_set,
            off="the KL term is off (kl_coef defaults to 0)",
            switch="algorithm.kl_coef > 0 (or 0, to keep the setting)",
        )
        if self.gdpo_components is not None:
            unknown = sorted(set(self.gdpo_weights) - set(self.gdpo_components))
            if unknown:
                raise ValueError(f"gdpo_weights names {unknown}, which are not in gdpo_components")
        return self

    @model_validator(mode="after")
    def _accuracy_bounds(self) -> AlgorithmConfig:
        # bounds outside [0, 1] or the wrong way round would drop every group, every round, with the
        # run going on training on nothing (NaN fails the comparison too)
        if self.accuracy_filter is not None:
            low, high = self.accuracy_filter
            if not 0.0 <= low <= high <= 1.0:
                raise ValueError(
                    f"algorithm.accuracy_filter [{low}, {high}]: the bounds of a group's accuracy, a share, "
                    "must satisfy 0 <= low <= high <= 1 (PRIME's recipe: [0.2, 0.8])"
                )
        return self

    @model_validator(mode="after")
    def _std_eps_read(self) -> AlgorithmConfig:
        # std_eps is the eps of a std denominator: a run whose advantages divide by no std would ignore a
        # changed one with nothing said (rloo, dr_grpo, mc_grpo and pure_min did).
        if not self._changed(["std_eps"]):
            return self
        if self.process_credit != "none":
            by = f"process_credit {self.process_credit}"
            read = self.process_credit == "grpo_process"
        else:
            by = f"estimator {self.estimator}"
            read = self.estimator == "gdpo"
            if self.estimator in ("grpo", "dapo"):
                read = self.resolved_scale_rewards != "none"
                by += f" with scale_rewards {self.resolved_scale_rewards}"
        if not read:
            raise ValueError(
                f"algorithm.std_eps ({self.std_eps}): not read by {by}, whose advantages divide by no std "
                "(remove it)"
            )
        return self

    @model_validator(mode="after")
    def _sequence_level(self) -> AlgorithmConfig:
        # GSPO's loss is one term per completion, averaged over completions. Written on each token, only
        # seq_mean_token_mean gives that back; the others would weight a completion's term by its length
        # (token_mean, bnpo) or by its length over L_max (seq_mean_token_sum_norm), the length weighting
        # GSPO's 1/|y_i| is there to avoid. verl's GSPO loss ignores its loss_agg_mode for the same reason.
        if self.importance_sampling_level != "sequence":
            return self
        if self.loss_agg not in ("auto", "seq_mean_token_mean"):
            raise ValueError(
                f"algorithm.loss_agg {self.loss_agg} with importance_sampling_level: sequence: GSPO's loss is "
                "one term per completion, averaged over completions; loss_agg would weight each term by "
                "the completion's length. Use seq_mean_token_mean (or auto, which picks it at sequence level)"
            )
        if self.dual_clip_c is not None:
            raise ValueError(
                "algorithm.dual_clip_c applies at importance_sampling_level: token only (verl's vanilla "
                "PPO loss has it, its GSPO loss does not; GSPO's sequence clip is 3e-4/4e-4 wide by "
                "default): remove it, or set importance_sampling_level: token"
            )
        return self

    @property
    def resolved_scale_rewards(self) -> str:
        return self.scale_rewards or "group"

    @property
    def resolved_loss_agg(self) -> str:
        if self.importance_sampling_level == "sequence":
            return "seq_mean_token_mean"
        return DEFAULT_LOSS_AGG[self.estimator] if self.loss_agg == "auto" else self.loss_agg

    @property
    def resolved_clip_low(self) -> float:
        """0.2, or at sequence level GSPO's 3e-4 (TRL's recommendation from the paper's §5.1): a sequence's
        ratio is the exp of a *mean* log-ratio, so 0.2 would almost never clip it."""
        if self.clip_eps_low is not None:
            return self.clip_eps_low
        return GSPO_CLIP_EPS[0] if self.importance_sampling_level == "sequence" else 0.2

    @property
    def resolved_clip_high(self) -> float:
        if self.clip_eps_high is not None:
            return self.clip_eps_high
        if self.importance_sampling_level == "sequence":
            return GSPO_CLIP_EPS[1] if self.clip_eps_low is None else self.clip_eps_low
        return 0.28 if self.estimator == "dapo" else self.resolved_clip_low

    @property
    def resolved_dynamic_sampling(self) -> bool:
        return self.estimator == "dapo" if self.dynamic_sampling is None else self.dynamic_sampling

    @property
    def resolved_overlong(self) -> bool:
        return self.estimator == "dapo" if self.overlong.enabled is None else self.overlong.enabled


class TrainingConfig(_Section):
    steps: int = Field(50, ge=1, description="Optimisation steps (one batch of prompts each).")
    prompts_per_step: int = Field(4, ge=1, description="B: prompts (groups) per step.")
    micro_batch_size: int = Field(
        8, ge=1, description="Sequences per forward/backward (gradient accumulation)."
    )
    learning_rate: float = Field(1e-5, ge=0, description="AdamW learning rate.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    adam_betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas.")
    warmup_steps: int = Field(
        0,
        ge=0,
        description="Linear learning-rate warmup, in updates (the updates metric): steps that stepped the "
        "optimizer, each of them its num_epochs optimizer steps at one rate (so not TRL's optimizer steps "
        "when num_epochs > 1); a step that stepped no optimizer (no reward answered, nothing with signal) "
        "does not advance it.",
    )
    max_grad_norm: float | None = Field(1.0, gt=0, description="Gradient clipping norm (null: none).")
    max_skipped_steps: int = Field(
        5,
        ge=1,
        description="An optimizer step whose loss has a non-finite input (a NaN or inf log-prob: a bad "
        "forward pass, an fp16/bf16 overflow) or whose gradient norm is not finite is skipped, weights "
        "unchanged (updates_skipped, nonfinite_tokens); this many consecutive steps in which every "
        "optimizer step was skipped end the run, which was training on nothing. A step that stepped "
        "ends the streak.",
    )
    seed: int = Field(0, description="Seed of torch/python RNGs (sampling, init of LoRA).")


class OutputConfig(_Section):
    run_dir: str = Field("runs/rewardhub-train", description="Where metrics, TensorBoard and checkpoints go.")
    save_every: int = Field(0, ge=0, description="Checkpoint every N steps (0: only at the end).")
    keep_checkpoints: int = Field(2, ge=1, description="How many step checkpoints to keep.")
    save_final_model: bool = Field(True, description="Write the trained model/adapter to RUN_DIR/final.")
    resume: bool = Field(True, description="Continue from the latest checkpoint in run_dir if there is one.")
    tensorboard: bool = Field(True, description="Write TensorBoard scalars (needs `tensorboard`).")
    progress: bool = Field(True, description="Show a progress bar (tqdm).")
    log_samples: int = Field(
        1,
        ge=0,
        description="Completions per step written to samples.jsonl (with their score and reason: the "
        "service's for an invalid item, request_failed where the request failed).",
    )


class TrainConfig(_Section):
    model: ModelConfig
    reward: RewardConfig = Field(default_factory=RewardConfig, description="The rewardhub service.")
    data: DataConfig = Field(default_factory=DataConfig, description="Prompts and references.")
    generation: GenerationConfig = Field(default_factory=GenerationConfig, description="Sampling.")
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig, description="Estimator and loss.")
    training: TrainingConfig = Field(default_factory=TrainingConfig, description="Optimisation.")
    output: OutputConfig = Field(default_factory=OutputConfig, description="Run directory and logging.")

    @model_validator(mode="after")
    def _vllm_truncated_logprobs(self) -> TrainConfig:
        # vLLM reports the sampled token's logprob *after* top-k/top-p truncation and renormalisation
        # (processed_logprobs; its raw mode would drop the temperature instead), while the loss computes
        # the policy's untruncated tempered logprob. As the ratio's denominator that biases every ratio
        # below 1, so the sampler's numbers cannot be used there: the ratio must be recomputed.
        gen, alg = self.generation, self.algorithm
        truncated = gen.top_p < 1.0 or gen.top_k > 0
        if gen.backend == "vllm" and truncated and alg.old_logprobs == "sampler":
            raise ValueError(
                "generation.backend vllm with top_p < 1 or top_k > 0 reports logprobs of the truncated "
                "sampling distribution, not of the policy: set algorithm.old_logprobs: recompute "
                "(or top_p: 1 and top_k: 0)"
            )
        return self

    @model_validator(mode="after")
    def _accuracy_key(self) -> TrainConfig:
        # A composite's score is Σ weight·component (or a formula): score >= threshold counted an item
        # right in a format bonus alone as accurate (format 1 + math 0 at weights 1, 1), so the accuracy
        # metric measured no one thing. Only the user knows which component is correctness.
        # (checked here, not in RewardConfig: check_service and the dispatcher take a RewardConfig
        # of any reward, and the accuracy metric is the run's)
        rc = self.reward
        if rc.name == "composite" and rc.accuracy_key is None:
            keys = _component_keys(rc.config)
            which = f" (its components: {', '.join(keys)})" if keys else ""
            raise ValueError(
                "reward.accuracy_key is required with reward.name: composite: the composite's score is a "
                "weighted sum or formula of its components, not correctness, so score >= "
                f"reward.accuracy_threshold is no accuracy; name the component that is correctness{which}"
            )
        return self

    @model_validator(mode="after")
    def _overlong_ramp(self) -> TrainConfig:
        # DAPO's shaping is 0 up to L_max − L_cache: with L_cache ≥ L_max no length is free of it, and
        # it becomes a length penalty on every completion (the service's dapo_overlong refuses it too).
        o = self.algorithm.overlong
        l_max = o.max_length or self.generation.max_new_tokens
        if self.algorithm.resolved_overlong and o.cache_length >= l_max:
            where = "algorithm.overlong.max_length" if o.max_length else "generation.max_new_tokens"
            raise ValueError(
                f"algorithm.overlong.cache_length ({o.cache_length}) must be smaller than L_max "
                f"({l_max}, {where}): DAPO's shaping is 0 up to L_max - L_cache, and with no such "
                "length it penalises every completion (set a smaller cache_length, or overlong.enabled: false)"
            )
        cap = self.generation.max_new_tokens
        if self.algorithm.resolved_overlong and l_max - o.cache_length >= cap:
            # the ramp starts where no completion can reach: the shaping would be 0 for all of them
            raise ValueError(
                f"algorithm.overlong: the shaping starts above L_max - L_cache = {l_max - o.cache_length} "
                f"tokens, and no completion (at most {cap} tokens, generation.max_new_tokens) is that long: "
                "it would never apply (lower overlong.max_length, or set overlong.enabled: false)"
            )
        return self


def _read(path: Path) -> dict[str, Any]:
    text = path.read_text()
    if path.suffix == ".toml":
        return tomllib.loads(text)
    import yaml

    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the top level must be a mapping")
    return data


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Apply ``section.key=value`` overrides (values parsed as YAML: ``3``, ``true``, ``[a, b]``)."""
    import yaml

    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ValueError(f"override {item!r} is not KEY=VALUE")
        node = data
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"override {item!r}: {part} is not a section")
        node[parts[-1]] = yaml.safe_load(raw)
    return data


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> TrainConfig:
    """Read a YAML (``.yaml``/``.yml``) or TOML (``.toml``) config and apply ``KEY=VALUE`` overrides."""
    return TrainConfig.model_validate(apply_overrides(_read(Path(path)), overrides))


def describe_fields(model: type[BaseModel] = TrainConfig, prefix: str = "") -> Iterator[tuple[str, str, str]]:
    """Yield ``(dotted name, default, description)`` for every field, sections recursively."""
    for name, info in model.model_fields.items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from describe_fields(ann, f"{prefix}{name}.")
            continue
        if info.is_required():
            default = "(required)"
        elif info.default_factory is not None:
            default = repr(info.default_factory())  # type: ignore[call-arg]
        else:
            default = repr(info.default)
        yield f"{prefix}{name}", default, info.description or ""


def to_dict(config: TrainConfig) -> Mapping[str, Any]:
    """The resolved config as plain JSON-able data (written to RUN_DIR/config.json), the reward
    service's key redacted: a run directory gets shared, uploaded and committed with its results, and
    the key is a credential, not a setting that describes the run."""
    data = config.model_dump(mode="json")
    if data["reward"]["api_key"] is not None:
        data["reward"]["api_key"] = REDACTED
    return data


REDACTED = "<redacted>"
