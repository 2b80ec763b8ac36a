"""Benchmark: a solution that builds its answer of new nodes (``ListNode(x)``) through the `code` reward.

LeetCode's solutions make the nodes of the answer with the tests' class they never define (``dummy =
ListNode(0)``): in the sandbox the tests' objects live in the judge's process, so how much a node made
in the solution's process costs decides whether a 20,000-node answer fits the time limit. Two tasks,
each on 20,000-node lists built by the tests: LeetCode 2 (add two numbers given as lists of digits, the
answer a new list) and copying a list. The solution times its own work (CPU seconds, and its voluntary
context switches: one per round trip to the judge) and the tests report it in a test's failure
(``int('COST [...]')``'s ValueError: an exception's message is the only channel out of a run); the
other test checks the answer, so the numbers are of correct runs.

Service: `rewardhub serve` in its own process, one request per task and repetition.

    python bench/code_node_building.py [--repeat 5] [--n 20000]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from typing import Any

import httpx

from _server import server

TESTS = (
    "class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val = val\n        self.next = next\n"
    "def build(xs):\n    head = None\n    for x in reversed(xs):\n        head = ListNode(x, head)\n    return head\n"
    "def to_list(node):\n    out = []\n    while node:\n        out.append(node.val)\n        node = node.next\n"
    "    return out\n"
    "N = {n}\n"
    "a, b = [9] * N, [1] + [0] * (N - 1)\n"
    "got = to_list({call})\n"
    "def test_answer():\n    assert got == {expected}\n"
    "def test_cost():\n    assert int('COST ' + repr(Solution.cost))\n"
)

SOLUTION = (
    "import resource, time\n"
    "def _now():\n    return time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw\n"
    "class Solution:\n    cost = None\n"
    "    def addTwoNumbers(self, l1, l2):\n        t, w = _now()\n"
    "        dummy = tail = ListNode(0)\n        carry = 0\n"
    "        while l1 or l2 or carry:\n"
    "            s = carry + (l1.val if l1 else 0) + (l2.val if l2 else 0)\n"
    "            carry, digit = divmod(s, 10)\n            tail.next = ListNode(digit)\n            tail = tail.next\n"
    "            l1 = l1.next if l1 else None\n            l2 = l2.next if l2 else None\n"
    "        t2, w2 = _now()\n        Solution.cost = [round(t2 - t, 3), w2 - w]\n        return dummy.next\n"
    "    def copyList(self, head):\n        t, w = _now()\n"
    "        dummy = tail = ListNode(0)\n        while head:\n"
    "            tail.next = ListNode(head.val)\n            tail = tail.next\n            head = head.next\n"
    "        t2, w2 = _now()\n        Solution.cost = [round(t2 - t, 3), w2 - w]\n        return dummy.next\n"
)

TASKS = {
    "add two numbers": ("Solution().addTwoNumbers(build(a), build(b))", "[0] * N + [1]"),
    "copy a list": ("Solution().copyList(build(a))", "a"),
}


def one(c: httpx.Client, n: int, call: str, expected: str) -> tuple[float, float, int]:
    """(request wall seconds, the solution's CPU seconds, its voluntary context switches) of one run."""
    tests = TESTS.format(n=n, call=call, expected=expected)
    item = {"response": f"```python\n{SOLUTION}```", "reference": {"tests": tests}}
    config = {"timeout_s": 60, "total_timeout_s": 180}
    body = {"reward": {"name": "code", "config": config}, "items": [item], "options": {"use_cache": False}}
    t0 = time.perf_counter()
    r = c.post("/v1/score", json=body)
    wall = time.perf_counter() - t0
    r.raise_for_status()
    result: dict[str, Any] = r.json()["results"][0]
    text = json.dumps(result)
    if result["details"].get("pass_mask") != "10":
        raise RuntimeError(f"wrong answer or no cost: {text[:2000]}")
    found = re.search(r"COST \[([0-9.]+), ([0-9]+)\]", text)
    if found is None:
        raise RuntimeError(f"no cost reported: {text[:2000]}")
    return wall, float(found.group(1)), int(found.group(2))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--n", type=int, default=20_000)
    args = ap.parse_args()
    with server() as url, httpx.Client(base_url=url, timeout=600) as c:
        for name, (call, expected) in TASKS.items():
            runs = [one(c, args.n, call, expected) for _ in range(args.repeat)]
            wall, cpu, waits = (statistics.median(r[k] for r in runs) for k in range(3))
            print(
                f"{name} ({args.n:,} nodes, median of {args.repeat}): request {wall:.2f} s, "
                f"solution CPU {cpu:.3f} s, round trips (voluntary context switches) {waits:,.0f}"
            )


if __name__ == "__main__":
    main()
