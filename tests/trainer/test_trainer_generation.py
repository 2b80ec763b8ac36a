"""Sampling with transformers generate: groups, EOS handling, and logprobs that match the policy."""

from __future__ import annotations

import copy
import math
import os
import sys
import types
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from rewardhub_trainer.config import GenerationConfig
from rewardhub_trainer.generation import HFGenerator, make_generator, prompt_seeds, split_completion
from rewardhub_trainer.losses import token_logprobs

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tiny_models import build_tiny_causal_lm

    path: Path = build_tiny_causal_lm(tmp_path_factory.mktemp("gen") / "m")
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def test_split_completion() -> None:
    assert split_completion([5, 6, 2, 9, 2], {2}) == ([5, 6, 2], False)  # EOS kept, the rest dropped
    assert split_completion([5, 6, 7], {2}) == ([5, 6, 7], True)


def test_groups_lengths_and_reproducibility(tiny: tuple[Any, Any]) -> None:
    model, tok = tiny
    gen = HFGenerator(model, tok, GenerationConfig(max_new_tokens=12, temperature=1.3, top_k=50))
    prompts = [tok("What is 3+5?")["input_ids"], tok("Say a number")["input_ids"]]
    torch.manual_seed(0)
    groups = gen.generate(prompts, 3)
    torch.manual_seed(0)
    again = gen.generate(prompts, 3)
    assert [len(g) for g in groups] == [3, 3]
    for prompt, group in zip(prompts, groups, strict=True):
        for c in group:
            assert c.prompt_ids == prompt and len(c.logprobs) == len(c.completion_ids) > 0
            ends_with_eos = c.completion_ids[-1] in gen.eos
            assert c.truncated == (not ends_with_eos) and (
                c.truncated == (len(c.completion_ids) == 12) or ends_with_eos
            )
            assert all(lp <= 0 for lp in c.logprobs)
    assert [[c.completion_ids for c in g] for g in groups] == [[c.completion_ids for c in g] for g in again]


def test_sampling_logprobs_equal_a_fresh_forward(tiny: tuple[Any, Any]) -> None:
    model, tok = tiny
    temperature = 0.7
    gen = HFGenerator(model, tok, GenerationConfig(max_new_tokens=10, temperature=temperature, top_p=0.9))
    torch.manual_seed(1)
    (group,) = gen.generate([tok("The answer is")["input_ids"]], 2)
    for c in group:
        ids = torch.tensor([c.prompt_ids + c.completion_ids])
        with torch.no_grad():
            logits = model(ids).logits[:, len(c.prompt_ids) - 1 : -1]
        ref = token_logprobs(logits, torch.tensor([c.completion_ids]), temperature)[0]
        # log softmax(z/T) of the full (untruncated) distribution, whatever top_p did while sampling
        assert torch.allclose(ref, torch.tensor(c.logprobs), atol=1e-4)


def _sampled_ranks(model: Any, completions: list[Any]) -> list[int]:
    """Rank of every sampled token in the policy's own next-token logits (0 = the most likely)."""
    ranks: list[int] = []
    for c in completions:
        ids = torch.tensor([c.prompt_ids + c.completion_ids])
        with torch.no_grad():
            logits = model(ids).logits[0, len(c.prompt_ids) - 1 : -1]
        chosen = logits.gather(-1, torch.tensor(c.completion_ids).unsqueeze(-1))
        ranks.extend((logits > chosen).sum(dim=-1).tolist())
    return ranks


@pytest.mark.parametrize(
    "checkpoint_defaults",
    [{}, {"top_k": 5, "min_p": 0.95, "repetition_penalty": 3.0, "typical_p": 0.2}],
    ids=["stock", "checkpoint-sampling-defaults"],
)
def test_top_k_zero_samples_the_untruncated_distribution(
    tiny: tuple[Any, Any], checkpoint_defaults: dict[str, Any]
) -> None:
    # top_k: 0 is "off", and a checkpoint's generation_config.json (Qwen/Llama instruct models ship
    # top_k, min_p, repetition_penalty...) must not truncate the sampling distribution either. The tiny
    # model's next-token distribution is near uniform over ~400 tokens, so untruncated sampling draws
    # many tokens outside the top 50; any truncation (transformers' own top_k=50 default included)
    # keeps every rank below 50.
    model, tok = tiny
    saved = model.generation_config
    model.generation_config = copy.deepcopy(saved)
    for key, value in checkpoint_defaults.items():
        setattr(model.generation_config, key, value)
    try:
        gen = HFGenerator(model, tok, GenerationConfig(max_new_tokens=12, temperature=1.0, top_k=0))
        torch.manual_seed(3)
        (group,) = gen.generate([tok("What is 3+5?")["input_ids"]], 4)
    finally:
        model.generation_config = saved
    ranks = _sampled_ranks(model, group)
    assert len(ranks) >= 8
    assert max(ranks) >= 50, ranks


def test_vllm_stops_on_and_recognises_the_checkpoint_eos_ids(
    tiny: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vLLM sampler took its EOS ids from the tokenizer alone, where transformers' also takes the
    model's generation_config ones (Qwen2.5/Llama-3 instruct list two or three): a completion ending
    in such an id (vLLM stops on them) was flagged truncated, so `mask_truncated` dropped it and the
    service was told it hit the length cap. Found in review. The engine is replaced at its boundary:
    a stand-in `vllm` module answers fixed token ids."""
    model, tok = tiny
    other_eos = tok.convert_tokens_to_ids("<|endoftext|>")
    assert other_eos != tok.eos_token_id
    seen: list[Any] = []

    class FakeLLM:
        def __init__(self, **kwargs: Any):
            pass

        def generate(self, prompts: list[Any], params: Any, use_tqdm: bool) -> list[Any]:
            seen.append(params)
            lp = SimpleNamespace(logprob=-1.0)
            out = SimpleNamespace(token_ids=[7, other_eos], logprobs=[{7: lp}, {other_eos: lp}])
            return [SimpleNamespace(outputs=[out] * p.n) for p in params]  # one SamplingParams a prompt

    fake = types.ModuleType("vllm")
    fake.LLM = FakeLLM  # type: ignore[attr-defined]
    fake.SamplingParams = SimpleNamespace  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", fake)
    saved = model.generation_config
    model.generation_config = copy.deepcopy(saved)
    model.generation_config.eos_token_id = [tok.eos_token_id, other_eos]
    try:
        gen = make_generator("vllm", model, tok, GenerationConfig(max_new_tokens=4), "/m", "float32")
        torch.manual_seed(5)
        group, _ = gen.generate([[1, 2, 3], [4, 5]], 2)
    finally:
        model.generation_config = saved
    (first, second) = seen[0]
    assert other_eos in first.stop_token_ids and tok.eos_token_id in first.stop_token_ids
    # each prompt its own seed, from torch's (checkpointed) generator: a resume samples the same
    torch.manual_seed(5)
    assert [first.seed, second.seed] == prompt_seeds(2) and first.seed != second.seed
    assert [(c.completion_ids, c.truncated) for c in group] == [([7, other_eos], False)] * 2


@pytest.mark.parametrize("lora", [False, True])
def test_the_loss_forward_has_no_dropout_of_the_checkpoint(
    tiny: tuple[Any, Any], tmp_path: Path, lora: bool
) -> None:
    """The loss passes run the policy in train mode, where a checkpoint's own dropout (config
    ``attention_dropout``, GPT-2/Phi-style ``nn.Dropout`` layers) is active, while sampling runs in eval
    mode: the recorded logprobs were not those of the policy the loss sees, so the PPO ratio was not 1
    before the first update and every gradient carried dropout noise. Found in review. (LoRA's own
    ``lora.dropout`` is a separate, documented setting.)"""
    import json

    from rewardhub_trainer.config import ModelConfig
    from rewardhub_trainer.modeling import load_policy

    model, tok = tiny
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "attention_dropout": 0.5}))
    policy, tok2, _ = load_policy(
        ModelConfig(path=str(tmp_path), device="cpu", lora={"enabled": lora}), need_reference=False
    )
    policy.train()
    ids = torch.tensor([tok2("What is 3+5? The answer is 8")["input_ids"]])
    torch.manual_seed(0)
    with torch.no_grad():
        first, second = policy(ids).logits, policy(ids).logits
        policy.eval()
        evaluated = policy(ids).logits
    assert torch.allclose(first, evaluated, atol=1e-5) and torch.allclose(second, evaluated, atol=1e-5)


def test_checkpoint_generation_settings_do_not_reshape_groups_or_sampling(tiny: tuple[Any, Any]) -> None:
    """transformers fills every generation field left unset from the checkpoint's generation_config:
    ``num_return_sequences`` there multiplied the rows (completions went to the wrong prompts, with
    another row's logprobs), ``num_beams`` turned sampling into beam search, and ``suppress_tokens``
    reshaped the distribution the recorded logprobs do not describe (``min_length`` is overridden by
    ``min_new_tokens=0``; it stays in the case as a guard).
    Found in review."""
    model, tok = tiny
    vocab = len(tok)
    saved = model.generation_config
    model.generation_config = copy.deepcopy(saved)
    g = model.generation_config
    g.num_return_sequences, g.num_beams, g.min_length = 2, 2, 40
    g.suppress_tokens = list(range(20, vocab))  # only ids < 20 left (and never EOS before 40 tokens)
    try:
        gen = HFGenerator(model, tok, GenerationConfig(max_new_tokens=8, temperature=1.0, top_k=0))
        prompts = [tok("What is 3+5?")["input_ids"], tok("Say a number")["input_ids"]]
        torch.manual_seed(5)
        groups = gen.generate(prompts, 3)
    finally:
        model.generation_config = saved
    assert [len(grp) for grp in groups] == [3, 3]
    for prompt, grp in zip(prompts, groups, strict=True):
        for c in grp:
            assert c.prompt_ids == prompt
            ids = torch.tensor([c.prompt_ids + c.completion_ids])
            with torch.no_grad():
                logits = model(ids).logits[:, len(c.prompt_ids) - 1 : -1]
            ref = token_logprobs(logits, torch.tensor([c.completion_ids]), 1.0)[0]
            assert torch.allclose(ref, torch.tensor(c.logprobs), atol=1e-4)
    sampled = {t for grp in groups for c in grp for t in c.completion_ids}
    assert max(sampled) >= 20, sampled  # the near-uniform tiny model draws from its whole vocabulary


def test_vllm_weight_sync_drops_the_prefix_cache(
    tiny: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vLLM engine runs with prefix caching, and every prompt shares the chat template's head: after
    the new weights were loaded, the next step reused KV blocks the *old* weights had computed, so it
    sampled from a mix of the two policies (TRL and verl reset the cache after each sync, as vLLM's own
    docstring says RLHF flows must). Found in review. The engine is a stand-in at its boundary."""
    model, tok = tiny
    events: list[str] = []

    class FakeRunnerModel:
        def load_weights(self, weights: list[tuple[str, torch.Tensor]]) -> None:
            events.append(f"load {len(weights)}")

    runner = SimpleNamespace(model=FakeRunnerModel())
    engine = SimpleNamespace(
        model_executor=SimpleNamespace(
            driver_worker=SimpleNamespace(worker=SimpleNamespace(model_runner=runner))
        )
    )

    class FakeLLM:
        def __init__(self, **kwargs: Any):
            self.llm_engine = engine
            assert kwargs["enable_prefix_caching"]

        def reset_prefix_cache(self) -> bool:
            events.append("reset")
            return True

    fake = types.ModuleType("vllm")
    fake.LLM = FakeLLM  # type: ignore[attr-defined]
    fake.SamplingParams = SimpleNamespace  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", fake)
    gen = make_generator("vllm", model, tok, GenerationConfig(), "/m", "float32")
    gen.sync_weights(model)
    assert events == [f"load {len(model.state_dict())}", "reset"]


def test_vllm_weight_sync_finds_the_engine_in_process(
    tiny: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM >= 0.11 (the extra's floor) has only the V1 engine, whose ``LLM`` runs the engine core in a
    child process by default (``VLLM_ENABLE_V1_MULTIPROCESSING=1``): ``llm_engine`` then has no
    ``model_executor`` (vllm/v1/engine/llm_engine.py sets it only ``if not multiprocess_mode``), so the
    first weight sync after the first optimizer step died with AttributeError. Found in review. The
    generator now asks for the in-process engine core before it builds the engine, whose model the
    trainer's weights can be loaded into. The stand-in engine at the boundary does what vLLM's does."""
    model, tok = tiny
    loaded: list[int] = []

    class FakeRunnerModel:
        def load_weights(self, weights: list[tuple[str, torch.Tensor]]) -> None:
            loaded.append(len(weights))

    class FakeLLM:
        def __init__(self, **kwargs: Any):
            self.llm_engine = SimpleNamespace()
            if os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1") == "0":  # vLLM's default: "1"
                runner = SimpleNamespace(model=FakeRunnerModel())
                self.llm_engine.model_executor = SimpleNamespace(
                    driver_worker=SimpleNamespace(worker=SimpleNamespace(model_runner=runner))
                )

        def reset_prefix_cache(self) -> bool:
            return True

    fake = types.ModuleType("vllm")
    fake.LLM = FakeLLM  # type: ignore[attr-defined]
    fake.SamplingParams = SimpleNamespace  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)  # restored after the test
    gen = make_generator("vllm", model, tok, GenerationConfig(), "/m", "float32")
    gen.sync_weights(model)
    assert loaded == [len(model.state_dict())]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("bad_words_ids", [[t] for t in range(20, 400)]),  # only ids < 20 left
        ("sequence_bias", [[[7], 50.0]]),  # token 7 nearly always
        ("forced_bos_token_id", 7),  # the first token of a one-token prompt's completion
        ("forced_eos_token_id", 7),  # the last token before max_new_tokens
        ("exponential_decay_length_penalty", (1, 3.0)),  # EOS more likely as the completion grows
        ("top_h", 0.2),  # entropy-bounded truncation
        ("stop_strings", ["a"]),  # stops mid-completion (and needs a tokenizer generate() was not given)
        ("suppress_tokens", list(range(20, 400))),  # (neutralised before: guards)
        ("begin_suppress_tokens", list(range(20, 400))),
    ],
)
@pytest.mark.parametrize("lora", [False, True])
def test_no_checkpoint_generation_setting_reaches_sampling(
    tiny: tuple[Any, Any], field: str, value: Any, lora: bool
) -> None:
    """transformers fills every generation field left unset from the checkpoint's generation_config, and
    some are off only when unset (None), so no explicit value could shut them off: a checkpoint's
    ``bad_words_ids``, ``sequence_bias``, ``forced_bos/eos_token_id``, ``exponential_decay_length_penalty``
    or ``top_h`` reshaped the distribution the tokens were drawn from while the recorded logprobs (and the
    loss) are the policy's own, and ``stop_strings`` failed generate(). Found in review. Sampling with the
    same seed must give exactly the tokens and logprobs of the same model without any of it (under peft
    too, whose generate() passes its own view of the base model's generation_config on)."""
    model, tok = tiny
    if lora:
        from peft import LoraConfig, get_peft_model

        lora_config = LoraConfig(r=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
        with warnings.catch_warnings():  # peft reads transformers' deprecated is_gradient_checkpointing
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            model = get_peft_model(copy.deepcopy(model), lora_config)
    config = GenerationConfig(max_new_tokens=6, temperature=1.0, top_k=0)
    prompts = [tok("What")["input_ids"][:1]]  # one token: forced_bos_token_id applies to it

    def sample() -> list[tuple[list[int], list[float]]]:
        torch.manual_seed(11)
        (group,) = HFGenerator(model, tok, config).generate(prompts, 6)
        return [(c.completion_ids, c.logprobs) for c in group]

    host = model.get_base_model() if lora else model
    saved = host.generation_config
    clean = sample()
    host.generation_config = copy.deepcopy(saved)
    setattr(host.generation_config, field, value)
    hostile = host.generation_config
    try:
        assert sample() == clean
        assert host.generation_config is hostile  # the checkpoint's, back after sampling
    finally:
        host.generation_config = saved


def test_vllm_logprobs_reported_for_fewer_tokens_are_unknown_not_zero(
    tiny: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """When vLLM reported logprobs for fewer tokens than it sampled (``logprobs`` None, shorter, or a
    position without the sampled token), the missing ones were padded with 0.0, probability 1 under the
    sampler, and ``old_logprobs: sampler`` then used a wrong importance ratio without a word. Found in
    review. Such a sample's logprobs are all NaN, which the trainer reads as "recompute with the policy";
    a fully reported sample keeps vLLM's values. The engine is a stand-in `vllm` module whose output
    objects have vLLM's shape (``RequestOutput.outputs[i].token_ids / .logprobs``)."""
    model, tok = tiny
    lp = SimpleNamespace(logprob=-0.5)
    whole = SimpleNamespace(token_ids=[7, 8], logprobs=[{7: lp}, {8: lp}])
    short = SimpleNamespace(token_ids=[7, 8], logprobs=[{7: lp}])
    none = SimpleNamespace(token_ids=[7, 8], logprobs=None)
    other = SimpleNamespace(token_ids=[7, 8], logprobs=[{7: lp}, {9: lp}])

    class FakeLLM:
        def __init__(self, **kwargs: Any):
            pass

        def generate(self, prompts: list[Any], params: Any, use_tqdm: bool) -> list[Any]:
            return [SimpleNamespace(outputs=[whole, short]), SimpleNamespace(outputs=[none, other])]

    fake = types.ModuleType("vllm")
    fake.LLM = FakeLLM  # type: ignore[attr-defined]
    fake.SamplingParams = SimpleNamespace  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", fake)
    gen = make_generator("vllm", model, tok, GenerationConfig(max_new_tokens=4), "/m", "float32")
    groups = gen.generate([[1], [2]], 2)
    got = [c.logprobs for g in groups for c in g]
    assert got[0] == [-0.5, -0.5]
    assert all(len(lps) == 2 and all(math.isnan(x) for x in lps) for lps in got[1:]), got
    assert [c.completion_ids for g in groups for c in g] == [[7, 8]] * 4


def test_a_missing_model_directory_names_the_field_and_the_fix(tmp_path: Path) -> None:
    """A model.path that does not exist (the README's examples before `convert-smollm2`) reached transformers
    as a hub id and failed with "Repo id must be in the form ..." under a long traceback; it is refused
    naming model.path and the command that makes the directory."""
    from rewardhub_trainer.config import ModelConfig
    from rewardhub_trainer.modeling import load_policy

    missing = tmp_path / "runs" / "models" / "smollm2-135m-instruct"
    with pytest.raises(FileNotFoundError, match="model.path") as err:
        load_policy(ModelConfig(path=str(missing), device="cpu"), need_reference=False)
    assert f"rewardhub-train convert-smollm2 {missing}" in str(err.value)
