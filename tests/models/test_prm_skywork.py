"""The `skywork` PRM convention (Skywork-o1-Open-PRM, algorithms.md §1.5): a value head on a causal LM,
read at the newline token after each separately tokenized step, through the real app and loading code."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import pytest

MakeApp = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]

QUESTION = "What is (2 + 3) * 4?"
# lines are Skywork's steps; "5." then a newline would be one token if the text were tokenized whole
SOLUTION = "First, 2 + 3 = 5.\nThen 5 * 4 = 20.\nSo the answer is \\boxed{20}."


async def prm(client: httpx.AsyncClient, items: list[dict[str, Any]], **config: Any) -> list[dict[str, Any]]:
    r = await client.post("/v1/score", json={"reward": {"name": "prm", "config": config}, "items": items})
    assert r.status_code == 200, r.text
    out: list[dict[str, Any]] = r.json()["results"]
    return out


def skywork_reference(path: str, question: str, steps: list[str]) -> list[float]:
    """Skywork's own recipe, written out independently of the service: the checkpoint loaded as the
    causal LM it declares, the value head read from its safetensors, the input built piece by piece
    (BOS + question + newline; each step's tokens + the newline token), sigmoid(v_head(h[-1])) at the
    newlines after the steps."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    weights = load_file(f"{path}/model.safetensors")
    w, b = weights["v_head.summary.weight"], weights["v_head.summary.bias"]
    newline = tok.encode("\n", add_special_tokens=False)[-1]
    ids = tok.encode(tok.bos_token + question + "\n", add_special_tokens=False)
    flags = []
    for step in steps:
        ids += tok.encode(step, add_special_tokens=False) + [newline]
        flags.append(len(ids) - 1)
    with torch.inference_mode():
        hidden = model(torch.tensor([ids]), output_hidden_states=True).hidden_states[-1][0]
        values = hidden @ w.T + b
    return [float(torch.sigmoid(values[k, 0])) for k in flags]


async def test_step_scores_are_skywork_s_recipe(make_app: MakeApp, skywork_prm_path: str) -> None:
    async with make_app(prm_model=skywork_prm_path, prm_convention="skywork") as client:
        (r,) = await prm(client, [{"prompt": QUESTION, "response": SOLUTION}])
        ready = (await client.get("/ready")).json()["checks"]["model:prm"]
    assert r["valid"], r
    steps = r["details"]["steps"]
    # a newline separates steps by default for this convention
    assert [SOLUTION[s["start"] : s["end"]] for s in steps] == SOLUTION.split("\n")
    expected = skywork_reference(skywork_prm_path, QUESTION, SOLUTION.split("\n"))
    assert [s["score"] for s in steps] == pytest.approx(expected, abs=1e-5)
    assert r["score"] == pytest.approx(min(expected), abs=1e-5)
    assert r["reward_version"].endswith("+skywork")
    assert ready["task"] == "value_head" and ready["ok"]


async def test_batched_and_shared_prompt_passes_equal_one_item_passes(
    make_app: MakeApp, skywork_prm_path: str
) -> None:
    """A group's rollouts share the question's tokens: the batch runs them once (passes.run_shared)
    through the value-head wrapper; every score must equal the item's own pass."""
    items = [
        {"prompt": QUESTION, "response": SOLUTION},
        {"prompt": QUESTION, "response": "2 + 3 = 6.\nSo \\boxed{24}."},
        {"prompt": QUESTION, "response": "Multiply first: 3 * 4 = 12.\n2 + 12 = 14.\n\\boxed{14}"},
        {"prompt": "Another question entirely?", "response": "One line.\nTwo lines."},
    ]
    async with make_app(prm_model=skywork_prm_path, prm_convention="skywork") as client:
        together = await prm(client, items)
        alone = [(await prm(client, [it]))[0] for it in items]
        ready = (await client.get("/ready")).json()["checks"]["model:prm"]
    assert ready["share_prefix"] is True  # the load-time probe passed the wrapper
    for a, b, item in zip(together, alone, items, strict=True):
        scores = [s["score"] for s in a["details"]["steps"]]
        assert scores == pytest.approx([s["score"] for s in b["details"]["steps"]], abs=1e-5)
        reference = skywork_reference(skywork_prm_path, item["prompt"], item["response"].split("\n"))
        assert scores == pytest.approx(reference, abs=1e-5)


async def test_conventions_and_heads_that_do_not_match_fail_per_item(
    make_app: MakeApp, skywork_prm_path: str, qwen_prm_path: str, tiny_dir: Any
) -> None:
    item = {"prompt": QUESTION, "response": SOLUTION}
    async with make_app(prm_model=skywork_prm_path, prm_convention="skywork") as client:
        (qwen,) = await prm(client, [item], convention="qwen")
    assert (qwen["valid"], qwen["reason"]) == (False, "unsupported") and "skywork" in qwen["details"][
        "message"
    ]
    async with make_app(prm_model=qwen_prm_path) as client:
        (sky,) = await prm(client, [item], convention="skywork")
    assert (sky["valid"], sky["reason"]) == (False, "unsupported") and "value head" in sky["details"][
        "message"
    ]
    # a causal LM without a value head is refused when the service starts, naming the setting, not
    # scored with a random head
    from rewardhub.models.errors import BackendUnavailable
    from tiny_models import build_tiny_causal_lm

    plain = build_tiny_causal_lm(tiny_dir / "no-value-head")
    with pytest.raises(BackendUnavailable, match=r"v_head\.summary.*REWARDHUB_PRM_MODEL"):
        async with make_app(prm_model=str(plain), prm_convention="skywork"):
            pass


def test_the_skywork_convention_keeps_the_text_and_builds_pieces() -> None:
    from rewardhub.prm import CONVENTIONS

    conv = CONVENTIONS["skywork"]
    q = conv.query("Is 1 + 1 = 2?\nYes.", ["1 + 1 = 2", "So yes <extra_0> ки"])
    assert q.pieces == ("Is 1 + 1 = 2?\nYes.\n", "1 + 1 = 2", "So yes <extra_0> ки") and q.value_head
    assert q.messages is None and q.text is None and q.steps == 2


def test_a_pieced_query_counts_its_length_for_the_batcher() -> None:
    """The batcher sorts by and budgets tokens with a length estimate; a pieced query counted as 8
    tokens whatever its size, so a batch of long Skywork inputs could pass the token budget many times."""
    from rewardhub.models.base import StepQuery
    from rewardhub.models.transformers_backend import _step_len

    long = StepQuery(step_tag="\n", steps=2, pieces=("q" * 400, "s" * 400, "t" * 400), value_head=True)
    text = StepQuery(step_tag="\n", steps=2, text="x" * 1200)
    assert _step_len(long) >= _step_len(text) > 100


def test_a_skywork_prm_named_by_hub_id_loads_its_head_from_the_cache(
    skywork_prm_path: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local model may be named by hub id (loaded offline from the Hugging Face cache, as every other
    task loads it); the value head was looked for in a directory named "acme/sky" under the working
    directory, so a cached Skywork PRM was refused at start as having no v_head. Found in review."""
    import shutil

    import huggingface_hub.constants

    from rewardhub.models import hf_compute
    from rewardhub.prm import CONVENTIONS

    repo = tmp_path / "models--acme--sky"
    shutil.copytree(skywork_prm_path, repo / "snapshots" / ("c" * 40))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("c" * 40)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    query = CONVENTIONS["skywork"].query(QUESTION, SOLUTION.split("\n"))
    loaded = hf_compute.load("acme/sky", "value_head", device="cpu")
    assert hf_compute.step_probs(loaded, [query]) == [
        pytest.approx(skywork_reference(skywork_prm_path, QUESTION, SOLUTION.split("\n")), abs=1e-5)
    ]


async def test_indented_lines_reach_the_model_as_written(make_app: MakeApp, skywork_prm_path: str) -> None:
    """Skywork's recipe tokenizes each line of ``response.split("\\n")`` as it is; the split trims its
    steps, and an indented line ("    2 + 3 = 5") was scored as "2 + 3 = 5", another input with another
    score. The spans stay trimmed. Found in review."""
    response = "Compute it:\n    2 + 3 = 5\n\t5 * 4 = 20  \nSo \\boxed{20}."
    lines = response.split("\n")
    async with make_app(prm_model=skywork_prm_path, prm_convention="skywork") as client:
        (r,) = await prm(client, [{"prompt": QUESTION, "response": response}])
    assert r["valid"], r
    steps = r["details"]["steps"]
    assert [response[s["start"] : s["end"]] for s in steps] == [line.strip() for line in lines]
    expected = skywork_reference(skywork_prm_path, QUESTION, lines)
    assert [s["score"] for s in steps] == pytest.approx(expected, abs=1e-5)
