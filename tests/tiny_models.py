"""Tiny random models for tests: a locally trained byte-level BPE tokenizer and small Qwen2 models built
from a config (causal LM, PRM token classifiers, an outcome RM), saved with ``save_pretrained`` so the
real ``from_pretrained`` loading code is exercised.
No hub access (HF_HUB_OFFLINE=1); building one takes well under a second.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_CORPUS = [
    "The answer is 42. Let's think step by step: 6 times 7 is 42.",
    "<think>2+2=4</think><answer>4</answer> The final answer is \\boxed{4}.",
    "What is 3+5? 3+5=8 so the answer is 8. ки Step 2: check it. ки",
    "def add(a, b):\n    return a + b\n\nprint(add(1, 2))",
    "Yes No yes no Correct Incorrect 0 1 2 3 4 5 6 7 8 9 10 A B C D",
    "Solution: first compute the sum, then divide. Confidence: 0.8 <confidence>0.9</confidence>",
]


def train_tokenizer(vocab_size: int = 1024, corpus: Sequence[str] | None = None) -> object:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<extra_0>", "<pad>"]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(list(corpus or ()) + _CORPUS * 50, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<pad>", bos_token=None, unk_token=None
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _qwen2_config(tok: object, hidden: int, layers: int, max_positions: int = 512, **extra: object) -> object:
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=len(tok),  # type: ignore[arg-type]
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id,  # type: ignore[attr-defined]
        pad_token_id=tok.pad_token_id,  # type: ignore[attr-defined]
        **extra,
    )


def _save(model: object, tok: object, path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)  # type: ignore[attr-defined]
    tok.save_pretrained(path)  # type: ignore[attr-defined]
    return path


def build_tiny_causal_lm(
    path: Path, *, hidden: int = 64, layers: int = 2, seed: int = 0, max_positions: int = 512
) -> Path:
    """A random Qwen2 causal LM + tokenizer saved under ``path`` (a directory ``from_pretrained`` loads)."""
    import torch
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(seed)
    tok = train_tokenizer()
    return _save(Qwen2ForCausalLM(_qwen2_config(tok, hidden, layers, max_positions)), tok, path)


def build_tiny_scripted_lm(path: Path, script: str, *, hidden: int = 64, layers: int = 2) -> Path:
    """A random Qwen2 causal LM (ChatML template) whose greedy reply to any conversation is ``script``
    then its EOS: the generation config biases each next token of the script by +100 after the
    assistant header and the script so far (transformers' ``sequence_bias``, a logits processor of
    ``generate``; the raw logits, and so the logprobs, stay the random model's). A continuation of an
    assistant message holding the start of the script goes on with the rest of it; anything else gets
    the random model's tokens."""
    import torch
    from transformers import AutoTokenizer, Qwen2ForCausalLM

    torch.manual_seed(0)
    tok = train_tokenizer()
    model = Qwen2ForCausalLM(_qwen2_config(tok, hidden, layers, max_positions=4096))
    _save(model, tok, path)
    # the tokens as the saved model's tokenizer makes them: loaded beside a Qwen2 config, it splits
    # digits one by one, as the one in memory does not
    tok = AutoTokenizer.from_pretrained(path)
    head = tok.encode("<|im_start|>assistant\n", add_special_tokens=False)
    ids = tok.encode(script, add_special_tokens=False) + [tok.eos_token_id]
    model.generation_config.sequence_bias = [[head + ids[: i + 1], 100.0] for i in range(len(ids))]
    model.generation_config.save_pretrained(path)
    return path


def build_tiny_qwen_prm(
    path: Path,
    *,
    hidden: int = 64,
    layers: int = 2,
    seed: int = 0,
    max_positions: int = 2048,
    corpus: Sequence[str] | None = None,
    vocab_size: int = 1024,
) -> Path:
    """A Qwen2.5-Math-PRM look-alike: a 2-label Qwen2 token classifier whose tokenizer has ``<extra_0>``
    as one special token and a ChatML template (random weights; the scores mean nothing)."""
    import torch
    from transformers import Qwen2ForTokenClassification

    torch.manual_seed(seed)
    tok = train_tokenizer(vocab_size, corpus)
    config = _qwen2_config(tok, hidden, layers, max_positions, num_labels=2)
    return _save(Qwen2ForTokenClassification(config), tok, path)


def build_tiny_math_shepherd_prm(path: Path, *, hidden: int = 64, layers: int = 2, seed: int = 0) -> Path:
    """A Math-Shepherd look-alike: a Qwen2 causal LM whose vocabulary has ``ки`` (an added token),
    ``+`` and ``-`` (random weights), and no chat template (Math-Shepherd reads plain text)."""
    import torch
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(seed)
    tok = train_tokenizer()
    tok.add_tokens(["ки"])  # type: ignore[attr-defined]
    tok.chat_template = None  # type: ignore[attr-defined]
    return _save(Qwen2ForCausalLM(_qwen2_config(tok, hidden, layers)), tok, path)


# A Llama-3.1-like template: a fixed system header first, every turn trimmed and closed by <|eot_id|>
LLAMA3_TEMPLATE = (
    "{{- bos_token }}<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
    "Today Date: 26 Jul 2024\n\n<|eot_id|>{% for message in messages %}<|start_header_id|>"
    "{{ message['role'] }}<|end_header_id|>\n\n{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def build_tiny_rlhflow_prm(path: Path, *, hidden: int = 64, layers: int = 2, seed: int = 0) -> Path:
    """An RLHFlow look-alike (Llama3.1-8B-PRM-Mistral-Data): a Llama causal LM whose tokenizer has Llama
    3's header and turn tokens, a Llama-3.1-like chat template, and ``+`` and ``-`` as tokens (random
    weights; the scores mean nothing)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    tok: Any = train_tokenizer()
    tok.add_special_tokens(
        {
            "additional_special_tokens": [
                "<|begin_of_text|>",
                "<|start_header_id|>",
                "<|end_header_id|>",
                "<|eot_id|>",
            ]
        }
    )
    tok.bos_token, tok.eos_token = "<|begin_of_text|>", "<|eot_id|>"
    tok.chat_template = LLAMA3_TEMPLATE
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    return _save(LlamaForCausalLM(config), tok, path)


def build_tiny_skywork_prm(path: Path, *, hidden: int = 64, layers: int = 2, seed: int = 0) -> Path:
    """A Skywork-o1-Open-PRM look-alike: a Qwen2 causal LM saved with a value head beside its weights
    (``v_head.summary.weight`` [1, hidden] and ``v_head.summary.bias``, TRL's value-head layout), and a
    tokenizer with a BOS text (random weights)."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(seed)
    tok = train_tokenizer()
    tok.bos_token = "<|endoftext|>"  # type: ignore[attr-defined]
    _save(Qwen2ForCausalLM(_qwen2_config(tok, hidden, layers)), tok, path)
    weights = load_file(str(path / "model.safetensors"))
    weights["v_head.summary.weight"] = torch.randn(1, hidden)
    weights["v_head.summary.bias"] = torch.randn(1)
    save_file(weights, str(path / "model.safetensors"), metadata={"format": "pt"})
    return path


def build_tiny_orm(
    path: Path, *, hidden: int = 64, layers: int = 2, seed: int = 0, num_labels: int = 1
) -> Path:
    """A Qwen2 sequence classifier (an outcome reward model; one output unless asked), random weights."""
    import torch
    from transformers import Qwen2ForSequenceClassification

    torch.manual_seed(seed)
    tok = train_tokenizer()
    config = _qwen2_config(tok, hidden, layers, num_labels=num_labels)
    return _save(Qwen2ForSequenceClassification(config), tok, path)


def build_tiny_bert_token_classifier(path: Path, *, hidden: int = 32, layers: int = 2, seed: int = 0) -> Path:
    """A 2-label BERT token classifier (bidirectional: a token's output depends on what follows it).

    Initialised with a large weight scale: at the usual 0.02, a random BERT's outputs barely depend on
    context at all (a millionth), and the shared-prefix check would rightly find no difference."""
    import torch
    from transformers import BertForTokenClassification

    torch.manual_seed(seed)
    tok = train_tokenizer()
    return _save(BertForTokenClassification(_bert_config(tok, hidden, layers, num_labels=2)), tok, path)


def _bert_config(tok: Any, hidden: int, layers: int, **extra: Any) -> Any:
    """A small BERT for ``tok``, initialised with a large weight scale (see the token classifier)."""
    from transformers import BertConfig

    return BertConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=2,
        max_position_embeddings=512,
        pad_token_id=tok.pad_token_id,
        initializer_range=0.5,
        **extra,
    )


def build_tiny_bert_embedder(
    path: Path, *, pooling: str | None, hidden: int = 32, seed: int = 0, extra_modules: Sequence[str] = ()
) -> Path:
    """A bare BERT encoder saved as a sentence-transformers checkpoint whose Pooling module says
    ``pooling_mode_<pooling>`` (no Pooling module when None), then ``extra_modules`` (class names such as
    ``Normalize`` or ``Dense``), random weights."""
    import json

    import torch
    from transformers import BertModel

    torch.manual_seed(seed)
    tok = train_tokenizer()
    _save(BertModel(_bert_config(tok, hidden, 2)), tok, path)
    if pooling is not None:
        modules = [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        ]
        modules += [
            {
                "idx": 2 + k,
                "name": str(2 + k),
                "path": f"{2 + k}_{m}",
                "type": f"sentence_transformers.models.{m}",
            }
            for k, m in enumerate(extra_modules)
        ]
        (path / "modules.json").write_text(json.dumps(modules))
        modes = ["cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens", "lasttoken"]
        flags = {f"pooling_mode_{m}": m == pooling for m in modes}
        (path / "1_Pooling").mkdir()
        (path / "1_Pooling" / "config.json").write_text(
            json.dumps({"word_embedding_dimension": hidden, **flags})
        )
    return path


# Qwen2.5-Math-PRM's own head class, as its checkpoint ships it (auto_map, trust_remote_code): a two-layer
# `score` head, where transformers' native Qwen2ForTokenClassification has one Linear.
_REMOTE_PRM_CODE = """
from torch import nn
from transformers import Qwen2Model, Qwen2PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast


class Qwen2ForProcessRewardModel(Qwen2PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.num_labels = 2
        self.model = Qwen2Model(config)
        self.score = nn.Sequential(
            nn.Linear(config.hidden_size, config.hidden_size), nn.ReLU(), nn.Linear(config.hidden_size, 2)
        )
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                inputs_embeds=None, use_cache=None, **kwargs):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         past_key_values=past_key_values, inputs_embeds=inputs_embeds, use_cache=use_cache)
        return CausalLMOutputWithPast(logits=self.score(out[0]), past_key_values=out.past_key_values)
"""


def build_tiny_remote_code_prm(path: Path, *, hidden: int = 64, layers: int = 2, seed: int = 0) -> Path:
    """A Qwen2.5-Math-PRM look-alike in its real packaging: the head class ships with the checkpoint
    (``modeling_qwen2_rm.py``, named by the config's ``auto_map``), so only ``trust_remote_code`` loads it."""
    import importlib.util
    import json

    import torch

    path.mkdir(parents=True, exist_ok=True)
    code = path / "modeling_qwen2_rm.py"
    code.write_text(_REMOTE_PRM_CODE)
    spec = importlib.util.spec_from_file_location("_tiny_modeling_qwen2_rm", code)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(seed)
    tok = train_tokenizer()
    _save(module.Qwen2ForProcessRewardModel(_qwen2_config(tok, hidden, layers, 2048)), tok, path)
    config = json.loads((path / "config.json").read_text())
    config["architectures"] = ["Qwen2ForProcessRewardModel"]
    config["auto_map"] = {"AutoModel": "modeling_qwen2_rm.Qwen2ForProcessRewardModel"}
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return path
