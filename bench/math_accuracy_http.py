"""Benchmark 3 through the service: HardVerify-Math and Qwen agreement scored by `math` over HTTP.

The same protocol as bench/math_accuracy.py (response = "The answer is $\\boxed{...}$", gold =
ground_truth), but every item goes through a real `rewardhub serve` process: extraction, the event-loop
fast path, the worker pool with its deadline. The numbers must match the in-process run.

    python bench/math_accuracy_http.py
"""

from __future__ import annotations

import json
import time

import httpx

from _server import DATA, machine, server


def main() -> None:
    hv = json.loads((DATA / "HardVerify-Math.json").read_text())
    items = []
    for kind in ("fn_output", "tn_output"):
        for r in hv:
            items.append(
                {
                    "id": f"{kind}:{r['id']}",
                    "response": f"The answer is $\\boxed{{{r[kind]}}}$",
                    "reference": r["ground_truth"],
                }
            )
    qwen = []
    with open(DATA / "qwen_math_cot_100.jsonl") as f:
        for line in f:
            row = json.loads(line)
            for k, text in enumerate(row["code"]):
                qwen.append(
                    (row["score"][k], {"id": f"q{len(qwen)}", "response": text, "reference": row["gt"]})
                )
    with server() as url, httpx.Client(base_url=url, timeout=600) as c:
        t0 = time.perf_counter()
        res = c.post(
            "/v1/score", json={"reward": "math", "items": items, "options": {"timeout_s": 10}}
        ).json()["results"]
        hv_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        qres = c.post("/v1/score", json={"reward": "math", "items": [q[1] for q in qwen]}).json()["results"]
        q_s = time.perf_counter() - t0
    fn = [r for r in res if r["id"].startswith("fn_output")]
    tn = [r for r in res if r["id"].startswith("tn_output")]
    agree = sum(1 for (label, _), r in zip(qwen, qres, strict=True) if (r["score"] == 1.0) == bool(label))
    out = {
        "machine": machine(),
        "hardverify_fn_accepted": sum(r["score"] == 1.0 for r in fn),
        "hardverify_tn_accepted": sum(r["score"] == 1.0 for r in tn),
        "hardverify_invalid": sum(not r["valid"] for r in res),
        "hardverify_seconds": round(hv_s, 2),
        "qwen_agreement": f"{agree}/{len(qwen)}",
        "qwen_invalid": sum(not r["valid"] for r in qres),
        "qwen_seconds": round(q_s, 2),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
