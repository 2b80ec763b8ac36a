"""Numerical edge cases of the in-process model computations (hf_compute), on tiny random models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from rewardhub.models import hf_compute  # noqa: E402
from tiny_models import build_tiny_bert_token_classifier  # noqa: E402


def test_an_embedding_does_not_depend_on_its_batch_when_the_tokenizer_pads_left(tmp_path: Path) -> None:
    """A tokenizer configured to pad on the left shifted a short text's positions by its batch's
    longest text: an absolute-position encoder gave it another vector in every batch (cosines ~0.2
    apart on this model), so a similarity score depended on the request it came in."""
    path = build_tiny_bert_token_classifier(tmp_path / "emb")
    config = json.loads((path / "tokenizer_config.json").read_text())
    (path / "tokenizer_config.json").write_text(json.dumps({**config, "padding_side": "left"}))
    loaded = hf_compute.load(str(path), "embedding", device="cpu", dtype="float32")
    assert loaded.tokenizer.padding_side == "left"
    texts = ["A cat.", "The cat sits on the mat and looks at the dog for a long while.", "x"]
    with hf_compute.inference():
        together = hf_compute.embed(loaded, texts)
        alone = [hf_compute.embed(loaded, [t])[0] for t in texts]
    for a, b in zip(together, alone, strict=True):
        assert not isinstance(a, Exception) and not isinstance(b, Exception)
        assert a.vector == pytest.approx(b.vector, abs=1e-5)


def test_an_infinite_step_logit_is_an_item_error_not_a_certain_step(tmp_path: Path) -> None:
    """A PRM logit that overflowed to -inf (fp16/bf16, a broken checkpoint) went through the softmax as
    a finite 0.0 or 1.0: every step a valid, certain verdict. The logits read are checked instead; the
    other items of the batch are scored as usual."""
    from transformers import AutoModelForTokenClassification

    from rewardhub.models.errors import BackendError
    from rewardhub.prm import CONVENTIONS
    from tiny_models import build_tiny_qwen_prm

    good = build_tiny_qwen_prm(tmp_path / "good")
    queries = [CONVENTIONS["qwen"].query("What is 2+3?", ["2+3=5.", "So the answer is 5."])]
    with hf_compute.inference():
        (expected,) = hf_compute.step_probs(hf_compute.load(str(good), "token_classification"), queries)
    assert not isinstance(expected, BackendError) and all(0.0 < p < 1.0 for p in expected)

    broken = build_tiny_qwen_prm(tmp_path / "broken")
    model = AutoModelForTokenClassification.from_pretrained(broken)
    with torch.no_grad():
        model.score.bias[0] = float("-inf")  # the negative class: the positive's softmax is exactly 1
    model.save_pretrained(broken)
    loaded = hf_compute.load(str(broken), "token_classification", device="cpu", dtype="float32")
    with hf_compute.inference():
        (res,) = hf_compute.step_probs(loaded, queries)
    assert isinstance(res, BackendError) and "non-finite" in str(res), res


def test_a_long_text_is_embedded_from_its_start_whatever_the_tokenizer_truncates(tmp_path: Path) -> None:
    """A checkpoint whose tokenizer truncates on the left embedded the *end* of a text past the context,
    where the docs (and sentence-transformers) embed its start."""
    path = build_tiny_bert_token_classifier(tmp_path / "emb")
    right = hf_compute.load(str(path), "embedding", device="cpu", dtype="float32", max_length=16)
    config = json.loads((path / "tokenizer_config.json").read_text())
    (path / "tokenizer_config.json").write_text(json.dumps({**config, "truncation_side": "left"}))
    left = hf_compute.load(str(path), "embedding", device="cpu", dtype="float32", max_length=16)
    text = " ".join(f"w{k}" for k in range(40))
    head, tail = "w0 w1 w2 w3", "w36 w37 w38 w39"
    with hf_compute.inference():
        (want,), (got,) = hf_compute.embed(right, [text]), hf_compute.embed(left, [text])
        (h,), (t,) = hf_compute.embed(left, [head]), hf_compute.embed(left, [tail])
    for e in (want, got, h, t):
        assert not isinstance(e, Exception)
    assert got.truncated and got.vector == pytest.approx(want.vector, abs=1e-6)
    # and it is the start that was kept: closer to the text's first words than to its last
    cos = lambda a, b: sum(x * y for x, y in zip(a.vector, b.vector, strict=True))  # noqa: E731
    assert cos(got, h) > cos(got, t)


def test_a_non_finite_implicit_prm_item_fails_alone_in_its_batch(tmp_path: Path) -> None:
    """Implicit-PRM log-likelihoods of a whole batch come back in one transfer; an item whose logits are
    not finite (here: a token whose embedding is NaN, which only that item's response contains) must
    still fail alone, named as non-finite, while its batch-mates keep their single-pass values."""
    from transformers import AutoModelForCausalLM

    from rewardhub.models.errors import BackendError
    from rewardhub.prm import CONVENTIONS
    from rewardhub.prm.steps import split_steps
    from rewardhub.rewards.prm import _as_written
    from tiny_models import build_tiny_causal_lm

    items = [
        ("What is 2+3?", "2 + 3 = 5.\n\nSo the answer is 5."),
        ("Name a colour.", "Zebras quickly jump.\n\nPurple."),
        ("What is 4*4?", "4 * 4 = 16.\n\nSo 16."),
    ]
    queries = [CONVENTIONS["implicit"].query(q, _as_written(r, split_steps(r))) for q, r in items]
    path = build_tiny_causal_lm(tmp_path / "lm")
    loaded = hf_compute.load(str(path), "generate", device="cpu", dtype="float32")
    with hf_compute.inference():
        alone = [hf_compute.step_probs(loaded, [q])[0] for q in queries]
    tok = loaded.tokenizer
    others = set(tok.encode(items[0][1] + items[2][1] + "".join(q for q, _ in items)))
    poison = next(t for t in tok.encode(items[1][1]) if t not in others)

    model = AutoModelForCausalLM.from_pretrained(path)
    with torch.no_grad():  # untied first: a NaN row of a tied output layer would poison every logit
        model.config.tie_word_embeddings = False
        model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.clone())
        model.get_input_embeddings().weight[poison] = float("nan")
    model.save_pretrained(path)
    broken = hf_compute.load(str(path), "generate", device="cpu", dtype="float32", share_prefix=False)
    with hf_compute.inference():
        together = hf_compute.step_probs(broken, queries)
    assert isinstance(together[1], BackendError) and "non-finite" in str(together[1]), together[1]
    for i in (0, 2):
        assert isinstance(together[i], list) and together[i] == pytest.approx(alone[i], abs=1e-4)
