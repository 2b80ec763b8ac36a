"""The synchronous model work of the transformers backend: loading, and the forward passes of a batch.

Everything here runs in the backend's model process (:mod:`rewardhub.models.model_process`), never on
the event loop. torch and transformers are imported lazily so that the service without the ``models``
extra never loads them.

Tasks and what they read:

* ``generate``: a causal LM; :func:`generate_chat` (judges: greedy or sampled generation with per-token
  top-k logprobs, each row ended at its own stop strings, a final assistant message continued) and :func:`step_probs` with ``label_tokens`` (Math-Shepherd: softmax over the
  ``+``/``-`` logits at each step tag; RLHFlow: the same at the token before each assistant ``+``);
* ``token_classification``: :func:`step_probs` with a classifier head (Qwen2.5-Math-PRM: softmax over
  the labels at each ``<extra_0>``, the positive class);
* ``value_head``: :func:`step_probs` with a scalar value head on the base model (Skywork-o1-Open-PRM:
  the sigmoid of the value at the newline after each step; see :class:`ValueHeadModel`);
* ``sequence_classification``: :func:`classify` (raw logits of an outcome reward model);
* ``embedding``: :func:`embed` (the pooling a sentence-transformers checkpoint names in its Pooling
  module's config: mean, CLS, max or last token; mean when it names none, the recipe of
  all-MiniLM-L6-v2; then L2 normalisation).
"""

from __future__ import annotations

import bisect
import contextlib
import json
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar

from rewardhub.models import attention, passes
from rewardhub.models.base import ChatRequest, Completion, Embedding, Message, StepQuery, TokenLogprob
from rewardhub.models.errors import (
    BackendError,
    BackendRejected,
    BackendTimeout,
    BackendUnavailable,
    InputTooLong,
    MissingExtra,
)
from rewardhub.models.fingerprint import local_dir
from rewardhub.models.prefix_cache import PrefixCache
from rewardhub.models.specials import Scrubber, clean_messages
from rewardhub.prm.tags import tag_pattern

T = TypeVar("T")
R = TypeVar("R")

__all__ = [
    "Loaded",
    "inference",
    "Task",
    "classify",
    "embed",
    "encode",
    "encode_conversations",
    "encode_steps",
    "generate_chat",
    "predicted_text",
    "load",
    "render",
    "scatter",
    "resolve_device",
    "sanitize",
    "scrubber",
    "shares_prefix",
    "special_strings",
    "step_probs",
    "stop_at",
    "StopStrings",
    "tokens_spelling",
]

Task = Literal["generate", "token_classification", "sequence_classification", "embedding", "value_head"]
Pooling = Literal["mean", "cls", "max", "lasttoken"]

# One lock for `import torch/transformers`: two backends loading at once in two threads could otherwise
# race on transformers' lazy module machinery.
_IMPORT_LOCK = threading.Lock()


@dataclass(slots=True)
class Loaded:
    model: Any
    tokenizer: Any
    device: str
    dtype: str
    max_length: int
    task: Task
    causal: bool = False  # passes.supported: padding masks can be dropped, shared prompts run once
    share_prefix: bool = False  # batches run their shared prompts once (causal and the setting on)
    pass_overhead: float = math.inf  # passes.pass_overhead: a forward pass's fixed cost, in tokens
    pad_id: int = 0  # what batches are padded with (see _pad_id)
    pooling: Pooling = "mean"  # embedding: how token vectors become one (see embedding_pooling)
    # shared prompts kept across batches (share_prefix on and REWARDHUB_BATCH_PREFIX_CACHE_MB > 0)
    prefix_cache: PrefixCache | None = None

    @property
    def prefix_cache_mb(self) -> float:
        """The prefix cache's size limit, MB (0: none)."""
        return self.prefix_cache.max_bytes / 2**20 if self.prefix_cache is not None else 0.0

    def counters(self) -> dict[str, int]:
        """What the service exports of this model's state after each batch (``/metrics``): the prefix
        cache's lookups so far and the bytes it holds; empty without one."""
        c = self.prefix_cache
        if c is None:
            return {}
        return {"prefix_cache_hits": c.hits, "prefix_cache_misses": c.misses, "prefix_cache_bytes": c.nbytes}


def _torch() -> Any:
    with _IMPORT_LOCK:
        try:
            import torch
            import transformers
        except ImportError as exc:
            raise MissingExtra(exc.name or "torch", "models") from None
        transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]  # no "LOAD REPORT" tables for newly initialised heads
        return torch


def resolve_device(device: str) -> str:
    torch = _torch()
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise BackendError(f"device {device!r} was asked for but torch sees no CUDA device")
    return device


def shares_prefix(setting: bool | Literal["auto"], device: str) -> bool:
    """REWARDHUB_BATCH_SHARE_PREFIX for a model on ``device``: "auto" is on for a CPU only (see load)."""
    return device == "cpu" if setting == "auto" else setting


def _dtype(name: str, device: str) -> Any:
    torch = _torch()
    if name == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32  # CPU half precision is slow and lossy on most CPUs
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def load(
    path: str,
    task: Task,
    *,
    device: str = "auto",
    dtype: str = "auto",
    trust_remote_code: bool = False,
    max_length: int | None = None,
    threads: int = 0,
    share_prefix: bool | Literal["auto"] = "auto",
    prefix_cache_mb: float = 0.0,
) -> Loaded:
    """``from_pretrained`` on a local directory (never the hub), moved to the device, in eval mode.

    ``threads`` > 0 sets torch's intra-op CPU threads (process-wide). On a small CPU box, torch's default
    (one per core) makes its OpenMP workers spin against the event loop's thread: a 2-core machine served
    a tiny PRM 15x slower with 2 threads than with 1.

    ``share_prefix``: let batches of PRM / ORM inputs run a prompt that several items start with once
    (:mod:`rewardhub.models.passes`), if a probe shows this model gives the same outputs that way.
    "auto" shares on a CPU only: there the prompt's compute is what batching saves (2.5-4x vs 1.8-2x
    without sharing), while on a GPU a 0.5B bf16 PRM ran plain padded batches faster (441 vs 357 items/s)
    and with scores closer to one-item passes (max step difference 0.002 vs 0.011; BENCHMARKS.md §5).

    ``prefix_cache_mb`` > 0 (with shared prompts on): keep the prompts batches shared, up to that many MB
    of keys and values, for the later batches that start with them (:mod:`rewardhub.models.prefix_cache`).
    """
    torch = _torch()
    import transformers as tf

    if threads > 0:
        torch.set_num_threads(threads)

    dev = resolve_device(device)
    dt = _dtype(dtype, dev)
    if dev.startswith("cpu"):
        attention.install()  # grouped key/value heads uncopied in masked passes
    classes: dict[str, Any] = {
        "generate": tf.AutoModelForCausalLM,
        "token_classification": tf.AutoModelForTokenClassification,
        "sequence_classification": tf.AutoModelForSequenceClassification,
        "embedding": tf.AutoModel,
        "value_head": tf.AutoModel,  # the base model; the head is added below (ValueHeadModel)
    }
    cls = classes[task]
    if task == "token_classification" and trust_remote_code and _remote_class_behind_auto_model(tf, path):
        # Qwen2.5-Math-PRM ships its own class (Qwen2ForProcessRewardModel) behind AutoModel. Only then:
        # AutoModel on a native token classifier is its bare base model, the head dropped unnoticed.
        cls = tf.AutoModel
    tok = tf.AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, local_files_only=True)
    model, info = cls.from_pretrained(
        path, dtype=dt, trust_remote_code=trust_remote_code, local_files_only=True, output_loading_info=True
    )
    _refuse_other_head(path, task, model)
    _refuse_new_weights(path, task, model, info, trust_remote_code)
    if task == "value_head":
        from rewardhub.models.value_head import ValueHeadModel, value_head_weights

        model = ValueHeadModel(model, value_head_weights(path))
    model.to(dev).eval()
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token if tok.eos_token is not None else tok.unk_token
    if task == "embedding":
        # texts past the context are embedded from their start, as documented, whatever the checkpoint's
        # tokenizer says (one saved with truncation_side="left" embedded their ends instead)
        tok.truncation_side = "right"
    pooling = embedding_pooling(path) if task == "embedding" else "mean"
    pad_id = _pad_id(model, tok)
    table = _position_table(model)
    if max_length and table is not None and max_length > table:
        raise BackendUnavailable(
            f"{path}: max_length {max_length} is more than the {table} positions the model has (a learned "
            f"position table: a longer input cannot be read, and failed its whole batch); set max_length "
            f"to {table} or less, or leave it unset"
        )
    limit = max_length or _context_limit(path, model, tok)
    # embeddings are mean-pooled over a bidirectional encoder: none of passes.py applies to them
    causal = task != "embedding" and passes.supported(model, pad_id, dev)
    overhead = passes.pass_overhead(model, dev) if task != "embedding" else math.inf
    shared = shares_prefix(share_prefix, dev) and causal
    return Loaded(
        model,
        tok,
        dev,
        str(dt).removeprefix("torch."),
        int(limit),
        task,
        causal=causal,
        share_prefix=shared,
        prefix_cache=PrefixCache(int(prefix_cache_mb * 2**20)) if shared and prefix_cache_mb > 0 else None,
        pass_overhead=overhead,
        pad_id=pad_id,
        pooling=pooling,
    )


_POOLING_MODES: dict[str, Pooling] = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_lasttoken": "lasttoken",
}


def _st_modules(root: Path) -> list[tuple[str, str]]:
    """A sentence-transformers checkpoint's modules as (class name, folder); none without modules.json."""
    with contextlib.suppress(ValueError, OSError, TypeError, AttributeError):
        modules = json.loads((root / "modules.json").read_text())
        return [(str(m.get("type", "")).rsplit(".", 1)[-1], str(m.get("path", ""))) for m in modules]
    return []


def embedding_pooling(path: str) -> Pooling:
    """The pooling a sentence-transformers checkpoint was trained with (its ``modules.json`` names the
    Pooling module's folder, whose ``config.json`` says the mode); mean when there is none.

    Mean pooling for every model embedded BGE (CLS pooling) or a last-token model (Qwen3-Embedding,
    gte-Qwen) with a recipe it was not trained for: other vectors, other cosines, all valid-looking. A
    mode this backend does not compute (several at once, weighted mean), or a module after the encoder
    that it does not apply (a Dense projection), refuses the load, not a guess. A hub id is read in its
    cached snapshot, where ``from_pretrained`` read the model (a cached BGE was mean-pooled)."""
    root = local_dir(path) or Path(path)
    modules = _st_modules(root)
    other = [name for name, _ in modules if name not in ("Transformer", "Pooling", "Normalize")]
    if other:
        raise BackendUnavailable(
            f"{root / 'modules.json'} names modules this backend does not apply ({', '.join(other)}); "
            "it computes the encoder, its pooling and L2 normalisation"
        )
    folder = next((where for name, where in modules if name == "Pooling"), "1_Pooling")
    config_file = root / folder / "config.json"
    if not config_file.is_file():
        return "mean"
    try:
        config = json.loads(config_file.read_text())
    except (ValueError, OSError) as exc:
        raise BackendUnavailable(f"unreadable pooling config {config_file}: {exc}") from None
    on = sorted(k for k, v in config.items() if k.startswith("pooling_mode") and v is True)
    if len(on) != 1 or on[0] not in _POOLING_MODES:
        raise BackendUnavailable(
            f"{config_file} asks for pooling {', '.join(on) or 'none'}; this backend computes one of "
            "mean, cls, max or last token"
        )
    return _POOLING_MODES[on[0]]


def _remote_class_behind_auto_model(tf: Any, path: str) -> bool:
    """Whether the checkpoint's config maps ``AutoModel`` to its own code and has no token-classification
    class of its own: the packaging of Qwen2.5-Math-PRM, whose head class is what AutoModel loads."""
    config = tf.AutoConfig.from_pretrained(path, trust_remote_code=True, local_files_only=True)
    auto_map = getattr(config, "auto_map", None) or {}
    return "AutoModel" in auto_map and "AutoModelForTokenClassification" not in auto_map


def _refuse_new_weights(path: str, task: Task, model: Any, info: dict[str, Any], remote: bool) -> None:
    """Refuse a checkpoint that does not fill the class it was loaded as.

    ``from_pretrained`` initialises what the checkpoint lacks at random and only warns. Qwen2.5-Math-PRM
    (and reward models such as ArmoRM) ship their own head class as remote code: loaded without
    ``trust_remote_code``, the native ``Qwen2ForTokenClassification`` gets a random ``score`` head, and
    every step score is noise that looks valid. A mean-pooled embedding model never reads BERT's pooler,
    so its absence is harmless.
    """
    missing = sorted(str(k) for k in info.get("missing_keys") or ())
    if task == "embedding":
        missing = [k for k in missing if not k.startswith("pooler.")]
    if not missing:
        return
    config = getattr(model, "config", None)
    declared = list(getattr(config, "architectures", None) or [])
    hint = (
        "set trust_remote_code: true for it in a REWARDHUB_BACKENDS_FILE backend (its config names its own "
        "code, auto_map)"
        if getattr(config, "auto_map", None) and not remote
        else f"check that it is a {task} model"
    )
    shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
    raise BackendUnavailable(
        f"{path}: loaded as {type(model).__name__} (task {task}; the checkpoint declares {declared or 'no class'}), "
        f"it has no weights for {shown}, which would score at random; {hint}"
    )


_HEAD_SUFFIXES = {
    "token_classification": "ForTokenClassification",
    "sequence_classification": "ForSequenceClassification",
}


def _refuse_other_head(path: str, task: Task, model: Any) -> None:
    """Refuse a token classifier loaded as a sequence classifier, or the reverse.

    Most architectures name both heads ``score`` (Qwen2, Llama, Mistral...) with the same shape, so
    :func:`_refuse_new_weights` finds nothing missing: a PRM given as ``REWARDHUB_ORM_MODEL`` loaded
    without a word and scored its negative class at the last token; an ORM given as a PRM read its
    one-output head at the step tags."""
    if task not in _HEAD_SUFFIXES:
        return
    declared = [str(a) for a in getattr(getattr(model, "config", None), "architectures", None) or []]
    (other,) = (t for t in _HEAD_SUFFIXES if t != task)
    if any(a.endswith(_HEAD_SUFFIXES[other]) for a in declared) and not any(
        a.endswith(_HEAD_SUFFIXES[task]) for a in declared
    ):
        use = (
            "a PRM (REWARDHUB_PRM_MODEL)"
            if other == "token_classification"
            else "an ORM (REWARDHUB_ORM_MODEL)"
        )
        raise BackendUnavailable(
            f"{path}: the checkpoint declares {declared}, a {other} model, which cannot serve as a {task} "
            f"model; use it as {use}, or with task {other} in REWARDHUB_BACKENDS_FILE"
        )


# Models whose position ids start after the padding index: max_position_embeddings counts those slots.
_OFFSET_POSITIONS = frozenset({"roberta", "xlm-roberta", "camembert", "mpnet", "longformer", "data2vec-text"})


def _position_table(model: Any) -> int | None:
    """The positions a model with a learned absolute position table can read (BERT, MiniLM, RoBERTa,
    GPT-2), or None for one without (rotary or relative positions: Qwen2, Llama, DeBERTa-v3), which may
    be read past its trained length. An input past the table raises in the forward pass, for its whole
    batch, so no ``max_length`` may exceed it."""
    embedding = _torch().nn.Embedding
    for name, module in model.named_modules():
        if name.rsplit(".", 1)[-1] in ("position_embeddings", "wpe") and isinstance(module, embedding):
            n = int(module.num_embeddings)
            if getattr(model.config, "model_type", None) in _OFFSET_POSITIONS:
                n -= int(getattr(model.config, "pad_token_id", None) or 1) + 1
            return n
    return None


def _context_limit(path: str, model: Any, tok: Any) -> int:
    """The most tokens one input may have: the smallest of what the config, the tokenizer and a
    sentence-transformers config say.

    ``max_position_embeddings`` alone is too many for RoBERTa-style models (514 slots, 512 usable: their
    positions start after the padding index), and a text one token too long failed its whole batch.
    """
    cfg = model.config
    limit = int(getattr(cfg, "max_position_embeddings", None) or 4096)
    if getattr(cfg, "model_type", None) in _OFFSET_POSITIONS:
        limit -= int(getattr(cfg, "pad_token_id", None) or 1) + 1
    told = getattr(tok, "model_max_length", None)
    if isinstance(told, int) and 0 < told < 1_000_000:  # unset is a huge sentinel
        limit = min(limit, told)
    # MiniLM: 256, what it was trained on (a hub id's in its cached snapshot, as the model was read)
    st_config = (local_dir(path) or Path(path)) / "sentence_bert_config.json"
    if st_config.is_file():
        with contextlib.suppress(ValueError, OSError):
            seq = json.loads(st_config.read_text()).get("max_seq_length")
            if isinstance(seq, int) and seq > 0:
                limit = min(limit, seq)
    return max(1, limit)


def _pad_id(model: Any, tok: Any) -> int:
    """The id batches are padded with: the model config's pad id when it names a real token, else the
    tokenizer's (which the config then adopts).

    A sequence classifier reads its score at the last token that is not ``config.pad_token_id``.
    Padding with another id (a config naming its own pad while the tokenizer pads with EOS, say) made it
    read a short item's score at a pad: the item's score depended on the rest of its batch.
    """
    cfg = model.config
    try:
        vocab = int(model.get_input_embeddings().num_embeddings)
    except Exception:  # no plain input embedding: trust the config's vocabulary size
        vocab = int(getattr(cfg, "vocab_size", 0) or 0)
    own = getattr(cfg, "pad_token_id", None)
    if isinstance(own, int) and 0 <= own < vocab:
        return own
    pad = int(tok.pad_token_id or 0)
    cfg.pad_token_id = pad
    return pad


def inference() -> Any:
    """A context manager for the forward passes: no autograd graph (thread-local, so entered per call)."""
    return _torch().inference_mode()


# --- formatting -----------------------------------------------------------------------------------
def special_strings(tok: Any) -> tuple[str, ...]:
    """The tokenizer's special-token strings (``<|im_end|>``, ``<extra_0>``...)."""
    found = set(getattr(tok, "all_special_tokens", ()) or ())
    for t in (getattr(tok, "added_tokens_decoder", None) or {}).values():
        if getattr(t, "special", False):
            found.add(str(t.content))
    return tuple(s for s in found if s)


def scrubber(tok: Any) -> Scrubber:
    """A :class:`~rewardhub.models.specials.Scrubber` of the tokenizer's specials, built once per tokenizer."""
    cached = getattr(tok, "_rewardhub_scrubber", None)
    if cached is None:
        cached = tok._rewardhub_scrubber = Scrubber(special_strings(tok))
    return cached


def sanitize(tok: Any, text: str, keep: str | None = None) -> str:
    """Remove the tokenizer's special-token strings from user-controlled text (until none is left).

    A tokenizer turns ``<|im_end|>`` written *inside* a response into the real control token, which would
    let a response close its own turn and forge the next one (a chat-template injection against a local
    judge or reward model). ``keep`` spares the one tag the input format itself inserts (a PRM's step tag).
    """
    return scrubber(tok)(text, keep)


def has_chat_template(tok: Any) -> bool:
    return bool(getattr(tok, "chat_template", None))


def render(
    tok: Any,
    messages: Sequence[Message],
    *,
    generation_prompt: bool,
    keep: str | None = None,
    continue_final: bool = False,
) -> str:
    """A conversation as the model saw it in training: its chat template, or plain joined text.

    ``continue_final``: the last message is left open for the model to continue (the template's
    ``continue_final_message``: its turn not closed, no generation prompt after it), as vLLM's and
    SGLang's ``continue_final_message`` render it; the joined text of a model without a template ends
    with that message already."""
    clean = clean_messages(scrubber(tok), messages, keep)
    if has_chat_template(tok):
        if continue_final:
            text = tok.apply_chat_template(
                clean, tokenize=False, add_generation_prompt=False, continue_final_message=True
            )
        else:
            text = tok.apply_chat_template(clean, tokenize=False, add_generation_prompt=generation_prompt)
        return str(text)
    return "\n\n".join(m["content"] for m in clean)


def step_input(tok: Any, q: StepQuery) -> str:
    """A PRM query's text: its conversation rendered, or its plain text, step tags kept."""
    if q.messages is not None:
        return render(tok, q.messages, generation_prompt=False, keep=q.step_tag)
    return sanitize(tok, q.text or "", keep=q.step_tag)


def encode(
    tok: Any,
    max_length: int,
    texts: Sequence[str],
    *,
    templated: Sequence[bool],
    offsets: bool = False,
    reserve: int = 0,
) -> list[Any]:
    """Tokenize (special tokens only where no chat template added them) and check the lengths: per
    text, its encoding or an :class:`InputTooLong` (one long item fails alone, not its batch).
    ``reserve``: tokens that must stay free after the input (one for generation).

    The one tokenization rule of every local backend: a template that writes its own BOS would get a
    second one from ``add_special_tokens``. One tokenizer call per flag value, not per text: a fast
    tokenizer encodes a list in one call into Rust, half the time of a Python loop (about a tenth of a
    tiny PRM's batch time)."""
    out: list[Any] = [None] * len(texts)
    for flag in sorted(set(templated)):
        idx = [i for i, t in enumerate(templated) if t == flag]
        enc = tok([texts[i] for i in idx], add_special_tokens=not flag, return_offsets_mapping=offsets)
        keys = ("input_ids", "offset_mapping") if offsets else ("input_ids",)
        for row, i in enumerate(idx):
            one = {k: enc[k][row] for k in keys}
            n = len(one["input_ids"])
            out[i] = _empty(n) or _too_long(n, max_length, reserve) or one
    return out


def _empty(n: int) -> BackendRejected | None:
    """The error of an input of no tokens (an empty response without a prompt, on a model without a
    chat template or special tokens): nothing for the model to read. In a batch its row was all padding
    and a classifier read a pad's output as a valid score; alone, the empty pass raised for its batch."""
    if n == 0:
        return BackendRejected("the input is empty: no tokens reach the model")
    return None


def _too_long(n: int, max_length: int, reserve: int = 0) -> InputTooLong | None:
    """The error of an input of ``n`` tokens that does not fit (with ``reserve`` tokens left free)."""
    if n > max_length:
        return InputTooLong(f"the input is {n} tokens, more than the model's max_length {max_length}")
    if n > max_length - reserve:
        return InputTooLong("no room left in the context to generate")
    return None


def encode_conversations(
    tok: Any,
    max_length: int,
    conversations: Sequence[Sequence[Message]],
    *,
    generation_prompt: bool,
    continued: Sequence[bool] = (),
) -> list[Any]:
    """Conversations rendered (:func:`render`) and encoded (:func:`encode`); one to be continued by
    generation (``generation_prompt``) must leave at least one token of room. ``continued`` (one flag
    per conversation, all false when empty): generation continues that conversation's last message
    (``continue_final``) instead of a new turn."""
    flags = list(continued) or [False] * len(conversations)
    rendered = [
        _rendered(partial(render, tok, msgs, generation_prompt=generation_prompt and not c, continue_final=c))
        for msgs, c in zip(conversations, flags, strict=True)
    ]
    return _encode_rendered(
        tok,
        max_length,
        rendered,
        [has_chat_template(tok)] * len(rendered),
        reserve=1 if generation_prompt else 0,
    )


def _rendered(make: Callable[[], str]) -> str | BackendError:
    """``make()``, or the error of a chat template that refuses this conversation (a Gemma template
    raises on a system turn): that item fails alone (``unsupported``), not its batch."""
    try:
        return str(make())
    except BackendError as exc:  # predicted_text's: already says what is wrong
        return exc
    except Exception as exc:  # jinja2's TemplateError, or whatever a template's raise_exception raises
        return BackendUnavailable(
            f"the model's chat template refused this input: {type(exc).__name__}: {exc}"[:300]
        )


def _encode_rendered(
    tok: Any,
    max_length: int,
    rendered: Sequence[str | BackendError],
    templated: Sequence[bool],
    *,
    offsets: bool = False,
    reserve: int = 0,
) -> list[Any]:
    """:func:`encode` over the texts that rendered; the render errors stay in their places."""
    return scatter(
        rendered,
        lambda idx, texts: encode(
            tok, max_length, texts, templated=[templated[i] for i in idx], offsets=offsets, reserve=reserve
        ),
    )


def scatter(
    items: Sequence[T | BackendError], run: Callable[[list[int], list[T]], Sequence[R]]
) -> list[R | BackendError]:
    """``run(indices, items)`` once over the items that are not errors; its results back in input
    order, each error left in its item's place (one bad input fails alone, not its batch)."""
    idx = [i for i, x in enumerate(items) if not isinstance(x, BackendError)]
    out: list[R | BackendError] = [
        x if isinstance(x, BackendError) else BackendError("not run") for x in items
    ]
    if idx:
        good = [x for x in items if not isinstance(x, BackendError)]
        for i, r in zip(idx, run(idx, good), strict=True):
            out[i] = r
    return out


def encode_steps(tok: Any, max_length: int, queries: Sequence[StepQuery]) -> tuple[list[str], list[Any]]:
    """PRM queries' texts (:func:`step_input`) and their encodings with character offsets. A query
    given as ``pieces`` has no text (""): its encoding carries its step positions (:func:`encode_pieces`);
    so does one whose tags stand for a ``predicts`` text (:func:`predicted_text`, :func:`_predicting`)."""
    rendered: list[str | BackendError] = []
    written: dict[int, list[int]] = {}  # per `predicts` query: where its predicted texts start
    for i, q in enumerate(queries):
        if q.pieces is not None:
            rendered.append("")
        elif q.predicts is not None:
            starts: list[int] = []
            rendered.append(_rendered(partial(predicted_text, tok, q, starts)))
            written[i] = starts
        else:
            rendered.append(_rendered(partial(step_input, tok, q)))
    texts = [r if isinstance(r, str) else "" for r in rendered]
    templated = [q.messages is not None and has_chat_template(tok) for q in queries]
    textual = [i for i, q in enumerate(queries) if q.pieces is None]
    encs: list[Any] = [None] * len(queries)
    if textual:
        done = _encode_rendered(
            tok, max_length, [rendered[i] for i in textual], [templated[i] for i in textual], offsets=True
        )
        token_id = _token_ids(tok)
        for i, enc in zip(textual, done, strict=True):
            if i in written and not isinstance(enc, BackendError):
                q = queries[i]
                assert q.predicts is not None
                at = _predicting(enc, written[i], token_id(q.predicts), q.predicts)
                enc = at if isinstance(at, BackendError) else {**enc, "positions": at}
            encs[i] = enc
    pieced = [i for i, q in enumerate(queries) if q.pieces is not None]
    if pieced:
        for i, enc in zip(pieced, encode_pieces(tok, max_length, [queries[i] for i in pieced]), strict=True):
            encs[i] = enc
    return texts, encs


def predicted_text(tok: Any, q: StepQuery, starts: list[int]) -> str:
    """A ``predicts`` query's conversation rendered (:func:`step_input`) with each step tag replaced by
    the predicted text; where each of those starts in the result is appended to ``starts``.

    The steps are read from one pass over the whole conversation, where the model card reads each from
    a pass over the conversation cut after that step's turn. Under causal masking that is the same,
    provided the template renders the start of a conversation as it renders that start alone; a
    template that does not (one that marks the last turn before its content, say) is refused here, per
    item, rather than scored with inputs the model never saw; what it renders after a ``+`` is never
    read. Checked with the conversation cut after its first step and after its last but one, not after
    every step: that is a render per step, quadratic in the steps (40 ms of Jinja for 64 steps on a
    2-core CPU box, 1.5 s for 512). Raises
    :class:`BackendUnavailable` for that and for a tokenizer without a chat template (the convention
    is a conversation)."""
    if not has_chat_template(tok):
        raise BackendUnavailable(
            "this PRM convention (rlhflow) is a conversation rendered with the model's chat template; "
            "the model's tokenizer has none: use the convention it was trained with"
        )
    assert q.messages is not None and q.predicts is not None
    tag = tag_pattern(q.step_tag)
    full = step_input(tok, q)
    cuts = [k for k, m in enumerate(q.messages[:-1]) if tag.search(m.content)]
    for k in sorted({*cuts[:1], *cuts[-1:]}):
        alone = step_input(tok, StepQuery(q.step_tag, 0, messages=q.messages[: k + 1]))
        ends = [t.end() for t in tag.finditer(alone)]
        if not ends or not full.startswith(alone[: ends[-1]]):
            raise BackendUnavailable(
                "the model's chat template renders a conversation's start otherwise than that start "
                "alone: one pass over the whole conversation would not score what the model card scores"
            )
    out: list[str] = []
    at, size = 0, 0
    for t in tag.finditer(full):
        out.append(full[at : t.start()])
        size += t.start() - at
        starts.append(size)
        out.append(q.predicts)
        size += len(q.predicts)
        at = t.end()
    out.append(full[at:])
    return "".join(out)


def _predicting(enc: Any, starts: Sequence[int], token: int, text: str) -> list[int] | BackendError:
    """The positions that predict the texts written at ``starts`` (:func:`predicted_text`): the token
    before each, which must be ``token`` exactly (the model card's ``tok.encode("+")[-1]``). A text the
    tokenizer merged with its neighbours is an error, not a read at a guessed position."""
    offsets, ids = enc["offset_mapping"], enc["input_ids"]
    positions: list[int] = []
    k = 0
    for start in starts:
        while k < len(offsets) and offsets[k][0] < start:
            k += 1
        if k == len(offsets) or k == 0 or tuple(offsets[k]) != (start, start + len(text)) or ids[k] != token:
            return BackendUnavailable(
                f"the chat template's {text!r} after a step is not the token {text!r} alone in this "
                "tokenization: there is no position predicting it"
            )
        positions.append(k - 1)
    return positions


def encode_pieces(tok: Any, max_length: int, queries: Sequence[StepQuery]) -> list[Any]:
    """Queries given as ``pieces`` (Skywork-o1-Open-PRM's input): the tokenizer's BOS text and the
    question's piece, then each step's tokens followed by the ``step_tag`` token, every piece tokenized
    on its own (one tokenizer call for all of them). Per query ``{"input_ids", "positions"}`` (where each
    step's score is read: its ``step_tag`` token) or an :class:`InputTooLong`.
    """
    bos = getattr(tok, "bos_token", None) or ""
    texts: list[str] = []
    for q in queries:
        assert q.pieces is not None
        # user text never becomes a control token ("<|endoftext|>" written in a step); the BOS is ours
        texts += [bos + sanitize(tok, q.pieces[0]), *(sanitize(tok, p) for p in q.pieces[1:])]
    ids = tok(texts, add_special_tokens=False)["input_ids"] if texts else []
    out: list[Any] = []
    token_id = _token_ids(tok)
    k = 0
    for q in queries:
        assert q.pieces is not None
        tag = token_id(q.step_tag)
        seq = list(ids[k])
        positions: list[int] = []
        for step in ids[k + 1 : k + len(q.pieces)]:
            seq += [*step, tag]
            positions.append(len(seq) - 1)
        k += len(q.pieces)
        out.append(_too_long(len(seq), max_length) or {"input_ids": seq, "positions": positions})
    return out


def _forward(loaded: Loaded, seqs: Sequence[Sequence[int]], read_from: Sequence[int]) -> passes.Rows:
    """One batch through the model: per item, the position its output rows start at and the rows.

    ``read_from[i]``: the first position of item i whose output the caller reads. Shared prompts run
    once when :func:`passes.plan` finds them (a GRPO group's rollouts), and not at all where an earlier
    batch's were kept (:func:`passes.plan_kept`); otherwise plain right-padded passes. Either way the
    batch is cut into length buckets on a CPU (see :mod:`rewardhub.models.passes`).
    """
    pad_id = loaded.pad_id
    p = passes.plan(seqs, read_from) if loaded.share_prefix else None
    if p is None and loaded.prefix_cache is not None:  # (one item, or distinct prompts: kept ones?)
        p = passes.plan_kept(seqs, read_from, loaded.prefix_cache)
    if p is not None:
        return passes.run_shared(
            loaded.model,
            p,
            seqs,
            pad_id=pad_id,
            device=loaded.device,
            overhead=loaded.pass_overhead,
            cache=loaded.prefix_cache,
        )
    return passes.run_plain(
        loaded.model,
        seqs,
        pad_id=pad_id,
        device=loaded.device,
        causal=loaded.causal,
        overhead=loaded.pass_overhead,
    )


def _token_id(tok: Any, text: str) -> int:
    ids = tok.encode(text, add_special_tokens=False)
    if not ids:
        raise BackendError(f"the token {text!r} encodes to nothing with this tokenizer")
    return int(ids[-1])


def _token_ids(tok: Any) -> Callable[[str], int]:
    """:func:`_token_id` remembered for one batch: its queries share their tags and labels, each
    tokenized once rather than once per query."""
    seen: dict[str, int] = {}

    def get(text: str) -> int:
        if text not in seen:
            seen[text] = _token_id(tok, text)
        return seen[text]

    return get


# --- steps (PRM) ----------------------------------------------------------------------------------
def step_probs(loaded: Loaded, queries: Sequence[StepQuery]) -> list[list[float] | BackendError]:
    """Per query, P(correct) at every step tag, or each step's log-likelihood for an implicit PRM's
    query (``likelihood``: :func:`step_likelihoods`). A batch mixing both runs each kind on its own."""
    if not any(q.likelihood for q in queries):
        return _tag_probs(loaded, queries)
    out: list[list[float] | BackendError] = [BackendError("not run")] * len(queries)
    for wanted, fn in ((True, step_likelihoods), (False, _tag_probs)):
        idx = [i for i, q in enumerate(queries) if q.likelihood == wanted]
        if idx:
            for i, res in zip(idx, fn(loaded, [queries[i] for i in idx]), strict=True):
                out[i] = res
    return out


def _likelihood_prompt(tok: Any, messages: Sequence[Message]) -> str:
    """The prompt an implicit PRM's response continues: the chat template with its generation prompt
    (the policy's own input), or the plain text and a blank line for a model without a template."""
    if has_chat_template(tok):
        return render(tok, messages, generation_prompt=True)
    return render(tok, messages, generation_prompt=False) + "\n\n"


def encode_likelihoods(tok: Any, max_length: int, queries: Sequence[StepQuery]) -> list[Any]:
    """Implicit-PRM queries as one text each (the prompt, then the pieces as written), tokenized whole
    with character offsets, as the policy's rollout was: per query ``{"input_ids", "first", "steps"}``,
    ``steps`` each step's token range ``(a, b)`` and ``first`` the first counted token, or an error.

    A token belongs to the piece its first non-blank character is in (a token of blanks: its first
    character): one that the tokenizer merged across a step boundary counts once, for the step its text
    starts in; " First" after the context's last blank is the first step's, as " Then" after a
    separator is its step's (the first step's opening word went uncounted, and a first step of one such
    token had none). One that starts in the prompt is never counted (it is no part of the response).
    Zero-width tokens (a BOS, an EOS a tokenizer appends) count nowhere.
    """
    rendered: list[str | BackendError] = []
    edges: list[list[int]] = []  # per query: where the prompt ends and each piece ends, in characters
    for q in queries:
        assert q.messages is not None and q.pieces is not None
        prompt = _rendered(partial(_likelihood_prompt, tok, q.messages))
        if isinstance(prompt, BackendError):
            rendered.append(prompt)
            edges.append([])
            continue
        # user text never becomes a control token; each piece alone, so the boundaries stay known
        pieces = [sanitize(tok, p) for p in q.pieces]
        ends = [len(prompt)]
        for piece in pieces:
            ends.append(ends[-1] + len(piece))
        rendered.append(prompt + "".join(pieces))
        edges.append(ends)
    encs = _encode_rendered(tok, max_length, rendered, [has_chat_template(tok)] * len(queries), offsets=True)
    out: list[Any] = []
    for q, text, enc, ends in zip(queries, rendered, encs, edges, strict=True):
        if isinstance(enc, BackendError) or isinstance(text, BackendError):
            out.append(enc)
            continue
        steps = len(q.pieces or ()) - 1
        ranges = [[0, 0] for _ in range(steps)]
        first: int | None = None
        for t, (a, b) in enumerate(enc["offset_mapping"]):
            if t == 0 or b <= a:  # nothing predicts it, or zero width
                continue
            blanks = len(text[a:b]) - len(text[a:b].lstrip())
            a += blanks if blanks < b - a else 0  # where its text starts
            if a < ends[1]:  # prompt or context
                continue
            k = bisect.bisect_right(ends, a, lo=2) - 2  # the step whose characters hold its start
            if k >= steps:
                continue
            if ranges[k][1] == 0:
                ranges[k][0] = t
            ranges[k][1] = t + 1
            first = t if first is None else first
        if first is None:
            out.append(BackendError("no token of the response survived tokenization"))
            continue
        out.append({"input_ids": enc["input_ids"], "first": first, "steps": [tuple(r) for r in ranges]})
    return out


_NON_FINITE = "the model produced non-finite outputs (NaN or infinity)"


def step_likelihoods(loaded: Loaded, queries: Sequence[StepQuery]) -> list[list[float] | BackendError]:
    """Each step's log-likelihood, ``sum log p(token | everything before it)`` over its tokens
    (:func:`encode_likelihoods`), in float32 from the batch's forward passes: the implicit PRM's
    process reward is ``beta`` times a difference of two such sums (PRIME), and bf16 log-probabilities
    summed over hundreds of tokens would drift by more than the difference."""
    torch = _torch()
    out: list[list[float] | BackendError] = [BackendError("not run")] * len(queries)
    encs = encode_likelihoods(loaded.tokenizer, loaded.max_length, queries)
    run: list[int] = []
    for i, (q, enc) in enumerate(zip(queries, encs, strict=True)):
        wrong_head = _head_mismatch(loaded, q)
        if wrong_head is not None or isinstance(enc, BackendError):
            out[i] = wrong_head or enc
        else:
            run.append(i)
    if not run:
        return out
    seqs = [encs[i]["input_ids"] for i in run]
    outputs = _forward(loaded, seqs, [encs[i]["first"] - 1 for i in run])
    # every item's token log-probabilities stay on the model's device until one transfer for the
    # batch (:func:`_to_host`), its targets copied in one go too
    device = outputs[0][1].device
    targets = torch.tensor([t for i in run for t in encs[i]["input_ids"][encs[i]["first"] :]], device=device)
    token_lps, finite = [], []
    at = 0
    for row, i in enumerate(run):
        first, n = encs[i]["first"], len(seqs[row])
        start, rows = outputs[row]
        logits = rows[first - 1 - start : n - 1 - start].float()  # the rows predicting tokens first..n-1
        finite.append(torch.isfinite(logits).all())
        lp = torch.log_softmax(logits, dim=-1).gather(1, targets[at : at + n - first].unsqueeze(1))
        token_lps.append(lp.squeeze(1))
        at += n - first
    for i, item in zip(run, _to_host(torch, token_lps, finite), strict=True):
        first = encs[i]["first"]
        out[i] = (
            [math.fsum(item[a - first : b - first]) if b > a else 0.0 for a, b in encs[i]["steps"]]
            if item is not None
            else BackendError(_NON_FINITE)
        )
    return out


def _to_host(torch: Any, values: Sequence[Any], finite: Sequence[Any]) -> list[list[float] | None]:
    """Each item's 1-D device tensor of ``values`` as a host list, or None where its ``finite`` flag (a
    0-d device tensor) is false, in one transfer for the batch: a host sync per item cost a 0.5B model on
    a GPU more than its forward pass (BENCHMARKS §5)."""
    flat = torch.cat(list(values)).cpu().tolist()
    ok = torch.stack(list(finite)).cpu().tolist()
    host: list[list[float] | None] = []
    at = 0
    for v, good in zip(values, ok, strict=True):
        n = int(v.shape[0])  # a shape is known on the host: no sync
        host.append([float(x) for x in flat[at : at + n]] if good else None)
        at += n
    return host


def _tag_probs(loaded: Loaded, queries: Sequence[StepQuery]) -> list[list[float] | BackendError]:
    """P(correct) at every step tag of every query, from the batch's forward passes (:func:`_forward`)."""
    torch = _torch()
    tok = loaded.tokenizer
    texts, encs = encode_steps(tok, loaded.max_length, queries)
    out: list[list[float] | BackendError] = [BackendError("not run")] * len(queries)
    run: list[tuple[int, list[int]]] = []  # (query index, token positions of its tags)
    for i, (q, text, enc) in enumerate(zip(queries, texts, encs, strict=True)):
        wrong_head = _head_mismatch(loaded, q)
        if wrong_head is not None or isinstance(enc, BackendError):
            out[i] = wrong_head or enc
            continue
        positions = (
            enc["positions"]
            if q.pieces is not None or q.predicts is not None
            else _tag_positions(text, q.step_tag, enc["offset_mapping"])
        )
        if len(positions) != q.steps:
            out[i] = BackendError(f"{len(positions)} step tags survived tokenization, expected {q.steps}")
            continue
        run.append((i, positions))
    if not run:
        return out
    seqs = [encs[i]["input_ids"] for i, _ in run]
    if loaded.causal:
        # what follows the last tag (the template's "<|im_end|>\n") changes no output a causal model
        # gives at a tag: not run (2 of a short benchmark item's 34 continuation tokens; the time saved
        # was within the host's noise, 3.4-4.4 ms of CPU per batched item either way)
        seqs = [
            s[: positions[-1] + 1] if positions else s for (_, positions), s in zip(run, seqs, strict=True)
        ]
    first_tags = [positions[0] if positions else len(s) for (_, positions), s in zip(run, seqs, strict=True)]
    outputs = _forward(loaded, seqs, first_tags)
    token_id = _token_ids(tok)
    # each item's probabilities and finiteness stay on the model's device until one transfer for the
    # batch (:func:`_to_host`; rows picked by integer views, not list indexes that copy to the device)
    picked, finite = [], []
    for row, (i, positions) in enumerate(run):
        q = queries[i]
        start, rows = outputs[row]
        at = torch.stack([rows[p - start] for p in positions]) if positions else rows[:0]
        if q.label_tokens is not None:  # P(positive) restricted to {+, -}
            at, positive = torch.stack([at[:, token_id(t)] for t in q.label_tokens], dim=1), 0
        else:
            positive = q.positive_index
        # checked on the logits: a softmax turns an overflow to -inf into a finite 0.0 or 1.0
        finite.append(torch.isfinite(at).all())
        picked.append(torch.sigmoid(at[:, 0]) if q.value_head else torch.softmax(at, dim=-1)[:, positive])
    for (i, _), item in zip(run, _to_host(torch, picked, finite), strict=True):
        out[i] = item if item is not None else BackendError(_NON_FINITE)
    return out


def _head_mismatch(loaded: Loaded, q: StepQuery) -> BackendUnavailable | None:
    """Whether this model can answer the query's convention: a request may name another convention
    than the one the model was loaded for, and it must fail alone and clearly, neither read a random
    vocabulary entry as a probability (a valid-looking near-0) nor index past a 2-label head (which
    failed the whole batch)."""
    if q.value_head != (loaded.task == "value_head"):
        return BackendUnavailable(
            "this PRM convention reads a value head (Skywork-o1-Open-PRM); the model is loaded for "
            f"task {loaded.task}: use the convention it was trained with"
            if q.value_head
            else "the model is a value-head PRM (Skywork-o1-Open-PRM): use convention skywork"
        )
    if q.value_head:
        return None
    lm_head = loaded.task == "generate"
    if q.likelihood:
        return (
            None
            if lm_head
            else BackendUnavailable(
                "an implicit PRM reads token log-likelihoods from a causal language model; the model is loaded "
                f"for task {loaded.task}: load it with task generate"
            )
        )
    if q.label_tokens is not None and not lm_head:
        return BackendUnavailable(
            "this PRM convention reads +/- logits from a language-model head (Math-Shepherd, RLHFlow); the "
            "model is loaded as a token classifier: use the convention it was trained with (qwen)"
        )
    if q.label_tokens is None:
        if lm_head:
            return BackendUnavailable(
                "this PRM convention reads a classifier head's positive class (Qwen2.5-Math-PRM); the model "
                "is loaded as a causal LM: use math_shepherd or rlhflow, or load it with task "
                "token_classification"
            )
        labels = int(getattr(getattr(loaded.model, "config", None), "num_labels", 0) or 0)
        if labels and q.positive_index >= labels:
            return BackendUnavailable(f"the model's head has {labels} labels, no class {q.positive_index}")
    return None


def _tag_positions(text: str, tag: str, offsets: Sequence[tuple[int, int]]) -> list[int]:
    """Index of the token holding the last character of each occurrence of ``tag`` in ``text``.

    Character offsets rather than token ids: a tag like ``ки`` may be one token or several depending on
    the tokenizer and on the space before it; its last token is where a PRM reads its verdict. Only the
    occurrences the convention counts as tags (:func:`~rewardhub.prm.tags.tag_pattern`): the
    ``ки`` ending the Russian "покупки" in a question is text, not a step.
    """
    ends = [m.end() - 1 for m in tag_pattern(tag).finditer(text)]
    positions: list[int] = []
    k = 0
    for end in ends:
        while k < len(offsets) and not (offsets[k][0] <= end < offsets[k][1]):
            k += 1
        if k == len(offsets):
            break  # truncated away
        # byte-level BPE may split that character into several tokens with the same offsets: the last
        while k + 1 < len(offsets) and offsets[k + 1][0] <= end < offsets[k + 1][1]:
            k += 1
        positions.append(k)
    return positions


# --- classify (ORM) -------------------------------------------------------------------------------
def classify(loaded: Loaded, inputs: Sequence[tuple[Message, ...]]) -> list[list[float] | BackendError]:
    encs = encode_conversations(loaded.tokenizer, loaded.max_length, inputs, generation_prompt=False)

    def run(_: list[int], ok: list[Any]) -> list[list[float]]:
        seqs = [e["input_ids"] for e in ok]
        outputs = _forward(loaded, seqs, [_pooled_at(s, loaded.pad_id) for s in seqs])
        # one row per item, all moved off the device at once (one host sync per batch)
        return [
            [float(x) for x in row] for row in _torch().stack([r for _, r in outputs]).float().cpu().tolist()
        ]

    return scatter(encs, run)


def _pooled_at(seq: Sequence[int], pad_id: int | None) -> int:
    """Where a transformers sequence classifier reads its score: the last token that is not the pad id
    (with pad = EOS, a template's closing EOS is skipped). Sharing a prompt must keep that token in the
    continuation pass, or the pass pools at a pad and scores another token (one row per item)."""
    for k in range(len(seq) - 1, -1, -1):
        if seq[k] != pad_id:
            return k
    return len(seq) - 1


# --- embed (similarity) ---------------------------------------------------------------------------
def embed(loaded: Loaded, texts: Sequence[str]) -> list[Embedding | BackendError]:
    """Pooled (:attr:`Loaded.pooling`), L2-normalised sentence embeddings; texts past max_length are
    truncated, as in sentence-transformers (an embedding of the first ``max_length`` tokens is still
    meaningful), and marked so.

    Padded on the right whatever the tokenizer's ``padding_side``: the position ids are 0, 1, ... from
    the first column, so a left-padded short text was embedded at shifted positions, and its vector (an
    absolute-position encoder's: BERT, MiniLM) depended on the longest text it was batched with."""
    torch = _torch()
    enc = loaded.tokenizer(
        list(texts),
        padding=True,
        padding_side="right",
        truncation=True,
        max_length=loaded.max_length,
        return_tensors="pt",
    ).to(loaded.device)
    lengths = enc["attention_mask"].sum(1).tolist()
    cut = truncated(loaded.tokenizer, texts, lengths, loaded.max_length)
    # no more tokens than "" has (its special tokens): the tokenizer dropped every character
    nothing = len(loaded.tokenizer("")["input_ids"])
    hidden = loaded.model(**enc).last_hidden_state.float()
    pooled = _pool(torch, hidden, enc["attention_mask"], loaded.pooling)
    normed = torch.nn.functional.normalize(pooled, p=2, dim=1)
    return [
        Embedding([float(x) for x in row], k in cut, empty=lengths[k] <= nothing)
        for k, row in enumerate(normed.cpu().tolist())
    ]


def _pool(torch: Any, hidden: Any, attention_mask: Any, pooling: Pooling) -> Any:
    """One vector per row of right-padded ``hidden`` states, as sentence-transformers pools them."""
    if pooling == "cls":
        return hidden[:, 0]
    mask = attention_mask.unsqueeze(-1).float()
    if pooling == "max":
        return hidden.masked_fill(mask == 0, -1e9).max(1).values
    if pooling == "lasttoken":
        last = (attention_mask.sum(1) - 1).clamp(min=0)
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


def truncated(tok: Any, texts: Sequence[str], lengths: Sequence[int], limit: int) -> set[int]:
    """Which texts truncation cut: only those that fill the whole context are tokenized again, in full
    (a text of exactly ``limit`` tokens fills it too and was not cut)."""
    full = [k for k, n in enumerate(lengths) if n >= limit]
    if not full:
        return set()
    counts = tok([texts[k] for k in full], truncation=False)["input_ids"]
    return {k for k, ids in zip(full, counts, strict=True) if len(ids) > limit}


# --- chat (judges) --------------------------------------------------------------------------------
# Temperatures below this are greedy: logits divided by 1e-45 overflow, and sampling then raises.
_GREEDY_BELOW = 1e-5


class _SeededSampler:
    """A logits processor that samples each row with its own generator seeded by the request's seed, and
    leaves only the drawn token for ``generate``'s greedy step to pick.

    ``torch.manual_seed`` before a batched ``generate`` made a seeded request's sample depend on its row
    and on how many neighbours shared its batch (one RNG stream feeds every row's draw in turn): the same
    request with the same seed answered differently under load. A generator per row draws the same
    tokens whatever the batch holds, as a seeded request to vLLM does (up to floating-point differences
    in the logits of a padded batch). ``warpers`` are the ones ``generate`` samples with
    (:func:`_sampling_warpers`), applied here after its other processors, in its order."""

    def __init__(self, torch: Any, seed: int, rows: int, warpers: Sequence[Any], device: Any):
        self.torch, self.warpers = torch, list(warpers)
        self.generators = [torch.Generator(device=device).manual_seed(seed) for _ in range(rows)]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        torch = self.torch
        warped = scores.float()
        for warp in self.warpers:
            warped = warp(input_ids, warped)
        probs = warped.softmax(-1)
        picked = torch.cat(
            [torch.multinomial(probs[r], 1, generator=g) for r, g in enumerate(self.generators)]
        )
        out = torch.full_like(scores, -math.inf)
        return out.scatter(-1, picked[:, None], 0.0)


def _sampling_warpers(model: Any, temperature: float, top_p: float) -> list[Any]:
    """What ``generate(do_sample=True, temperature=..., top_p=...)`` samples with, in its order: the
    request's temperature and top-p, and the cut-offs of the model's generation config (top-k, which is
    transformers' 50 when it names none; top-h, min-p, typical-p, epsilon and eta). The seeded sampler
    applied temperature and top-p alone, so a seed widened the draw to the whole vocabulary where the
    same request unseeded never left the 50 likeliest tokens."""
    import transformers as tf

    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"`top_p` has to be a float in (0, 1], got {top_p}")
    config = getattr(model, "generation_config", None)

    def option(name: str) -> Any:
        return getattr(config, name, None)

    top_k, top_h, min_p = option("top_k"), option("top_h"), option("min_p")
    typical_p, epsilon, eta = option("typical_p"), option("epsilon_cutoff"), option("eta_cutoff")
    warpers: list[Any] = [tf.TemperatureLogitsWarper(temperature)]
    if top_h is not None and hasattr(tf, "TopHLogitsWarper"):
        warpers.append(tf.TopHLogitsWarper(top_h=top_h))
    if top_k is None or top_k != 0:
        warpers.append(tf.TopKLogitsWarper(50 if top_k is None else top_k))
    if top_p < 1.0:
        warpers.append(tf.TopPLogitsWarper(top_p))
    if min_p is not None:
        warpers.append(tf.MinPLogitsWarper(min_p))
    if typical_p is not None and typical_p < 1.0:
        warpers.append(tf.TypicalLogitsWarper(mass=typical_p))
    if epsilon is not None and 0.0 < epsilon < 1.0:
        warpers.append(tf.EpsilonLogitsWarper(epsilon=epsilon))
    if eta is not None and 0.0 < eta < 1.0:
        warpers.append(tf.EtaLogitsWarper(epsilon=eta, device=getattr(model, "device", "cpu")))
    return warpers


def _stop_ids(loaded: Loaded) -> set[int]:
    """Every id ``generate`` stops at: the generation config's EOS ids (Llama 3's end_of_text, eom and
    eot; Qwen's im_end and endoftext) as well as the tokenizer's EOS and pad. Missing one, a stop read as
    ``length`` and left its token in the output."""
    tok = loaded.tokenizer
    ids = {tok.eos_token_id, tok.pad_token_id}
    configured = getattr(getattr(loaded.model, "generation_config", None), "eos_token_id", None)
    ids.update(configured if isinstance(configured, list | tuple) else [configured])
    return {int(t) for t in ids if isinstance(t, int)}


def generate_chat(loaded: Loaded, requests: Sequence[ChatRequest]) -> list[Completion | BackendError]:
    """Generate for requests sharing one sampling key (the caller groups them), left-padded.

    One ``generate`` per generation budget: an item gets ``max_tokens`` new tokens or what is left of
    the context after its own input, never less because a longer item shares its batch. (The budget was
    the batch's: one rollout near the context limit cut its neighbours' answers off at a few tokens, a
    ``finish_reason`` length they would not have had alone.)"""
    tok = loaded.tokenizer
    encs = encode_conversations(
        tok,
        loaded.max_length,
        [r.messages for r in requests],
        generation_prompt=True,
        continued=[r.continue_final for r in requests],
    )
    out: list[Completion | BackendError] = [
        e if isinstance(e, BackendError) else BackendError("") for e in encs
    ]
    budgets: dict[int, list[int]] = {}  # at least 1: encode reserved it for every item
    for i, e in enumerate(encs):
        if not isinstance(e, BackendError):
            room = loaded.max_length - len(e["input_ids"])
            budgets.setdefault(min(requests[i].max_tokens, room), []).append(i)
    for budget, ok in budgets.items():
        for i, completion in zip(
            ok, _generate(loaded, [requests[i] for i in ok], [encs[i] for i in ok], budget), strict=True
        ):
            out[i] = completion
    return out


def _generate(
    loaded: Loaded, requests: Sequence[ChatRequest], encs: Sequence[Any], max_new: int
) -> list[Completion | BackendError]:
    """One batched ``generate`` of at most ``max_new`` tokens over encoded requests of one sampling key."""
    torch = _torch()
    tok = loaded.tokenizer
    first = requests[0]
    ids, mask = passes.padded([e["input_ids"] for e in encs], loaded.pad_id, left=True)
    ids, mask = ids.to(loaded.device), mask.to(loaded.device)
    k = first.top_logprobs
    kwargs: dict[str, Any] = {
        "max_new_tokens": max_new,
        # every step's logits over the whole vocabulary, kept to the end: only for top logprobs (4 bytes
        # x vocabulary x tokens x rows, 60 GB for 32 answers of 1024 tokens from a 152k vocabulary)
        "output_logits": k > 0,
        "return_dict_in_generate": True,
        "pad_token_id": tok.pad_token_id,
    }
    deadlines = [r.deadline for r in requests if r.deadline is not None]
    if deadlines:  # the last caller's deadline: past it, nobody waits for this batch
        kwargs["max_time"] = max(0.01, max(deadlines) - time.monotonic())
    if first.temperature > _GREEDY_BELOW and first.seed is not None:
        # seeded: each row draws from its own generator; generate's greedy step takes the drawn token
        warpers = _sampling_warpers(loaded.model, first.temperature, first.top_p)
        sampler = _SeededSampler(torch, first.seed, len(requests), warpers, loaded.device)
        kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None, logits_processor=[sampler])
    elif first.temperature > _GREEDY_BELOW:
        kwargs.update(do_sample=True, temperature=first.temperature, top_p=first.top_p)
    else:
        kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    stops = [tuple(s for s in r.stop if s) for r in requests]
    if any(stops):  # each row ends at its own strings; the others generate on
        kwargs["stopping_criteria"] = [StopStrings(tok, ids.shape[1], stops)]
    gen = loaded.model.generate(input_ids=ids, attention_mask=mask, **kwargs)
    new = gen.sequences[:, ids.shape[1] :]
    eos = _stop_ids(loaded)
    # generate stopped at max_time, short of max_new tokens: its unfinished rows were cut by the deadline,
    # not by max_tokens (a cut answer read as "length" was a parse_error, not a timeout: a composite's
    # on_invalid zero then cached its 0, where the batcher's own timeout, the usual end, is transient)
    timed_out = bool(deadlines) and new.shape[1] < max_new and time.monotonic() >= max(deadlines)
    out: list[Completion | BackendError] = []
    for row in range(len(requests)):
        seq: list[int] = []
        finish = "length"
        for t in range(new.shape[1]):
            tid = int(new[row, t])
            if tid in eos:
                finish = "stop"
                break
            seq.append(tid)
        text = tok.decode(seq, skip_special_tokens=True)
        cut = stop_at(text, stops[row])
        if cut is not None:
            seq, text, finish = seq[: tokens_spelling(tok, seq, cut)], text[:cut], "stop"
        if finish == "length" and timed_out:
            out.append(BackendTimeout("the deadline passed during generation"))
            continue
        tokens: list[TokenLogprob] = []
        for t, tid in enumerate(seq if k > 0 else ()):
            # raw (pre-temperature) logprobs, one position at a time: no [B, T, V] copies
            lp = gen.logits[t][row].float().log_softmax(-1)
            top_v, top_i = torch.topk(lp, min(k, lp.shape[-1]))
            top = tuple(
                (tok.decode([int(j)]), float(v)) for v, j in zip(top_v.tolist(), top_i.tolist(), strict=True)
            )
            tokens.append(TokenLogprob(tok.decode([tid]), float(lp[tid]), top))
        out.append(Completion(text=text, tokens=tuple(tokens) if k > 0 else None, finish_reason=finish))
    return out


def stop_at(text: str, stops: Sequence[str]) -> int | None:
    """Where ``text`` is cut for its stop strings: before the earliest one found (None: none is in it).
    The text returned ends there, the stop string not included, as OpenAI-compatible servers return it."""
    found = [i for s in stops if s and (i := text.find(s)) >= 0]
    return min(found) if found else None


def tokens_spelling(tok: Any, ids: Sequence[int], chars: int) -> int:
    """How many of ``ids`` it takes to spell the first ``chars`` characters of their text: the tokens a
    text cut at a stop string keeps (the one the stop string starts inside included, so that the tokens
    still cover the text, as a verdict's position in the text is found in them). A binary search over
    decoded prefixes: a critique of thousands of tokens is decoded a dozen times, not once per token."""
    lo, hi = 0, len(ids)
    while lo < hi:
        mid = (lo + hi) // 2
        if len(tok.decode(list(ids[:mid]), skip_special_tokens=True)) >= chars:
            hi = mid
        else:
            lo = mid + 1
    return lo


class StopStrings:
    """A ``generate`` stopping criterion: a row is done once the text it generated holds one of its own
    stop strings (rows without any are never stopped by it), so that a critique stopped at "Is the
    solution correct?" does not run on to its ``max_tokens`` while the batch's other rows generate. Only
    the last tokens are decoded each step (enough for the longest string); the text is cut at the
    string afterwards (:func:`stop_at`), so a string this misses (in a run of tokens that decode to
    nothing) still ends the text, and only costs the tokens generated past it."""

    def __init__(self, tok: Any, start: int, stops: Sequence[tuple[str, ...]]):
        self.tok, self.start, self.stops = tok, start, list(stops)
        # tokens: a token that decodes to text holds at least one byte of it (a character may take
        # several: three each for CJK in a byte-level BPE that never merged them)
        self.window = max((len(s.encode()) for row in stops for s in row), default=0) + 8

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        torch = _torch()
        done = [False] * len(self.stops)
        first = max(self.start, input_ids.shape[1] - self.window)
        for row, strings in enumerate(self.stops):
            if strings:
                tail = self.tok.decode(input_ids[row, first:].tolist(), skip_special_tokens=True)
                done[row] = any(s in tail for s in strings)
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)
