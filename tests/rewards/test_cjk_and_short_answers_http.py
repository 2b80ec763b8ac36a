"""Answers a user scores every day that the text rewards got wrong: Chinese and Japanese answers (written
without spaces), short answers, through POST /v1/score on the real app. Found in review."""

from __future__ import annotations

from typing import Any

import httpx
import pytest


async def score(client: httpx.AsyncClient, reward: dict[str, Any], items: list[dict[str, Any]]) -> list[Any]:
    r = await client.post("/v1/score", json={"reward": reward, "items": items})
    assert r.status_code == 200, r.text
    results: list[dict[str, Any]] = r.json()["results"]
    return results


@pytest.mark.parametrize(
    ("response", "reference", "f1", "precision", "recall"),
    [
        # 2 of 3 characters predicted are gold, both gold ones found: P=2/3, R=1 -> 0.8
        ("東京都", "東京", 0.8, 2 / 3, 1.0),
        # a sentence holding the answer: 2 common of 8 predicted (punctuation dropped), P=1/4, R=1 -> 0.4
        ("北京是中国的首都。", "北京", 0.4, 0.25, 1.0),
        # kana are tokens too, a Latin word beside ideographs one token: P=2/5, R=2/3 -> 0.5
        ("東京タワー", "東京 tower", 0.5, 0.4, 2 / 3),
        ("東京 Tower", "東京 tower", 1.0, 1.0, 1.0),
        # the prolonged sound mark ー is kana's, not glued to a Latin word after it ("ーw"): 2 common of 6
        # predicted, P=1/3, R=1 -> 0.5 (it was 0.29)
        ("サッカーW杯", "W杯", 0.5, 1 / 3, 1.0),
        # Hangul is written with spaces: its words stay words
        ("서울 특별시", "서울", 2 / 3, 0.5, 1.0),
    ],
)
async def test_f1_gives_cjk_answers_partial_credit(
    client: httpx.AsyncClient, response: str, reference: str, f1: float, precision: float, recall: float
) -> None:
    """A Chinese or Japanese answer was one whitespace token, so F1 was 1.0 for the exact string and 0.0
    for anything else ("東京都" against "東京", a sentence holding the answer): exact match with extra
    steps, no partial credit. Each ideograph or kana is a token, as MLQA's script segments Chinese."""
    [res] = await score(client, {"name": "f1"}, [{"response": response, "reference": reference}])
    assert res["valid"], res
    assert res["score"] == pytest.approx(f1)
    assert res["components"]["precision"] == pytest.approx(precision)
    assert res["components"]["recall"] == pytest.approx(recall)


@pytest.mark.parametrize("answer", ["Paris", "New York", "the Eiffel Tower", "a b c d e"])
async def test_bleu_of_a_copy_of_the_reference_is_one(client: httpx.AsyncClient, answer: str) -> None:
    """BLEU-4 of a response under four words has no 2-, 3- or 4-gram to match, each counted as 0.1 by
    the smoothing: a copy of the reference "Paris" scored 0.18, of "New York" 0.32, of a three-word one
    0.56, so the short answers a QA policy is asked for never reached 1.0 and the longer the copy the
    more it earned. A short response is weighed over the orders it has, as NLTK's auto_reweigh and
    sacrebleu's effective order do."""
    [res] = await score(
        client,
        {"name": "text_similarity", "config": {"metric": "bleu"}},
        [{"response": answer, "reference": answer}],
    )
    assert res["valid"] and res["score"] == pytest.approx(1.0), res


async def test_bleu_of_a_short_partial_answer_is_partial(client: httpx.AsyncClient) -> None:
    """A one-word response to a two-word reference: unigram precision 1, brevity penalty e^(1 - 2/1)."""
    [res] = await score(
        client,
        {"name": "text_similarity", "config": {"metric": "bleu"}},
        [{"response": "Paris", "reference": "Paris France"}],
    )
    assert res["valid"] and res["score"] == pytest.approx(0.36787944117144233), res


@pytest.mark.parametrize(
    ("response", "reference", "expected", "strategy"),
    [
        ("答案是B", "B", 1.0, "answer_is"),  # "the answer is B": nothing was found (no_answer)
        ("答案是B，因为A和C都不对。", "B", 1.0, "answer_is"),  # "... because A and C are wrong": C was read
        ("所以答案为 (C)", "C", 1.0, "answer_is"),
        ("答案应该是选项D", "D", 1.0, "answer_is"),  # "the answer should be option D"
        ("正确答案：Ｂ", "B", 1.0, "answer_colon"),  # full-width colon and letter
        ("因为A是错的，所以选C", "C", 1.0, "last_letter"),  # "A is wrong, so choose C"
        ("答えはBです", "B", 1.0, "last_letter"),  # Japanese: "the answer is B"
        ("정답은 B입니다", "B", 1.0, "last_letter"),  # Korean: "the answer is B"
        ("正确答案是A或C。", "C", 0.0, "answer_is"),  # "A or C": a hedge, as "the answer is A or C."
    ],
)
async def test_multiple_choice_reads_a_letter_written_against_cjk_text(
    client: httpx.AsyncClient, response: str, reference: str, expected: float, strategy: str
) -> None:
    """Chinese, Japanese and Korean write the option letter against the text ("答案是B", "选C", "B입니다"),
    and CJK characters are word characters to a regex's \\b: the letter was the start of a word, so
    "答案是B" had no answer at all, and "答案是B，因为A和C都不对" ("B, because A and C are wrong") scored
    the last capital letter, C. The Chinese "the answer is" / "answer:" phrases are read as the English
    ones are, and a letter beside CJK text stands alone."""
    [res] = await score(client, {"name": "multiple_choice"}, [{"response": response, "reference": reference}])
    assert res["valid"] and res["reason"] is None, res
    assert (res["score"], res["details"]["strategy"]) == (expected, strategy), res


@pytest.mark.parametrize("normalize", ["whitespace", "squad"])
async def test_majority_vote_by_string_reads_a_boxed_text_word_as_the_word(
    client: httpx.AsyncClient, normalize: str
) -> None:
    """\\boxed{\\text{Paris}} and \\boxed{Paris} are the same answer written two ways, but string
    equivalence compared "\\text{paris}" (squad: "textparis") with "paris": the group's two Paris votes
    split, so London's two won the pseudo-label, the policy paid for the minority answer."""
    responses = [
        "\\boxed{London}",
        "\\boxed{\\text{Paris}}",
        "\\boxed{Paris}",
        "\\boxed{\\textbf{Paris}}",
        "The answer is London.",
    ]
    res = await score(
        client,
        {"name": "majority_vote", "config": {"equivalence": "string", "normalize": normalize}},
        [{"response": r, "group": "q1"} for r in responses],
    )
    assert [r["score"] for r in res] == [0.0, 1.0, 1.0, 1.0, 0.0], res
    assert {r["details"]["answer"] for r in res[1:4]} == {"paris"}
    assert res[0]["details"]["pseudo_label"] == "paris" and res[0]["details"]["votes"] == 3


@pytest.mark.parametrize(
    ("metric", "response", "reference", "expected"),
    [
        # 1- to 4-gram precision 1 ("首都是北京" is in the reference), brevity penalty e^(1 - 8/5)
        ("bleu", "首都是北京", "中国的首都是北京", 0.5488116360940264),
        # GLEU: 3 of the response's 6 n-grams (東 京 都 東京 京都 東京都) in the reference's 3: min(3/6, 3/3)
        ("gleu", "東京都", "東京", 0.5),
        ("bleu", "北京是中国的首都", "北京是中国的首都", 1.0),
    ],
)
async def test_bleu_and_gleu_read_cjk_characters_as_tokens(
    client: httpx.AsyncClient, metric: str, response: str, reference: str, expected: float
) -> None:
    """Whitespace tokens made a Chinese or Japanese answer, written without spaces, one token: BLEU and
    GLEU were 1.0 for the exact text and 0.0 for anything else, exact match under another name (ROUGE
    already read each character as a word). Each CJK ideograph or kana is a token, as sacrebleu's zh
    tokenizer splits them."""
    [res] = await score(
        client,
        {"name": "text_similarity", "config": {"metric": metric}},
        [{"response": response, "reference": reference}],
    )
    assert res["valid"] and res["score"] == pytest.approx(expected), res


@pytest.mark.parametrize("reward", ["exact_match", "f1"])
async def test_an_extract_pattern_of_alternatives_reads_the_group_that_matched(
    client: httpx.AsyncClient, reward: str
) -> None:
    """An extract pattern that takes either form, <answer>(.*?)</answer>|\\boxed{(.*?)}, captures in
    group 1 or in group 2: only group 1 was read, None for a boxed answer, so a correct boxed answer
    scored 0 (no_answer). The first group that took part in the match is read."""
    pattern = r"<answer>(.*?)</answer>|\\boxed\{(.*?)\}"
    res = await score(
        client,
        {"name": reward, "config": {"extract": pattern}},
        [
            {"response": "So it is \\boxed{Paris}.", "reference": "Paris"},
            {"response": "<answer>Paris</answer>", "reference": "Paris"},
            {"response": "<answer>Lyon</answer> or rather \\boxed{Paris}", "reference": "Paris"},
            {"response": "Paris", "reference": "Paris"},
        ],
    )
    assert [(r["score"], r["reason"]) for r in res] == [(1.0, None)] * 3 + [(0.0, "no_answer")], res
    assert [r["details"]["extracted"] for r in res] == ["Paris", "Paris", "Paris", None]


@pytest.mark.parametrize(
    ("response", "words"),
    [
        # eight ideographs a sentence, and its full stop, left between them, as " . " would be
        ("北京是中国的首都。" * 10, 90),
        ("東京タワーは高い", 8),  # ideographs and kana alike
        ("サーバー2台", 6),  # ー a kana, the number after it a word of its own (it was "ー2")
        ("The 東京 Tower", 4),
        ("서울 특별시", 2),  # Hangul is written with spaces
        ("just three words", 3),
        # Thai, Lao, Khmer and Burmese put no space between words: each letter is a word, its vowel signs
        # and tone marks part of it (a sentence of them was one word)
        ("สวัสดีครับ", 7),  # ส ว ส ด ค ร บ
        ("ภาษาไทย " * 10, 70),
        ("ສະບາຍດີ", 6),  # Lao: ສ ະ ບ າ ຍ ດ
        ("ភាសាខ្មែរ", 5),  # Khmer: ភ ស ខ ម រ (the coeng ្ a mark)
        ("မြန်မာဘာသာ", 5),  # Burmese: မ န မ ဘ သ
        ("ราคา ๑๒๓ บาท", 8),  # ร า ค า, the number ๑๒๓ one word (Thai digits), บ า ท
    ],
)
async def test_length_in_words_counts_each_cjk_character(
    client: httpx.AsyncClient, response: str, words: int
) -> None:
    """A length in whitespace words made a Chinese or Japanese answer, written without spaces, a handful
    of words however long (90 characters: 10 words, one a sentence), so a max_length in words never
    punished one. Each ideograph or kana is a word, as f1 and bleu read them. DAPO's overlong ramp of
    max_length 101, cache 100 reads the length back: (1 - L) / 100."""
    [res] = await score(
        client,
        {
            "name": "length",
            "config": {"mode": "dapo_overlong", "max_length": 101, "cache_length": 100, "unit": "words"},
        },
        [{"response": response}],
    )
    assert res["valid"], res
    assert res["components"]["length"] == words
    assert res["score"] == pytest.approx((1 - words) / 100)


async def test_repetition_penalises_a_cjk_loop(client: httpx.AsyncClient) -> None:
    """A Chinese or Japanese rollout stuck in a loop, written without spaces, was one whitespace word:
    no trigram, no penalty, where the same loop in English was penalised almost fully. Each ideograph or
    kana is a word: 150 characters, 148 trigrams, 3 of them distinct."""
    res = await score(
        client,
        {"name": "repetition"},
        [{"response": "我爱你" * 50}, {"response": "もう一度" * 30}, {"response": "I love you " * 50}],
    )
    assert [r["score"] for r in res] == pytest.approx([-(1 - 3 / 148), -(1 - 4 / 118), -(1 - 3 / 148)]), res
    assert res[0]["details"]["tokens"] == 150
