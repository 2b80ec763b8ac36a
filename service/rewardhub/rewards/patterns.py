"""User-supplied regular expressions, run safely on the event loop.

Patterns in reward configs come from callers and are matched against model output, so a pathological
pair (``(x+x+)+y`` against a long run of ``x``) could stall the service's event loop for minutes with
the standard ``re`` module. The ``regex`` package takes a per-call ``timeout``; a match that runs past it
raises :class:`PatternTimeout` and the reward reports the item as ``timeout`` instead of hanging.

A per-match limit alone still lets one request stall the loop for its number of items times the limit
(4096 items × 0.5 s is half an hour), so a reward gives all the matches of one call a shared
:class:`MatchBudget`: once ``BATCH_BUDGET_S`` of CPU time is spent (or ``BATCH_WALL_CAP_S`` of wall time,
on a host so loaded that the CPU seconds come slowly), the remaining items are not matched and are
reported as ``timeout`` too.

Matching runs on the event loop, the budget bounding the stall: a realistic response is matched in
microseconds, and ``regex`` times a match by the process's CPU time, so matches of concurrent requests
in worker threads (``regex`` lets other threads run while it matches) would run each other's clocks and
time each other out.

A match also takes memory, and a timeout alone does not bound it: a repeat that captures, ``(.)*``,
keeps a backtrack entry and the group's span for every character, about 80 bytes each, so ``(.)*`` on a 5
MB response grew the process by 160-450 MB within its 0.5 s (the ``regex`` engine's own cap is 1 GB), and
each capturing group around the repeated one adds as much again per character. So a reward matches a
text on the event loop only where that cost is small (:func:`runs_inline`: characters x (capturing
groups + 1) up to ``INLINE_MATCH_UNITS``, about 30 MB at most as measured), and a longer one in a CPU
worker (:func:`capped_match`), where the match may add at most ``MATCH_MEMORY_BYTES`` to the worker's
address space (a lowered ``RLIMIT_AS``) before it is stopped with :class:`PatternMemory`: the service
process never holds that memory, and the worker only up to the cap.

Patterns are ``regex``'s own syntax, version 0 (``re``-compatible) unless the pattern turns on version 1
with ``(?V1)``: nested sets and set operations (``[[a-z]--[aeiou]]``), and full case folding whenever
it ignores case. The version was pinned to 0 at compile, so every ``(?V1)`` pattern was refused ("VERSION0
and VERSION1 flags are mutually incompatible"); only JSON Schema's patterns (ECMA-262) pin it still.
"""

from __future__ import annotations

import contextlib
import resource
import time
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import TypeVar

import regex

from rewardhub.protocol import Reason
from rewardhub.rewards.base import Outcome

__all__ = [
    "BATCH_BUDGET_S",
    "BATCH_WALL_CAP_S",
    "INLINE_MATCH_UNITS",
    "MATCH_MEMORY_BYTES",
    "MATCH_TIMEOUT_S",
    "MAX_FULLCASE_UNITS",
    "MAX_NESTING",
    "MAX_PATTERN_UNITS",
    "MatchBudget",
    "PatternMemory",
    "PatternTimeout",
    "capped_last_match",
    "capped_match",
    "capped_outcome",
    "check_size",
    "compile_pattern",
    "first_group",
    "full_case_folding",
    "last_match",
    "nesting",
    "pattern_units",
    "runs_inline",
    "validate_pattern",
    "version1",
]

# Seconds one match may take before the item is reported as a timeout.
MATCH_TIMEOUT_S = 0.5
# CPU seconds (of the matching thread) all the matches of one reward call (one request's items) may take.
BATCH_BUDGET_S = 2.0
# Wall seconds those matches may take together, however much CPU time is left, as a multiple of their CPU
# budget: a host that gives the loop a fifth of a core still spends it, and the loop's stall stays bounded.
WALL_CAP_FACTOR = 5
BATCH_WALL_CAP_S = WALL_CAP_FACTOR * BATCH_BUDGET_S

# Characters x (capturing groups + 1) of a text matched on the event loop (:func:`runs_inline`): a match
# of ``(.)*`` took about 80 bytes a unit, a group-free one up to some 120 bytes a character, so at most
# about 30 MB (measured: 20-33 MB for (.)*, ten nested groups, (?:.|b)* and lookarounds at this size).
# A 64K-character response with a pattern of three groups still runs there.
INLINE_MATCH_UNITS = 1 << 18
# Address space one match in a CPU worker may add before it is stopped (``PatternMemory``): far above
# what a pattern that is not pathological takes (a text's size is held before the match starts).
MATCH_MEMORY_BYTES = 64 << 20

T = TypeVar("T")


class PatternTimeout(Exception):
    """A regex match exceeded its time budget."""


class PatternMemory(Exception):
    """A regex match in a CPU worker needed more than ``MATCH_MEMORY_BYTES``."""


class MatchBudget:
    """The matching time left to one reward call; each match gets ``per_match_s`` or what is left.

    ``regex`` times a match by the process's CPU time, so the budget is charged in CPU time too: this
    thread's (``time.thread_time``), which never runs ahead of the process's, so a match that times out is
    charged at most its own timeout. Charged in wall time, as it once was, one catastrophic match on a
    loaded host (0.5 s of CPU over 4.7 s of wall at load 5 on 2 cores) spent the whole 2 s and every later
    item of the call was a spurious ``timeout``; nor is it the process's CPU time, which other threads (a
    model's inference) spend. The wall clock still caps the call at ``wall_cap_s``, so the event loop's
    stall stays bounded however slowly the CPU seconds come.
    """

    def __init__(
        self,
        per_match_s: float = MATCH_TIMEOUT_S,
        total_s: float = BATCH_BUDGET_S,
        wall_cap_s: float | None = None,
    ) -> None:
        self.per_match_s = per_match_s
        self.total_s = total_s
        self.left_s = total_s
        self.wall_cap_s = WALL_CAP_FACTOR * total_s if wall_cap_s is None else wall_cap_s
        self.wall_left_s = self.wall_cap_s

    def run(self, pattern: str, match: Callable[..., T], text: str) -> T:
        """``match(text, timeout=...)`` charged to the budget.

        Raises:
            PatternTimeout: the match ran past its timeout, or the budget was already spent.
        """
        if self.left_s <= 0:
            raise PatternTimeout(
                f"pattern {pattern[:80]!r} not run: this request's matches used up their {self.total_s}s"
            )
        if self.wall_left_s <= 0:
            raise PatternTimeout(
                f"pattern {pattern[:80]!r} not run: this request's matches used up their wall-clock cap "
                f"of {self.wall_cap_s}s (a loaded host)"
            )
        timeout = min(self.per_match_s, self.left_s)
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        try:
            return match(text, timeout=timeout)
        except TimeoutError:
            raise PatternTimeout(f"pattern {pattern[:80]!r} ran past {timeout:.3g}s") from None
        finally:
            self.left_s -= time.thread_time() - cpu0
            self.wall_left_s -= time.perf_counter() - wall0


def runs_inline(rx: regex.Pattern[str], text: str) -> bool:
    """Whether ``rx`` may match ``text`` on the event loop: its memory, about ``len(text) x (groups +
    1)`` x 80 bytes at most, is small (``INLINE_MATCH_UNITS``). Otherwise match it in a CPU worker with
    :func:`capped_match`."""
    return len(text) * (rx.groups + 1) <= INLINE_MATCH_UNITS


def _address_space() -> int | None:
    """This process's address space in bytes (what ``RLIMIT_AS`` bounds), or None where unknown."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return None


@contextlib.contextmanager
def _memory_cap(extra: int) -> Iterator[None]:
    """Lower this process's soft ``RLIMIT_AS`` to its present address space plus ``extra`` for the
    block, then put it back (a soft limit can be raised again up to the hard one): an allocation past it
    fails, and the ``regex`` engine raises MemoryError. For a CPU worker, which runs one item at a time
    on one thread; never the service process."""
    size = _address_space()
    if size is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = size + extra
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft != resource.RLIM_INFINITY and soft <= cap:
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def capped_match(
    pattern: str,
    match: Callable[..., T],
    text: str,
    timeout_s: float = MATCH_TIMEOUT_S,
    memory_bytes: int = MATCH_MEMORY_BYTES,
) -> T:
    """``match(text, timeout=...)`` in a CPU worker, bounded in time and in the address space it may add.

    Raises:
        PatternTimeout: the match ran past ``timeout_s``.
        PatternMemory: it needed more than ``memory_bytes``.
    """
    try:
        with _memory_cap(memory_bytes):
            return match(text, timeout=timeout_s)
    except TimeoutError:
        raise PatternTimeout(f"pattern {pattern[:80]!r} ran past {timeout_s:.3g}s") from None
    except MemoryError:
        raise PatternMemory(
            f"pattern {pattern[:80]!r} needed more than {memory_bytes >> 20} MB on a response of "
            f"{len(text):,} characters (a repeated capturing group keeps every repetition's span)"
        ) from None


def capped_outcome(call: Callable[[], T]) -> T | Outcome:
    """``call()``, a capped match's work in a CPU worker (:func:`capped_match`, :func:`capped_last_match`),
    or the item's invalid outcome past its bounds: ``timeout`` past the match's time, ``resource_limit``
    past its memory. One place for what every reward that matches a caller's pattern in a worker reports."""
    try:
        return call()
    except PatternTimeout as exc:
        return Outcome.invalid(Reason.TIMEOUT, str(exc))
    except PatternMemory as exc:
        return Outcome.invalid(Reason.RESOURCE_LIMIT, str(exc))


def first_group(m: regex.Match[str] | None) -> str | None:
    """The first of ``m``'s groups that took part in the match, None if none did or nothing matched: a
    pattern of alternatives, ``<answer>(.*?)</answer>|\\\\boxed\\{(.*?)\\}``, captures in one or the other
    (group 1 alone was None for a boxed answer, which scored no_answer)."""
    if m is None:
        return None
    return next((g for g in m.groups() if g is not None), None)


# Most units (about one per atom the compiled program holds, a counted repeat ``X{m}`` / ``X{m,}`` /
# ``X{m,n}`` holding m copies of X) a pattern may expand to: about 5 MB of compiled program, so that
# even a full compile_pattern cache (512 patterns) stays within a few GB.
MAX_PATTERN_UNITS = 20_000

# Most units a pattern may have when it turns on full case folding (``(?fi)``): the engine then folds
# every code point of each character class it lays out, about 1 ms for a class of 65,000 (15 s for 19,000
# such classes, within MAX_PATTERN_UNITS), where plain ``(?i)`` takes 0.01 ms.
MAX_FULLCASE_UNITS = 250

# An inline flag group, ``(?fi)``, ``(?i-s:`` or ``(?V1)``, its flags read possessively (linear on any text).
_FLAG_GROUP = regex.compile(r"\(\?([A-Za-z0-9-]*+)[:)]")

_COUNTED = regex.compile(r"\{([0-9]*)(?:,([0-9]*))?\}")
_BRACED_ESCAPES = frozenset("pPNxuUg")


# Deepest nesting of groups a pattern may have: the ``regex`` compiler recurses some five Python frames a
# level, so "(?:" * 200 raised RecursionError out of the config's validation (an HTTP 500, not a 422),
# wherever in the stack the compile ran; 50 is far past a pattern anyone writes and far from the limit.
MAX_NESTING = 50


def pattern_units(pattern: str, nested_sets: bool = False) -> int:
    """An estimate of the size of the program ``regex`` compiles ``pattern`` to (see MAX_PATTERN_UNITS).

    The engine lays out the minimum count of a counted repeat: ``(?:a{3000}){3000}``, 17 characters,
    took 6 s and 2.4 GB to compile on the event loop, and one more level was killed for memory. A scan
    of the text (escapes, classes and groups skipped over as units) is enough to bound that product.
    ``nested_sets``: a ``[`` inside a class opens a nested set, as in version 1 (in version 0 it is the
    character), so the class ends at the ``]`` that closes the outer one.
    """
    return _scan(pattern, nested_sets)[0]


def nesting(pattern: str, nested_sets: bool = False) -> int:
    """How deep ``pattern``'s groups nest ("(a(b))": 2), read as :func:`pattern_units` reads it."""
    return _scan(pattern, nested_sets)[1]


def _scan(pattern: str, nested_sets: bool) -> tuple[int, int]:
    """:func:`pattern_units` and :func:`nesting` of ``pattern``, in one pass."""
    stack: list[list[int]] = [[0, 0]]  # per open group: [total units so far, units of the last atom]
    deepest = 0
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        atom = 1
        if ch == "\\":
            i += 2
            if i - 1 < n and pattern[i - 1] in _BRACED_ESCAPES and i < n and pattern[i] == "{":
                close = pattern.find("}", i)
                i = n if close < 0 else close + 1
        elif ch == "[":
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":
                i += 1
            depth = 1
            while i < n and (pattern[i] != "]" or depth > 1):
                if pattern[i] == "\\":
                    i += 1
                elif pattern.startswith("[:", i):
                    close = pattern.find(":]", i + 2)
                    i = i if close < 0 else close + 1
                elif nested_sets and pattern[i] == "[":
                    depth += 1
                    # the compiler recurses for a nested set as for a group (more frames a level)
                    deepest = max(deepest, len(stack) - 1 + depth - 1)
                    if pattern.startswith("[^", i):
                        i += 1
                    if pattern.startswith("]", i + 1):
                        i += 1  # "[]...]": a leading ] is the character
                elif pattern[i] == "]":
                    depth -= 1
                i += 1
            i += 1
        elif ch == "(":
            if pattern.startswith("(?#", i):
                close = pattern.find(")", i)
                i = n if close < 0 else close + 1
                continue
            stack.append([0, 0])
            deepest = max(deepest, len(stack) - 1)
            i += 1
            continue
        elif ch == ")":
            if len(stack) > 1:
                atom = max(1, stack.pop()[0])
            i += 1
        elif ch == "{":
            m = _COUNTED.match(pattern, i)
            if m is not None and (m.group(1) or m.group(2)):
                frame = stack[-1]
                copies = max(1, int(m.group(1) or 0))
                frame[0] += frame[1] * (copies - 1)
                frame[1] *= copies
                i = m.end()
                continue
            i += 1
        elif ch in "|*+?":
            i += 1
            continue
        else:
            i += 1
        frame = stack[-1]
        frame[0] += atom
        frame[1] = atom
    while len(stack) > 1:  # unbalanced: the compiler will say so
        units = stack.pop()[0]
        stack[-1][0] += units
    return stack[0][0], deepest


def version1(pattern: str) -> bool:
    """Whether an inline flag group of ``pattern`` turns on version 1 (``(?V1)``), in linear time."""
    return any("V1" in m.group(1) for m in _FLAG_GROUP.finditer(pattern))


def full_case_folding(pattern: str, ignorecase: bool = False) -> bool:
    """Whether ``pattern`` may fold case fully, in linear time: an inline flag group names ``f``, or the
    pattern is version 1 (``(?V1)``), which folds fully wherever it ignores case (``ignorecase``, the
    caller's flag, or an inline ``i``)."""
    groups = [m.group(1) for m in _FLAG_GROUP.finditer(pattern)]
    if any("f" in g for g in groups):
        return True
    return any("V1" in g for g in groups) and (ignorecase or any("i" in g for g in groups))


def check_size(pattern: str, ignorecase: bool = False) -> None:
    """Raise ``regex.error`` for a pattern that would expand past MAX_PATTERN_UNITS (MAX_FULLCASE_UNITS
    with full case folding, ``ignorecase`` the caller's flag): what it costs to compile, on the event
    loop; or that nests its groups (and nested sets) more than MAX_NESTING deep, past what the compiler's
    recursion takes.
    A version 1 pattern is also scanned with nested sets, and the larger estimate counts: a scan that ends
    its set at an inner ``]`` reads the rest of the set as groups and repeats."""
    units, depth = _scan(pattern, False)
    if version1(pattern):
        units2, depth2 = _scan(pattern, True)
        units, depth = max(units, units2), max(depth, depth2)
    if depth > MAX_NESTING:
        raise regex.error(f"the pattern nests groups (or sets) {depth} deep, more than {MAX_NESTING}")
    if units > MAX_PATTERN_UNITS:
        raise regex.error(
            f"the pattern expands to about {units:,} units, more than {MAX_PATTERN_UNITS:,} "
            "(nested counted repeats such as (?:a{1000}){1000} multiply); use * + or {0,n}"
        )
    if units > MAX_FULLCASE_UNITS and full_case_folding(pattern, ignorecase):
        raise regex.error(
            f"with full case folding (?f) the pattern may have about {MAX_FULLCASE_UNITS:,} units, it has "
            f"{units:,} (each character class is folded code point by code point); use (?i) alone"
        )


@lru_cache(maxsize=512)
def compile_pattern(
    pattern: str, dotall: bool = True, ignorecase: bool = False, version0: bool = False
) -> regex.Pattern[str]:
    """The compiled pattern; raises ``regex.error`` for one too big to compile (:func:`check_size`).

    Version 0 unless the pattern says ``(?V1)``; ``version0`` pins it (a ``(?V1)`` pattern then raises
    ValueError), for JSON Schema's patterns, which are ECMA-262 ones."""
    check_size(pattern, ignorecase)
    flags = regex.V0 if version0 else 0
    if dotall:
        flags |= regex.DOTALL
    if ignorecase:
        flags |= regex.IGNORECASE
    return regex.compile(pattern, flags)


def validate_pattern(pattern: str, ignorecase: bool = False) -> str:
    """For config validators: raise ValueError with the compiler's message when the pattern is invalid
    (``ignorecase``: as it will be compiled, which bounds a version 1 pattern as full case folding)."""
    try:
        compile_pattern(pattern, ignorecase=ignorecase)
    except (regex.error, ValueError) as exc:  # ValueError: flags that conflict, (?V0) with (?V1)
        raise ValueError(f"not a valid regular expression: {exc}") from None
    return pattern


def _last_of(rx: regex.Pattern[str]) -> Callable[..., regex.Match[str] | None]:
    """``rx``'s last non-overlapping match in a text, as a match function of ``(text, timeout=)``."""

    def scan(text: str, timeout: float) -> regex.Match[str] | None:
        last = None
        for m in rx.finditer(text, timeout=timeout):
            last = m
        return last

    return scan


def last_match(
    pattern: str,
    text: str,
    *,
    dotall: bool = True,
    ignorecase: bool = False,
    timeout_s: float = MATCH_TIMEOUT_S,
    budget: MatchBudget | None = None,
) -> regex.Match[str] | None:
    """The last non-overlapping match of ``pattern`` in ``text``, or None (``budget``: the call's).
    On the event loop: for a text :func:`runs_inline` refuses, :func:`capped_last_match` in a worker."""
    scan = _last_of(compile_pattern(pattern, dotall, ignorecase))
    return (budget or MatchBudget(timeout_s, total_s=timeout_s)).run(pattern, scan, text)


def capped_last_match(
    pattern: str,
    text: str,
    *,
    dotall: bool = True,
    ignorecase: bool = False,
    timeout_s: float = MATCH_TIMEOUT_S,
) -> regex.Match[str] | None:
    """:func:`last_match` in a CPU worker, bounded in time and memory as :func:`capped_match` bounds it.

    Raises:
        PatternTimeout: the matches ran past ``timeout_s``.
        PatternMemory: one needed more than ``MATCH_MEMORY_BYTES``.
    """
    return capped_match(pattern, _last_of(compile_pattern(pattern, dotall, ignorecase)), text, timeout_s)
