"""Shared-prefix forward passes: the grouping plan, and outputs equal to the plain padded pass on real
(tiny) PRM, Math-Shepherd and ORM models; a bidirectional model fails the load-time check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from rewardhub.models import hf_compute, passes  # noqa: E402
from rewardhub.models.base import Message, StepQuery  # noqa: E402
from rewardhub.models.prefix_cache import PrefixCache  # noqa: E402

SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."


# --- the plan (pure Python) ---------------------------------------------------------------------
def test_plan_groups_the_rollouts_of_each_prompt() -> None:
    p1, p2 = list(range(100, 140)), list(range(200, 230))  # two prompts, 40 and 30 tokens
    seqs = [p1 + [1, 2, 3], p2 + [4, 5], p1 + [7, 8], p2 + [9], p1 + [1, 2, 6], list(range(300, 320))]
    plan = passes.plan(seqs, [len(s) - 1 for s in seqs])
    assert plan is not None
    groups = {g.members: g.prefix for g in plan.groups}
    assert groups[(0, 4, 2)] == 40  # sorted order; the common prefix of 0 and 4 is longer, but 2 joins
    assert groups[(1, 3)] == 30
    assert groups[(5,)] == 19  # alone: everything but its last token, which must come from pass two
    assert plan.starts == (40, 30, 40, 30, 40, 19)
    assert plan.padded_tokens([len(s) for s in seqs]) < 0.8 * len(seqs) * max(len(s) for s in seqs)


def test_plan_stops_before_the_first_position_read() -> None:
    prompt = list(range(100, 150))
    seqs = [prompt + [1, 2], prompt + [1, 2], prompt + [3]]  # two identical items
    plan = passes.plan(seqs, [30, 45, 50])
    assert plan is not None and plan.groups[0].prefix == 30  # item 0 reads position 30 on
    for s, start, read in zip(seqs, plan.starts, [30, 45, 50], strict=True):
        assert start <= read and start < len(s)
    same = passes.plan([prompt, prompt], [len(prompt), len(prompt)])
    assert same is not None and same.starts == (len(prompt) - 1,) * 2  # at least one token is left


@pytest.mark.parametrize(
    ("seqs", "read_from"),
    [
        ([list(range(100, 140))], [39]),  # one item
        ([list(range(100, 140)), list(range(200, 240))], [39, 39]),  # nothing shared
        ([list(range(100, 140)), list(range(100, 110)) + [0] * 30], [39, 39]),  # 10 shared: too few
        ([list(range(100, 140))] * 2, [0, 39]),  # an item reads its first token
    ],
)
def test_plan_declines_when_sharing_does_not_pay(seqs: list[list[int]], read_from: list[int]) -> None:
    assert passes.plan(seqs, read_from) is None


def test_buckets_trade_padding_against_the_cost_of_a_pass() -> None:
    widths = [100, 10, 12, 101, 11]
    assert passes.buckets(widths, float("inf")) == [[1, 4, 2, 0, 3]]  # one pass, sorted
    assert passes.buckets(widths, 20.0) == [[1, 4, 2], [0, 3]]  # two length buckets
    assert passes.buckets(widths, 1e6) == [[1, 4, 2, 0, 3]]  # a pass costs more than any padding
    cut = passes.buckets(widths, 0.0)  # free passes: no padding at all
    assert sorted(i for c in cut for i in c) == list(range(5))
    assert sum(len(c) * max(widths[i] for i in c) for c in cut) == sum(widths)
    assert passes.buckets([], 1.0) == [] and passes.buckets([5], 1.0) == [[0]]
    many = [k % 7 + 1 for k in range(passes.MAX_BUCKETED + 1)]
    assert len(passes.buckets(many, 1.0)) == 1


# --- the prefix cache (kept across batches) -------------------------------------------------------
def _layers(n: int, nbytes_per_token: int = 8) -> torch.Tensor:
    """A stand-in for one layer's keys and values of ``n`` tokens (``[layers, 2, kv heads, n, head
    size]``): a float32 tensor of a known size."""
    return torch.zeros((1, 2, 1, n, nbytes_per_token // 8))


def test_prefix_cache_finds_the_longest_kept_prefix_and_drops_the_oldest() -> None:
    cache = PrefixCache(max_bytes=3 * 80)  # three 10-token entries (keys and values, 4 bytes each)
    cache.put([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], _layers(10))
    cache.put([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12][:10], _layers(10))  # the same key: kept once
    assert len(cache) == 1 and cache.nbytes == 80
    cache.put([1, 2, 3, 4, 5], _layers(5))
    hit = cache.longest([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 99])
    assert hit is not None and hit.length == 10  # the longest of the two it starts with
    hit = cache.longest([1, 2, 3, 4, 5, 6, 0])
    assert hit is not None and hit.length == 5
    assert cache.longest([1, 2, 3]) is None and cache.longest([2, 3, 4, 5, 6]) is None
    # over the limit: the least recently used goes (the 10-token entry was used before the 5-token one)
    cache.put(list(range(100, 110)), _layers(10))
    cache.put(list(range(200, 210)), _layers(10))
    assert cache.nbytes <= cache.max_bytes
    gone = cache.longest([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    assert gone is not None and gone.length == 5  # the 10-token entry went, the 5-token one is left
    assert cache.longest(list(range(200, 215))) is not None
    cache.put(list(range(300, 400)), _layers(100))  # larger than the whole cache: not kept
    assert cache.longest(list(range(300, 400))) is None
    with pytest.raises(ValueError):
        PrefixCache(0)


def _seqs(loaded: hf_compute.Loaded, queries: list[StepQuery]) -> tuple[list[list[int]], list[int]]:
    tok = loaded.tokenizer
    texts = [
        hf_compute.render(tok, q.messages or (), generation_prompt=False, keep="<extra_0>") for q in queries
    ]
    seqs = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    tag = tok.convert_tokens_to_ids("<extra_0>")
    return seqs, [s.index(tag) for s in seqs]


def _grouped(seqs: list[list[int]], read_from: list[int], groups: list[list[int]]) -> passes.Plan:
    """A plan with these groups, each sharing its members' common prefix (as :func:`passes.plan` cuts it)."""
    built, starts, group_of = [], [0] * len(seqs), [0] * len(seqs)
    for g, members in enumerate(groups):
        cap = min(min(read_from[i], len(seqs[i]) - 1) for i in members)
        first = seqs[members[0]]
        n = next((k for k in range(cap) if any(seqs[i][k] != first[k] for i in members)), cap)
        built.append(passes.Group(n, tuple(members)))
        for i in members:
            starts[i], group_of[i] = n, g
    return passes.Plan(tuple(built), tuple(starts), tuple(group_of))


def test_prefix_kept_from_an_earlier_batch_gives_the_same_outputs(qwen_prm_path: str) -> None:
    """A group's prompt prefilled in one batch and reused in the next (whole, or cut back where the next
    batch's group shares more than the kept prefix) gives what the plain masked pass gives."""
    loaded = _load(qwen_prm_path, "token_classification", True)
    pad = loaded.tokenizer.pad_token_id
    seqs, read_from = _seqs(loaded, _rollouts())
    cache = PrefixCache(1 << 24)

    def check(items: list[int], groups: list[list[int]], reused: int) -> None:
        batch = [seqs[i] for i in items]
        plan = _grouped(batch, [read_from[i] for i in items], groups)
        hits, misses = cache.hits, cache.misses
        rows = passes.run_shared(
            loaded.model, plan, batch, pad_id=pad, device="cpu", overhead=0.0, cache=cache
        )
        assert (cache.hits - hits, cache.misses - misses) == (reused, len(groups) - reused)
        for k, (start, out) in zip(items, rows, strict=True):
            ref = reference[k][1]
            assert start <= read_from[k] and out.shape[0] == len(seqs[k]) - start
            assert torch.allclose(out, ref[start:], atol=1e-5)

    with hf_compute.inference():
        reference = passes.run_plain(loaded.model, seqs, pad_id=pad, device="cpu", causal=False)
        check([0, 1, 2, 4], [[0, 1], [2, 3]], reused=0)  # two rollouts of each of two prompts
        assert len(cache) == 2  # both groups' prefixes kept
        # the next batch: rollouts 0 and 5 are the same text, so their common prefix runs into the
        # response, past the kept one (cut back to it); a lone rollout of a new prompt is prefilled but
        # not kept (its prefix runs into its own response), nor does the lone "3+5" rollout 3 find one
        # (the kept prefix holds the response's first token, which 0 and 1 share and 3 does not)
        check([5, 0, 6, 3], [[0, 1], [2], [3]], reused=1)
        assert len(cache) == 2
        check([6, 6, 2, 4], [[0, 1], [2, 3]], reused=1)  # the new prompt's two rollouts: kept now
        assert len(cache) == 3
        check([6, 6, 2, 4], [[0, 1], [2, 3]], reused=2)  # every prompt kept: no prefill at all


def test_kept_prompts_enter_a_batch_in_one_copy_per_group_not_per_layer(tmp_path: Path) -> None:
    """Each kept prompt goes into a batch as one copy of all its layers' keys and values. A copy per
    layer, keys and values apart (2 x 12 here, 2 x 24 for the 0.5B GPU model), made a batch of five
    kept prompts some 240 kernel launches dearer than the plain pass it was to beat (BENCHMARKS.md §5:
    614 vs 723 items/s on an H200). Counted in tensor operations, which are kernel launches on a GPU."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from tiny_models import build_tiny_qwen_prm

    layers = 12
    loaded = _load(
        str(build_tiny_qwen_prm(tmp_path / "deep", hidden=32, layers=layers)), "token_classification", True
    )
    pad = loaded.tokenizer.pad_token_id
    prompts = [[(100 + 37 * k + j) % 1000 for j in range(30)] for k in range(4)]

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            Count.n += 1
            return func(*args, **(kwargs or {}))

    def ops(groups: int) -> int:
        """Tensor operations of a batch of eight rollouts of ``groups`` prompts, every prompt kept."""
        seqs = [prompts[i % groups] + [5 + i, 6 + i] for i in range(8)]
        plan = passes.plan(seqs, [len(s) - 1 for s in seqs])
        assert plan is not None and len(plan.groups) == groups
        cache = PrefixCache(1 << 24)
        kw = {"pad_id": pad, "device": "cpu", "cache": cache}
        passes.run_shared(loaded.model, plan, seqs, **kw)  # prefills and keeps the prompts
        hits = cache.hits
        Count.n = 0
        with Count():
            passes.run_shared(loaded.model, plan, seqs, **kw)
        assert cache.hits - hits == groups  # no prefill: every group from the cache
        return Count.n

    with hf_compute.inference():
        two, four = ops(2), ops(4)
    # the same items, shapes and passes; two more groups cost their copies and mask rows, not 2 x layers
    # copies each
    assert 0 <= four - two < 2 * layers


def test_step_probs_over_batches_with_the_prefix_cache_equal_plain(qwen_prm_path: str) -> None:
    kept = hf_compute.load(
        qwen_prm_path, "token_classification", device="cpu", share_prefix=True, prefix_cache_mb=8
    )
    plain = _load(qwen_prm_path, "token_classification", False)
    assert kept.prefix_cache is not None and kept.prefix_cache_mb == 8.0
    assert _load(qwen_prm_path, "token_classification", True).prefix_cache is None  # the default: 0 MB
    assert (
        hf_compute.load(
            qwen_prm_path, "token_classification", device="cpu", share_prefix=False, prefix_cache_mb=8
        ).prefix_cache
        is None
    )  # kept prefixes are shared prompts: off with them
    queries = _rollouts()
    cache = kept.prefix_cache
    with hf_compute.inference():
        for batch in (queries[:3], queries[3:], queries):
            _close(hf_compute.step_probs(kept, batch), hf_compute.step_probs(plain, batch))
        assert cache.hits >= 2
        # one item at a time (a quiet service's batches): on a kept prompt, no prefill (passes.plan_kept)
        seqs, read_from = _seqs(kept, queries)
        for k, q in enumerate(queries):
            hits, misses = cache.hits, cache.misses
            _close(hf_compute.step_probs(kept, [q]), hf_compute.step_probs(plain, [q]))
            found = passes.plan_kept([seqs[k]], [read_from[k]], cache) is not None
            assert cache.hits - hits == int(found) and cache.misses == misses
        # the lone "divisors" question was never in a group of two, but the whole batch shared the
        # system prompt, kept then: its item reuses that
        lone = passes.plan_kept([seqs[6]], [read_from[6]], cache)
        assert lone is not None and lone.starts[0] <= passes._common(seqs[6], seqs[0], read_from[6])
        # an item that starts with nothing kept: the plain pass for its whole batch
        stranger = [seqs[0][0], *reversed(seqs[0][1:])]
        assert passes.plan_kept([stranger], [len(stranger) - 1], cache) is None
        assert passes.plan_kept([seqs[0], stranger], [read_from[0], len(stranger) - 1], cache) is None
        both = passes.plan_kept([seqs[0], seqs[2]], [read_from[0], read_from[2]], cache)
        assert both is not None and [g.members for g in both.groups] in ([(0,), (1,)], [(0, 1)])


# --- equal outputs on real models -------------------------------------------------------------------
def _rollouts() -> list[StepQuery]:
    """Two prompts with several rollouts each (different lengths), one lone prompt, a repeated rollout."""
    out = []
    for k, (q, steps) in enumerate(
        [
            ("What is 3+5?", ["3+5=8", "So the answer is \\boxed{8}."]),
            ("What is 3+5?", ["3 plus 5 is 9", "check: no, it is 8", "The answer is \\boxed{8}."]),
            ("A train goes 60 km in 1.5 h. Speed?", ["60/1.5 = 40", "\\boxed{40} km/h"]),
            ("What is 3+5?", ["8"]),
            ("A train goes 60 km in 1.5 h. Speed?", ["Speed is distance over time.", "40 km/h"]),
            ("What is 3+5?", ["3+5=8", "So the answer is \\boxed{8}."]),
            ("How many divisors does 36 have?", ["1,2,3,4,6,9,12,18,36", "nine"]),
        ]
    ):
        tag = "<extra_0>"
        msgs = (
            Message("system", SYSTEM),
            Message("user", q),
            Message("assistant", tag.join(steps) + tag + ("" if k % 2 else " ")),
        )
        out.append(StepQuery(step_tag=tag, steps=len(steps), messages=msgs))
    return out


def _load(path: str, task: hf_compute.Task, share: bool) -> hf_compute.Loaded:
    return hf_compute.load(path, task, device="cpu", share_prefix=share)


def _close(a: list[list[float] | Exception], b: list[list[float] | Exception]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert isinstance(x, list) and isinstance(y, list)
        assert x == pytest.approx(y, abs=1e-5)


def test_qwen_prm_shared_prefix_equals_plain(qwen_prm_path: str) -> None:
    shared, plain = (
        _load(qwen_prm_path, "token_classification", True),
        _load(qwen_prm_path, "token_classification", False),
    )
    assert shared.share_prefix is True and plain.share_prefix is False and plain.causal is True
    queries = _rollouts()
    texts = [
        hf_compute.render(shared.tokenizer, q.messages or (), generation_prompt=False, keep="<extra_0>")
        for q in queries
    ]
    seqs = [shared.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    tag = shared.tokenizer.convert_tokens_to_ids("<extra_0>")
    plan = passes.plan(seqs, [s.index(tag) for s in seqs])
    assert plan is not None and max(len(g.members) for g in plan.groups) >= 3  # the shared path runs
    with hf_compute.inference():
        _close(hf_compute.step_probs(shared, queries), hf_compute.step_probs(plain, queries))
        # a causal model's plain pass drops the padding mask: the same outputs at every real position
        pad = shared.tokenizer.pad_token_id
        masked = passes.run_plain(plain.model, seqs, pad_id=pad, device="cpu", causal=False)
        unmasked = passes.run_plain(plain.model, seqs, pad_id=pad, device="cpu", causal=True)
        assert len({len(s) for s in seqs}) > 1  # there is padding
        for (_, a), (_, b) in zip(masked, unmasked, strict=True):
            assert torch.allclose(a, b, atol=1e-5)
        # cut into length buckets (every pass its own width), the outputs do not change
        for overhead in (0.0, 50.0):
            for (s1, a), (s2, b) in zip(
                passes.run_shared(plain.model, plan, seqs, pad_id=pad, device="cpu", overhead=overhead),
                passes.run_shared(plain.model, plan, seqs, pad_id=pad, device="cpu"),
                strict=True,
            ):
                assert s1 == s2 and torch.allclose(a, b, atol=1e-5)
            for (_, a), (_, b) in zip(
                passes.run_plain(plain.model, seqs, pad_id=pad, device="cpu", causal=True, overhead=overhead),
                masked,
                strict=True,
            ):
                assert torch.allclose(a, b, atol=1e-5)
        # measured on this CPU; a busy machine can hide the per-token cost in one measurement (the
        # function then says inf: keep batches whole), so it gets three tries to see it
        overheads = [shared.pass_overhead] + [passes.pass_overhead(plain.model, "cpu") for _ in range(2)]
        assert any(4.0 <= o <= 4096.0 for o in overheads), overheads
        # one item, or items with nothing in common, take the plain pass and still agree
        _close(hf_compute.step_probs(shared, queries[:1]), hf_compute.step_probs(plain, queries[:1]))


def test_a_causal_model_runs_no_token_after_the_last_step_tag(qwen_prm_path: str) -> None:
    """The Qwen PRM's template ends every input with "<|im_end|>\\n" after the last step tag. A causal
    model's output at a tag does not depend on what follows it, so those tokens are no longer run (one
    item or a batch, shared prompts or not); the scores are a full masked pass's at the tags."""
    queries = _rollouts()
    for share in (True, False):
        loaded = _load(qwen_prm_path, "token_classification", share)
        assert loaded.causal is True
        tok = loaded.tokenizer
        tag = tok.convert_tokens_to_ids("<extra_0>")
        texts = [
            hf_compute.render(tok, q.messages or (), generation_prompt=False, keep="<extra_0>")
            for q in queries
        ]
        seqs = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
        last = [max(i for i, t in enumerate(s) if t == tag) for s in seqs]
        assert all(n + 1 < len(s) for n, s in zip(last, seqs, strict=True))  # the template's tail
        widths: list[int] = []  # of every pass the model runs
        hook = loaded.model.get_input_embeddings().register_forward_hook(
            lambda _m, args, _out, widths=widths: widths.append(args[0].shape[1])
        )
        try:
            with hf_compute.inference():
                one = [hf_compute.step_probs(loaded, [q])[0] for q in queries]  # one item a pass
                ran = list(widths)
                batched = hf_compute.step_probs(loaded, queries)
                full = passes.run_plain(
                    loaded.model, seqs, pad_id=tok.pad_token_id, device="cpu", causal=False
                )
        finally:
            hook.remove()
        assert ran == [n + 1 for n in last]  # each one-item pass ends at its last tag
        want = []
        for s, (_, rows) in zip(seqs, full, strict=True):
            at = rows[[i for i, t in enumerate(s) if t == tag]]
            want.append(torch.softmax(at, dim=-1)[:, 1].tolist())
        _close(one, want)
        _close(batched, want)


def test_shared_passes_use_the_cache_argument_the_model_takes(qwen_prm_path: str) -> None:
    """transformers 5.2x renamed ``past_key_values`` to ``cache``: the old name warned on every shared
    pass (in the model process's log, once per batch) and stops working in 5.40."""
    import warnings

    shared = _load(qwen_prm_path, "token_classification", True)
    tok = shared.tokenizer
    texts = [
        hf_compute.render(tok, q.messages or (), generation_prompt=False, keep="<extra_0>")
        for q in _rollouts()
    ]
    seqs = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    tag = tok.convert_tokens_to_ids("<extra_0>")
    plan = passes.plan(seqs, [s.index(tag) for s in seqs])
    assert plan is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with hf_compute.inference():
            rows = passes.run_shared(shared.model, plan, seqs, pad_id=tok.pad_token_id, device="cpu")
    assert len(rows) == len(seqs)


def test_math_shepherd_shared_prefix_equals_plain(shepherd_prm_path: str) -> None:
    shared, plain = _load(shepherd_prm_path, "generate", True), _load(shepherd_prm_path, "generate", False)
    assert shared.share_prefix is True
    question = "What is 3+5? Please think step by step and give the answer at the end. "
    queries = [
        StepQuery(
            step_tag="ки",
            steps=len(steps),
            text=question + " ".join(f"{s} ки" for s in steps),
            label_tokens=("+", "-"),
        )
        for steps in (["3+5=8", "The answer is 8"], ["3+5=9"], ["3 and 5", "make 8", "The answer is 8"])
    ]
    with hf_compute.inference():
        _close(hf_compute.step_probs(shared, queries), hf_compute.step_probs(plain, queries))


def test_orm_shared_prefix_equals_plain(orm_path: str) -> None:
    shared, plain = (
        _load(orm_path, "sequence_classification", True),
        _load(orm_path, "sequence_classification", False),
    )
    assert shared.share_prefix is True
    inputs = [
        (Message("system", SYSTEM), Message("user", "What is 3+5?"), Message("assistant", answer))
        for answer in ("8", "It is 8 because 3+5=8.", "9", "Let me think. 3+5 is 8, so \\boxed{8}.")
    ]
    with hf_compute.inference():
        _close(hf_compute.classify(shared, inputs), hf_compute.classify(plain, inputs))


@pytest.mark.parametrize("share", [True, False])
def test_orm_scores_do_not_depend_on_the_batch_when_the_config_names_its_own_pad(
    tmp_path: Path, share: bool
) -> None:
    """The classifier reads its score at the last token that is not ``config.pad_token_id``; batches
    padded with the tokenizer's (different) pad made it read short items' scores at a pad."""
    from transformers import AutoConfig

    from tiny_models import build_tiny_orm

    path = build_tiny_orm(tmp_path / "orm")
    config = AutoConfig.from_pretrained(path)
    config.pad_token_id = 11  # a real token, not the tokenizer's pad (4)
    config.save_pretrained(path)
    loaded = _load(str(path), "sequence_classification", share)
    assert loaded.tokenizer.pad_token_id != 11 and loaded.pad_id == 11
    inputs = [
        (Message("user", "What is 3+5?"), Message("assistant", answer))
        for answer in ("8", "It is 8 because 3+5=8, as one can check by counting.", "9")
    ]
    with hf_compute.inference():
        batched = hf_compute.classify(loaded, inputs)
        alone = [hf_compute.classify(loaded, [x])[0] for x in inputs]
    _close(batched, alone)


def test_bidirectional_model_fails_the_check(tmp_path: Path) -> None:
    from tiny_models import build_tiny_bert_token_classifier

    path = build_tiny_bert_token_classifier(tmp_path / "bert")
    loaded = _load(str(path), "token_classification", True)
    assert loaded.causal is False and loaded.share_prefix is False  # never split, always masked


def test_a_continuation_pass_on_a_cpu_converts_no_mask_per_layer_and_copies_no_key_value_heads(
    tmp_path: Path,
) -> None:
    """The continuation passes of shared prompts carry a mask. Given it 2-D, transformers built a boolean
    4-D mask that torch's CPU attention turned into an additive one in every layer (``aten::where``), and
    it copied each key/value head once per query head it serves before every attention call
    (``repeat_kv``: grouped-query models keep fewer key/value heads, 2 for 4 here, 4 for 28 in
    Qwen2.5-Math-PRM-7B). Together ~17% of a batch of the PRM benchmark (BENCHMARKS.md §5). The mask
    is now built once per pass in the kernel's additive form, and the kernel reads the grouped heads as
    they are (``enable_gqa``); the outputs are the plain pass's (the other tests here)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from tiny_models import build_tiny_qwen_prm

    layers = 6
    loaded = _load(
        str(build_tiny_qwen_prm(tmp_path / "gqa", hidden=32, layers=layers)), "token_classification", True
    )
    cfg = loaded.model.config
    assert cfg.num_key_value_heads < cfg.num_attention_heads
    prompts = [[(100 + 37 * k + j) % 1000 for j in range(30)] for k in range(2)]
    seqs = [prompts[i % 2] + [5 + i, 6 + i, 7][: 2 + i % 2] for i in range(8)]
    plan = passes.plan(seqs, [len(s) - 2 for s in seqs])
    assert plan is not None

    key_heads: list[int] = []
    masks: list[Any] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if func.overloadpacket.__name__ == "scaled_dot_product_attention":
                key_heads.append(args[1].shape[1])
                mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
                masks.append(None if mask is None else mask.dtype)
            return func(*args, **kwargs)

    with hf_compute.inference(), Record():
        passes.run_shared(loaded.model, plan, seqs, pad_id=loaded.tokenizer.pad_token_id, device="cpu")
    assert len(key_heads) == 2 * layers  # the prefill and the continuation, every layer
    assert key_heads == [cfg.num_key_value_heads] * (2 * layers)  # no head copied for the kernel
    # the prefill is causal and unmasked; the continuation's mask is additive (float), not boolean
    assert masks == [None] * layers + [torch.float32] * layers
