"""A model whose outputs overflow (NaN or infinity: fp16/bf16 overflow, a broken checkpoint) gives item
errors, never scores. Read on, a NaN step probability passed every first_error threshold check (a valid
1.0), and an infinite ORM logit was a sigmoid's valid 1.0.

The models are the tiny random ones, saved with the embedding rows of a marker word's tokens set to
infinity: items containing the marker overflow, the others score as usual."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tiny_models import build_tiny_bert_token_classifier, build_tiny_orm, build_tiny_qwen_prm

MakeApp = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]
MARKER = "zqxjv"
CLEAN = "What is 2+2? The sum 2+2=4 so it is 4. Hello world"


def poison(path: Path, auto: Any) -> str:
    """Set the marker's own token rows (none of CLEAN's) of the input embeddings to infinity."""
    import torch
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = auto.from_pretrained(path)
    ids = set(tok(MARKER, add_special_tokens=False)["input_ids"]) - set(tok(CLEAN)["input_ids"])
    assert ids
    with torch.no_grad():
        for t in ids:
            model.get_input_embeddings().weight[t] = float("inf")
    model.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def poisoned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from transformers import AutoModel, AutoModelForSequenceClassification, AutoModelForTokenClassification

    d = tmp_path_factory.mktemp("poisoned")
    return {
        "prm": poison(build_tiny_qwen_prm(d / "prm"), AutoModelForTokenClassification),
        "orm": poison(build_tiny_orm(d / "orm"), AutoModelForSequenceClassification),
        "emb": poison(build_tiny_bert_token_classifier(d / "emb"), AutoModel),
    }


async def run(
    client: httpx.AsyncClient, name: str, config: dict[str, Any], items: list[dict[str, Any]]
) -> Any:
    r = await client.post(
        "/v1/score",
        json={"reward": {"name": name, "config": config}, "items": items, "options": {"use_cache": False}},
    )
    assert r.status_code == 200, r.text
    return r.json()["results"]


def overflowed(res: dict[str, Any]) -> bool:
    return (
        res["valid"] is False
        and res["reason"] == "backend_error"
        and "non-finite" in res["details"]["message"]
    )


async def test_overflowing_outputs_are_item_errors(make_app: MakeApp, poisoned: dict[str, str]) -> None:
    settings = {
        "prm_model": poisoned["prm"],
        "orm_model": poisoned["orm"],
        "embedding_model": poisoned["emb"],
    }
    async with make_app(**settings) as client:
        for agg in ("first_error", "min"):
            good, bad = await run(
                client,
                "prm",
                {"aggregation": agg},
                [
                    {"prompt": "What is 2+2?", "response": "2+2=4\n\nso it is 4"},
                    {"prompt": "What is 2+2?", "response": f"2+2=4\n\nso {MARKER} it is 4"},
                ],
            )
            assert good["valid"] and 0.0 <= good["score"] <= 1.0
            assert overflowed(bad), bad
        good, bad = await run(
            client,
            "orm",
            {"normalize": "sigmoid"},
            [{"response": "it is 4"}, {"response": f"it is {MARKER}"}],
        )
        assert good["valid"] and overflowed(bad), bad
        good, bad = await run(
            client,
            "similarity",
            {},
            [{"response": "it is 4", "reference": "4"}, {"response": f"it is {MARKER}", "reference": "4"}],
        )
        assert good["valid"] and overflowed(bad), bad
