"""Group rewards through the real app: ``majority_vote`` (TTRL) and ``group_length`` (Kimi k1.5)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest

from rewardhub.protocol import ScoreItem
from rewardhub.rewards.base import ScoreContext
from rewardhub.rewards.majority_vote import MajorityVoteReward


def gid() -> str:
    return f"g-{uuid.uuid4().hex}"  # a fresh group id: groups are remembered across requests


async def results(c: httpx.AsyncClient, reward: Any, items: list[dict[str, Any]]) -> list[Any]:
    resp = await c.post("/v1/score", json={"reward": reward, "items": items})
    assert resp.status_code == 200, resp.text
    out: list[Any] = resp.json()["results"]
    return out


def boxed(answers: list[str], group: str) -> list[dict[str, Any]]:
    return [{"response": f"so \\boxed{{{a}}}", "group": group} for a in answers]


# --- majority_vote ---------------------------------------------------------------------------


async def test_majority_with_math_equivalence(client: httpx.AsyncClient) -> None:
    g = gid()
    # 1/2, 0.5 and \frac{1}{2} are one answer (3 votes) against 3 (2 votes); "none" does not vote
    items = boxed(["1/2", "3", "0.5", "3", "\\frac{1}{2}"], g) + [{"response": "no idea", "group": g}]
    out = await results(client, "majority_vote", items)
    assert [r["score"] for r in out] == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    assert out[5]["reason"] == "no_answer"
    d = out[0]["details"]
    assert (d["pseudo_label"], d["votes"], d["answered"], d["group_size"], d["tie"]) == (
        "1/2",
        3,
        5,
        6,
        False,
    )
    assert [r["cached"] for r in out] == [False] * 6


async def test_years_are_no_days_and_convert_to_months(client: httpx.AsyncClient) -> None:
    # math 1.1.15: "5 years" and "5 days" were one vote (the unit words dropped, 3 votes against 2), "1 year"
    # and "12 months" two; now 1 year and 12 months are the majority (3 votes), 5 days (2) and 5 years (1)
    out = await results(
        client,
        "majority_vote",
        boxed(["5 years", "5 days", "1 year", "12 months", "12 months", "5 days"], gid()),
    )
    assert [r["score"] for r in out] == [0.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    assert (out[0]["details"]["pseudo_label"], out[0]["details"]["votes"]) == ("12 months", 3)


async def test_cubic_inches_and_cents_are_one_vote(client: httpx.AsyncClient) -> None:
    # math 1.1.16: "8 in^3" and "8 cubic inches" were two votes, and "8 \\text{ in}^2" and "8 cubic inches"
    # one (both 8 once the unit words were dropped); now 8 in^3 and 8 cubic inches are the majority (3 votes)
    out = await results(
        client,
        "majority_vote",
        boxed(["8 \\text{ in}^2", "8 in^3", "8 cubic inches", "8 \\text{ in}^2", "8 in³"], gid()),
    )
    assert [r["score"] for r in out] == [0.0, 1.0, 1.0, 0.0, 1.0]
    assert out[0]["details"]["votes"] == 3
    # ... and "50¢", "50 cents" and "\\$0.50" one answer (3 votes) against "\\$50" (2); 50¢ was a vote of its
    # own (a tie, 2 votes to 2)
    out = await results(
        client, "majority_vote", boxed(["50¢", "\\$50", "50 cents", "\\$50", "\\$0.50"], gid())
    )
    assert [r["score"] for r in out] == [1.0, 0.0, 1.0, 0.0, 1.0]


async def test_rate_fractions_and_dollar_thousands_are_one_vote(client: httpx.AsyncClient) -> None:
    # math 1.0.19: "96.56 \\frac{\\text{km}}{\\text{h}}" and "60 mph" were two votes; now they and "96.56
    # km/h" are the majority (3 votes) against "96.56 \\frac{\\text{km}}{\\text{s}}" (2), a rate in other units
    out = await results(
        client,
        "majority_vote",
        boxed(
            [
                "96.56 \\frac{\\text{km}}{\\text{s}}",
                "60 mph",
                "96.56 \\frac{\\text{km}}{\\text{h}}",
                "96.56 \\frac{\\text{km}}{\\text{s}}",
                "96.56 km/h",
            ],
            gid(),
        ),
    )
    assert [r["score"] for r in out] == [0.0, 1.0, 1.0, 0.0, 1.0]
    assert out[0]["details"]["votes"] == 3
    # ... and "\\$1,200, \\$5" and "1200, 5" one answer (3 votes) against "1, 200, 5" (2), which the amounts'
    # groups were one with (a 3-2 tie)
    out = await results(
        client,
        "majority_vote",
        boxed(["1, 200, 5", "\\$1,200, \\$5", "1200, 5", "1, 200, 5", "\\$1,200, 5"], gid()),
    )
    assert [r["score"] for r in out] == [0.0, 1.0, 1.0, 0.0, 1.0]
    assert out[0]["details"]["votes"] == 3


async def test_inches_weeks_and_dollar_thousands_against_cents_are_votes_of_their_own(
    client: httpx.AsyncClient,
) -> None:
    # math 1.0.20: "8 in" and "8 cm" were one vote (the word "in" dropped), and "8 in" and "20.32 cm" two; now
    # "8 in" and "20.32 cm" are the majority (3 votes) against "8 cm" (2)
    out = await results(client, "majority_vote", boxed(["8 cm", "8 in", "20.32 cm", "8 cm", "8 in"], gid()))
    assert [r["score"] for r in out] == [0.0, 1.0, 1.0, 0.0, 1.0]
    assert out[0]["details"]["votes"] == 3
    # ... "143 weeks" is no rounding of "1000 days" (1000/7 weeks), which "1001 days" is: 3 votes against 2
    out = await results(
        client,
        "majority_vote",
        boxed(["1000 days", "143 weeks", "1001 days", "1000 days", "143 weeks"], gid()),
    )
    assert [r["score"] for r in out] == [0.0, 1.0, 1.0, 0.0, 1.0]
    # ... and "\\$1,200, \\$300" is "120000 cents, 30000 cents" (3 votes), not "1200 cents, 300 cents" (2)
    answers = [
        "1200 cents, 300 cents",
        "\\$1,200, \\$300",
        "120000 cents, 30000 cents",
        "1200 cents, 300 cents",
        "\\$1,200, \\$300",
    ]
    out = await results(client, "majority_vote", boxed(answers, gid()))
    assert [r["score"] for r in out] == [0.0, 1.0, 1.0, 0.0, 1.0]


async def test_an_inch_is_no_vote_for_hours(client: httpx.AsyncClient) -> None:
    # math 1.0.21: "8 in" and "8 hours" were one vote (the word "in" dropped: all 5 scored 1); now "8 in" is
    # an inch against any unit, and its 3 votes beat "8 hours" (2)
    out = await results(client, "majority_vote", boxed(["8 hours", "8 in", "8 hours", "8 in", "8 in"], gid()))
    assert [r["score"] for r in out] == [0.0, 1.0, 0.0, 1.0, 1.0]
    assert out[0]["details"]["votes"] == 3


async def test_degrees_are_no_vote_for_centimetres(client: httpx.AsyncClient) -> None:
    # math 1.0.21: "8^\\circ" and "8 cm" were one vote (both units dropped: all 5 scored 1); now 3 votes for
    # "8 cm" beat 2 for "8^\\circ"
    out = await results(
        client, "majority_vote", boxed(["8^\\circ", "8 cm", "8^\\circ", "8 cm", "8 cm"], gid())
    )
    assert [r["score"] for r in out] == [0.0, 1.0, 0.0, 1.0, 1.0]
    assert out[0]["details"]["votes"] == 3


async def test_radians_are_no_vote_for_degrees(client: httpx.AsyncClient) -> None:
    # math 1.0.21 as first extended: "8 rad" and "8^\\circ" were one vote (the word dropped, the 8 read in
    # degrees: all 5 scored 1); now 3 votes for "8^\\circ" beat 2 for "8 rad", and "\\pi rad" is "180^\\circ"
    out = await results(
        client, "majority_vote", boxed(["8 rad", "8^\\circ", "8 rad", "8^\\circ", "8^\\circ"], gid())
    )
    assert [r["score"] for r in out] == [0.0, 1.0, 0.0, 1.0, 1.0]
    assert out[0]["details"]["votes"] == 3
    answers = ["\\pi \\text{ rad}", "180^\\circ", "90^\\circ", "\\pi \\text{ rad}", "90^\\circ"]
    out = await results(client, "majority_vote", boxed(answers, gid()))
    assert [r["score"] for r in out] == [1.0, 1.0, 0.0, 1.0, 0.0]


async def test_symbolic_equivalence_goes_to_the_cpu_pool(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = client.app.state.runtime.cpu_pool  # type: ignore[attr-defined]
    sent: list[Any] = []
    real_run = pool.run

    async def counting_run(fn: Any, payloads: Any, deadline_s: float) -> Any:
        sent.extend(payloads)
        return await real_run(fn, payloads, deadline_s)

    monkeypatch.setattr(pool, "run", counting_run)
    g = gid()
    items = boxed(["\\frac{\\sqrt{3}}{2}", "1", "\\sqrt{3}/2", "1", "\\frac{\\sqrt 3}{2}"], g)
    out = await results(client, "majority_vote", items)
    assert sent  # the quick check could not settle every pair: one batch went to the workers
    assert [r["score"] for r in out] == [1.0, 0.0, 1.0, 0.0, 1.0]
    assert out[0]["details"]["votes"] == 3


@pytest.mark.parametrize(
    ("tie_break", "scores", "label"),
    [
        ("first", [1.0, 0.0, 0.0, 1.0, 0.0], "3"),  # 3 and 5 tie at 2 votes: 3 appears first
        # no pseudo-label: the answers cannot be scored (every member 0 said all were wrong)
        ("none", [None, None, None, None, 0.0], None),
    ],
)
async def test_ties(
    client: httpx.AsyncClient, tie_break: str, scores: list[float | None], label: str | None
) -> None:
    reward = {"name": "majority_vote", "config": {"tie_break": tie_break}}
    g = gid()
    out = await results(client, reward, [*boxed(["3", "5", "5", "3"], g), {"response": "hmm", "group": g}])
    assert [r["score"] for r in out] == scores
    assert out[0]["details"]["tie"] is True and out[0]["details"]["pseudo_label"] == label
    assert out[4]["reason"] == "no_answer"  # no answer is a 0 either way
    if tie_break == "none":
        assert {r["reason"] for r in out[:4]} == {"unsupported"}
        assert "2 answers tie at 2 votes" in out[0]["details"]["message"]


async def test_tie_goes_to_the_cluster_with_the_earliest_answer(client: httpx.AsyncClient) -> None:
    # 3 (3 votes) ties with {0.5, 1/2} (3 votes); 1/2 is the first answer of the request, but it
    # joins the 0.5 cluster (clustered most voted first), so that cluster must count from position 0
    out = await results(client, "majority_vote", boxed(["1/2", "3", "0.5", "0.5", "3", "3"], gid()))
    assert [r["score"] for r in out] == [1.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    d = out[0]["details"]
    assert (d["pseudo_label"], d["votes"], d["tie"]) == ("0.5", 3, True)


async def test_a_draft_in_the_reasoning_is_no_vote(client: httpx.AsyncClient) -> None:
    """The answer was extracted from the whole response, so a box in the reasoning outvoted the final
    answers (boxed is tried first) and a response cut off while it reasoned voted with its draft."""
    g = gid()
    items = [
        {"response": "<think>maybe \\boxed{5}</think> The answer is 3.", "group": g},
        {"response": "<think>\\boxed{5}?</think> The answer is 3.", "group": g},
        {"response": "<think>so far \\boxed{5}", "group": g},  # cut off while it reasoned
        {"response": "so \\boxed{5}", "group": g},
    ]
    out = await results(client, "majority_vote", items)
    assert out[0]["details"]["pseudo_label"] == "3", out[0]
    assert [r["score"] for r in out] == [1.0, 1.0, 0.0, 0.0]
    assert out[2]["reason"] == "no_answer"


async def test_string_equivalence_and_several_groups(client: httpx.AsyncClient) -> None:
    g1, g2 = gid(), gid()
    reward = {"name": "majority_vote", "config": {"equivalence": "string", "extraction": ["answer_tag"]}}
    items = [
        {"response": "<answer>Paris</answer>", "group": g1},
        {"response": "<answer>  paris </answer>", "group": g2},  # interleaved groups
        {"response": "<answer>PARIS</answer>", "group": g1},
        {"response": "<answer>Lyon</answer>", "group": g2},
        {"response": "<answer>Lyon</answer>", "group": g1},
        {"response": "<answer>Lyon</answer>", "group": g2},
        {"response": "<answer>Ｐａｒｉｓ</answer>", "group": g1},  # full-width: the same answer (NFKC)
    ]
    out = await results(client, reward, items)
    assert [r["score"] for r in out] == [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]
    assert out[0]["details"]["pseudo_label"] == "paris" and out[1]["details"]["pseudo_label"] == "lyon"


async def test_squad_votes_across_unicode_punctuation(client: httpx.AsyncClient) -> None:
    """ "Ocean’s Eleven" with a curly apostrophe was its own cluster under normalize=squad (SQuAD drops
    ASCII punctuation only), so the group's majority answer lost to a minority. Found in review."""
    reward = {
        "name": "majority_vote",
        "config": {"equivalence": "string", "normalize": "squad", "extraction": ["answer_tag"]},
    }
    g = gid()
    answers = ["Ocean’s Eleven", "Ocean's Eleven", "“Ocean's Eleven”", "Heat", "Heat"]
    out = await results(client, reward, [{"response": f"<answer>{a}</answer>", "group": g} for a in answers])
    assert [r["score"] for r in out] == [1.0, 1.0, 1.0, 0.0, 0.0]


async def test_squad_votes_across_full_case_folding(client: httpx.AsyncClient) -> None:
    """normalize=squad lower-cased where whitespace case-folds: "STRASSE" was another vote than "Straße"
    under squad alone, and two minority answers outvoted it."""
    reward = {
        "name": "majority_vote",
        "config": {"equivalence": "string", "normalize": "squad", "extraction": ["answer_tag"]},
    }
    g = gid()
    answers = ["Straße", "STRASSE", "strasse", "Weg", "Weg"]
    out = await results(client, reward, [{"response": f"<answer>{a}</answer>", "group": g} for a in answers])
    assert [r["score"] for r in out] == [1.0, 1.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize("normalize", ["squad", "whitespace"])
async def test_votes_across_the_capital_dotted_i(client: httpx.AsyncClient, normalize: str) -> None:
    """casefold writes "İ" as "i" and a combining dot above: "İstanbul" was another vote than "istanbul"
    and "ISTANBUL", and two minority answers outvoted them. Found in review."""
    reward = {
        "name": "majority_vote",
        "config": {"equivalence": "string", "normalize": normalize, "extraction": ["answer_tag"]},
    }
    g = gid()
    answers = ["İstanbul", "istanbul", "ISTANBUL", "Ankara", "Ankara"]
    out = await results(client, reward, [{"response": f"<answer>{a}</answer>", "group": g} for a in answers])
    assert [r["score"] for r in out] == [1.0, 1.0, 1.0, 0.0, 0.0], out
    assert out[0]["details"]["pseudo_label"] == "istanbul"


async def test_squad_votes_for_an_option_letter_that_is_an_article(client: httpx.AsyncClient) -> None:
    """Under normalize=squad the option letter "A" (an article) normalised to nothing, so every "A" was
    no answer (0.0) and the group's majority went to "B" with fewer votes, where squad exact_match keeps
    a reference's articles when SQuAD's normalisation would empty it (:func:`.text.squad_pair`). Found in
    review. Such an answer votes with its articles kept: "A", "a." and "(A)" vote together, "An" and "The"
    are other answers; a blank one, or punctuation alone ("...", as a cut-off answer writes), is still none
    (three "..." would otherwise label the group)."""
    reward = {
        "name": "majority_vote",
        "config": {"equivalence": "string", "normalize": "squad", "extraction": ["answer_tag"]},
    }
    g = gid()
    answers = ["A", "a.", "(A)", "B", "B", "An", "The", " ", "...", "...", "...", "?"]
    out = await results(client, reward, [{"response": f"<answer>{a}</answer>", "group": g} for a in answers])
    keys = ["a", "a", "a", "b", "b", "an", "the", None, None, None, None, None]
    assert [r["details"]["answer"] for r in out] == keys, out
    assert [r["score"] for r in out] == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0] + [0.0] * 5, out
    assert out[0]["details"]["pseudo_label"] == "a" and out[0]["details"]["votes"] == 3
    assert {r["reason"] for r in out[7:]} == {"no_answer"}


async def test_squad_votes_across_spaces_between_cjk_characters(client: httpx.AsyncClient) -> None:
    """normalize=squad kept the spaces SQuAD's normalisation leaves, where squad exact_match compares CJK
    text as f1's tokens (MLQA): "東京 タワー" was another vote than "東京タワー", though exact_match scores it
    1 against either, and two minority answers outvoted them. Found in review. The key is written without
    a space beside an ideograph or kana, so it reads as the answer does; spaces between words still count."""
    reward = {
        "name": "majority_vote",
        "config": {"equivalence": "string", "normalize": "squad", "extraction": ["answer_tag"]},
    }
    g = gid()
    answers = ["東京タワー", "東京 タワー", "東 京 タ ワ ー", "大阪", "大阪"]
    out = await results(client, reward, [{"response": f"<answer>{a}</answer>", "group": g} for a in answers])
    assert [r["score"] for r in out] == [1.0, 1.0, 1.0, 0.0, 0.0], out
    assert {r["details"]["answer"] for r in out[:3]} == {"東京タワー"}
    assert out[0]["details"]["pseudo_label"] == "東京タワー" and out[0]["details"]["votes"] == 3
    # a Latin word beside CJK text is one token either way; between two Latin words a space still counts
    g = gid()
    answers = ["東京 Tower", "東京tower", "new york", "newyork", "newyork"]
    out = await results(client, reward, [{"response": f"<answer>{a}</answer>", "group": g} for a in answers])
    keys = ["東京tower", "東京tower", "new york", "newyork", "newyork"]
    assert [r["details"]["answer"] for r in out] == keys
    assert out[0]["details"]["tie"] and [r["score"] for r in out] == [1.0, 1.0, 0.0, 0.0, 0.0], out


async def test_no_answers_and_no_group(client: httpx.AsyncClient) -> None:
    g = gid()
    out = await results(
        client,
        "majority_vote",
        [{"response": "hmm", "group": g}, {"response": "dunno", "group": g}, {"response": "\\boxed{1}"}],
    )
    assert [(r["score"], r["reason"]) for r in out] == [
        (0.0, "no_answer"),
        (0.0, "no_answer"),
        (None, "unsupported"),
    ]
    assert out[0]["details"]["pseudo_label"] is None


def votes(responses: list[str], group: str) -> list[dict[str, Any]]:
    return [{"response": r, "group": group} for r in responses]


@pytest.mark.parametrize(
    "responses",
    [
        ["so \\boxed{7}"],  # a group of one
        ["so \\boxed{7}", "no idea", "dunno"],  # only one response has an answer
        ["\\boxed{1}", "\\boxed{2}", "\\boxed{3}"],  # all different: the first "won" with 1 vote
    ],
)
async def test_a_vote_of_one_gives_no_pseudo_label(client: httpx.AsyncClient, responses: list[str]) -> None:
    """A group whose most common answer had one vote still had a pseudo-label: that answer, so it scored
    1.0 for agreeing with itself, the meaningless reward an item without a group is refused for. A
    pseudo-label needs ``min_votes`` (2) agreeing votes; without one the answers cannot be scored
    (invalid ``unsupported``, not 0: nothing says they are wrong), and a response without an answer is
    still a 0 (``no_answer``). Found in review."""
    out = await results(client, "majority_vote", votes(responses, gid()))
    answered = [r for r, text in zip(out, responses, strict=True) if "boxed" in text]
    assert [(r["score"], r["valid"], r["reason"]) for r in answered] == [(None, False, "unsupported")] * len(
        answered
    )
    assert "most common answer has 1 vote" in answered[0]["details"]["message"]
    assert "min_votes is 2" in answered[0]["details"]["message"]
    assert answered[0]["details"]["pseudo_label"] is None
    assert [(r["score"], r["reason"]) for r in out if r not in answered] == [(0.0, "no_answer")] * (
        len(out) - len(answered)
    )


@pytest.mark.parametrize(
    ("min_votes", "answers", "scores"),
    [
        (1, ["7"], [1.0]),  # TTRL as published: a lone answer labels itself
        (1, ["1", "2", "3"], [1.0, 0.0, 0.0]),
        (3, ["3", "3", "5"], [None, None, None]),  # 2 votes are too few
        (3, ["3", "5", "3", "3"], [1.0, 0.0, 1.0, 1.0]),
        (2, ["3", "5", "5", "3"], [1.0, 0.0, 0.0, 1.0]),  # a tie at 2 votes still labels (first)
    ],
)
async def test_min_votes(
    client: httpx.AsyncClient, min_votes: int, answers: list[str], scores: list[float | None]
) -> None:
    reward = {"name": "majority_vote", "config": {"min_votes": min_votes}}
    out = await results(client, reward, boxed(answers, gid()))
    assert [r["score"] for r in out] == scores


@pytest.mark.timeout(120)
async def test_a_group_of_distinct_answers_is_clustered_in_linear_time() -> None:
    """Once the max_pairs comparisons were spent, each further answer still walked every cluster so far
    to count it skipped: quadratic in a group of distinct answers, 20,000 of them (a job's group) held
    the event loop for about 20 s. The count is now taken at once, the same count. Found in review.
    (CPU time, bounded at 10 times what it takes here: the walk took 20 times it.)"""
    reward = MajorityVoteReward(runtime=None)  # type: ignore[arg-type]  # no pair reaches the CPU pool
    n = 20_000
    items = [ScoreItem(response=f"so \\boxed{{{i}}}", group="g") for i in range(n)]
    t0 = time.process_time()
    out = await reward.score(items, reward.parse_config({}), ScoreContext(deadline_s=5))
    spent = time.process_time() - t0
    # a tie of ones: too few votes for a pseudo-label
    assert out[0].score is None and out[1].score is None
    # 256 comparisons, then every later answer skips every cluster before it
    assert out[0].details["pairs_skipped"] == n * (n - 1) // 2 - 256
    assert spent < 10, spent


# --- group_length (Kimi k1.5) ----------------------------------------------------------------

KIMI_META = {"name": "group_length", "config": {"unit": "chars", "correctness": "metadata"}}


def kimi(lengths: list[int], correct: list[bool], group: str) -> list[dict[str, Any]]:
    return [
        {"response": "x" * n, "group": group, "metadata": {"correct": ok}}
        for n, ok in zip(lengths, correct, strict=True)
    ]


async def test_kimi_hand_computed(client: httpx.AsyncClient) -> None:
    # min 10, max 50, range 40:  λ = 0.5 − (len − 10)/40
    #   10 correct: λ = 0.5                  -> 0.5
    #   20 wrong:   λ = 0.25   -> min(0, λ)  -> 0.0
    #   25 correct: λ = 0.125                -> 0.125
    #   50 wrong:   λ = −0.5                 -> −0.5
    #   40 correct: λ = −0.25                -> −0.25
    out = await results(
        client, KIMI_META, kimi([10, 20, 25, 50, 40], [True, False, True, False, True], gid())
    )
    assert [r["score"] for r in out] == [0.5, 0.0, 0.125, -0.5, -0.25]
    assert [r["components"]["lambda"] for r in out] == [0.5, 0.25, 0.125, -0.5, -0.25]
    assert out[0]["details"] == {"min_length": 10, "max_length": 50, "unit": "chars"}


async def test_kimi_equal_lengths_and_invalid_members(client: httpx.AsyncClient) -> None:
    out = await results(client, KIMI_META, kimi([7, 7, 7], [True, False, True], gid()))
    assert [r["score"] for r in out] == [0.0, 0.0, 0.0]
    g = gid()
    tokens = {"name": "group_length", "config": {"unit": "tokens", "correctness": "metadata"}}
    items = [
        {"response": "a", "group": g, "metadata": {"correct": True, "completion_tokens": 100}},
        {
            "response": "b",
            "group": g,
            "metadata": {"correct": True},
        },  # no token count: invalid, not in min/max
        {"response": "c", "group": g, "metadata": {"completion_tokens": 300}},  # no correctness: invalid
        {"response": "d", "group": g, "metadata": {"correct": False, "completion_tokens": 200}},
        {"response": "e", "metadata": {"correct": True, "completion_tokens": 1}},  # no group
    ]
    out = await results(client, tokens, items)
    # min 100, max 300 (the member without correctness still has a length)
    assert [r["score"] for r in out] == [0.5, None, None, 0.0, None]
    assert [r["reason"] for r in out] == [None, "missing_reference", "missing_reference", None, "unsupported"]
    assert out[3]["components"]["lambda"] == 0.0


async def test_kimi_a_lone_length_has_no_relative_length(client: httpx.AsyncClient) -> None:
    """A group of one, or a group where one member's length could be read, had min = max: every such
    member scored 0 as if the group's lengths were all equal, where an item without a group is refused
    (``unsupported``) because a group of one has no relative length. Found in review."""
    [alone] = await results(client, KIMI_META, kimi([12], [True], gid()))
    assert (alone["score"], alone["reason"]) == (None, "unsupported")
    assert "1 member of known length" in alone["details"]["message"]
    g = gid()
    tokens = {"name": "group_length", "config": {"unit": "tokens", "correctness": "metadata"}}
    items = [
        {"response": "a", "group": g, "metadata": {"correct": True, "completion_tokens": 100}},
        {"response": "b", "group": g, "metadata": {"correct": False}},  # no token count
    ]
    out = await results(client, tokens, items)
    assert [(r["score"], r["reason"]) for r in out] == [(None, "unsupported"), (None, "missing_reference")]
    # two members of one length are a group whose lengths are all equal: 0, as Kimi gives
    assert [r["score"] for r in await results(client, KIMI_META, kimi([5, 5], [True, False], gid()))] == [
        0.0,
        0.0,
    ]


async def test_kimi_token_count_past_the_float_range_is_invalid_alone(client: httpx.AsyncClient) -> None:
    """A member's count of 10**400 (JSON integers are unbounded) made ``float(length)`` raise
    OverflowError out of the reward: every member of every group came back ``internal_error``. Found in
    review."""
    g = gid()
    tokens = {"name": "group_length", "config": {"unit": "tokens", "correctness": "metadata"}}
    items = [
        {"response": "a", "group": g, "metadata": {"correct": True, "completion_tokens": 100}},
        {"response": "b", "group": g, "metadata": {"correct": True, "completion_tokens": 10**400}},
        {"response": "c", "group": g, "metadata": {"correct": True, "completion_tokens": 300}},
    ]
    out = await results(client, tokens, items)
    assert [r["score"] for r in out] == [0.5, None, -0.5]
    assert out[1]["reason"] == "parse_error"


async def test_kimi_with_the_math_verifier(client: httpx.AsyncClient) -> None:
    g = gid()
    reward = {"name": "group_length", "config": {"unit": "chars"}}
    items = [
        {"response": "\\boxed{4}", "reference": "4", "group": g},  # 9 chars, correct: 0.5
        {"response": "so \\boxed{4}", "reference": "4", "group": g},  # 12 chars, correct: 0.5 − 3/6 = 0
        {"response": "so so \\boxed{5}", "reference": "4", "group": g},  # 15 chars, wrong: −0.5
        {"response": "so \\boxed{5}", "reference": "4", "group": g},  # 12 chars, wrong: min(0, 0) = 0
    ]
    out = await results(client, reward, items)
    assert [r["score"] for r in out] == [0.5, 0.0, -0.5, 0.0]
    assert [r["components"]["correct"] for r in out] == [1.0, 1.0, 0.0, 0.0]
    assert out[0]["reward_version"].startswith("1.0.7+")  # includes the verifier's version
    missing = await results(client, reward, [{"response": "\\boxed{4}", "group": gid()}])
    assert missing[0]["reason"] == "missing_reference"


async def test_kimi_with_a_group_verifier_votes_with_the_whole_group(client: httpx.AsyncClient) -> None:
    """With a group verifier (majority_vote: label-free correctness) the members whose length could not
    be read were left out of the vote: of 5, 5, 5, 7, 7 the 7s won among the three with token counts,
    and the 5 that agrees with the group's majority was scored wrong."""
    g = gid()
    reward = {
        "name": "group_length",
        "config": {"verifier": {"name": "majority_vote", "config": {"equivalence": "string"}}},
    }
    tokens = [None, None, 10, 20, 30]
    items = [
        {"response": f"\\boxed{{{a}}}", "group": g, "metadata": {} if n is None else {"completion_tokens": n}}
        for a, n in zip(["5", "5", "5", "7", "7"], tokens, strict=True)
    ]
    out = await results(client, reward, items)
    assert [r["valid"] for r in out] == [False, False, True, True, True]
    assert [r["components"].get("correct") for r in out] == [None, None, 1.0, 0.0, 0.0]
    # min 10, max 30: the 5 is correct and shortest (0.5); the 7s are wrong: min(0, λ)
    assert [r["score"] for r in out] == [None, None, 0.5, 0.0, -0.5]


async def test_group_length_config_errors(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/score",
        json={
            "reward": {"name": "group_length", "config": {"correctness": "metadata", "verifier": "math"}},
            "items": [{"response": "x", "group": "g"}],
        },
    )
    assert resp.status_code == 422 and "verifier applies to correctness 'verifier' only" in resp.text
