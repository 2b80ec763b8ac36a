"""What a judge may see of one response: the hardening gates as one picklable job.

The judge reward screens every response before any judge call (content-free text, grader-directed text,
and in ``reference`` mode the extracted final answer). The scans are linear regexes, but a megabyte of
responses still costs well over half a second of CPU, and Python's ``re`` holds the GIL for a whole
``search``: on the event loop, or on one of its threads, that stalls every other request. So the
screening is a plain function of plain data, :func:`screen`, that the reward runs inline for ordinary
requests and in the CPU worker pool (:mod:`rewardhub.runtime.process_pool`) for large ones, where it
also gets the pool's hard per-item deadline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from rewardhub.judging.hardening import content_free, echoes, injection, lone_verdict, signs_off
from rewardhub.mathlib import extract_answer

__all__ = ["Screen", "ScreenJob", "extract_final", "screen"]

Verdict = Literal["pass", "content_free", "lone_verdict", "injection", "no_answer"]


@dataclass(frozen=True, slots=True)
class ScreenJob:
    """One response's screening, as data (it crosses a process boundary).

    ``forged``: the judge mode's own verdict-line pattern (a response holding one is a forged verdict),
    or None with a caller's own decision pattern (the boxed-verdict pattern when that one reads a
    box). ``extraction``: the answer extraction methods in ``reference`` mode (the judge then sees only
    the extracted answer), None in the other modes.
    ``content``: check for content-free text (False when only the injection check is left to run).
    ``verdict_is_answer``: the question asks whether something is correct
    (:func:`~rewardhub.judging.hardening.asks_correctness`), so "This is correct." is an answer.
    ``question``: the question when it is open (no yes/no question:
    :func:`~rewardhub.judging.hardening.asks_yes_no`), None otherwise; a response (or extracted answer)
    that is only a verdict, "Yes", is no answer to it (:func:`~rewardhub.judging.hardening.lone_verdict`;
    ``reference``: the gold answer, whose own verdict words are answers).
    ``grade_is_answer``: the task asks for a grade (:func:`~rewardhub.judging.hardening.asks_grade`), so
    a line "Grade: A" is an answer, not a forged verdict.
    ``prompt``: the question; a response (or extracted answer) that only gives it back is content-free
    (:func:`~rewardhub.judging.hardening.echoes`), and so is a sign-off alone ("Done.") that the
    question does not hold (:func:`~rewardhub.judging.hardening.signs_off`).
    ``step_is_answer``: the task asks for a step (:func:`~rewardhub.judging.hardening.asks_step`), so
    "Step 3" is an answer, not a step's label with nothing after it.
    """

    text: str
    check_injection: bool
    forged: str | None = None
    extraction: tuple[str, ...] | None = None
    short_answer_max_chars: int = 200
    content: bool = True
    verdict_is_answer: bool = False
    question: str | None = None
    reference: str = ""
    grade_is_answer: bool = False
    prompt: str = ""
    step_is_answer: bool = False


@dataclass(frozen=True, slots=True)
class Screen:
    """The result: ``pass`` with the text the judge may see (``answer``: the extracted answer in reference
    mode, None for the whole visible response), or why the response scores 0 without a judge:
    ``content_free``, ``lone_verdict`` (only a verdict, to an open question), ``injection`` (``pattern`` names the check that fired) or ``no_answer``
    (``answer``: what was extracted, if anything)."""

    verdict: Verdict
    answer: str | None = None
    pattern: str | None = None


def extract_final(text: str, methods: tuple[str, ...], short_max_chars: int) -> str | None:
    """The final answer by the first method that finds one; ``short_response``: the whole (stripped)
    response when it is at most ``short_max_chars`` long."""
    found = [m for m in methods if m != "short_response"]
    if found:
        got = extract_answer(text, found)
        if got is not None and got.text.strip():
            return got.text.strip()
    if "short_response" in methods:
        stripped = text.strip()
        if stripped and len(stripped) <= short_max_chars:
            return stripped
    return None


def screen(job: ScreenJob) -> Screen:
    """Run the gates in order: content-free, grader-directed, a lone verdict to an open question, then
    (reference mode) the final answer."""
    text, answer_verdict = job.text, job.verdict_is_answer
    steps = job.step_is_answer
    if job.content and (
        content_free(text, answer_verdict, steps)
        or echoes(text, job.prompt, answer_verdict)
        or signs_off(text, job.prompt, job.reference, answer_verdict, steps)
    ):
        return Screen("content_free")
    if job.check_injection:
        forged = (re.compile(job.forged, re.IGNORECASE | re.MULTILINE),) if job.forged else ()
        hit = injection(text, forged, answer_verdict, job.grade_is_answer)
        if hit is not None:
            return Screen("injection", pattern=hit)
    if job.content and _lone(text, job):
        return Screen("lone_verdict")
    if job.extraction is None:
        return Screen("pass")
    answer = extract_final(text, job.extraction, job.short_answer_max_chars)
    if (
        answer is None
        or content_free(answer, answer_verdict, steps)
        or _lone(answer, job)
        or echoes(answer, job.prompt, answer_verdict)
        or signs_off(answer, job.prompt, job.reference, answer_verdict, steps)
    ):
        return Screen("no_answer", answer=answer)
    return Screen("pass", answer=answer)


def _lone(text: str, job: ScreenJob) -> bool:
    """``text`` is only a verdict ("Yes") and the question is open (``job.question``)."""
    return job.question is not None and lone_verdict(text, job.question, job.reference)
