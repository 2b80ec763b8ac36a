"""The in-process transformers backend: a local judge (generation with top logprobs, batched), loading
errors, and the judge reward on top of it (a random model's judgement is unreadable: parse_error)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from conftest import THINKPRM_SCRIPT
from rewardhub.models import hf_compute
from rewardhub.models.base import ChatRequest, Completion, Message
from rewardhub.models.errors import BackendError, BackendTimeout, BackendUnavailable
from rewardhub.models.transformers_backend import BatchOptions, TransformersBackend

MakeApp = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


async def test_local_chat_with_top_logprobs_is_batched(causal_lm_path: str) -> None:
    b = TransformersBackend(
        "judge", causal_lm_path, "generate", batch=BatchOptions(max_batch=8, max_wait_ms=30)
    )
    await b.start()
    try:
        reqs = [
            ChatRequest(
                (Message("user", f"Is {k}+{k}={2 * k}? Answer Yes or No."),), max_tokens=6, top_logprobs=4
            )
            for k in range(4)
        ]
        outs = await asyncio.gather(*(b.chat(r, time.monotonic() + 30) for r in reqs))
        for out in outs:
            assert out.tokens is not None and 1 <= len(out.tokens) <= 6
            for t in out.tokens:
                assert len(t.top) == 4
                assert [lp for _, lp in t.top] == sorted((lp for _, lp in t.top), reverse=True)
                assert t.logprob <= 0.0
        stats = b.batchers["chat"].stats
        assert stats.items == 4 and stats.batches == 1  # one generate() for the four concurrent calls
        greedy = await b.chat(reqs[0], time.monotonic() + 30)
        assert greedy.text == outs[0].text  # temperature 0 is deterministic
        assert b.ready()["ok"] and b.ready()["device"] == "cpu" and b.ready()["dtype"] == "float32"
        with pytest.raises(BackendUnavailable, match="cannot do 'classify'"):
            await b.classify([(Message("user", "x"),)], time.monotonic() + 5)
    finally:
        await b.close()


async def test_local_judge_reward(make_app: MakeApp, causal_lm_path: str) -> None:
    async with make_app(judge_model=causal_lm_path) as client:
        r = await client.post(
            "/v1/score",
            json={
                "reward": {
                    "name": "judge",
                    "config": {"mode": "pointwise", "max_tokens": 8, "scoring": "logprobs"},
                },
                "items": [{"prompt": "What is 2+2?", "response": "It is 4."}],
            },
        )
        (res,) = r.json()["results"]
        # a random model does not answer "Score: N": unreadable, so invalid (never a silent 0)
        assert res["valid"] is False and res["reason"] == "parse_error" and "judgement" in res["details"]


async def test_a_judge_request_with_more_calls_than_the_model_queue_is_scored_not_refused(
    make_app: MakeApp, causal_lm_path: str
) -> None:
    """A judge calls the model once per item (twice per pairwise item), one call at a time: with more
    calls than the model's queue holds, the first ones filled the queue the later ones needed, so the
    request was refused (429) on every retry while its admitted calls ran for nobody. A request now
    keeps at most half the queue in flight."""
    async with make_app(judge_model=causal_lm_path, batch_queue_max=4, batch_max_size=2) as client:
        r = await client.post(
            "/v1/score",
            json={
                "reward": {"name": "judge", "config": {"mode": "pairwise", "max_tokens": 4}},
                "items": [{"prompt": "q", "response": f"answer {k}", "reference": "other"} for k in range(5)],
                "options": {"use_cache": False},
            },
        )
        assert r.status_code == 200, r.text
        results = r.json()["results"]
        assert [x["reason"] for x in results] == ["parse_error"] * 5  # all ten calls ran
        stats = client.app.state.runtime.models.get("judge").batchers["chat"].stats  # type: ignore[attr-defined]
        assert stats.rejected == 0 and stats.items == 10


async def test_a_full_local_judge_queue_answers_429_not_an_item_error(
    make_app: MakeApp, causal_lm_path: str
) -> None:
    """A judge's chat call refused by a full model queue is back-pressure on the request (429 with
    Retry-After), as for prm, orm and score_model: the judge's per-item catch-all made it a 200 whose
    item was internal_error, which a trainer takes as a scored batch and never retries."""
    settings = {"batch_queue_max": 2, "batch_max_size": 8, "batch_max_wait_ms": 1500}
    async with make_app(judge_model=causal_lm_path, **settings) as client:

        def body(k: int) -> dict[str, Any]:
            return {
                "reward": {"name": "judge", "config": {"mode": "pointwise", "max_tokens": 2}},
                "items": [{"prompt": "q", "response": f"answer {k}"}],
                "options": {"use_cache": False},
            }

        batcher = client.app.state.runtime.models.get("judge").batchers["chat"]  # type: ignore[attr-defined]
        waiting = [asyncio.create_task(client.post("/v1/score", json=body(k))) for k in range(2)]
        # both calls wait in the queue (the batcher gathers for 1.5 s); a fixed 0.5 s sleep once took
        # that to be so, which a loaded CI machine need not make true
        for _ in range(500):
            if batcher.depth() == 2:
                break
            await asyncio.sleep(0.01)
        assert batcher.depth() == 2
        r = await client.post("/v1/score", json=body(9))
        assert r.status_code == 429, r.text
        assert r.headers["retry-after"] == "1" and "REWARDHUB_BATCH_QUEUE_MAX" in r.text
        assert [(await w).status_code for w in waiting] == [200, 200]


QUESTION = "Is the solution correct?"
CRITIQUE = THINKPRM_SCRIPT[: THINKPRM_SCRIPT.index(QUESTION)]  # "Step 1: ... \\boxed{correct}\n"


def _ask(**extra: Any) -> ChatRequest:
    return ChatRequest((Message("user", "Is 2+2=4?"),), max_tokens=60, top_logprobs=2, **extra)


def test_a_stop_string_ends_its_own_row_before_it(scripted_lm_path: str) -> None:
    """The judge's verdict "continued" (ThinkPRM's two calls) stops its critique at "Is the solution
    correct?". As OpenAI-compatible servers do, the text ends before the earliest stop string (not
    included), the finish reason is "stop", and the tokens are those that spell the text (the one a
    stop string starts inside included); in a batch, the other rows generate as they would alone."""
    loaded = hf_compute.load(scripted_lm_path, "generate", device="cpu")
    requests = [
        _ask(stop=(QUESTION,)),
        _ask(),  # no stop string: the whole script, ended by its EOS
        _ask(stop=("Yes", "2+2")),  # the earliest of two
        _ask(stop=("orrec",)),  # inside the token "correct"
        _ask(stop=("never written",)),
    ]
    with hf_compute.inference():
        got = hf_compute.generate_chat(loaded, requests)
        (alone,) = hf_compute.generate_chat(loaded, [requests[1]])
    assert all(isinstance(c, Completion) for c in got), got
    stopped, free, earliest, inside, never = cast(list[Completion], got)
    assert (stopped.text, stopped.finish_reason) == (CRITIQUE, "stop")
    assert stopped.tokens is not None and "".join(t.token for t in stopped.tokens) == CRITIQUE
    assert (free.text, free.finish_reason) == (THINKPRM_SCRIPT, "stop")
    assert (alone.text, alone.finish_reason) == (never.text, never.finish_reason) == (free.text, "stop")
    assert (earliest.text, earliest.finish_reason) == ("Step 1: ", "stop")
    assert inside.text == CRITIQUE[: CRITIQUE.index("orrec")] and inside.tokens is not None
    assert "".join(t.token for t in inside.tokens) == CRITIQUE[: CRITIQUE.index("}")]
    assert inside.tokens[-1].token == "correct"


def test_the_stopping_criterion_ends_only_the_rows_that_wrote_their_own_string(causal_lm_path: str) -> None:
    """``generate`` stops a row once the text it generated holds one of that row's stop strings: not a
    row without strings, not a row whose string is only in its prompt, not a row with another string."""
    torch = pytest.importorskip("torch")
    tok = hf_compute.load(causal_lm_path, "generate", device="cpu").tokenizer
    prompt = tok.encode("Is the solution correct?", add_special_tokens=False)
    written = tok.encode("Step 1 \\boxed{correct}. Is the solution correct?", add_special_tokens=False)
    plain = tok.encode("Step 1 \\boxed{correct}. Is the answer right? Yes.", add_special_tokens=False)
    width = max(len(written), len(plain))  # a row done early is padded on (as generate does)
    rows = [written, written, plain, written]
    ids = torch.tensor([prompt + r + [tok.pad_token_id] * (width - len(r)) for r in rows])
    stops = [(QUESTION,), (), (QUESTION,), ("never written",)]
    criterion = hf_compute.StopStrings(tok, len(prompt), stops)
    assert criterion(ids, None).tolist() == [True, False, False, False]
    # a string of characters that take several tokens each (three bytes each, in a byte-level BPE that
    # never saw them): its tokens outnumber its characters, and are all looked at
    wide = "解答正确吗？是的"
    assert len(tok.encode(wide, add_special_tokens=False)) == 3 * len(wide)
    chinese = torch.tensor([prompt + tok.encode("Step 1. " + wide, add_special_tokens=False)])
    assert hf_compute.StopStrings(tok, len(prompt), [(wide,)])(chinese, None).tolist() == [True]


def test_a_continued_message_is_rendered_open(scripted_lm_path: str, causal_lm_path: str) -> None:
    """``continue_final``: the conversation is rendered with the chat template's
    ``continue_final_message`` (no closing of the assistant's turn, no new generation prompt), so the
    model continues the critique it wrote: the scripted judge, continued after "Is the solution
    correct?", says "Yes"; answered as a new turn it starts its critique again. A model without a chat
    template continues the joined text, which ends with the message."""
    loaded = hf_compute.load(scripted_lm_path, "generate", device="cpu")
    tok = loaded.tokenizer
    messages = (Message("user", "Is 2+2=4?"), Message("assistant", CRITIQUE + QUESTION))
    closed = hf_compute.render(tok, messages, generation_prompt=False)
    rendered = hf_compute.render(tok, messages, generation_prompt=False, continue_final=True)
    assert closed.endswith(QUESTION + "<|im_end|>\n")
    assert rendered == closed[: -len("<|im_end|>\n")] and rendered.endswith(
        "assistant\n" + CRITIQUE + QUESTION
    )
    one = ChatRequest(messages, max_tokens=1, top_logprobs=20)
    with hf_compute.inference():
        continued, answered = hf_compute.generate_chat(
            loaded, [dataclasses.replace(one, continue_final=True), one]
        )
    assert isinstance(continued, Completion) and isinstance(answered, Completion)
    assert (continued.text, continued.finish_reason) == ("Yes", "length")
    assert continued.tokens is not None and len(continued.tokens[0].top) == 20
    assert answered.text == "Step"
    plain = hf_compute.load(causal_lm_path, "generate", device="cpu").tokenizer
    plain.chat_template = None
    assert hf_compute.render(plain, messages, generation_prompt=False, continue_final=True).endswith(
        "\n\n" + CRITIQUE + QUESTION
    )


async def test_the_backend_stops_and_continues_through_its_model_process(scripted_lm_path: str) -> None:
    """The two requests of verdict "continued" through the backend (its model process and batcher):
    they were refused (backend_error), and a local ThinkPRM could not be asked for its verdict."""
    b = TransformersBackend("judge", scripted_lm_path, "generate")
    await b.start()
    try:
        first = await b.chat(_ask(stop=(QUESTION,)), time.monotonic() + 60)
        messages = (Message("user", "Is 2+2=4?"), Message("assistant", first.text + QUESTION))
        second = await b.chat(ChatRequest(messages, max_tokens=1, continue_final=True), time.monotonic() + 60)
    finally:
        await b.close()
    assert (first.text, first.finish_reason) == (CRITIQUE, "stop")
    assert second.text == "Yes"


async def test_a_failing_sampling_group_fails_only_its_own_items(causal_lm_path: str) -> None:
    """One micro-batch holds calls with different sampling settings, run as one generate() per setting:
    transformers refusing one setting (a negative top_p) must fail that setting's calls only, not the
    greedy calls that happened to share the batch."""
    b = TransformersBackend(
        "judge", causal_lm_path, "generate", batch=BatchOptions(max_batch=8, max_wait_ms=200)
    )
    await b.start()
    try:
        msgs = (Message("user", "Is 2+2=4? Answer Yes or No."),)
        good = ChatRequest(msgs, max_tokens=3)
        bad = ChatRequest(msgs, max_tokens=3, temperature=1.0, top_p=-0.5)
        outs = await asyncio.gather(
            *(b.chat(r, time.monotonic() + 30) for r in (good, bad, good)), return_exceptions=True
        )
        assert b.batchers["chat"].stats.batches == 1  # the three calls shared one micro-batch
        assert not isinstance(outs[0], BaseException) and not isinstance(outs[2], BaseException)
        assert outs[0].text == outs[2].text  # greedy: the same answer
        assert isinstance(outs[1], BackendError) and "top_p" in str(outs[1])
        again = await b.chat(good, time.monotonic() + 30)  # the backend serves on
        assert again.text == outs[0].text
    finally:
        await b.close()


async def test_a_seeded_sample_does_not_depend_on_its_batch_neighbours(causal_lm_path: str) -> None:
    """``torch.manual_seed`` before a batched generate() fed one RNG stream to every row in turn: the same
    seeded request answered differently alone, behind other rows, or twice in one batch."""
    b = TransformersBackend(
        "judge", causal_lm_path, "generate", batch=BatchOptions(max_batch=8, max_wait_ms=200)
    )
    await b.start()
    try:

        def req(text: str) -> ChatRequest:
            return ChatRequest((Message("user", text),), max_tokens=12, temperature=1.0, top_p=0.9, seed=7)

        target = req("Is 2+2=4? Answer Yes or No.")
        alone = await b.chat(target, time.monotonic() + 30)
        others = [req(f"Question {k}: what is {k}*{k}?") for k in range(3)]
        batched = await asyncio.gather(*(b.chat(r, time.monotonic() + 30) for r in [*others, target, target]))
        assert b.batchers["chat"].stats.sizes[5] == 1  # the five calls shared one micro-batch
        assert batched[3].text == batched[4].text == alone.text
        unseeded = ChatRequest(target.messages, max_tokens=12, temperature=1.0)
        texts = {(await b.chat(unseeded, time.monotonic() + 30)).text for _ in range(4)}
        assert len(texts) > 1  # without a seed it still samples
    finally:
        await b.close()


async def test_a_long_neighbour_does_not_shorten_an_item_s_generation(causal_lm_path: str) -> None:
    """Every item of a generate() got the room the longest input left in the context: a rollout near
    max_length cut a short neighbour's answer off (finish_reason length, a judge's parse_error) at a
    few tokens it would not have stopped at alone."""
    b = TransformersBackend(
        "judge", causal_lm_path, "generate", batch=BatchOptions(max_batch=8, max_wait_ms=200)
    )
    await b.start()
    try:
        near_limit = ChatRequest((Message("user", "The answer is 42. " * 66),), max_tokens=40)  # 480 of 512
        short = ChatRequest((Message("user", "Hi"),), max_tokens=40)
        alone = await b.chat(short, time.monotonic() + 30)
        long_out, short_out = await asyncio.gather(
            *(b.chat(r, time.monotonic() + 30) for r in (near_limit, short))
        )
        assert b.batchers["chat"].stats.sizes[2] == 1  # the two calls shared one micro-batch
        assert (short_out.text, short_out.finish_reason) == (alone.text, alone.finish_reason)
        assert long_out.finish_reason == "length"  # the long one stops where its context ends
    finally:
        await b.close()


async def test_generation_stops_at_the_deadline_and_the_next_call_is_served(tmp_path: Path) -> None:
    """A generation past its caller's deadline kept the model process busy for minutes: every later
    call on the backend timed out behind it."""
    from tiny_models import build_tiny_causal_lm

    path = build_tiny_causal_lm(tmp_path / "lm", max_positions=30_000)
    b = TransformersBackend("judge", str(path), "generate", max_length=30_000)
    await b.start()
    try:
        long = ChatRequest((Message("user", "Write a long story"),), max_tokens=25_000)
        # generate stops at the deadline (max_time), and its answer may reach the caller before the
        # caller's own timeout fires (a race a loaded host decides): a timeout either way
        with pytest.raises(BackendTimeout):
            await b.chat(long, time.monotonic() + 1.0)
        short = ChatRequest((Message("user", "Hi"),), max_tokens=2, temperature=1e-45)  # tiny: greedy
        # served, not a BackendTimeout behind a generation still running (its 25,000 tokens take far
        # longer than this deadline); the wall-clock bound on the call said no more than its deadline
        out = await b.chat(short, time.monotonic() + 20)
        assert out.text is not None
    finally:
        await b.close()


def test_a_generation_the_deadline_stopped_is_a_timeout_not_a_cut_answer(tmp_path: Path) -> None:
    """``generate`` stops at the caller's deadline (max_time); its unfinished rows came back as answers
    cut at ``finish_reason`` "length", which a judge reads as cut off at max_tokens (``parse_error``, not
    transient): a composite zeroing that part (``on_invalid: zero``) cached its 0, where the batcher's
    own timeout (the usual end of the race) is a transient ``timeout``. Found in review. Such a row is
    now a BackendTimeout; a row that used its whole max_tokens is still "length"."""
    from tiny_models import build_tiny_causal_lm

    path = build_tiny_causal_lm(tmp_path / "lm", max_positions=30_000)
    loaded = hf_compute.load(str(path), "generate", device="cpu", max_length=30_000)
    story = (Message("user", "Write a long story"),)
    with hf_compute.inference():
        (late,) = hf_compute.generate_chat(
            loaded, [ChatRequest(story, max_tokens=25_000, deadline=time.monotonic() + 0.5)]
        )
        (full,) = hf_compute.generate_chat(
            loaded, [ChatRequest(story, max_tokens=3, deadline=time.monotonic() + 600)]
        )
    assert isinstance(late, BackendTimeout), late
    assert isinstance(full, Completion) and full.finish_reason == "length", full


def _generation_growth_mib(loaded: Any, requests: list[ChatRequest]) -> list[float]:
    """In the model process: how far generating ``requests`` raised its peak memory, in MiB."""
    import resource

    from rewardhub.models import hf_compute

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = hf_compute.generate_chat(loaded, requests)
    grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024  # KiB on Linux
    return [grew for _ in out]


async def test_generation_without_logprobs_keeps_no_vocabulary_sized_logits(tmp_path: Path) -> None:
    """generate() kept every step's logits over the whole vocabulary (output_logits), then stacked and
    log-softmaxed copies of them, for every call, also those asking for no top logprobs (score_model, a
    judge reading text): 4 answers of 300 tokens over a 131k vocabulary took 2.2 GB, and a real batch
    (32 x 1024 tokens x Qwen's 152k) some 60 GB, an out-of-memory that the batcher then retried in halves."""
    from functools import partial

    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from rewardhub.models import hf_compute
    from rewardhub.models.model_process import ModelProcess
    from tiny_models import _save, train_tokenizer

    torch.manual_seed(0)
    tok: Any = train_tokenizer()
    config = Qwen2Config(
        vocab_size=131_072,  # an embedding larger than the tokenizer, as Qwen's (151,936 for 151,665)
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    path = _save(Qwen2ForCausalLM(config), tok, tmp_path / "lm")
    proc = ModelProcess("judge", partial(hf_compute.load, str(path), "generate", threads=1))
    await proc.start()
    try:
        requests = [ChatRequest((Message("user", f"question {k}"),), max_tokens=300) for k in range(4)]
        grew = await proc.call(_generation_growth_mib, requests)
        assert grew[0] < 256, f"generation raised the model process's peak memory by {grew[0]:.0f} MiB"
    finally:
        await proc.close()


async def test_lazy_load_failure_is_an_item_error() -> None:
    b = TransformersBackend("embedding", "/nonexistent/model", "embedding", lazy=True)
    await b.start()
    try:
        with pytest.raises(Exception, match="nonexistent"):
            await b.embed(["x"], time.monotonic() + 60)  # the spawn and imports alone can take 5 s here
        assert b.ready()["ok"] is True and "error" in b.ready()  # a lazy default never fails readiness
    finally:
        await b.close()


def test_a_local_backend_s_identity_follows_its_checkpoint_and_settings(tmp_path: Path) -> None:
    """The identity is in the cache key of every reward using the backend: a reward model retrained and
    saved over the same directory, or read with a shorter context, kept serving the old scores."""
    from tiny_models import build_tiny_orm

    path = str(build_tiny_orm(tmp_path / "orm", seed=0))

    def identity(**kw: Any) -> str:
        return TransformersBackend("orm", path, "sequence_classification", **kw).identity()

    before = identity()
    assert identity() == before  # stable for the same files and settings
    build_tiny_orm(tmp_path / "orm", seed=1)  # retrained, saved over the same directory
    after = identity()
    assert after != before
    assert identity(max_length=32) != after and identity(dtype="bfloat16") != after


def test_a_retrained_checkpoint_with_normalised_file_times_is_another_model(tmp_path: Path) -> None:
    """A reproducible container build sets every file's time to one constant: a retrained reward model of
    the same architecture (same file sizes) had the old one's identity, so the old scores were served
    from a shared cache. Found in review."""
    from tiny_models import build_tiny_orm

    path = tmp_path / "orm"

    def built(seed: int) -> str:
        build_tiny_orm(path, hidden=256, seed=seed)  # weights of about 5 MB: not hashed whole
        assert (path / "model.safetensors").stat().st_size > 1 << 20
        for f in path.iterdir():
            os.utime(f, ns=(315_532_800_000_000_000, 315_532_800_000_000_000))  # 1980-01-01
        return TransformersBackend("orm", str(path), "sequence_classification").identity()

    assert built(seed=0) != built(seed=1)


def test_a_hub_id_is_fingerprinted_at_the_cached_revision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model named by hub id and loaded from the Hugging Face cache had no fingerprint: a newer revision
    downloaded into the cache kept the old one's identity, and its cached scores. Found in review."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    repo = tmp_path / "models--acme--rm"
    for commit, label in (("a" * 40, "0"), ("b" * 40, "1")):
        (repo / "snapshots" / commit).mkdir(parents=True)
        (repo / "snapshots" / commit / "config.json").write_text(f'{{"num_labels": {label}}}')
    (repo / "refs").mkdir()

    def identity_at(commit: str) -> str:
        (repo / "refs" / "main").write_text(commit)
        return TransformersBackend("orm", "acme/rm", "sequence_classification").identity()

    old, new = identity_at("a" * 40), identity_at("b" * 40)
    assert old != new and identity_at("a" * 40) == old
    assert TransformersBackend("orm", "acme/missing", "sequence_classification").identity().endswith("|")
    from rewardhub.models.fingerprint import checkpoint_fingerprint

    assert checkpoint_fingerprint("") == ""  # Path("") is the working directory, not a checkpoint


async def test_a_checkpoint_with_its_own_head_class_needs_remote_code(tmp_path: Path) -> None:
    # REWARDHUB_PRM_MODEL=<Qwen2.5-Math-PRM> (the README's and the k8s manifest's shortcut) loaded the
    # checkpoint as transformers' own Qwen2ForTokenClassification: the shipped two-layer head did not fit,
    # a random one was made, and every step score was noise that looked valid. Now it does not start.
    from rewardhub.config import Settings
    from rewardhub.models.hub import ModelHub
    from tiny_models import build_tiny_remote_code_prm

    path = str(build_tiny_remote_code_prm(tmp_path / "remote-prm"))
    settings = Settings(_env_file=None, prm_model=path, embedding_model="off")  # type: ignore[call-arg]
    hub = ModelHub.from_settings(settings)
    with pytest.raises(
        BackendUnavailable, match=r"no weights for score\.bias, score\.weight.*trust_remote_code"
    ):
        await hub.start()
    await hub.close()

    b = TransformersBackend("prm", path, "token_classification", trust_remote_code=True)
    await b.start()  # the backends file's `trust_remote_code: true` loads the shipped class
    try:
        assert b.ready()["ok"]
    finally:
        await b.close()


def test_remote_code_on_a_native_token_classifier_keeps_its_head(qwen_prm_path: str) -> None:
    # trust_remote_code: true on a PRM whose checkpoint is transformers' own Qwen2ForTokenClassification
    # (no auto_map) loaded it through AutoModel as the bare Qwen2Model: the score head was dropped as an
    # unexpected key, nothing was missing, and the step scores were a softmax over hidden states (~0.004
    # for every step with the tiny PRM): noise that looked valid. The flag must not change the model.
    from rewardhub.models import hf_compute
    from rewardhub.models.base import StepQuery

    q = StepQuery(step_tag="<extra_0>", steps=2, text="What is 3+5? 3+5=8<extra_0>so 8<extra_0>")
    plain = hf_compute.load(qwen_prm_path, "token_classification")
    remote = hf_compute.load(qwen_prm_path, "token_classification", trust_remote_code=True)
    assert type(remote.model) is type(plain.model)
    assert hf_compute.step_probs(remote, [q]) == hf_compute.step_probs(plain, [q])


def test_a_seed_does_not_change_what_is_sampled_from(causal_lm_path: str) -> None:
    # The per-row seeded sampler applied temperature and top-p only, where generate() samples with the
    # model's top_k too (transformers' default 50 when its generation config names none): a seed widened
    # the draw to the whole vocabulary, and with the tiny LM half of 200 seeded first tokens lay outside
    # the 50 likeliest, a choice the same request without a seed never makes.
    from rewardhub.models import hf_compute

    loaded = hf_compute.load(causal_lm_path, "generate")
    assert loaded.model.generation_config.top_k is None  # so generate() uses transformers' 50
    msgs = (Message("user", "Is 2+2=4? Answer Yes or No."),)
    reqs = [ChatRequest(msgs, max_tokens=1, temperature=1.0, top_logprobs=50, seed=s) for s in range(200)]
    outs = hf_compute.generate_chat(loaded, reqs)
    firsts = [o.tokens[0] for o in outs if not isinstance(o, BackendError) and o.tokens]  # not a stop
    assert len(firsts) > 150
    for first in firsts:
        assert first.token in {text for text, _ in first.top}


@pytest.mark.parametrize("cutoff", [{"epsilon_cutoff": 0.9}, {"typical_p": 1e-6}, {"min_p": 0.99}])
def test_a_seeded_draw_obeys_the_generation_configs_cutoffs(
    causal_lm_path: str, cutoff: dict[str, float]
) -> None:
    # Each of these keeps one token (at least one is always kept): generate() then samples the same
    # token every time, and so must every seed. The seeded sampler ignored typical-p, epsilon and eta
    # (its draws spread over the top 50 where the unseeded request never varied).
    from rewardhub.models import hf_compute

    loaded = hf_compute.load(causal_lm_path, "generate")
    for name, value in cutoff.items():
        setattr(loaded.model.generation_config, name, value)
    msgs = (Message("user", "Is 2+2=4? Answer Yes or No."),)

    def firsts(seeds: list[int | None]) -> set[str]:
        reqs = [ChatRequest(msgs, max_tokens=1, temperature=1.0, seed=s) for s in seeds]
        outs = [hf_compute.generate_chat(loaded, [r])[0] for r in reqs]
        return {o.text for o in outs if not isinstance(o, BackendError)}

    unseeded = firsts([None] * 8)
    assert len(unseeded) == 1
    assert firsts(list(range(24))) == unseeded


def test_the_seeded_sampler_warps_as_generate_does(causal_lm_path: str) -> None:
    # eta keeps many tokens of a flat distribution, so no draw shows it: the list is compared instead,
    # with the order generate() applies them in
    from rewardhub.models import hf_compute

    loaded = hf_compute.load(causal_lm_path, "generate")
    config = loaded.model.generation_config
    config.top_k, config.min_p, config.typical_p, config.epsilon_cutoff, config.eta_cutoff = (
        20,
        0.1,
        0.9,
        0.01,
        0.02,
    )
    names = [type(w).__name__ for w in hf_compute._sampling_warpers(loaded.model, 0.7, 0.9)]
    assert names == [
        "TemperatureLogitsWarper",
        "TopKLogitsWarper",
        "TopPLogitsWarper",
        "MinPLogitsWarper",
        "TypicalLogitsWarper",
        "EpsilonLogitsWarper",
        "EtaLogitsWarper",
    ]


@pytest.mark.parametrize(
    ("kind", "task"), [("orm", "token_classification"), ("prm", "sequence_classification")]
)
async def test_a_prm_and_an_orm_do_not_load_as_each_other(
    qwen_prm_path: str, orm_path: str, kind: str, task: str
) -> None:
    # Both heads are named `score`, so REWARDHUB_ORM_MODEL=<a PRM> loaded the token classifier as a
    # sequence classifier with no weight missing, and scored its negative class at the last token as a
    # valid reward (and an ORM given as a PRM read its one output at the step tags).
    from rewardhub.config import Settings
    from rewardhub.models.hub import ModelHub

    path = qwen_prm_path if kind == "orm" else orm_path
    settings = Settings(_env_file=None, embedding_model="off", **{f"{kind}_model": path})  # type: ignore[call-arg, arg-type]
    hub = ModelHub.from_settings(settings)
    with pytest.raises(BackendUnavailable, match=rf"a {task} model, which cannot serve") as info:
        await hub.start()
    await hub.close()
    assert f"configured by REWARDHUB_{kind.upper()}_MODEL" in str(info.value)


@pytest.mark.parametrize(
    ("env", "device", "shares"),
    [
        (None, "cpu", True),  # the default, "auto": a CPU gains most from running a group's prompt once
        (None, "cuda", False),  # ...a GPU ran plain padded batches faster and closer to one-item scores
        (None, "cuda:1", False),
        ("auto", "cpu", True),
        ("true", "cuda", True),
        ("false", "cpu", False),
    ],
)
def test_share_prefix_setting_resolves_per_device(
    monkeypatch: pytest.MonkeyPatch, env: str | None, device: str, shares: bool
) -> None:
    """REWARDHUB_BATCH_SHARE_PREFIX=auto (the default) shares prompts on a CPU and not on a GPU, where a
    0.5B bf16 PRM measured 357 items/s with sharing vs 441 without (BENCHMARKS.md section 5)."""
    from rewardhub.config import Settings
    from rewardhub.models import hf_compute

    if env is None:
        monkeypatch.delenv("REWARDHUB_BATCH_SHARE_PREFIX", raising=False)
    else:
        monkeypatch.setenv("REWARDHUB_BATCH_SHARE_PREFIX", env)
    setting = Settings(_env_file=None).batch_share_prefix  # type: ignore[call-arg]
    assert hf_compute.shares_prefix(setting, device) is shares
