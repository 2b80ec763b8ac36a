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
