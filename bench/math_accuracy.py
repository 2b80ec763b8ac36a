"""Accuracy of rewardhub.mathlib against plain math-verify on two labelled benchmarks.

HardVerify-Math (TinyV): each item has a gold answer, a correct answer written in a hard form
(``fn_output``) and a wrong answer (``tn_output``).  We want many fn accepted and almost no tn.
qwen_math_cot_100 (Qwen2.5-Math): 100 problems x 8 sampled solutions with the Qwen grader's
verdicts; we want to agree with it.

Usage: python bench/math_accuracy.py [--data-dir ../shared/benchmarks] [--verbose]

Everything runs in-process.  Each comparison runs under a SIGALRM timer so a pathological pair
cannot hang the script; timeouts are counted separately (and as "not accepted").
The last line printed is a JSON object with all numbers.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "service"))

from rewardhub.mathlib import check, extract_answer, quick_check, read_gold  # noqa: E402

logging.disable(logging.CRITICAL)


class Timeout(BaseException):
    """Raised by the SIGALRM handler; a BaseException, like the service's soft timeout."""


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise Timeout


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def ours(gold: str, response: str) -> bool:
    extracted = extract_answer(response)
    ref = read_gold(gold)
    if extracted is None or ref is None:
        return False
    verdict = quick_check(ref, extracted.text) or check(ref, extracted.text)
    return verdict.equivalent


def plain_math_verify(gold: str, response: str) -> bool:
    """Math-Verify with default configs; the gold parsed both boxed and as-is (either may verify)."""
    from math_verify import parse, verify

    p = parse(response, parsing_timeout=None)
    for wrapped in ("$\\boxed{" + gold + "}$", gold):
        if verify(parse(wrapped, parsing_timeout=None), p, timeout_seconds=None):
            return True
    return False


def run(fn: Callable[[str, str], bool], gold: str, response: str, timeout_s: int) -> bool | None:
    """Verdict, or None on timeout."""
    try:
        with deadline(timeout_s):
            return fn(gold, response)
    except Timeout:
        return None


def hardverify(
    data_dir: Path, fn: Callable[[str, str], bool], timeout_s: int, verbose: bool
) -> dict[str, int | float]:
    items = json.loads((data_dir / "HardVerify-Math.json").read_text())
    fn_ok = tn_ok = timeouts = 0
    start = time.perf_counter()
    for idx, item in enumerate(items):
        gold = item["ground_truth"]
        for kind in ("fn_output", "tn_output"):
            response = "The answer is $\\boxed{" + item[kind] + "}$"
            verdict = run(fn, gold, response, timeout_s)
            if verdict is None:
                timeouts += 1
            elif verdict and kind == "fn_output":
                fn_ok += 1
            elif verdict:
                tn_ok += 1
            if verbose and ((kind == "fn_output") != bool(verdict)):
                print(f"  hv[{idx}] {kind} verdict={verdict} gold={gold!r} answer={item[kind]!r}")
    return {
        "fn_accepted": fn_ok,
        "tn_accepted": tn_ok,
        "n": len(items),
        "timeouts": timeouts,
        "seconds": round(time.perf_counter() - start, 2),
    }


def qwen(
    data_dir: Path, fn: Callable[[str, str], bool], timeout_s: int, verbose: bool
) -> dict[str, int | float]:
    rows = [json.loads(line) for line in (data_dir / "qwen_math_cot_100.jsonl").open()]
    conf = {"tt": 0, "tf": 0, "ft": 0, "ff": 0}  # first letter: Qwen's label, second: ours
    timeouts = 0
    start = time.perf_counter()
    for row in rows:
        for code, label in zip(row["code"], row["score"], strict=True):
            verdict = run(fn, row["gt"], code, timeout_s)
            if verdict is None:
                timeouts += 1
                verdict = False
            conf[("t" if label else "f") + ("t" if verdict else "f")] += 1
            if verbose and bool(label) != verdict:
                ext = extract_answer(code)
                print(f"  qwen idx={row['idx']} label={label} ours={verdict} gt={row['gt']!r} pred={ext}")
    return {
        "agree": conf["tt"] + conf["ff"],
        "n": sum(conf.values()),
        **conf,
        "timeouts": timeouts,
        "seconds": round(time.perf_counter() - start, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "benchmarks")
    parser.add_argument("--timeout", type=int, default=10, help="seconds per comparison")
    parser.add_argument("--verbose", action="store_true", help="print every disagreement")
    parser.add_argument("--only-ours", action="store_true", help="skip the math-verify baseline")
    args = parser.parse_args()

    systems: dict[str, Callable[[str, str], bool]] = {"ours": ours}
    if not args.only_ours:
        systems["math_verify"] = plain_math_verify
    results: dict[str, dict[str, dict[str, int | float]]] = {}
    for name, fn in systems.items():
        if args.verbose:
            print(f"[{name}]")
        results[name] = {
            "hardverify": hardverify(args.data_dir, fn, args.timeout, args.verbose),
            "qwen": qwen(args.data_dir, fn, args.timeout, args.verbose),
        }

    header = f"{'':28}" + "".join(f"{name:>16}" for name in results)
    print(header)
    rows: list[tuple[str, Callable[[dict[str, dict[str, int | float]]], str]]] = [
        ("HardVerify fn accepted", lambda r: f"{r['hardverify']['fn_accepted']}/{r['hardverify']['n']}"),
        ("HardVerify tn accepted", lambda r: f"{r['hardverify']['tn_accepted']}/{r['hardverify']['n']}"),
        ("HardVerify timeouts", lambda r: f"{r['hardverify']['timeouts']}"),
        ("HardVerify wall s", lambda r: f"{r['hardverify']['seconds']}"),
        ("Qwen agreement", lambda r: f"{r['qwen']['agree']}/{r['qwen']['n']}"),
        ("  Qwen T / ours T", lambda r: f"{r['qwen']['tt']}"),
        ("  Qwen T / ours F", lambda r: f"{r['qwen']['tf']}"),
        ("  Qwen F / ours T", lambda r: f"{r['qwen']['ft']}"),
        ("  Qwen F / ours F", lambda r: f"{r['qwen']['ff']}"),
        ("Qwen timeouts", lambda r: f"{r['qwen']['timeouts']}"),
        ("Qwen wall s", lambda r: f"{r['qwen']['seconds']}"),
    ]
    for label, cell in rows:
        print(f"{label:28}" + "".join(f"{cell(r):>16}" for r in results.values()))
    print(json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main()
