"""``regex``: 1 if the response matches a caller's regular expression, else 0.

Two uses: a *format* check (``mode: fullmatch`` with a pattern describing the whole allowed shape, in the
spirit of the DeepSeek-R1 format reward ``^<think>.*?</think><answer>.*?</answer>$``), and a *cheap
verifier* (``compare_group_to_reference``: the pattern's first group that took part in the match, for
a pattern of alternatives the one that matched, stripped of surrounding whitespace, must equal the
reference, e.g. ``#### (\\S+)`` for GSM8K-style answers).

The comparison is exact but for compatibility forms and invisible characters: the group and the references
are compared after :func:`.text.fold_forms` (NFKC, format characters dropped), as exact_match and f1 read
text. The pattern's ``\\d`` and ``\\w`` are Unicode (as in ``re``), so ``(\\d+)`` captures a full-width
"１２", which is the reference "12"; an ASCII flag would have made it no answer instead, and changed what a
caller's pattern matches. Letter case counts, and digits of other scripts (Arabic-Indic "١٢") are other
characters, as NFKC keeps them.

The pattern comes from the caller and runs on the event loop, so it goes through
:mod:`rewardhub.rewards.patterns` (the ``regex`` engine with a per-match timeout): a catastrophic
pattern/response pair comes back as ``timeout`` (invalid) instead of stalling the service, and so do the
items left when one call's matches have used up their shared budget (``BATCH_BUDGET_S``). ``.``
matches newlines by default (``dotall``), like the other rewards' ``extract`` patterns. The syntax is
``regex``'s version 0 (``re``'s) unless the pattern turns on version 1 with ``(?V1)`` (set operations
such as ``[[a-z]--[aeiou]]``, full case folding under ``ignorecase``); such a pattern was refused whole.

A long response is matched in a CPU worker instead (:func:`.patterns.runs_inline`: characters x
(capturing groups + 1) past ``INLINE_MATCH_UNITS``, 262,144), where the match may take 0.5 s and add
64 MB (``MATCH_MEMORY_BYTES``) to the worker: ``(.)*`` keeps about 80 bytes a character, and on a 5 MB
response grew the service by 160-450 MB within its 0.5 s. Past the memory cap the item is
``resource_limit`` (invalid), as past the time limit it is ``timeout``. Those matches do not hold the
event loop, so they do not draw on the request's shared budget.

A non-matching response is the model's failure: 0.0 with reason ``format``, or ``no_answer`` in
comparison mode (there is no answer to compare).

In comparison mode a ``search`` reads the answer outside the reasoning (after the last ``</think>``, up
to a ``<think>`` that never closes: :func:`.text.answer_text`), as ``exact_match``'s ``extract`` does: a
"#### 41" drafted inside ``<think>`` is not the answer, and a response cut off in its reasoning has none.
A ``fullmatch`` pattern describes the whole response, reasoning included, and reads all of it.

The reference is read as ``exact_match`` reads it (:func:`.exact_match.answer_references`): a string, a
list of them, ``{"answer": ...}``, ``{"answers": [...]}`` or a SQuAD row's answer texts. A blank reference
(``""``, ``[""]``, ``{"answer": ""}``) is ``missing_reference``, and so is a SQuAD v2 unanswerable row
(there is no abstention to score here): an empty group equalled a blank, rewarding a policy for saying
nothing. A blank among real answers is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

import regex
from pydantic import Field, field_validator, model_validator

from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, Reward, RewardConfig, ScoreContext, register
from rewardhub.rewards.exact_match import answer_references
from rewardhub.rewards.patterns import (
    MATCH_TIMEOUT_S,
    MatchBudget,
    PatternTimeout,
    capped_match,
    capped_outcome,
    compile_pattern,
    first_group,
    runs_inline,
    validate_pattern,
)
from rewardhub.rewards.text import answer_text, fold_forms

__all__ = ["RegexConfig", "RegexReward", "match_outcome"]


class RegexConfig(RewardConfig):
    pattern: str = Field(
        description="The regular expression (Python `regex` syntax, version 0 unless it says (?V1)).",
        min_length=1,
    )
    mode: Literal["search", "fullmatch"] = Field(
        "search", description="search: a match anywhere; fullmatch: the whole response must match."
    )
    ignorecase: bool = Field(False, description="Case-insensitive matching.")
    dotall: bool = Field(True, description="'.' also matches a newline.")
    compare_group_to_reference: bool = Field(
        False,
        description="Score 1 iff the first group that took part in the (first) match, whitespace-stripped, "
        "equals the reference (or one of a list of references) exactly, both read after NFKC (full-width "
        "'１２' is '12'; case counts); the pattern needs a group. A search reads "
        "the response outside its <think> reasoning. A blank reference is missing_reference.",
    )

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        return validate_pattern(v)

    @model_validator(mode="after")
    def _has_group(self) -> RegexConfig:
        if self.ignorecase:  # compiled with it: a (?V1) pattern then folds case fully, a smaller bound
            validate_pattern(self.pattern, ignorecase=True)
        if self.compare_group_to_reference and compile_pattern(self.pattern).groups < 1:
            raise ValueError("compare_group_to_reference needs a pattern with a capturing group")
        return self


def _outcome(m: regex.Match[str] | None, refs: list[str] | None) -> Outcome:
    """An item's outcome from its match (None: no match), its group against ``refs`` when comparing."""
    if refs is None:
        hit = m is not None
        span = m.group(0)[:200] if m is not None else None
        return Outcome(float(hit), None if hit else Reason.FORMAT, details={"match": span})
    # the first group that took part: a pattern of alternatives ("<answer>(.*?)</answer>|
    # \\boxed\{(.*?)\}") captures in group 2 when the second form matched
    group = first_group(m)
    if group is None:
        return Outcome(0.0, Reason.NO_ANSWER, details={"extracted": None})
    # compared after NFKC, as the other text rewards compare: \d and \w are Unicode, so a
    # full-width "１２" is a group of (\d+) and must be the reference "12"
    hit = fold_forms(group).strip() in {fold_forms(r).strip() for r in refs}
    return Outcome(float(hit), details={"extracted": group, "reference": refs})


_Payload = tuple[str, bool, bool, str, str, list[str] | None, float]


def match_outcome(payload: _Payload) -> Outcome:
    """One long item's outcome, in a CPU worker (module level, pickled by reference): ``payload`` is the
    pattern, dotall, ignorecase, mode, the text to match, the references (None: no comparison) and the
    match's timeout. The match is bounded in time and memory (:func:`.patterns.capped_match`)."""
    pattern, dotall, ignorecase, mode, text, refs, timeout_s = payload
    rx = compile_pattern(pattern, dotall, ignorecase)
    match = rx.search if mode == "search" else rx.fullmatch
    return capped_outcome(lambda: _outcome(capped_match(pattern, match, text, timeout_s), refs))


@register
class RegexReward(Reward[RegexConfig]):
    name: ClassVar[str] = "regex"
    # 1.0.2: compare_group_to_reference searches the answer outside the reasoning, not drafts in <think>
    # 1.0.3: a blank reference ("", [""], {"answer": ""}) is missing_reference (an empty group matched
    # it, 1.0) and a blank among real answers is dropped; a SQuAD answers column alone is read
    # 1.0.4: a reference of invisible characters only (a zero-width space) is blank: missing_reference
    # 1.0.5: compare_group_to_reference reads the first group that took part in the match: with
    # alternatives, a boxed answer captured by group 2 was no_answer (0)
    # 1.0.6: a (?V1) pattern compiles (version 0 was pinned: every one was refused, "VERSION0 and
    # VERSION1 flags are mutually incompatible")
    # 1.0.7: compare_group_to_reference compares after NFKC (.text.fold_forms): (\d+) captures a full-width
    # "１２" (\d is Unicode), which no reference "12" equalled
    # 1.0.8: a long response is matched in a CPU worker, where a match past 64 MB is resource_limit:
    # (.)* on a 5 MB response grew the service by 160-450 MB within its 0.5 s (and matched a 1 MB one);
    # a pattern nesting groups more than 50 deep is refused (some 200 deep raised RecursionError, a 500)
    version: ClassVar[str] = "1.0.8"
    description: ClassVar[str] = (
        "1 if the response matches a regular expression (search or fullmatch, with a timeout), or if its "
        "first group equals the reference."
    )
    config_model = RegexConfig
    reads = ("response", "reference")

    async def score(
        self, items: Sequence[ScoreItem], config: RegexConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        rx = compile_pattern(config.pattern, config.dotall, config.ignorecase)
        match = rx.search if config.mode == "search" else rx.fullmatch
        budget = MatchBudget(min(MATCH_TIMEOUT_S, ctx.deadline_s))
        out: list[Outcome | None] = [None] * len(items)
        todo: list[int] = []  # the long items, matched in the workers
        payloads: list[_Payload] = []
        for i, item in enumerate(items):
            refs: list[str] | None = None
            if config.compare_group_to_reference:
                # [] is a SQuAD v2 unanswerable row: no answer for a group to equal, as a blank one
                refs = answer_references(item.reference) or None
                if refs is None:
                    out[i] = Outcome.invalid(
                        Reason.MISSING_REFERENCE,
                        "compare_group_to_reference needs a reference that is not blank",
                    )
                    continue
            text = item.response
            if refs is not None and config.mode == "search":
                text = answer_text(text)  # the answer, not a draft in the reasoning
            if not runs_inline(rx, text):  # its memory could be hundreds of MB: in a worker, capped
                todo.append(i)
                payloads.append(
                    (
                        config.pattern,
                        config.dotall,
                        config.ignorecase,
                        config.mode,
                        text,
                        refs,
                        budget.per_match_s,
                    )
                )
                continue
            try:
                out[i] = _outcome(budget.run(config.pattern, match, text), refs)
            except PatternTimeout as exc:
                out[i] = Outcome.invalid(Reason.TIMEOUT, str(exc))
        if payloads:
            results = await self.runtime.cpu_pool.run(match_outcome, payloads, ctx.deadline_s)
            for i, res in zip(todo, results, strict=True):
                out[i] = res.value if res.ok else Outcome.pool_failure(res.error, res.message or res.error)
        return [o if o is not None else Outcome.invalid(Reason.INTERNAL_ERROR) for o in out]
