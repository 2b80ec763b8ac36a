"""``majority_vote``: label-free reward from the group's majority answer (TTRL).

"TTRL: Test-Time Reinforcement Learning" (arXiv 2504.16084): with no gold answer, the G responses of a
prompt vote; the most common final answer is the pseudo-label, and each response is rewarded for
agreeing with it::

    ŷ = argmax_a  #{i : answer_i ≡ a}          r_i = 1[answer_i ≡ ŷ]

The majority of a group of samples is right far more often than one sample (self-consistency), so the
pseudo-label carries signal even where single answers are mostly wrong; the reward needs no reference.

Answers are extracted like the ``math`` reward does (``extraction``: boxed / answer tag / "The answer
is" / last number). Equivalence (``equivalence``):

* ``math`` (default): answers are clustered by mathematical equivalence. Identical strings merge first;
  then each distinct answer, most voted first, is compared with the leader of each cluster so far
  with :func:`rewardhub.mathlib.quick_check` on the event loop; pairs it cannot settle go, for all
  groups of the request in **one** batch, to the CPU pool (``check_pair``, the math reward's full check
  under the per-item deadline), and clusters whose leaders are equivalent merge. A pair that times out
  counts as "not equivalent" (a missed merge costs less than a false one). At most ``max_pairs``
  comparisons per group, the most voted answers first, bound the work when a group has many distinct
  answers (such a group has no strong majority anyway); ``details.pairs_skipped`` says when the bound hit;
* ``string``: answers equal after ``normalize`` (``whitespace``: LaTeX text wrappers dropped, so
  ``\boxed{\text{Paris}}`` votes with ``\boxed{Paris}``, NFKC, so full-width ``Ｐａｒｉｓ`` is ``Paris``,
  then drop invisible format characters, collapse spaces and case-fold (:func:`.text.fold_case`: "İ" is
  "i"); ``squad``: also drop punctuation and articles, and a space beside a CJK ideograph or kana, as
  squad ``exact_match`` compares: "東京 タワー" votes with "東京タワー"; an answer that this would empty keeps
  its articles, as exact_match's reference does, so the option letter "A" votes as "a"; ``none``);
  ``answer`` and ``pseudo_label`` are then shown normalised, and an answer that normalises to nothing (a
  blank one, or punctuation alone) counts as no answer.

Votes count items, so a cluster's votes are the number of responses whose answer is in it. Ties
(``tie_break``): ``first`` (default) takes the tied answer that appears first in the request, as
``Counter.most_common`` in TTRL does; ``none`` gives no pseudo-label, and the tied answers, like every
answer of the group, are invalid (``unsupported``) as below.
A response without an extractable answer does not vote and scores 0 (reason ``no_answer``); a group where
no response has an answer has no pseudo-label. Items without a ``group`` are invalid (``unsupported``):
a vote of one always agrees with itself, a meaningless reward. For the same reason a pseudo-label needs
``min_votes`` (default 2) votes: in a group of one, a group where one response has an answer, or one
where every answer differs, the most common answer has a single vote, and rewarding it for agreeing with
itself says nothing. Such a group has no pseudo-label, and its answers are invalid (``unsupported``, the
message giving the count): the reward could not be computed, where a 0 would say "scored and wrong".
``min_votes: 1`` is TTRL as published (``Counter.most_common(1)`` labels whatever it finds).

Details: ``answer`` (this item's), ``pseudo_label``, ``votes`` (the label's), ``answered`` (items that
voted), ``group_size``, ``tie``. Not cacheable: an item's score depends on the other members.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, cast

from pydantic import Field

from rewardhub.groups import group_indices
from rewardhub.mathlib import DEFAULT_METHODS, extract_answer, quick_check
from rewardhub.mathlib.normalize import unwrap_text
from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, Reward, RewardConfig, ScoreContext, register
from rewardhub.rewards.math_answer import Method
from rewardhub.rewards.text import answer_text, fold_case, fold_forms, join_cjk, squad_normalize, squad_pair
from rewardhub.runtime.cpu_tasks import check_pair

__all__ = ["MajorityVoteConfig", "MajorityVoteReward"]

_DEFAULT_EXTRACTION = cast(tuple[Method, ...], DEFAULT_METHODS)


class MajorityVoteConfig(RewardConfig):
    equivalence: Literal["math", "string"] = Field(
        "math",
        description="math: mathematical equivalence (quick check, then CPU pool); string: normalised text.",
    )
    extraction: tuple[Method, ...] = Field(
        _DEFAULT_EXTRACTION, min_length=1, description="Answer extraction rules, tried in this order."
    )
    normalize: Literal["whitespace", "squad", "none"] = Field(
        "whitespace", description="string: whitespace (collapse, case-fold) | squad | none."
    )
    tie_break: Literal["first", "none"] = Field(
        "first",
        description="first: the tied answer seen first wins; none: no pseudo-label, the answers unsupported.",
    )
    max_pairs: int = Field(
        256, ge=0, le=4096, description="math: most equivalence comparisons per group (most voted first)."
    )
    min_votes: int = Field(
        2,
        ge=1,
        le=100_000,
        description="Fewest votes a pseudo-label needs; below it the group's answers are unsupported "
        "(1: a lone answer labels itself, as TTRL's code does).",
    )


@dataclass(slots=True)
class _Cluster:
    leader: str
    first: int  # position (in the group) of its earliest member
    reps: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _GroupVote:
    """One group's clustering: distinct answers, their clusters (union-find) and pending pairs."""

    members: list[int]  # batch indices
    answers: list[str | None]  # per member
    counts: dict[str, int] = field(default_factory=dict)
    first: dict[str, int] = field(default_factory=dict)
    clusters: list[_Cluster] = field(default_factory=list)
    cluster_of: dict[str, int] = field(default_factory=dict)
    parent: list[int] = field(default_factory=list)
    pending: list[tuple[int, int]] = field(default_factory=list)  # (cluster a, cluster b) undecided
    skipped: int = 0

    def find(self, c: int) -> int:
        while self.parent[c] != c:
            self.parent[c] = self.parent[self.parent[c]]
            c = self.parent[c]
        return c

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # keep the root that appeared first, so a cluster's identity is its earliest answer
            if self.clusters[rb].first < self.clusters[ra].first:
                ra, rb = rb, ra
            self.parent[rb] = ra

    def new_cluster(self, rep: str) -> int:
        self.clusters.append(_Cluster(rep, self.first[rep], [rep]))
        self.parent.append(len(self.parent))
        self.cluster_of[rep] = len(self.clusters) - 1
        return len(self.clusters) - 1


def _normalizer(mode: str) -> Any:
    # \text{Paris}, \textbf{Paris}, \mathrm{Paris}: the way a box writes a word, not another answer
    # (math's unwrap_text); squad made "\text{Paris}" the word "textparis"
    if mode == "squad":
        # no space beside CJK text, as squad exact_match compares (MLQA's tokens): "東京 タワー" is "東京タワー";
        # an answer SQuAD's normalisation empties keeps its articles, as exact_match's reference does
        # (squad_pair): the option letter "A" is "a", where it was nothing (no answer); punctuation alone
        # ("...", a cut-off answer) is still none, or a few of them could label the group
        def squad(s: str) -> str:
            text = unwrap_text(s)
            key = squad_normalize(text)
            if not key:
                key = squad_pair(text, text)[1]
                key = key if any(ch.isalnum() for ch in key) else ""
            return join_cjk(key)

        return squad
    if mode == "whitespace":
        return lambda s: fold_case(" ".join(fold_forms(unwrap_text(s)).split()))
    return lambda s: s


def _vote(g: _GroupVote, tie_break: str) -> tuple[int | None, int, int]:
    """(winning root cluster or None, its votes, how many clusters tie at them) once the clustering is
    final."""
    votes: dict[int, int] = {}
    for rep, n in g.counts.items():
        root = g.find(g.cluster_of[rep])
        votes[root] = votes.get(root, 0) + n
    if not votes:
        return None, 0, 0
    best = max(votes.values())
    tied = sorted((g.clusters[c].first, c) for c, v in votes.items() if v == best)
    if len(tied) > 1 and tie_break == "none":
        return None, best, len(tied)
    return tied[0][1], best, len(tied)


@register
class MajorityVoteReward(Reward[MajorityVoteConfig]):
    name: ClassVar[str] = "majority_vote"
    # 1.0.1: a tie goes to the cluster with the earliest answer; votes are read after </think>, not from
    # the reasoning's drafts or a <think> never closed. 1.0.3: a last number "0,100" is 100, not "0100".
    # 1.0.4: squad drops Unicode punctuation (’ “ ” 。), not only ASCII's. 1.0.5: a pseudo-label needs
    # min_votes (2) votes; a lone vote (group of one, one answer, all different) scored 1.0 for itself,
    # and a tie under tie_break none is unsupported (it scored every answer 0, "wrong")
    # 1.0.6: whitespace and squad drop invisible format characters (Cf), and extracted math answers too:
    # "Par\u200bis" was another vote than "Paris"
    # 1.0.7: string equivalence drops LaTeX text wrappers (whitespace, squad): \boxed{\text{Paris}} was
    # another vote than \boxed{Paris} ("\text{paris}"; "textparis" under squad), splitting the majority
    # 1.0.8: squad case-folds as whitespace does: "STRASSE" was another vote than "Straße" under squad
    # 1.0.9: squad drops the spaces beside CJK characters, as squad exact_match compares (MLQA's tokens):
    # "東京 タワー" was another vote than "東京タワー"; whitespace and squad fold the capital dotted I to i
    # (.text.fold_case): casefold wrote "İ" as "i" and a combining dot, another vote than "istanbul"; an
    # answer squad empties keeps its articles (.text.squad_pair): the option letter "A" was no answer
    # 1.0.9: a last number that is a LaTeX argument (the 4 of \\frac{3}{4}, the 2 of r^2) is read with its math;
    # one grouped with LaTeX's {,} is whole (10{,}000 was 000); "The answer is:" reads the math below it
    # 1.0.11: math: "y = x^2" and "f(x) = x^2" (or "g(t) = t^2") are one vote (they were two), and so are
    # "3 hours" and "180 minutes"; "3 hours" and "3 minutes" are two
    # 1.0.12: math: "f'(x) = x^2" and "f(x) = x^2" are two votes (a prime is a derivative; 1.0.11 made one);
    # "3 hours" and "3 meters" are two votes (they were one); "1000 m" and "1 km" one
    # 1.0.13: math: "1000 m" and "1000" (or "5 s" and "5", "20 percent" and "20\\%") are one vote (they were
    # two); "5 s" and "5 seconds" one; "a = 5" and "f(b) = 5" two (they were one)
    # 1.0.14: math: "1000\\,\\text{m}" and "1000\\,\\text{s}", "t = 3 hours" and "t = 3 minutes", "3 hours, 2" and "3
    # minutes, 2" are two votes (they were one); "5 m/s" and "18 km/h", "1\\,\\text{h}" and "3600\\,\\text{s}" one
    # 1.0.15: math: "(5\\,\\text{m}, 2)" and "(5 hours, 2)" are two votes (they were one);
    # "5\\,\\text{m}/\\text{s}" and "18 km/h" one
    # 1.0.16: math: "2 km^2" and "2000000 m^2", "1 L" and "1000 mL", "(1 hour, 2)" and "(60 minutes, 2)" are one
    # vote (they were two); "5\\,\\text{x}" and "5 hours" two (they were one)
    # 1.0.17: math: "118\\%" and "117.95\\%", "\\arccos(1 - 2a)" and "2\\arcsin\\sqrt{a}", "5\\,\\text{d}" and "5
    # days" are one vote (they were two); "5 wk" and "5 hours" two (they were one); "1 year" and "12 months"
    # one (they were two); "5 days" and "5 years", "5" and "5\\,\\mathrm{d}x", "3 hours" and "3 apples" two
    # (they were one); "25 m^2" and "25 square meters", "3 l" and "3 litres", "50 cents" and "\\$0.50" one
    # (they were two); "25 square meters" and "25 meters", "50 cents" and "\\$50" two (they were one)
    # 1.0.18: math: "8 in^3" and "8 cubic inches", "8 ft²" and "8 square feet", "50¢" and "\\$0.50" are one
    # vote (they were two), and so is "60 mph" after "96.56 km/h" (the other way round it was); "8 \\text{
    # in}^2" and "8 cubic inches", "50 cents, 2" and "\\$50, 2" two (they were one)
    # 1.0.19: math: "96.56 \\frac{\\text{km}}{\\text{h}}" and "60 mph", "\\$1,200, \\$5" and "1200, 5" are one
    # vote (they were two); "\\$1,200, \\$5" and "1, 200, 5" two (they were one)
    # 1.0.20: math: "143 weeks" and "1000 days", "8 in" and "8 cm", "\\$1,200, 5" and "1200 cents, 5" are two
    # votes (they were one); "8 in" and "20.32 cm", "\\$1,200, \\$300" and "120000 cents, 30000 cents" one (they
    # were two)
    # 1.0.21: math: "8 in" and "8 hours" (or "8 kg", "8^\\circ") are two votes (they were one); "8 in" and "8",
    # "8 in total" and "8 hours" still one; "8^\\circ" and "8 cm" (or "8 hours"), "8 °C" and "8 °F", "8\\%"
    # and "8 cm" two (they were one); "in 8 hours" and "8 hours" one (they were two); "8 rad" and "8^\\circ",
    # "8 kelvin" and "8 °C", "8 °C, 2" and "8 °F, 2" two (they were one); "\\pi rad" and "180^\\circ", "8
    # kelvin" and "8 K", "(30 degrees, 2)" and "(30^\\circ, 2)", "in 8\\,\\text{h}" and "8 hours" one (they
    # were two); "(x+y, 2xy)" and "(x + y, 2 xy)" still one, "(1, 2)" and "(1, 2 ab)" still two
    version: ClassVar[str] = "1.0.21"
    description: ClassVar[str] = (
        "TTRL label-free reward: 1 if the answer is equivalent to the group's majority answer, else 0 "
        "(math equivalence or normalised strings); the majority needs `min_votes` (2) votes; needs `group` "
        "on every item; not cacheable."
    )
    config_model = MajorityVoteConfig
    reads = ("response", "group")
    cacheable = False
    group_aware: ClassVar[bool] = True

    async def score(
        self, items: Sequence[ScoreItem], config: MajorityVoteConfig, ctx: ScoreContext
    ) -> list[Outcome]:
        out: list[Outcome | None] = [None] * len(items)
        for i, item in enumerate(items):
            if item.group is None:
                out[i] = Outcome.invalid(
                    Reason.UNSUPPORTED, "majority_vote needs a `group` id on every item (the group votes)"
                )
        norm = _normalizer(config.normalize)
        groups: list[_GroupVote] = []
        for idx in group_indices(items).values():
            answers: list[str | None] = []
            for i in idx:
                # a draft in the reasoning is no vote
                ext = extract_answer(answer_text(items[i].response), config.extraction)
                text = None if ext is None else ext.text if config.equivalence == "math" else norm(ext.text)
                answers.append(text or None)  # an answer that normalises to nothing is no answer
            g = _GroupVote(idx, answers)
            for pos, a in enumerate(answers):
                if a is not None:
                    g.counts[a] = g.counts.get(a, 0) + 1
                    g.first.setdefault(a, pos)
            groups.append(g)
            if config.equivalence == "math":
                self._quick_cluster(g, config.max_pairs)
                await asyncio.sleep(0)  # let other requests in between groups
            else:
                for rep in g.counts:
                    g.new_cluster(rep)
        await self._resolve_pending(groups, ctx)
        for g in groups:
            self._score_group(g, config, out)
        return [o if o is not None else Outcome.invalid(Reason.INTERNAL_ERROR) for o in out]

    @staticmethod
    def _quick_cluster(g: _GroupVote, max_pairs: int) -> None:
        """Cluster distinct answers (most voted first) against cluster leaders with the quick check."""
        budget = max_pairs
        for rep in sorted(g.counts, key=lambda a: (-g.counts[a], g.first[a])):
            joined = None
            mine = len(g.pending)  # the pairs from here on are rep's own
            # (no cluster merges before _resolve_pending: each one here is a root, with its leader)
            for c, cl in enumerate(g.clusters):
                if budget <= 0:
                    # the rest of the clusters go uncompared; counted at once, not walked: with every
                    # answer distinct, walking them was quadratic in the group (a 20,000-member group
                    # spent 20 s here on the event loop after its 256 comparisons)
                    g.skipped += len(g.clusters) - c
                    break
                budget -= 1
                q = quick_check(cl.leader, rep)
                if q is None:
                    g.pending.append((c, -1))  # filled in below with rep's own cluster
                elif q.equivalent:
                    joined = c
                    break
            if joined is None:
                joined = g.new_cluster(rep)
            else:
                cl = g.clusters[joined]
                cl.reps.append(rep)
                # a less voted answer can appear earlier than the leader: the tie-break counts from it
                cl.first = min(cl.first, g.first[rep])
                g.cluster_of[rep] = joined
            # rep's undecided pairs are between those clusters and the one rep is now in
            g.pending[mine:] = [(a, joined) for a, _ in g.pending[mine:]]

    async def _resolve_pending(self, groups: Sequence[_GroupVote], ctx: ScoreContext) -> None:
        """Send every group's undecided leader pairs to the CPU pool in one batch; merge the equivalent."""
        jobs = [(g, a, b) for g in groups for a, b in dict.fromkeys(g.pending) if a != b]
        if not jobs:
            return
        payloads = [(g.clusters[a].leader, g.clusters[b].leader) for g, a, b in jobs]
        results = await self.runtime.cpu_pool.run(check_pair, payloads, ctx.deadline_s)
        for (g, a, b), res in zip(jobs, results, strict=True):
            if res.ok and res.value.equivalent:
                g.union(a, b)

    @staticmethod
    def _score_group(g: _GroupVote, config: MajorityVoteConfig, out: list[Outcome | None]) -> None:
        winner, votes, tied = _vote(g, config.tie_break)
        tie = tied > 1
        unlabelled = None  # why the answers cannot be scored
        if votes and votes < config.min_votes:
            winner = None
            unlabelled = (
                f"no pseudo-label: the group's most common answer has {votes} vote"
                f"{'s' if votes != 1 else ''}, min_votes is {config.min_votes}"
            )
        elif winner is None and votes:
            unlabelled = (
                f"no pseudo-label: {tied} answers tie at {votes} vote{'s' if votes != 1 else ''} "
                "(tie_break none)"
            )
        label = None
        if winner is not None:
            in_winner = [rep for rep in g.counts if g.find(g.cluster_of[rep]) == winner]
            label = min(in_winner, key=lambda a: (-g.counts[a], g.first[a]))
        answered = sum(g.counts.values())
        for pos, i in enumerate(g.members):
            answer = g.answers[pos]
            details: dict[str, Any] = {
                "answer": answer,
                "pseudo_label": label,
                "votes": votes if winner is not None else 0,
                "answered": answered,
                "group_size": len(g.members),
                "tie": tie,
            }
            if g.skipped:
                details["pairs_skipped"] = g.skipped
            if answer is None:
                out[i] = Outcome(0.0, Reason.NO_ANSWER, details=details)
                continue
            if unlabelled is not None:
                out[i] = Outcome.invalid(Reason.UNSUPPORTED, unlabelled, **details)
                continue
            agree = winner is not None and g.find(g.cluster_of[answer]) == winner
            out[i] = Outcome(1.0 if agree else 0.0, details=details)
