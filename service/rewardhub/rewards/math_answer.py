"""``math``: final-answer equivalence against a gold answer.

The answer is extracted from the response (last ``\\boxed{}``, ``<answer>`` tag, "The answer is ...",
last number, read with its math when it is a LaTeX argument such as a denominator; configurable order), then compared with the gold in two stages. Only the text after the
last ``</think>`` and before a ``<think>`` that never closes is searched (:func:`~.text.answer_text`): a
box or number in the reasoning is a draft, and a response cut off in its reasoning has no answer.

1. on the event loop, a cheap *sound* check (identical normalised strings, or two rational literals
   compared exactly) settles most items in microseconds without SymPy;
2. the rest go, as one batch, to the CPU worker pool, where Math-Verify (gold first) and rewardhub's
   own normalisation rules decide under a hard per-item deadline. A hung SymPy call (a power tower,
   say) is killed: the item comes back ``valid: false, reason: timeout``; the worker is replaced.

Reference: the gold answer as a string (``"\\frac{1}{2}"``, ``"$x=3$"``, ``"\\boxed{5}"``), or an
object ``{"answer": "..."}``; ``{"answers": [...]}`` accepts any of several golds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal, cast

from pydantic import Field

from rewardhub.mathlib import DEFAULT_METHODS, Check, extract_answer, quick_check, read_gold
from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, Reward, RewardConfig, ScoreContext, register
from rewardhub.rewards.text import answer_text
from rewardhub.runtime.cpu_tasks import check_pair
from rewardhub.runtime.process_pool import TaskResult

__all__ = ["MathConfig", "MathReward", "read_golds"]

Method = Literal["boxed", "answer_tag", "answer_phrase", "last_number"]
_DEFAULT_EXTRACTION = cast(tuple[Method, ...], DEFAULT_METHODS)


class MathConfig(RewardConfig):
    extraction: tuple[Method, ...] = Field(
        _DEFAULT_EXTRACTION, min_length=1, description="Answer extraction rules, tried in this order."
    )
    correct_score: float = Field(1.0, allow_inf_nan=False, description="Score of an equivalent answer.")
    wrong_score: float = Field(0.0, allow_inf_nan=False, description="Score of a wrong or missing answer.")


def read_golds(reference: Any) -> list[str] | None:
    """The gold answers of a reference; None when there are none (the item is then invalid)."""
    raw: list[Any]
    if isinstance(reference, str):
        raw = [reference]
    elif isinstance(reference, dict):
        if isinstance(reference.get("answers"), list):
            raw = reference["answers"]
        elif "answer" in reference:
            raw = [reference["answer"]]
        else:
            return None
    elif isinstance(reference, list):
        raw = reference
    else:
        return None
    golds = [g for g in (read_gold(str(x)) for x in raw if isinstance(x, str | int | float)) if g]
    return golds or None


@register
class MathReward(Reward[MathConfig]):
    name: ClassVar[str] = "math"
    # 1.1.4: invisible format characters (Cf: zero-width space, BOM...) are dropped from the extracted
    # answer and the gold: "\\boxed{4\u200b2}" was not 42
    # 1.1.5: an equation against the value of the one variable the answer leaves out, when it enters
    # linearly: "xy = 6" vs "\\frac{6}{x}", "\\rho\\sin\\theta = \\sqrt{3}" vs "\\sqrt{3}\\csc\\theta"
    # (either side); an ordering chain "b < a < d < c" is the list "b, a, d, c" (not a solved form:
    # 4+ terms or constants) and the chain "c > d > a > b"; an item with an ellipsis compares as a
    # string only (the parser dropped \\ldots: "1 + 2 + \\ldots + 10" equalled 13), except that a sum
    # "a_k + a_{k-1} + \\ldots + a_0" equals the same sum written the other way round
    # 1.1.6: a last number that is a LaTeX argument (the 4 of \\frac{3}{4}, the 2 of
    # r^2) is read with its math ("4" was a false accept for a gold 4), or not at all outside math;
    # a last number grouped with LaTeX's {,} is whole (10{,}000 was 000); "The answer is:" ending its line
    # reads the display, inline math or number on the next one (it fell to the last number: 1 of $$x + 1$$)
    # 1.1.7: an empty final box is no answer; abbreviations ("Mr.", "approx.") do not end an answer phrase
    # 1.1.8: an approximation is its value: "\\approx 3.14", "approximately 3.14", "about 3.14" (they never
    # matched 3.14) and "x \\approx 3.14" (the answer was "x"); an answer phrase of several inline math
    # spans, "The answer is $x=5$ or $x=-5$.", is the whole list (it was the first span: "x=5" against
    # \\pm 5 scored 0), unless prose follows it ("$5$, and $6$ is wrong" is 5); the empty set in any
    # spelling (\\varnothing, \\{\\}, "no solution") equals \\emptyset (they differed); an AMC answer, a
    # choice's label and its value ("\\textbf{(C)}\\ 12"), is its value, or its label against a label (it
    # matched neither 12 nor (C)); a temperature's unit, "10^\\circ C" or "10°F", is dropped (10°C scored 0 against 10);
    # a whole number in words, "three" or "twenty-one apples", is its number, and an answer that shows its
    # arithmetic, "5 + 3 = 8", its result (both scored 0); a repeating decimal, "0.\\overline{3}" or
    # "0.1\\overline{6}", is the exact rational it denotes (it matched neither 1/3 nor 1/6)
    # 1.1.9: one function named two ways is one answer: "y = x^2" against "f(x) = x^2" (or "g(t) = t^2")
    # compares the right-hand sides (the different labels scored 0, though a bare x^2 matched either);
    # quantities in different units of one dimension (time, length, mass) are converted: "3 hours" is
    # "180 minutes" (it scored 0) and not "3 minutes" (it scored 1)
    # 1.1.10: a label's primes are derivatives, not part of its name: "f'(x) = x^2" against "f(x) = x^2"
    # (or "y = x^2") is a different answer again (1.1.9 relabelled it, 1.0)
    # also 1.1.10: quantities in units of different dimensions differ: "3 hours" against "3 meters" scored 1
    # (the units were dropped); a lone "m" is metres against another length unit: "1000 m" (or typeset,
    # "1000\\,\\text{m}") is "1 km" (it scored 0)
    # 1.1.11: a unit stated on one side only is ignored: "1000 m", "5 s", "3.5 h", "5 m/s", "5 cm^2" scored 0
    # against their bare number (a one-letter symbol was read as a variable, 5 times s), now 1, after a label
    # or in a list too ("d = 1000 m", "1000 m, 2 s"); "1 km" against 1000 still 0; "20 percent" is "20\\%" (0
    # against 20); a symbol m, s, h or g (or typeset upright) is converted against a unit of its dimension:
    # "5 s" is "5 seconds" and "60\\,\\text{s}" is "1 minute" (0), "5\\,\\text{s}" is not "5 minutes" nor
    # "5 meters" (they scored 1, the typeset s dropped)
    # also 1.1.11: a constant value does not relabel a simple name as a function: "a = 5" against
    # "f(b) = 5" (or "y = 5" against "f(x) = 5") scored 1, now 0 as "x = 5" against "y = 5"; two calls,
    # "f(x) = 5" and "g(t) = 5", are still one constant function
    # 1.1.12: a typeset one-letter unit is a unit though normalisation drops it: "1000\\,\\text{m}" against
    # "1000\\,\\text{s}" (or "5\\,\\text{A}" against "5\\,\\text{V}", "3\\,\\text{m}" against "3 hours") scored 1, now 0,
    # and "1\\,\\text{h}" is "3600\\,\\text{s}" (0); a unit's power is a dimension: "5\\,\\text{cm}^2" against "5
    # hours" or "5 cm" scored 1, now 0, and "1 cm^2" is "100 mm^2" (0); a rate converts: "5 m/s" is "18 km/h" (0);
    # after one label, or a label on one side only: "t = 3 hours" against "t = 3 minutes" (or "3 minutes")
    # scored 1, now 0, and "3 hours" against "t = 180 minutes" 0, now 1
    # also 1.1.12: two items of a list whose units were dropped compare as quantities: "3 hours, 2" against
    # "3 minutes, 2" scored 1, now 0, and "180 minutes, 2" 0, now 1
    # also 1.1.12: a rate in words converts: "60 miles per hour" is "1 mile per minute" (0)
    # 1.1.13: a typeset one-letter unit keeps its unit in a list or a tuple: "(5\\,\\text{m}, 2)" against
    # "(5 hours, 2)" (or "5\\,\\text{s}, 2" against "5 m, 2") scored 1 (the item 5 against 5 hours), now 0;
    # "1\\,\\text{h}, 2" is "60 minutes, 2" (0); items whose units differ differ past 1,000 characters or
    # beside an ordinal too ("15th Day, 2" against "15 hours, 2" scored 1)
    # also 1.1.13: a rate typeset in two groups is a rate: "5\\,\\text{m}/\\text{s}" (normalised "5 /s")
    # against "18 km/h" or 5 scored 0, now 1
    # 1.1.14: a plain symbol's power is a unit's against the same power in a unit, and volumes convert:
    # "2 km^2" against "2000000 m^2", "1 L" against "1000 mL" or "1000\\,\\text{cm}^3" scored 0, now 1; a
    # tuple's components and list items that keep their units convert: "(1 hour, 2)" against "(60 minutes,
    # 2)", "1 hour, 2 km" against "60 minutes, 2000 m", "5\\,\\text{m}/\\text{s}, 2" against "18 km/h, 2"
    # scored 0, now 1; an upright symbol of no known unit is no known unit word: "5\\,\\text{x}" (or
    # "5\\,\\text{A}") against "5 hours" scored 1, now 0
    # 1.1.15: a whole number against a decimal gold is its coarsest rounding: "118\\%" against "117.95\\%"
    # scored 0 (as "118.0\\%" did not), now 1 (3 significant digits, trailing zeros not counted: "300" against
    # "299.94" stays 0; against an exact gold a whole number stays exact); two expressions in the same
    # variables that are real at the same sample points and equal there are one answer: "\\arccos(1 - 2a)"
    # against "2\\arcsin\\sqrt{a}" (an identity for 0 <= a <= 1 only) scored 0, now 1 ("2\\arctan x"
    # against "\\arcsin\\frac{2x}{1+x^2}", equal for |x| <= 1 only, and "2\\ln x" against "\\ln x^2" stay 0);
    # a week's "wk" is a unit and a day's d typeset upright after a number: "5\\,\\text{d}" against "5 days"
    # scored 0, now 1, and "5 wk" against "5 hours" scored 1 (wk was dropped as an unknown word), now 0;
    # months and years (decades, centuries) are units of their own, converted among themselves and not to
    # days: "5 days" against "5 years", "5 weeks" against "5 months" scored 1, now 0, "1 year" against "12
    # months" scored 0, now 1; a differential is no unit word: "5\\,\\mathrm{d}x" (or "5 dx") against "5"
    # or "5 days" scored 1, now 0; a known unit against a word that names no unit is two answers: "3 hours"
    # against "3 apples" scored 1, now 0 ("12 apples" against "12", and against "12 oranges", stay 1);
    # square and cubic units in words, a plain l against a volume, a rate in one word and cents: "25 m^2"
    # against "25 square meters" (or "25 sq m"), "3 l" against "3 litres", "60 mph" against "96.56064
    # km/h", "50 cents" against "\\$0.50" scored 0, now 1; "25 square meters" against "25 meters", "50
    # cents" against "\\$50", "60 mph" against "60 kph" scored 1, now 0 ("2 l" against "2" stays 0)
    # 1.1.16: an inch's "in" with a power or after square/cubic is a unit, superscript digits a power, acres an
    # area, the cent sign cents: "8 cubic inches" against "8 in^3" (or "8 cu in"), "8 ft^2" against "8 ft²",
    # "1 acre" against "43560 ft^2", "50¢" against "50 cents" or "\\$0.50", "x²" against "x^2" scored 0, now 1;
    # "8 \\text{ in}^2" against "8 cubic inches" scored 1 (both 8 once the unit words were dropped), now 0;
    # a converted quantity agrees at the answer's precision, a whole number a rounding too ("161 km/h" for
    # "100 mph"), and a decimal gold rounds an exact answer converted to its unit ("96.56 km/h" against "60
    # mph"): 0, now 1; "97 km/h" for "60 mph" stays 0 (2 significant digits, no rounding as everywhere)
    # also 1.1.16: a list item's dollar sign is its unit against cents: "50 cents, 2" against "\\$50, 2" (or
    # "(50 cents, 2)" against "(\\$50, 2)") scored 1, now 0, and "50 cents, 20 cents" against "\\$0.50,
    # \\$0.20" 0, now 1 ("\\$3, \\$5" against "3, 5" stays 1)
    # 1.1.17: a rate's units typeset as a fraction are the rate: "96.56 \\frac{\\text{km}}{\\text{h}}" (or
    # \\dfrac, \\tfrac, "\\frac{km}{h}") against "60 mph", "5 \\frac{\\text{m}}{\\text{s}}" against "18 km/h",
    # "96.56" against "96.56 \\frac{\\text{km}}{\\text{h}}" scored 0, now 1 ("\\frac{96}{2}" stays 48); a dollar
    # amount in thousands groups is one number in a list: "\\$1,200, \\$5" against "1200, 5" (or a tuple's)
    # scored 0, now 1, and against "1, 200, 5" 1, now 0 ("1,200, 5" without the sign stays 1, 200 and 5)
    # 1.1.18: a converted quantity compares as a plain number: the gold in the prediction's unit is the literal
    # that writes it exactly, a decimal a whole number may round ("1609 m" for "1 mile", 1609.344 m) or a
    # fraction it may not: "143 weeks" against "1000 days" (1000/7 weeks) scored 1, now 0, as 143 against
    # \\frac{1000}{7}; a plain "in" ending the answer is an inch against a length in a unit: "8 in" against
    # "8 cm" or "8 ft" scored 1 (the word dropped), now 0, and against "20.32 cm" (or "24 in" against "2 ft")
    # 0, now 1 (against a bare 8 still 1, and "8 in total" is no inch); a dollar amount in thousands groups
    # keeps its sign against cents in a list: "\\$1,200, 5" against "1200 cents, 5" scored 1, now 0, and
    # "\\$1,200, \\$300" against "120000 cents, 30000 cents" 0, now 1
    # 1.1.19: a plain "in" ending the answer is an inch against a unit of any dimension, not only a length:
    # "8 in" (or "8\\text{ in}", "8 \\mathrm{in}") against "8 hours", "8 kg", "8 liters", "8 cm^2", "8 mph", "8
    # cents", "8^\\circ", "8 °C" or "8\\,\\text{s}" scored 1 (the word dropped as a preposition), now 0; against
    # a bare 8, a count noun ("8 apples") or "\\$8" still 1, and "8 in total", "8 in each row" are no inch;
    # degrees against a unit of another kind differ too: "8^\\circ" (or "8°", "8 °C", "8 degrees") against "8
    # cm", "8 hours", "8 dollars", "8 m" or "8\\,\\text{K}" scored 1 (both units dropped), now 0 (against "8",
    # "\\$8" or "8 apples" still 1, and radians still convert); one number in two temperature scales, "8 °C"
    # against "8 °F", scored 1, now 0; a percentage against a unit, "8\\%" against "8 in", "8 cm" or "8
    # hours", scored 1, now 0 (against "8" or "0.08" still 1); a quantity after a preposition, "in 8 hours"
    # (or "after", "within", "for") against "8 hours" or "480 minutes", scored 0, now 1 ("in 8 hours"
    # against "8 in" still 0); radians are an angle's unit: "8 rad" (or "8 radians", "8\\,\\text{rad}")
    # against "8^\\circ", "8 in", "8 °C" or "8\\%" scored 1 (the word dropped, the 8 read in degrees), now 0,
    # and "\\pi rad" against "180^\\circ" (or "\\pi") 0, now 1 (against "8" or "8 radians" still 1); kelvin in
    # words is a temperature: "8 kelvin" against "8 °C", "8^\\circ", "8 in" or "8\\%" scored 1, now 0, and
    # against "8 K" 0, now 1; a list item's temperature keeps its scale: "8 °C, 2" against "8 °F, 2" or "8 cm,
    # 2" scored 1, now 0; a tuple's components drop their unit words as a whole answer does: "(30 degrees,
    # 2)" against "(30^\\circ, 2)", "(30, 2)" or "(\\frac{\\pi}{6}, 2)", "(8 apples, 2)" against "(8, 2)",
    # scored 0, now 1 ("(8 cm, 2)" against "(8 in, 2)" still 0), but for a last word of two or three letters
    # that names no unit, a product of variables kept as in 1.1.18 ("(x+y, 2xy)" against "(x + y, 2 xy)" or
    # "(x + y, 2\\cdot xy)" still 1, "(1, 2)" against "(1, 2 ab)" still 0); "in 8\\,\\text{h}" and "at 8
    # hours" against "8 hours" scored 0, now 1
    version: ClassVar[str] = "1.1.19"
    description: ClassVar[str] = (
        "Final-answer equivalence (boxed / answer tag / 'The answer is' / last number) with Math-Verify "
        "and extra normalisation, in killable worker processes with a hard per-item deadline."
    )
    config_model = MathConfig
    reads = ("response", "reference")

    async def score(self, items: Sequence[ScoreItem], config: MathConfig, ctx: ScoreContext) -> list[Outcome]:
        outcomes: list[Outcome | None] = [None] * len(items)
        # (item index, gold, prediction) pairs the quick check could not settle
        pending: list[tuple[int, str, str, str]] = []
        for i, item in enumerate(items):
            golds = read_golds(item.reference)
            if golds is None:
                outcomes[i] = Outcome.invalid(
                    Reason.MISSING_REFERENCE if item.reference is None else Reason.PARSE_ERROR,
                    'math needs a gold answer: reference as a string or {"answer": ...}',
                )
                continue
            extracted = extract_answer(answer_text(item.response), config.extraction)
            if extracted is None:
                outcomes[i] = Outcome(
                    config.wrong_score,
                    Reason.NO_ANSWER,
                    {"correct": 0.0},
                    {"gold": golds[0], "extracted": None},
                )
                continue
            base = {"gold": golds[0], "extracted": extracted.text, "extraction": extracted.method}
            decided = False
            for gold in golds:
                q = quick_check(gold, extracted.text)
                if q is not None and (q.equivalent or len(golds) == 1):
                    outcomes[i] = self._outcome(config, q, {**base, "gold": gold})
                    decided = True
                    break
            if not decided:
                pending.extend((i, gold, extracted.text, extracted.method) for gold in golds)
        if pending:
            results = await self.runtime.cpu_pool.run(
                check_pair, [(g, p) for _, g, p, _ in pending], ctx.deadline_s
            )
            self._merge(config, pending, results, outcomes, items)
        return [o if o is not None else Outcome.invalid(Reason.INTERNAL_ERROR) for o in outcomes]

    def _merge(
        self,
        config: MathConfig,
        pending: list[tuple[int, str, str, str]],
        results: list[TaskResult],
        outcomes: list[Outcome | None],
        items: Sequence[ScoreItem],
    ) -> None:
        """Fold worker results into outcomes; with several golds, any equivalent one wins, and a wrong
        verdict needs every gold checked."""
        for (i, gold, pred, method), res in zip(pending, results, strict=True):
            current = outcomes[i]
            if current is not None and current.score == config.correct_score:
                continue  # already matched another gold
            details = {"gold": gold, "extracted": pred, "extraction": method}
            if res.ok:
                new = self._outcome(config, res.value, details, latency_ms=res.elapsed_s * 1000)
            else:
                new = Outcome.pool_failure(res.error, res.message, **details)
                new.latency_ms = res.elapsed_s * 1000
            # An equivalent verdict beats everything. Otherwise a gold that could not be checked (a
            # timeout, say) beats a definite wrong: the answer may equal that gold, so the item was
            # not scored, and 0.0 would say it was scored and wrong.
            if (
                current is None
                or new.score == config.correct_score
                or (current.score is not None and new.score is None)
            ):
                outcomes[i] = new

    @staticmethod
    def _outcome(
        config: MathConfig, check: Check, details: dict[str, Any], latency_ms: float | None = None
    ) -> Outcome:
        ok = check.equivalent
        details["match"] = check.method
        if not check.gold_parsed:
            details["gold_parsed"] = False
        return Outcome(
            config.correct_score if ok else config.wrong_score,
            None,
            {"correct": 1.0 if ok else 0.0},
            details,
            latency_ms,
        )
