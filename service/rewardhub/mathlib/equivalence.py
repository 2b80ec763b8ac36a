"""Answer equivalence for the ``math`` reward: a cheap certain path and a full path.

``quick_check`` runs on the service's event loop for every item, so it only uses string
normalisation and exact rational arithmetic and answers only when it is certain.  ``check`` is
the full judgement (structure, sympy, math-verify) and runs in a worker process that the caller
can kill; see :mod:`rewardhub.mathlib.symbolic` for the timeout contract.

Design rule: every rule must be sound on any data, and gold and prediction get the same
rewrites.  False positives are worse than false negatives for a reward (a policy learns to
exploit them), so where two readings exist we pick the stricter one: answer lists compare as
*multisets* (math-verify compares sets), tuples compare in order, and numeric constants must
agree to 30 relative digits unless one side is a decimal that rounds correctly.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from rewardhub.mathlib.normalize import key, normalize
from rewardhub.mathlib.numeric import literals_equivalent, parse_literal
from rewardhub.mathlib.quantities import (
    mentions_ordinal,
    mentions_unit,
    quantities_check,
    states_number,
    typeset_units_differ,
)
from rewardhub.mathlib.scan import find_top_level, outer_brackets, split_top_level
from rewardhub.mathlib.structures import RADIANS, Item, call_parts, is_name, parse_answer
from rewardhub.mathlib.symbolic import (
    PARAMETER_LETTERS,
    agree_at_samples,
    constants_equal,
    depends_on,
    family_parameter,
    is_constant,
    is_equation,
    mentions,
    mv_verify,
    parse_item,
    rename_symbols,
    solve_for_missing,
)

_MAX_LEN = 20_000
_DEGREE = "^\\circ"
_BASE_RE = re.compile(r"\d\s?_")
# Digits, a space, digits: the parser reads "3 4" as 3 + 4 (and "10 000" as 10*0). Thousands groups
# ("12 345") are literals and compared before this; anything else compares as a string only.
_SPACED_DIGITS_RE = re.compile(r"(?<![\^_\d])\d+ \d")
# A lone k, n or m (not part of a word or a command such as \\sin or \\ln).
_PARAMETER_RE = re.compile(r"(?<![A-Za-z\\])[" + "".join(sorted(PARAMETER_LETTERS)) + r"](?![A-Za-z])")
# A number, then a letter, a command or a degree sign: a value that may state a unit ("2000 m", "5 \\mathrm{m}",
# "(1 h, 2)", "(8^\\circ, 2)").
_UNIT_AFTER_NUMBER_RE = re.compile(r"\d ?(?:[A-Za-z\\]|\^\\circ)")
_DEGREE_VALUE_RE = re.compile(r"^(?P<x>[+-]?\d+(?:\.\d+)?)\s?\^\\circ$")
# Any relation but a strict < or >: a term holding one is not a term of an ordering chain.
_OTHER_RELATION_RE = re.compile(r"\\(?:leq?|geq?|neq|leqslant|geqslant)(?![A-Za-z])|[=<>]")


@dataclass(frozen=True, slots=True)
class Check:
    """Verdict of an equivalence check.

    ``method`` names the rule that decided; ``gold_parsed`` is False when the gold could not be
    read as math at all, in which case only string rules were applied.
    """

    equivalent: bool
    method: str
    gold_parsed: bool


def quick_check(gold: str, pred: str) -> Check | None:
    """Certain verdicts from string normalisation and exact rationals only; None if undecided.

    Never raises and never touches sympy: it runs on the event loop.
    """
    try:
        if len(gold) > _MAX_LEN or len(pred) > _MAX_LEN:
            return None
        units_g: list[str] = []
        units_p: list[str] = []
        g = normalize(gold, units_g)
        p = normalize(pred, units_p)
        if not g or not p:
            return None
        if typeset_units_differ(units_g, units_p):
            # numbers in two upright units, "5\,\text{m}" and "5\,\text{s}" (both 5 once normalised),
            # "1\,\text{h}" and "3600\,\text{s}": the full check compares them
            return None
        if key(g) == key(p):
            return Check(True, "string", True)
        lg = parse_literal(g)
        lp = parse_literal(p)
        if lg is not None and lp is not None:
            return Check(literals_equivalent(lg, lp), "rational", True)
    except Exception:
        return None
    return None


def _ordering(s: str) -> tuple[list[str], str] | None:
    """``b < a < d < c``: its terms in written order and the relation, or None.

    A chain of two or more strict inequalities all one way and nothing else at the top level.
    """
    for op in ("<", ">"):
        terms = [t.strip() for t in split_top_level(s, (op,))]
        if len(terms) >= 3 and all(t and not _OTHER_RELATION_RE.search(t) for t in terms):
            return terms, op
    return None


class _Comparer:
    """One ``check`` call: holds the parse cache so each item is parsed at most once.

    ``bare`` says, for gold and prediction, whether a number in it is bare as written: not where the
    answer holds a unit word (``3 hours`` is the item 3 once its unit is dropped, and is no bare 3 against
    ``3 m``). ``quantities`` says whether two items whose units were dropped and that convert equal are equal
    (not where an answer may hold an ordinal: ``15th day`` is no 15 days); items whose units differ are
    unequal whatever it says."""

    def __init__(self, bare: tuple[bool, bool] = (True, True), quantities: bool = True) -> None:
        self.cache: dict[str, Any] = {}
        self.bare = bare
        self.quantities = quantities

    # -- single values -------------------------------------------------------------------------

    def value(self, g: str, p: str, rename: dict[str, str] | None = None) -> str | None:
        """Name of the rule that shows ``g`` and ``p`` equal, or None."""
        if key(g) == key(p) and not rename:
            return "string"
        if _BASE_RE.search(g) or _BASE_RE.search(p):
            return None  # 221_3 is base 3; the parser would drop the base, so strings only
        if g.endswith(RADIANS) or p.endswith(RADIANS):
            return self._radians(g, p, rename)
        lg, lp = parse_literal(g), parse_literal(p)
        if lg is not None and lp is not None:
            return "rational" if literals_equivalent(lg, lp) else None
        if self._stated(g, p):
            return "units"
        if _SPACED_DIGITS_RE.search(g) or _SPACED_DIGITS_RE.search(p):
            return None
        og, op = _ordering(g), _ordering(p)
        if og is not None and op is not None and len(og[0]) == len(op[0]):
            # b < a < d < c is c > d > a > b: the same statement, read in ascending order
            up_g = og[0] if og[1] == "<" else og[0][::-1]
            up_p = op[0] if op[1] == "<" else op[0][::-1]
            if all(self.value(a, b) for a, b in zip(up_g, up_p, strict=True)):
                return "order"
        structural = self._brackets(g, p)
        if structural is not None:
            return structural or None
        if _DEGREE in g or _DEGREE in p:
            return self._degrees(g, p, rename)
        return self._symbolic(g, p, rename)

    def _stated(self, g: str, p: str) -> bool:
        """A unit stated on one side only is ignored: after a label (``d = 1000 m``) or in a list (``1000 m, 2
        s``) as in a whole answer (:func:`.quantities.quantities_check`), where the bare side's number is
        bare as written (see ``bare``)."""
        lg, lp = parse_literal(g), parse_literal(p)
        if (lg is not None and lp is None and self.bare[0]) or (
            lp is not None and lg is None and self.bare[1]
        ):
            return states_number(g, p)
        return False

    def _brackets(self, g: str, p: str) -> str | None:
        """Tuples, intervals and set literals compared component-wise ("" = decided unequal).

        Same brackets and arity: tuples and intervals compare in order, ``\\{...\\}`` as
        multisets.  An interval never equals one with different end brackets (``[a, b]`` is not
        ``(a, b)``), and a set literal of several elements never equals a tuple or an interval.
        Unions of pieces compare as multisets of pieces when the counts agree.
        """
        bg, bp = outer_brackets(g), outer_brackets(p)
        if bg is not None and bp is not None:
            cg, cp = split_top_level(bg[1]), split_top_level(bp[1])
            same = (bg[0], bg[2]) == (bp[0], bp[2])
            if same and len(cg) == len(cp) and len(cg) > 1:
                if bg[0] == "\\{":
                    ok = self._match([Item(None, x) for x in cg], [Item(None, x) for x in cp])
                else:
                    ok = all(self.value(a.strip(), b.strip()) for a, b in zip(cg, cp, strict=True))
                return ("set" if bg[0] == "\\{" else "tuple") if ok else ""
            if not same and len(cg) == len(cp) == 2 and "\\{" not in (bg[0], bp[0]):
                return ""
            if not same and len(cg) > 1 and len(cp) > 1 and "\\{" in (bg[0], bp[0]):
                # A set literal of several elements is unordered, so it is never a tuple or an
                # interval (math-verify accepts {0, 1} for the interval (0, 1) element by element).
                inner = bg[1] if bg[0] == "\\{" else bp[1]
                if all(find_top_level(inner, sep) < 0 for sep in ("\\mid", "|", ":")):
                    return ""
        ug, up = split_top_level(g, ("\\cup",)), split_top_level(p, ("\\cup",))
        if len(ug) > 1 and len(ug) == len(up):
            if self._match([Item(None, x.strip()) for x in ug], [Item(None, x.strip()) for x in up]):
                return "interval"
        return None

    def _degrees(self, g: str, p: str, rename: dict[str, str] | None) -> str | None:
        """Degree marks: ``45^\\circ`` equals ``45``, and equals ``\\pi/4`` when compared to radians.

        A bare number next to a degree value is read in degrees (the unit was omitted); a value
        written with ``\\pi`` is in radians, so the degree side is converted instead.
        """
        for degrees, other, gold_side in ((g, p, True), (p, g, False)):
            m = _DEGREE_VALUE_RE.match(degrees)
            if m is not None and _DEGREE not in other and "\\pi" in other:
                rad = f"\\frac{{{m.group('x')}\\pi}}{{180}}"
                pair = (rad, other) if gold_side else (other, rad)
                return "degrees" if self._symbolic(pair[0], pair[1], rename) else None
        g2, p2 = g.replace(_DEGREE, " ").strip(), p.replace(_DEGREE, " ").strip()
        return "degrees" if self.value(g2, p2, rename) else None

    def _radians(self, g: str, p: str, rename: dict[str, str] | None) -> str | None:
        """A value in radians (``8 rad``): against degrees the degrees converted (``180^\\circ`` is
        ``\\pi`` rad, and ``8^\\circ`` no 8 rad, which is about 458.4 degrees; degrees that are no plain
        number, ``x^\\circ``, are unequal), against anything else its value, the unit stated on one side
        only (``8 rad`` is ``8``) or on both (``8 rad`` and ``8 radians``)."""
        # the value without the unit, as :func:`.structures.strip_units` wrote it ("8 rad", "\\pi rad")
        g2, p2 = (x.removesuffix(RADIANS).strip() if x.endswith(RADIANS) else x for x in (g, p))
        if not g2 or not p2:
            return None
        for radians, degrees, gold_side in ((g2 != g, p2, False), (p2 != p, g2, True)):
            if not radians or _DEGREE not in degrees:
                continue
            m = _DEGREE_VALUE_RE.match(degrees)
            if m is None:
                return None
            converted = f"\\frac{{{m.group('x')}\\pi}}{{180}}"
            pair = (converted, p2) if gold_side else (g2, converted)
            return "degrees" if self._symbolic(pair[0], pair[1], rename) else None
        return self.value(g2, p2, rename)

    def _symbolic(self, g: str, p: str, rename: dict[str, str] | None) -> str | None:
        gp = parse_item(g, self.cache)
        pp = parse_item(p, self.cache)
        if gp is None or pp is None:
            return None
        if rename:
            pp = rename_symbols(pp, rename)
            if pp is None:
                return None
        if is_equation(pp) and not is_equation(gp):
            # math-verify would compare the gold with the equation's right-hand side; that is
            # only sound for a simple-name label, which parse_items has already removed.  An
            # equation that fixes the one variable the gold leaves out is that variable's value.
            solved = solve_for_missing(pp, gp)
            return "solved" if solved is not None and mv_verify(gp, solved) else None
        if is_equation(gp) and not is_equation(pp):
            solved = solve_for_missing(gp, pp)
            if solved is not None and mv_verify(solved, pp):
                return "solved"
        if is_constant(gp) and is_constant(pp):
            verdict = constants_equal(gp, pp, parse_literal(g), parse_literal(p))
            if verdict is not None:
                return "numeric" if verdict else None
        if mv_verify(gp, pp):
            return "math_verify"
        # an identity on a domain only (2 arcsin sqrt(a) is arccos(1 - 2a) for 0 <= a <= 1), which
        # simplification does not prove: the values at sample points decide
        return "sampled" if agree_at_samples(gp, pp) else None

    # -- lists ---------------------------------------------------------------------------------

    def _item_eq(self, g: Item, p: Item, use_labels: bool) -> str | None:
        gq, pq = g.quantity or g.value, p.quantity or p.value
        if (g.quantity is not None or p.quantity is not None) or (
            _UNIT_AFTER_NUMBER_RE.search(gq) and _UNIT_AFTER_NUMBER_RE.search(pq)
        ):
            # two quantities, their units dropped ("3 hours, 2" and "3 minutes, 2"), or kept ("2 km^2, 3" and
            # "2000000 m^2, 3"), or one against a value that kept its unit ("5\,\text{s}, 2" and "5 m, 2"), or
            # a tuple's ("(5\,\text{m}, 2)" and "(5 hours, 2)"): units of another dimension, or of one that
            # convert unequal, differ (not even an ordinal stops a refusal: the 15th day is no 15 hours
            # either); two that each state a unit and are equal once converted, whole or component by
            # component in a tuple ("(1 hour, 2)" and "(60 minutes, 2)"), are one value (not where an answer
            # may hold an ordinal: 15th day is no 15 days)
            units = quantities_check(gq, pq, stated=False)
            if units is False or _components_differ(gq, pq):
                return None
            labelled = not use_labels or g.label == p.label
            if self.quantities and labelled and (units or self._converted(g, p)):
                return "units"
            if labelled and (g.quantity is not None or p.quantity is not None) and self._stated(gq, pq):
                return "units"  # the number a quantity states, where its unit was dropped: "5 /s" is 5 m/s
        if not use_labels or g.label == p.label:
            return self.value(g.value, p.value)
        rename = _bound_variables(g.label, p.label)
        return None if rename is None else self.value(g.value, p.value, rename)

    def _match(self, gold: list[Item], pred: list[Item]) -> bool:
        """Perfect matching between two multisets under item equality (augmenting paths)."""
        if len(gold) != len(pred):
            return False
        use_labels = all(i.label for i in gold) and all(i.label for i in pred)
        memo: dict[tuple[int, int], bool] = {}

        def eq(i: int, j: int) -> bool:
            if (i, j) not in memo:
                memo[(i, j)] = self._item_eq(gold[i], pred[j], use_labels) is not None
            return memo[(i, j)]

        owner: dict[int, int] = {}

        def augment(i: int, seen: set[int]) -> bool:
            for j in range(len(pred)):
                if j not in seen and eq(i, j):
                    seen.add(j)
                    if j not in owner or augment(owner[j], seen):
                        owner[j] = i
                        return True
            return False

        return all(augment(i, set()) for i in range(len(gold)))

    def items(
        self, gold: list[Item], pred: list[Item], sets: tuple[bool, bool] = (False, False)
    ) -> str | None:
        """Equivalence of two item lists; ``sets`` says which side was written as a set literal."""
        if len(gold) == 1 and len(pred) == 1:
            use_labels = bool(gold[0].label and pred[0].label)
            found = self._item_eq(gold[0], pred[0], use_labels)
            if found is None and use_labels and gold[0].label != pred[0].label:
                found = self._relabelled(gold[0], pred[0])
            return found
        if len(gold) == len(pred):
            # x = 1, y = 2 (or (x, y) = (1, 2)) names each value, so it is a tuple: a bare list
            # must give the values in the same order, as the tuple (2, 1) must.  Subscripts of
            # one name (x_1 = -2, x_2 = 3) number the solutions of one unknown: any order.
            bases = {(i.label or "").split("_", 1)[0] for i in gold}
            if all(i.label for i in gold) and len(bases) == len(gold) and not any(i.label for i in pred):
                ok = all(self._item_eq(a, b, False) for a, b in zip(gold, pred, strict=True))
                return "tuple" if ok else None
            if not self._match(gold, pred):
                return None
            tuples = all(outer_brackets(i.value) is not None for i in gold)
            return "tuple_set" if tuples else "set"
        # One tuple against a bare list of its components: (x, y, z) = 1, 2, 3 in order.  A set
        # literal is not such a list: \{0, 1\} is unordered and is neither (0, 1) nor (1, 0).
        for single, many, flip, many_is_set in ((gold, pred, False, sets[1]), (pred, gold, True, sets[0])):
            if len(single) == 1 and len(many) > 1 and not many_is_set:
                parts = _parts(single[0])
                if parts is not None and parts[0] == ("(", ")") and len(parts[1]) == len(many):
                    if not self._listed_units_differ(single[0], many, flip):
                        listed = zip(parts[1], ((i.value, i.quantity or i.value) for i in many), strict=True)
                        if all((self._pair_eq(b, a) if flip else self._pair_eq(a, b)) for a, b in listed):
                            return "tuple"
        # A chain b < a < d < c against the bare list b, a, d, c: the list gives the order in the
        # chain's written order (a reversed list is another answer).  Only a chain that is not a
        # solved-form inequality: one of four or more terms, or of constants (a < x < b is not the
        # list a, x, b; the parser has already turned 1 < x < 2 into an interval).
        for single, many, flip, many_is_set in ((gold, pred, False, sets[1]), (pred, gold, True, sets[0])):
            if len(single) == 1 and len(many) > 1 and not many_is_set and single[0].label is None:
                chain = _ordering(single[0].value)
                if chain is None or len(chain[0]) != len(many) or any(i.label for i in many):
                    continue
                if len(chain[0]) < 4 and not all(self._is_constant(t) for t in chain[0]):
                    continue
                pairs = zip(chain[0], (i.value for i in many), strict=True)
                if all((self.value(b, a) if flip else self.value(a, b)) for a, b in pairs):
                    return "order"
        return None

    def _pair_eq(self, g: tuple[str, str], p: tuple[str, str]) -> bool:
        """Two components, each its value and its text with units kept (:func:`_parts`): equal once
        converted where both state a unit (``1 \\mathrm{h}`` and ``60 minutes``), else as values."""
        if self.quantities and quantities_check(g[1], p[1], stated=False):
            return True
        return self.value(g[0], p[0]) is not None

    def _converted(self, g: Item, p: Item) -> bool:
        """Two tuples (or intervals) of as many components, compared in order, where one pair at least is
        equal once converted and the others are equal (``(1 hour, 2)`` and ``(60 minutes, 2)``; the units of
        ``(1\\,\\text{h}, 2)`` are read from its ``quantity``)."""
        cg, cp = _parts(g), _parts(p)
        if cg is None or cp is None or cg[0] != cp[0] or len(cg[1]) != len(cp[1]):
            return False
        converted = [quantities_check(a[1], b[1], stated=False) for a, b in zip(cg[1], cp[1], strict=True)]
        pairs = zip(converted, cg[1], cp[1], strict=True)
        return any(converted) and all(c or self.value(a[0], b[0]) for c, a, b in pairs)

    def _listed_units_differ(self, single: Item, many: list[Item], flip: bool) -> bool:
        """Whether a tuple and a bare list of its components (``(5\\,\\text{m}, 2)`` and ``5 hours, 2``) hold
        a pair of quantities that differ (:func:`.quantities.quantities_check`), their units kept."""
        if single.quantity is None and all(i.quantity is None for i in many):
            return False
        br = outer_brackets(single.quantity or single.value)
        comps = [] if br is None else split_top_level(br[1])
        if len(comps) != len(many):
            return False
        for comp, item in zip(comps, many, strict=True):
            pair = (
                (item.quantity or item.value, comp.strip())
                if flip
                else (comp.strip(), item.quantity or item.value)
            )
            if quantities_check(*pair) is False:
                return True
        return False

    def _relabelled(self, g: Item, p: Item) -> str | None:
        """One function named two ways: ``y = x^2`` and ``f(x) = x^2``, ``f(x) = x^2`` and ``g(t) = t^2``.

        The left-hand side only names the function, as a bare ``x^2`` (which already equals either)
        leaves it unnamed, so the right-hand sides decide: a call's arguments are renamed to the other
        call's (f(x) vs g(t)); a simple name (``y``) stands for a call only when it is none of its
        arguments, neither side's value mentions it (``x = 5`` is not ``f(x) = 5``, and ``y = 2y``
        is an equation) and the value varies with the call's arguments: ``y = x^2`` is a function of x,
        but ``a = 5`` names a variable's value and ``f(b) = 5`` a constant function, two answers (found in
        review; two calls, ``f(x) = 5`` and ``g(t) = 5``, are one constant function named two ways).
        Two simple names (``x = 5``, ``y = 5``) say which variable has the value, and
        stay different; so do the labels of a list of answers (``f(x) = x, g(x) = x^2``).
        """
        assert g.label is not None and p.label is not None
        g_call, p_call = call_parts(g.label), call_parts(p.label)
        # primes are derivatives, not part of the name: f'(x) = x^2 is not f(x) = x^2
        if _primes(g_call[0] if g_call else g.label) != _primes(p_call[0] if p_call else p.label):
            return None
        if g_call is not None and p_call is not None:
            rename = _call_renaming(g_call[1], p_call[1])
            if rename is None:
                return None
            return "relabelled" if self.value(g.value, p.value, rename or None) else None
        call, name, value = (g_call, p.label, g.value) if g_call is not None else (p_call, g.label, p.value)
        if call is None or not is_name(name) or not all(is_name(a) for a in call[1]):
            return None
        if key(name) in {key(a) for a in call[1]}:
            return None
        # only a value that varies with the call's arguments shows the name is the function's: a = 5 names
        # a variable's value, f(b) = 5 a constant function
        parsed = parse_item(value, self.cache)
        if not any(depends_on(parsed, parse_item(a, self.cache)) for a in call[1]):
            return None
        symbol = parse_item(name, self.cache)
        if any(mentions(parse_item(v, self.cache), symbol) for v in (g.value, p.value)):
            return None
        return "relabelled" if self.value(g.value, p.value) else None

    def _is_constant(self, s: str) -> bool:
        return parse_literal(s) is not None or is_constant(parse_item(s, self.cache))


def _parts(item: Item) -> tuple[tuple[str, str], list[tuple[str, str]]] | None:
    """A tuple's (or an interval's) brackets and components, each its value and its text with units kept
    (from the item's ``quantity``: ``(1 \\mathrm{h}, 2)``); None for anything else, and for a set literal
    (unordered)."""
    bv = outer_brackets(item.value)
    if bv is None or bv[0] == "\\{":
        return None
    values = split_top_level(bv[1])
    bq = outer_brackets(item.quantity) if item.quantity is not None else None
    kept = split_top_level(bq[1]) if bq is not None else values
    if len(values) < 2:
        return None
    if len(kept) != len(values):
        kept = values
    return (bv[0], bv[2]), [(v.strip(), q.strip()) for v, q in zip(values, kept, strict=True)]


def _components_differ(g: str, p: str) -> bool:
    """Whether two tuples (or intervals) of as many components hold a pair of quantities that differ, in
    order: ``(5 \\mathrm{m}, 2)`` and ``(5 hours, 2)`` (:func:`.quantities.quantities_check`; set literals,
    unordered, are left alone)."""
    bg, bp = outer_brackets(g), outer_brackets(p)
    if bg is None or bp is None or (bg[0], bg[2]) != (bp[0], bp[2]) or bg[0] == "\\{":
        return False
    cg, cp = split_top_level(bg[1]), split_top_level(bp[1])
    if len(cg) != len(cp) or len(cg) < 2:
        return False
    return any(quantities_check(a.strip(), b.strip()) is False for a, b in zip(cg, cp, strict=True))


def _family_letter(items: list[Item], cache: dict[str, Any]) -> str | None:
    """The one integer-parameter letter of an answer, if every use of it is a periodic family.

    Every value (or tuple/interval component) that mentions k, n or m must be a family
    ``a + b k`` in that letter alone (:func:`~rewardhub.mathlib.symbolic.family_parameter`), and
    no label may mention it: then the letter is a bound dummy of the whole answer.
    """
    letters: set[str] = set()
    for item in items:
        if item.label is not None and _PARAMETER_RE.search(item.label):
            return None
        if _PARAMETER_RE.search(item.value) is None:
            continue
        br = outer_brackets(item.value)
        parts = split_top_level(br[1]) if br is not None and br[0] in "([" else [item.value]
        for part in parts:
            found = set(_PARAMETER_RE.findall(part))
            if not found:
                continue
            if len(found) != 1 or family_parameter(parse_item(part.strip(), cache)) not in found:
                return None
            letters |= found
    return letters.pop() if len(letters) == 1 else None


def _renamed_family(
    comparer: _Comparer, gold: list[Item], pred: list[Item], sets: tuple[bool, bool]
) -> str | None:
    """``\\frac{\\pi}{6} + n\\pi`` against ``\\frac{\\pi}{6} + k\\pi``: the same family, another letter.

    The parameter is renamed in the whole prediction at once, never value by value: in
    ``(n\\pi, 2m\\pi)`` the two letters vary independently, so it is not ``(k\\pi, 2k\\pi)``.
    """
    g_letter = _family_letter(gold, comparer.cache)
    p_letter = _family_letter(pred, comparer.cache)
    if g_letter is None or p_letter is None or g_letter == p_letter:
        return None
    renamed = [Item(i.label, _PARAMETER_RE.sub(g_letter, i.value)) for i in pred]
    return "family" if comparer.items(gold, renamed, sets) is not None else None


def _ellipsis_sums(comparer: _Comparer, gold: str, pred: str) -> str | None:
    """``a_k + a_{k-1} + \\ldots + a_0`` against ``a_0 + a_1 + \\cdots + a_k``: each such sum becomes a
    symbol (the same one for the same sum on both sides) and the answers are compared again."""
    named = _name_runs(normalize(gold), normalize(pred))
    if named is None:
        return None
    g_items, g_set = parse_answer(named[0])
    p_items, p_set = parse_answer(named[1])
    if not g_items or not p_items:
        return None
    return "ellipsis" if comparer.items(g_items, p_items, (g_set, p_set)) is not None else None


def _bound_variables(g_label: str | None, p_label: str | None) -> dict[str, str] | None:
    """``f(x)`` vs ``f(z)``: same function, argument names are bound, so rename z -> x."""
    if g_label is None or p_label is None:
        return None
    g_call, p_call = call_parts(g_label), call_parts(p_label)
    if g_call is None or p_call is None or g_call[0] != p_call[0]:
        return None
    return _call_renaming(g_call[1], p_call[1])


def _primes(name: str) -> int:
    """The primes (derivative marks) a label's name ends with: ``f''`` has 2."""
    name = name.strip()
    return len(name) - len(name.rstrip("'"))


def _call_renaming(ga: list[str], pa: list[str]) -> dict[str, str] | None:
    """The renaming of a call's arguments ``pa`` to ``ga`` (names, as many), or None."""
    if len(ga) != len(pa) or not all(is_name(a) for a in ga + pa):
        return None
    return {b: a for a, b in zip(ga, pa, strict=True) if a != b}


# A run of subscripted terms with an ellipsis, written as a whole group: "(a_k + a_{k-1} + \\ldots + a_0)".
_RUN_TERM = r"[A-Za-z]_(?:\{[^{}]{1,12}\}|[A-Za-z0-9])"
_RUN_RE = re.compile(
    rf"(?:(?<=[({{\[,=])|^)\s*(?P<run>{_RUN_TERM}(?:\s*\+\s*{_RUN_TERM})*\s*\+\s*"
    rf"\\(?:ldots|cdots|dots|dotsb)\s*\+\s*{_RUN_TERM}(?:\s*\+\s*{_RUN_TERM})*)\s*(?=[)}}\],=]|$)"
)
_INDEX_RE = re.compile(r"^(?:(?P<sym>[A-Za-z])(?P<off>[+-]\d{1,3})?|(?P<num>\d{1,6}))$")
_PLACEHOLDER = "\\Upsilon"


def _index(term: str) -> tuple[str, str | None, int] | None:
    """``a_{k-1}`` -> ``("a", "k", -1)``, ``a_0`` -> ``("a", None, 0)``, or None."""
    base, idx = term[0], term[2:].strip("{}").replace(" ", "")
    m = _INDEX_RE.match(idx)
    if m is None:
        return None
    if m.group("num") is not None:
        return base, None, int(m.group("num"))
    return base, m.group("sym"), int(m.group("off") or 0)


def _run_key(run: str) -> tuple[str, tuple[str | None, int], tuple[str | None, int], int] | None:
    """The sum ``a_k + a_{k-1} + \\ldots + a_0`` as (base, first index, last index, step > 0), or None.

    The explicit terms fix the step: every neighbouring pair on one side of the ellipsis must differ
    by it, the same on both sides.  The sum does not depend on the direction in which it is written,
    so a descending one is turned around (``a_k + a_{k-1} + \\ldots + a_0`` is ``a_0 + \\ldots + a_k``
    in steps of 1).  Without explicit pairs (``a_1 + \\cdots + a_n``) the step is 1 and the sum runs
    up from a number to a letter, or from the smaller number or offset; anything else is None.  Where
    both ends are comparable (two numbers, or offsets of one letter) the step must lead from the
    first to the last.
    """
    before, after = re.split(r"\\(?:ldots|cdots|dots|dotsb)", run)
    sides = [[_index(t.strip()) for t in side.split("+") if t.strip()] for side in (before, after)]
    flat = [x for side in sides for x in side]
    if not sides[0] or not sides[1] or any(x is None for x in flat):
        return None
    if len({x[0] for x in flat if x is not None}) != 1:
        return None
    steps: set[int] = set()
    for side in sides:
        for a, b in itertools.pairwise(side):
            if a is None or b is None or a[1] != b[1]:
                return None
            steps.add(b[2] - a[2])
    first, last = sides[0][0], sides[1][-1]
    if first is None or last is None or len(steps) > 1 or 0 in steps:
        return None
    start, end = first[1:], last[1:]
    comparable = start[0] == end[0]
    if steps:
        step = steps.pop()
        if comparable and (end[1] - start[1]) * step <= 0:
            return None
    elif comparable:
        step = 1 if end[1] > start[1] else -1
    elif start[0] is None:
        step = 1  # a_1 + \\cdots + a_n
    elif end[0] is None:
        step = -1  # a_n + \\cdots + a_1
    else:
        return None
    if step < 0:
        start, end, step = end, start, -step
    return first[0], start, end, step


def _name_runs(gold: str, pred: str) -> tuple[str, str] | None:
    """Both answers with each ellipsis sum replaced by one fresh symbol per distinct sum, or None.

    Two sums get the same symbol only when :func:`_run_key` says they are the same sum; an ellipsis
    left anywhere else keeps the answer string-only.
    """
    if "dots" not in gold or "dots" not in pred or "upsilon" in (gold + pred).lower():
        return None
    names: dict[Any, str] = {}
    out: list[str] = []
    for text in (gold, pred):
        failed = False

        def name(m: re.Match[str]) -> str:
            nonlocal failed
            k = _run_key(m.group("run"))
            if k is None:
                failed = True
                return m.group(0)
            names.setdefault(k, f"{_PLACEHOLDER}_{{{len(names) + 1}}}")
            return " " + names[k] + " "

        new = _RUN_RE.sub(name, text)
        if failed or new == text:
            return None
        out.append(new)
    return out[0], out[1]


# An AMC-style answer: a choice's label and its value, "\\textbf{(C)}\\ 12" (normalised "(C) 12"), or a
# label alone ("(C)", "C") to hold against one.
_CHOICE_VALUE_RE = re.compile(r"\(\s*([A-E])\s*\)\s*(\S.*)")
_CHOICE_ONLY_RE = re.compile(r"\(?\s*([A-E])\s*\)?")


def _choice_parts(s: str) -> tuple[str, str | None] | None:
    n = normalize(s)
    m = _CHOICE_VALUE_RE.fullmatch(n)
    if m is not None:
        return m.group(1), m.group(2)
    m = _CHOICE_ONLY_RE.fullmatch(n)
    return (m.group(1), None) if m is not None else None


def _choice_check(gold: str, pred: str) -> Check | None:
    """The verdict when one side is a choice's label with its value ("(C) 12"): the labels decide against a
    label, the values against anything else, and two different labels differ whatever their values.
    None when neither side has both (nothing to say)."""
    g, p = _choice_parts(gold), _choice_parts(pred)
    if (g is None or g[1] is None) and (p is None or p[1] is None):
        return None
    if g is not None and p is not None:
        if g[0] != p[0]:
            return Check(False, "choice", True)
        if g[1] is None or p[1] is None:
            return Check(True, "choice", True)
        return check(g[1], p[1])
    if g is not None and g[1] is not None:
        return check(g[1], pred)
    value = p[1] if p is not None else None
    return check(gold, value) if value is not None else None


def _symbols_differ(gold: str, pred: str) -> bool:
    """Whether two answers normalise alike but for their upright unit symbols; at any length (quick_check
    stops at _MAX_LEN; normalisation is linear, and the full check normalises the answers anyway)."""
    units_g: list[str] = []
    units_p: list[str] = []
    g, p = normalize(gold, units_g), normalize(pred, units_p)
    return key(g) == key(p) and typeset_units_differ(units_g, units_p)


def check(gold: str, pred: str) -> Check:
    """Full equivalence check; may be slow (sympy) and relies on the caller for deadlines."""
    quick = quick_check(gold, pred)
    if quick is not None:
        return quick
    units = quantities_check(gold, pred)  # "3 hours" and "180 minutes": before the units are dropped
    if units is not None:
        return Check(units, "units", True)
    if _symbols_differ(gold, pred):
        # equal once normalised, but one number in two upright units: "(1\,\text{m}, 2)", "(1\,\text{s}, 2)"
        return Check(False, "units", True)
    choice = _choice_check(gold, pred)
    if choice is not None:
        return choice
    try:
        comparer = _Comparer(
            (not mentions_unit(normalize(gold)), not mentions_unit(normalize(pred))),
            not (mentions_ordinal(gold) or mentions_ordinal(pred)),
        )
    except Exception:
        comparer = _Comparer((False, False), False)
    try:
        g_items, g_set = parse_answer(gold)
        p_items, p_set = parse_answer(pred)
    except Exception:
        g_items, p_items, g_set, p_set = [], [], False, False
    gold_parsed = any(
        parse_literal(i.value) is not None or parse_item(i.value, comparer.cache) is not None for i in g_items
    )
    if not g_items or not p_items:
        return Check(False, "empty", gold_parsed)
    try:
        method = comparer.items(g_items, p_items, (g_set, p_set))
        if method is None:
            method = _renamed_family(comparer, g_items, p_items, (g_set, p_set))
        if method is None:
            method = _ellipsis_sums(comparer, gold, pred)
    except Exception:
        method = None
    if method is None:
        return Check(False, "math_verify" if gold_parsed else "string", gold_parsed)
    return Check(True, method, gold_parsed or method == "ellipsis")
