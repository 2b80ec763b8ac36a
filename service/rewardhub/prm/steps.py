"""Splitting a response into reasoning steps, keeping where each step is in the original text.

A PRM scores *steps*, and a person (or a trainer placing token-level rewards) needs to know which part of
the response each score belongs to, so every :class:`Step` carries its ``[start, end)`` character span in
the response as sent (after whitespace is trimmed from both ends of the step).

* ``separator`` (default ``"\\n\\n"``, paragraphs, what Qwen2.5-Math-PRM and ProcessBench use): split on
  the literal string, drop empty pieces; a newline in it also matches a Windows ``\\r\\n`` (a response
  written with CRLF line ends has no ``"\\n\\n"`` in it and would be one step);
* ``pattern``: split on the matches of a regular expression (e.g. ``"\\n(?=Step \\d+:)"``), empty
  matches included as in ``re.split`` (``"(?=Step \\d+:)"`` splits before each label); run with the
  ``regex`` package's per-call timeout, since patterns come from callers. ``.`` does not match a newline
  (no DOTALL, as in ``re.split``): a separator pattern like ``"\\n---.*\\n"`` would otherwise run to the
  last such line and swallow the steps between; write ``(?s)`` to have it cross lines;
* a piece that is empty once trimmed, or once ``blank`` says nothing of it reaches the model (only step
  tags or control tokens), is no step, as an empty piece between two separators is none;
* a ``<think>...</think>`` block is skipped by default: the PRMs above were trained on short worked
  solutions, and a long chain of thought has hundreds of paragraphs past their context. Only the text
  after the last ``</think>`` is split (spans still index the full response), up to a ``<think>`` that
  never closes (:func:`~rewardhub.rewards.text.answer_span`, as the judges read a response): a rollout
  cut off inside its reasoning wrote no solution, and has no steps;
* more than ``max_steps`` steps are merged into ``max_steps`` groups of adjacent steps (each group's
  span covers its members), so the final answer keeps its own score position and the input fits;
* ``filler`` marks a step that says nothing (``Step.filler``: "Let me think.", "I hope it is correct."):
  it stays a step, so the model reads the response as written and step indices stay the solution's
  paragraphs (ProcessBench labels count them), and the caller leaves it out of what it aggregates. A
  merged group is filler when all its members are.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from rewardhub.rewards.patterns import PatternTimeout, compile_pattern
from rewardhub.rewards.text import answer_span

__all__ = ["Step", "merge_steps", "split_steps"]


@dataclass(frozen=True, slots=True)
class Step:
    text: str
    start: int
    end: int
    members: int = 1  # the steps merged into this one (max_steps), 1 for a step as split
    filler: bool = False  # says nothing ("Let me think."): scored in context, not aggregated


def _trimmed(
    text: str,
    start: int,
    end: int,
    blank: Callable[[str], bool] | None,
    filler: Callable[[str], bool] | None = None,
) -> Step | None:
    piece = text[start:end]
    stripped = piece.strip()
    if not stripped or (blank is not None and blank(stripped)):
        return None
    lead = len(piece) - len(piece.lstrip())
    s = start + lead
    return Step(stripped, s, s + len(stripped), filler=filler is not None and filler(stripped))


def split_steps(
    text: str,
    *,
    separator: str = "\n\n",
    pattern: str | None = None,
    skip_think: bool = True,
    max_steps: int = 64,
    timeout_s: float = 0.5,
    blank: Callable[[str], bool] | None = None,
    filler: Callable[[str], bool] | None = None,
) -> list[Step]:
    """The steps of ``text`` (see the module docstring).

    Raises:
        PatternTimeout: ``pattern`` ran past ``timeout_s``.
    """
    base, stop = answer_span(text) if skip_think else (0, len(text))
    bounds: list[tuple[int, int]] = []
    if pattern is not None:
        rx = compile_pattern(pattern, dotall=False)
        pos = base
        try:
            for m in rx.finditer(text, base, stop, timeout=timeout_s):
                # An empty match splits too, as in re.split: a lookahead pattern such as
                # "(?=Step \\d+:)" matches only empty strings, and skipping them left one step.
                bounds.append((pos, m.start()))
                pos = m.end()
        except TimeoutError:
            raise PatternTimeout(f"step pattern {pattern[:80]!r} ran past {timeout_s}s") from None
        bounds.append((pos, stop))
    elif separator and "\n" in separator and "\r\n" in text:
        crlf = re.compile("".join(r"\r?\n" if c == "\n" else re.escape(c) for c in separator))
        pos = base
        for hit in crlf.finditer(text, base, stop):
            bounds.append((pos, hit.start()))
            pos = hit.end()
        bounds.append((pos, stop))
    else:
        pos = base
        while True:
            k = text.find(separator, pos, stop) if separator else -1
            if k < 0:
                bounds.append((pos, stop))
                break
            bounds.append((pos, k))
            pos = k + len(separator)
    steps = [s for s in (_trimmed(text, a, b, blank, filler) for a, b in bounds) if s is not None]
    return merge_steps(text, steps, max_steps)


def merge_steps(text: str, steps: list[Step], max_steps: int) -> list[Step]:
    """At most ``max_steps`` steps: adjacent steps merged into nearly equal groups, order kept."""
    n = len(steps)
    if n <= max_steps:
        return steps
    merged: list[Step] = []
    for g in range(max_steps):
        lo, hi = g * n // max_steps, (g + 1) * n // max_steps
        first, last = steps[lo], steps[hi - 1]
        filler = all(s.filler for s in steps[lo:hi])
        merged.append(Step(text[first.start : last.end], first.start, last.end, hi - lo, filler))
    return merged
