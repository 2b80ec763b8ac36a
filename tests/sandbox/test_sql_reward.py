"""The `sql` reward: execution match on SQLite, read-only and time-limited, in the CPU workers."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import score_results

SCHEMA = """
CREATE TABLE singer (id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER);
INSERT INTO singer VALUES (1, 'Ann', 'FR', 31), (2, 'Bob', 'US', 45), (3, 'Cleo', 'FR', 27), (4, 'Dan', 'DE', 45);
"""
GOLD = "SELECT name FROM singer WHERE country = 'FR'"


def _item(pred: str, gold: str = GOLD, **ref: Any) -> dict[str, Any]:
    return {"response": pred, "reference": {"query": gold, "schema": SCHEMA, **ref}}


async def test_execution_match_and_components(client: httpx.AsyncClient) -> None:
    results = await score_results(
        client,
        "sql",
        [
            _item("```sql\nSELECT name FROM singer WHERE age < 40;\n```"),  # same rows, other query
            _item(
                "SELECT s.name AS who FROM singer s WHERE s.country='FR'"
            ),  # alias: names ignored by default
            _item("SELECT name FROM singer"),  # executes, wrong rows
            _item("SELECT name, age FROM singer WHERE country = 'FR'"),  # wrong width
            _item("SELEKT name FROM singer"),  # does not parse
            _item("SELECT nme FROM singer"),  # parses, fails
            _item("I don't know."),
        ],
    )
    assert [x["score"] for x in results] == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert results[2]["components"] == {
        "parses": 1.0,
        "executes": 1.0,
        "columns_match": 1.0,
        "rows_match": 0.0,
    }
    assert results[3]["components"]["columns_match"] == 0.0
    assert results[4]["reason"] == "format" and results[4]["components"]["parses"] == 0.0
    assert results[5]["components"]["parses"] == 1.0 and results[5]["components"]["executes"] == 0.0
    assert results[6]["reason"] in ("format", "no_answer")


async def test_columns_in_any_order_match_as_spider_counts_them(client: httpx.AsyncClient) -> None:
    """``SELECT age, name`` for a gold ``SELECT name, age`` scored 0: the rows were compared as tuples only.
    ``columns: any_order`` (Spider's test-suite evaluation) looks for a permutation of the predicted columns
    under which the rows match (as sets, multisets or, ordered, lists); the default stays BIRD's."""
    gold = "SELECT name, age FROM singer"
    items = [
        _item("SELECT age, name FROM singer", gold),  # 0: the columns permuted
        # 1: each column's values right, rows paired wrongly (Ann's age is Dan's): no permutation matches
        _item("SELECT a.name, b.age FROM singer a JOIN singer b ON b.id = a.id % 4 + 1", gold),
        _item("SELECT age, name, name FROM singer", gold),  # 2: another width
        # 3: a predicted column stands for one gold column: age twice is not (age, age)'s permutation of id
        _item("SELECT id, age FROM singer", "SELECT age, age FROM singer"),
        _item("SELECT age AS x, age AS y FROM singer", "SELECT age, age FROM singer"),  # 4
        # 5: the columns permuted and a duplicate row: a set of rows matches, a multiset does not
        _item("SELECT age, name FROM singer UNION ALL SELECT age, name FROM singer WHERE id = 1", gold),
        # 6, 7: the gold sorts: the permuted rows must come in its order
        _item("SELECT age, name FROM singer ORDER BY age, name", gold + " ORDER BY age, name"),
        _item("SELECT age, name FROM singer ORDER BY age DESC, name", gold + " ORDER BY age, name"),
        _item("SELECT age, country FROM singer", gold),  # 8: another column
    ]
    default = await score_results(client, "sql", items)
    assert [r["score"] for r in default] == [0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    anyorder = await score_results(client, "sql", items, columns="any_order")
    assert [r["score"] for r in anyorder] == [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0], anyorder
    assert anyorder[0]["details"]["column_permutation"] == [1, 0]
    assert anyorder[2]["components"]["columns_match"] == 0.0
    multiset = await score_results(client, "sql", items[5:6], columns="any_order", rows="multiset")
    assert multiset[0]["score"] == 0.0
    # names, when they count, are permuted with their columns
    named = await score_results(
        client,
        "sql",
        [
            _item("SELECT age, name FROM singer", gold),
            _item("SELECT age AS name, name AS age FROM singer", gold),
        ],
        columns="any_order",
        column_names=True,
    )
    assert [r["score"] for r in named] == [1.0, 0.0]
    assert named[1]["components"]["columns_match"] == 1.0  # the same names, on the wrong columns


async def test_a_wide_result_in_any_column_order_is_searched_within_bounds(client: httpx.AsyncClient) -> None:
    """40 columns, each a permutation of the same 40 values (row r, column c: (r + c) % 40): every predicted
    column agrees with every gold column value for value, so only the rows tell the 40! orders apart. The
    search answers (not the pool's deadline, which would make the item invalid), right and wrong."""
    width = 40
    cols = [f"c{c}" for c in range(width)]
    rows = ", ".join("(" + ", ".join(str((r + c) % width) for c in range(width)) + ")" for r in range(width))
    schema = f"CREATE TABLE sq ({', '.join(cols)}); INSERT INTO sq VALUES {rows};"
    shuffled = cols[7:] + cols[:7]
    shuffled[3], shuffled[20] = shuffled[20], shuffled[3]
    gold = f"SELECT {', '.join(cols)} FROM sq"
    wrong = list(shuffled)
    wrong[-1] = wrong[0]  # c7 twice, c6 missing: every column's values still agree with every gold column's
    items = [
        {"response": f"SELECT {', '.join(shuffled)} FROM sq", "reference": {"query": gold, "schema": schema}},
        {"response": f"SELECT {', '.join(wrong)} FROM sq", "reference": {"query": gold, "schema": schema}},
    ]
    results = await score_results(client, "sql", items, columns="any_order", rows="multiset")
    assert [(r["valid"], r["score"]) for r in results] == [(True, 1.0), (True, 0.0)], results
    # (the rows' cyclic pattern lets more than one permutation match, as multisets of rows: any will do)
    assert len(results[0]["details"]["column_permutation"]) == 20
    assert "columns_search" not in results[1]["details"]


def test_the_column_search_agrees_with_trying_every_permutation() -> None:
    """The pruned search finds a permutation exactly when one of all n! does (small random results: columns
    permuted, rows shuffled, a cell changed, a row repeated, names that count or not), and what it finds
    does match."""
    import itertools
    import random
    from collections import Counter

    from rewardhub.rewards.sql_columns import match_any_column_order

    def equal(a: list[tuple[int, ...]], b: list[tuple[int, ...]], mode: str) -> bool:
        return (
            a == b if mode == "ordered" else set(a) == set(b) if mode == "set" else Counter(a) == Counter(b)
        )

    def permuted(rows: list[tuple[int, ...]], perm: Sequence[int]) -> list[tuple[int, ...]]:
        return [tuple(r[i] for i in perm) for r in rows]

    rng = random.Random(7)
    for _ in range(600):
        width, top = rng.randint(1, 4), rng.randint(1, 3)
        gold = [tuple(rng.randint(0, top) for _ in range(width)) for _ in range(rng.randint(0, 5))]
        order = rng.sample(range(width), width)
        pred = rng.sample(permuted(gold, order), len(gold))
        if pred and rng.random() < 0.4:
            r, c = rng.randrange(len(pred)), rng.randrange(width)
            pred[r] = pred[r][:c] + (rng.randint(0, top),) + pred[r][c + 1 :]
        if pred and rng.random() < 0.2:
            pred.append(pred[0])
        g_names, p_names = [rng.choice("ab") for _ in range(width)], [rng.choice("aB") for _ in range(width)]
        for mode, names in itertools.product(("ordered", "set", "multiset"), (False, True)):
            found = match_any_column_order(pred, gold, p_names, g_names, mode, names)  # type: ignore[arg-type]
            every = [
                perm
                for perm in itertools.permutations(range(width))
                if equal(permuted(pred, perm), gold, mode)
                and not (names and any(p_names[i].lower() != g_names[j] for j, i in enumerate(perm)))
            ]
            assert (found.permutation is not None) == bool(every), (pred, gold, p_names, g_names, mode, names)
            assert found.permutation is None or list(found.permutation) in [list(p) for p in every]


def test_the_column_search_gives_up_at_its_budget() -> None:
    """Past its budget the permutation search stops and says so (no match), rather than run on for n!."""
    from rewardhub.rewards.sql_columns import match_any_column_order

    rows = [(r, r % 2, (r + 1) % 2) for r in range(8)]
    names = ["a", "b", "c"]
    assert match_any_column_order(rows, rows, names, names, "multiset", False).permutation == [0, 1, 2]
    swapped = [(b, a, c) for a, b, c in rows]
    assert match_any_column_order(swapped, rows, names, names, "multiset", False).permutation == [1, 0, 2]
    small = match_any_column_order(swapped, rows, names, names, "multiset", False, budget=10)
    assert (small.permutation, small.gave_up) == (None, True)


def test_a_column_search_the_first_column_settles_fits_the_budget_of_a_harder_one() -> None:
    """Once a column told the gold rows apart, the rest were charged one column too many: a result whose
    first column is a key (the easy case: the rows pair one way) cost 2·rows·(width + 1) where one that no
    prefix of columns tells apart costs 2·rows·width, so the default budget (5 s, 4M) refused a
    100,000-row result of 20 columns with a key column (resource_limit), the size it is meant to fit.
    Found in review."""
    from rewardhub.rewards.sql_columns import match_any_column_order

    rows, width = 50, 4
    names = ["a", "b", "c", "d"]
    keyed = [(r, 100 + r, 200 + r, 300 + r) for r in range(rows)]  # every column tells the rows apart
    flags = [(r % 2, r // 2 % 2, r // 4 % 2, r // 8 % 2) for r in range(rows)]  # no prefix does (r < 16)
    budget = 2 * rows * width
    for gold in (keyed, flags):
        pred = [(d, c, b, a) for a, b, c, d in reversed(gold)]
        found = match_any_column_order(pred, gold, names[::-1], names, "multiset", False, budget=budget)
        assert found.permutation is not None and not found.gave_up, gold[:2]
        # (the flags' columns are interchangeable in more than one order; the keyed ones in one)
        moved = sorted(tuple(row[p] for p in found.permutation) for row in pred)
        assert moved == sorted(gold)


async def test_order_column_names_and_partial_credit(client: httpx.AsyncClient) -> None:
    ordered_gold = "SELECT name FROM singer ORDER BY age DESC, name"
    reversed_pred = "SELECT name FROM singer ORDER BY age ASC, name DESC"
    auto = await score_results(
        client,
        "sql",
        [
            _item(reversed_pred, ordered_gold),
            _item("SELECT name FROM singer", "SELECT name FROM singer ORDER BY id DESC"),
        ],
    )
    assert [x["score"] for x in auto] == [0.0, 0.0]  # gold has ORDER BY: order matters
    unordered = await score_results(client, "sql", [_item(reversed_pred, ordered_gold)], order="unordered")
    assert unordered[0]["score"] == 1.0
    named = await score_results(
        client, "sql", [_item("SELECT name AS who FROM singer WHERE country = 'FR'")], column_names=True
    )
    assert named[0]["score"] == 0.0
    partial = await score_results(
        client,
        "sql",
        [_item("SELECT name FROM singer")],
        component_weights={"parses": 0.1, "executes": 0.1, "columns_match": 0.2, "rows_match": 0.6},
    )
    assert abs(partial[0]["score"] - 0.4) < 1e-9


async def test_read_only_and_time_limited(client: httpx.AsyncClient, tmp_path: Path) -> None:
    target = tmp_path / "escape.db"
    attacks = [
        "DELETE FROM singer",
        "DROP TABLE singer",
        "UPDATE singer SET age = 0",
        f"ATTACH DATABASE '{target}' AS x",
        f"VACUUM INTO '{target}'",
        "PRAGMA query_only = OFF",
        "SELECT load_extension('/tmp/evil.so')",
        "SELECT 1; DELETE FROM singer",
        "UPDATE sqlite_master SET sql = NULL",
    ]
    results = await score_results(client, "sql", [_item(a) for a in attacks])
    assert all(x["valid"] and x["score"] == 0.0 for x in results), results
    assert not target.exists()
    # the shared in-memory database is unchanged for the next item
    again = await score_results(client, "sql", [_item("SELECT count(*) FROM singer", "SELECT 4")])
    assert again[0]["score"] == 1.0
    slow = await score_results(
        client,
        "sql",
        [_item("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")],
        timeout_s=2.0,  # the gold, and the worker's round trip (2x this + 1 s), must fit on a loaded machine
    )
    assert slow[0]["valid"] and slow[0]["score"] == 0.0 and "time limit" in slow[0]["details"]["error"]


async def test_bad_references_are_invalid(client: httpx.AsyncClient) -> None:
    results = await score_results(
        client,
        "sql",
        [
            {"response": "SELECT 1", "reference": None},
            {"response": "SELECT 1", "reference": {"query": "SELECT nope FROM singer", "schema": SCHEMA}},
            {"response": "SELECT 1", "reference": {"query": "SELECT 1", "schema": "CREATE TABLE ("}},
            {"response": "SELECT 1", "reference": {"query": "SELECT 1", "fixture": "no_such_db"}},
            {"response": "SELECT 1", "reference": {"query": "SELECT 1", "fixture": "../../etc/passwd"}},
        ],
    )
    assert [x["reason"] for x in results] == [
        "missing_reference",
        "parse_error",
        "parse_error",
        "missing_reference",
        "missing_reference",
    ]
    assert not any(x["valid"] for x in results)


async def test_named_fixture_database(make_app: Any, tmp_path: Path) -> None:
    db = tmp_path / "concerts" / "concerts.sqlite"
    db.parent.mkdir()
    with sqlite3.connect(db) as conn:
        conn.executescript(SCHEMA)
    async with make_app(sql_fixtures_dir=str(tmp_path)) as c:
        r = await c.post(
            "/v1/score",
            json={
                "reward": "sql",
                "items": [
                    {
                        "response": "SELECT name FROM singer WHERE age=45",
                        "reference": {
                            "query": "SELECT name FROM singer WHERE id IN (2, 4)",
                            "fixture": "concerts",
                        },
                    },
                    {
                        "response": "DELETE FROM singer",
                        "reference": {"query": "SELECT 1", "fixture": "concerts"},
                    },
                ],
            },
        )
        assert [x["score"] for x in r.json()["results"]] == [1.0, 0.0]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM singer").fetchone() == (4,)


async def test_a_fixture_saved_over_is_not_scored_from_the_cache(make_app: Any, tmp_path: Path) -> None:
    """A fixture database is part of what a score depends on, but only its name was in the cache key:
    once the file was replaced (a corrected dataset), or the service pointed at another fixtures
    directory, the old database's verdicts were still served. Found in review."""
    db = tmp_path / "concerts.sqlite"
    with sqlite3.connect(db) as conn:
        conn.executescript(SCHEMA)
    item = {
        "response": "SELECT name FROM singer WHERE age = 45",
        "reference": {"query": "SELECT name FROM singer WHERE country = 'US'", "fixture": "concerts"},
    }
    async with make_app(sql_fixtures_dir=str(tmp_path)) as c:
        (before,) = await score_results(c, "sql", [item])
        assert (before["score"], before["cached"]) == (0.0, False)
        fixed = tmp_path / "fixed.sqlite"
        with sqlite3.connect(fixed) as conn:
            conn.executescript(SCHEMA.replace("'DE', 45", "'US', 45"))
        fixed.replace(db)
        (after,) = await score_results(c, "sql", [item])
    assert (after["score"], after["cached"]) == (1.0, False), after


async def test_comments_in_the_gold_do_not_decide_the_row_order(client: httpx.AsyncClient) -> None:
    # An apostrophe in a comment is no string: the ORDER BY after it still orders the comparison.
    ordered = "SELECT name FROM singer -- the singer's names, youngest first\nORDER BY age"
    # Words in a comment are no clause: this gold does not sort, so any row order matches.
    unordered = "SELECT name FROM singer /* order by age would be nicer */"
    results = await score_results(
        client,
        "sql",
        [
            _item("SELECT name FROM singer ORDER BY age DESC", ordered),
            _item("SELECT name FROM singer ORDER BY age DESC", unordered),
        ],
    )
    assert [x["score"] for x in results] == [0.0, 1.0]
    assert [x["details"]["ordered"] for x in results] == [True, False]


async def test_only_an_order_by_clause_orders_the_comparison(client: httpx.AsyncClient) -> None:
    """A column named `orderby` made the gold look sorted (any row order of the same rows scored 0.0), and
    an ORDER BY with a comment between its words did not (found in review)."""
    schema = (
        SCHEMA
        + "CREATE TABLE shop (id INTEGER, orderby TEXT);\nINSERT INTO shop VALUES (1, 'a'), (2, 'b');\n"
    )
    unordered_gold = "SELECT orderby FROM shop"
    ordered_gold = "SELECT name FROM singer ORDER/* youngest first */BY age"
    results = await score_results(
        client,
        "sql",
        [
            {
                "response": "SELECT orderby FROM shop ORDER BY id DESC",
                "reference": {"query": unordered_gold, "schema": schema},
            },
            {
                "response": "SELECT name FROM singer ORDER BY age DESC",
                "reference": {"query": ordered_gold, "schema": schema},
            },
        ],
    )
    assert [x["details"]["ordered"] for x in results] == [False, True]
    assert [x["score"] for x in results] == [1.0, 0.0]


async def test_a_statement_that_is_no_query_earns_no_credit(client: httpx.AsyncClient) -> None:
    weights = {"parses": 0.5, "executes": 0.5}  # syntax-style partial credit
    results = await score_results(
        client,
        "sql",
        [
            _item("```sql\n-- I cannot answer this\n```"),
            _item("/* SELECT name FROM singer WHERE country = 'FR' */"),
            _item("REINDEX"),
            _item("SELECT name FROM singer -- a query with a comment still counts"),
        ],
        component_weights=weights,
    )
    assert [x["score"] for x in results] == [0.0, 0.0, 0.5, 1.0]
    assert [x["reason"] for x in results[:2]] == ["no_answer", "no_answer"]
    assert results[2]["components"]["executes"] == 0.0 and "not a query" in results[2]["details"]["error"]


async def test_the_gold_row_limit_holds_after_the_gold_was_cached(make_app: Any) -> None:
    # One worker, so the second request finds the gold result the first one left in its cache.
    item = _item("SELECT name FROM singer", "SELECT name FROM singer")
    async with make_app(cpu_workers=1) as c:
        first = await score_results(c, "sql", [item])
        assert first[0]["score"] == 1.0
        # Over max_rows the gold fails (the dataset's fault, not the model's), as on a fresh worker.
        limited = await score_results(c, "sql", [item], max_rows=2)
    # Its reason is unsupported (this configuration cannot compare it; raising max_rows can), not
    # parse_error: the gold query was read and ran.
    assert not limited[0]["valid"] and limited[0]["reason"] == "unsupported", limited
    assert "more than 2 rows" in limited[0]["details"]["message"]
    assert "max_rows" in limited[0]["details"]["message"]


async def test_a_query_in_an_unclosed_think_block_is_not_the_answer(client: httpx.AsyncClient) -> None:
    cut = f"<think>\nMaybe:\n```sql\n{GOLD}\n```\nor should I join"  # cut off in its reasoning
    late = f"<think>x</think>\n```sql\nSELECT name FROM singer\n```\n<think>\n```sql\n{GOLD}\n```"
    results = await score_results(client, "sql", [_item(cut), _item(late)])
    assert results[0]["score"] == 0.0 and results[0]["reason"] == "no_answer"
    assert results[1]["score"] == 0.0 and results[1]["components"]["executes"] == 1.0


async def test_a_gold_query_past_the_time_limit_is_a_timeout(client: httpx.AsyncClient) -> None:
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    results = await score_results(client, "sql", [_item("SELECT 1", endless)], timeout_s=0.5)
    # Not the model's fault, and not a broken reference either: a slow one, which a later try may score.
    assert not results[0]["valid"] and results[0]["reason"] == "timeout", results


async def test_table_valued_json_functions_are_reads(client: httpx.AsyncClient) -> None:
    schema = (
        SCHEMA
        + 'CREATE TABLE album (id INTEGER, tags TEXT); INSERT INTO album VALUES (1, \'["pop", "rock"]\');'
    )
    gold = "SELECT count(*) FROM album, json_each(album.tags)"
    results = await score_results(
        client,
        "sql",
        [
            {
                "response": "SELECT json_array_length(tags) FROM album",
                "reference": {"query": gold, "schema": schema},
            },
            {
                "response": "SELECT count(*) FROM album, json_each(album.tags)",
                "reference": {"query": "SELECT 2", "schema": schema},
            },
        ],
    )
    assert [(x["valid"], x["score"]) for x in results] == [(True, 1.0), (True, 1.0)], results


async def test_a_schema_dump_builds(client: httpx.AsyncClient) -> None:
    # what `sqlite3 db .dump` writes: a pragma for the dump's own database, then one transaction
    dump = f"PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\n{SCHEMA}COMMIT;\n"
    results = await score_results(
        client,
        "sql",
        [
            {
                "response": "SELECT name FROM singer WHERE age < 40",
                "reference": {"query": GOLD, "schema": dump},
            },
            # pragmas that reach past the database (the worker's heap limit, the schema table) stay denied
            {
                "response": "SELECT 1",
                "reference": {"query": "SELECT 1", "schema": "PRAGMA hard_heap_limit=0;"},
            },
            {
                "response": "SELECT 1",
                "reference": {"query": "SELECT 1", "schema": "PRAGMA writable_schema=ON;"},
            },
        ],
    )
    assert [(x["score"], x["reason"]) for x in results] == [
        (1.0, None),
        (None, "parse_error"),
        (None, "parse_error"),
    ]


def test_a_sort_past_the_heap_limit_does_not_spill_to_the_host_disk() -> None:
    """SQLite spills sorts and temporary tables past its page cache to files in the host's temporary
    directory, outside the heap limit: a predicted query sorting a recursive CTE's output could write
    gigabytes there before its time limit. Temporary storage is now memory, under the heap limit, so
    such a query fails fast as out of memory. Found in review. (Here with a 16 MiB limit and ~60 MB.)"""
    import sqlite3

    from rewardhub.rewards import sql_exec

    original = sql_exec._HEAP_LIMIT_BYTES
    sql_exec._HEAP_LIMIT_BYTES = 16 << 20
    try:
        schema = "CREATE TABLE spill_probe(x INTEGER);"  # a database of its own, opened with that limit
        pred = (
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000) "
            "SELECT count(*) FROM (SELECT printf('%.200c', 'y') || x AS s FROM c ORDER BY s DESC)"
        )
        out = sql_exec.run_sql_pair(
            ("schema", schema, "SELECT 1", pred, 20.0, 1000, 6, "auto", False, "set", "ordered")
        )
    finally:  # the limit is process-wide in SQLite: put the service's back for the tests after this one
        sql_exec._HEAP_LIMIT_BYTES = original
        sqlite3.connect(":memory:").execute(f"PRAGMA hard_heap_limit={original}")
    assert out["executes"] is False and "Memory" in out["error"], out


def test_cached_gold_results_stay_within_a_memory_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    # run_sql_pair is what a CPU worker runs; here in this process, with a small budget to fill quickly.
    from rewardhub.rewards import sql_exec

    budget = 200_000
    monkeypatch.setattr(sql_exec, "_MAX_GOLD_BYTES", budget, raising=False)
    monkeypatch.setattr(sql_exec, "_GOLD", type(sql_exec._GOLD)())
    monkeypatch.setattr(sql_exec, "_gold_bytes", 0, raising=False)
    rows = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100) "
    for width in range(300, 310):  # distinct golds of 100 rows and about 30 KB each, 300 KB in all
        gold = rows + f"SELECT x, printf('%.{width}c', 'x') FROM c"
        out = sql_exec.run_sql_pair(
            ("schema", SCHEMA, gold, gold, 5.0, 1000, 6, "auto", False, "set", "ordered")
        )
        assert out["rows_match"] is True
    held = sum(
        len(v) for g in sql_exec._GOLD.values() for row in g["rows"] for v in row if isinstance(v, str)
    )
    assert 0 < held <= budget


async def test_unordered_rows_compare_as_sets_by_default_and_as_multisets_on_request(
    client: httpx.AsyncClient,
) -> None:
    # The gold has no duplicates; the prediction repeats Ann through a join. BIRD's execution accuracy
    # compares sets (algorithms.md §5.2), Spider's test-suite evaluation multisets.
    gold = "SELECT DISTINCT country FROM singer"
    dup = "SELECT country FROM singer"  # FR twice
    items = [_item(dup, gold), _item("SELECT country FROM singer WHERE country <> 'DE'", gold)]
    as_sets = await score_results(client, "sql", items)
    assert [x["score"] for x in as_sets] == [1.0, 0.0], as_sets
    as_multisets = await score_results(client, "sql", items, rows="multiset")
    assert [x["score"] for x in as_multisets] == [0.0, 0.0], as_multisets
    # An ordered comparison is a list whatever `rows` says.
    ordered = await score_results(
        client, "sql", [_item(dup + " ORDER BY country", gold + " ORDER BY country")]
    )
    assert ordered[0]["score"] == 0.0


async def test_the_request_deadline_caps_the_sql_workers(client: httpx.AsyncClient) -> None:
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    r = await client.post(
        "/v1/score",
        json={
            "reward": {"name": "sql", "config": {"timeout_s": 30}},
            "items": [_item(endless, "SELECT 1 + 0")],
            "options": {"timeout_s": 1.0},
        },
    )
    assert r.status_code == 200, r.text
    result = r.json()["results"][0]
    # Past the caller's own deadline: invalid (and not cached), not a 0.0 for a "slow" query.
    assert not result["valid"] and result["reason"] == "timeout", r.json()


def test_a_query_the_wall_clock_cut_off_on_a_loaded_host_is_served_but_not_cached() -> None:
    """A predicted query is stopped at its time limit by the wall clock: on a loaded host a query that
    finishes in time on an idle one was stopped having run a fraction of it, and its valid 0 was cached
    for the cache's TTL. Found in review. Here another thread holds the interpreter lock (the query's
    progress handler waits for it, as a worker waits for a core), so the query runs a sliver of its limit
    on the CPU: its outcome is now transient (served, never cached), as a code case's wall-clock timeout."""
    import sys
    import threading

    from rewardhub.rewards import sql_exec
    from rewardhub.rewards.sql import SqlConfig, SqlReward

    runaway = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    payload = ("schema", SCHEMA, "SELECT 1", runaway, 0.5, 1000, 6, "auto", False, "set", "ordered")
    stop = threading.Event()

    def hog() -> None:  # pure Python: keeps the interpreter lock for whole switch intervals
        n = 0
        while not stop.is_set():
            n += 1

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.2)
    thread = threading.Thread(target=hog)
    thread.start()
    try:
        out = sql_exec.run_sql_pair(payload)
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)
    assert out["executes"] is False and "time limit" in out["error"], out
    assert out.get("by_wall") is True, out
    o = SqlReward._outcome(out, runaway, SqlConfig())
    assert (o.score, o.transient) == (0.0, True)
    assert "by_wall" not in o.details
    # an answer the query's own cost decided stays cacheable
    (done,) = [
        sql_exec.run_sql_pair(
            ("schema", SCHEMA, "SELECT 1", "SELECT 2", 5.0, 1000, 6, "auto", False, "set", "ordered")
        )
    ]
    assert SqlReward._outcome(done, "SELECT 2", SqlConfig()).transient is False


def test_the_databases_other_items_left_cached_do_not_take_an_item_s_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SQLite's heap limit is the worker process's, and a worker keeps the databases of earlier items: one
    item's big database (its reference's schema) left the next items' queries out of memory, a right
    prediction scored a valid (cached) 0.0 and a gold or a schema that fits alone invalid. Found in review.
    The databases of other items are now closed and the query (or the build) run again. (Here with a 16 MiB
    limit and a database of about 14 MB.)"""
    import sqlite3

    from rewardhub.rewards import sql_exec

    monkeypatch.setattr(sql_exec, "_DATABASES", type(sql_exec._DATABASES)())
    monkeypatch.setattr(sql_exec, "_GOLD", type(sql_exec._GOLD)())
    monkeypatch.setattr(sql_exec, "_gold_bytes", 0, raising=False)
    original = sql_exec._HEAP_LIMIT_BYTES
    sql_exec._HEAP_LIMIT_BYTES = 16 << 20
    rows = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c LIMIT 40000) "
    gold = rows + "SELECT count(*) FROM (SELECT DISTINCT printf('%.100c', 'x') || i FROM c)"
    pred = rows + "SELECT count(*) FROM (SELECT printf('%.100c', 'x') || i FROM c GROUP BY 1)"
    big = (
        "CREATE TABLE big(x); WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c LIMIT 13000) "
        "INSERT INTO big SELECT randomblob(1000) FROM c;"
    )
    built = "CREATE TABLE t(s TEXT); " + rows + "INSERT INTO t SELECT printf('%.100c', 'y') || i FROM c;"

    def run(schema: str, gold: str, pred: str) -> dict[str, Any]:
        return sql_exec.run_sql_pair(
            ("schema", schema, gold, pred, 20.0, 1000, 6, "auto", False, "set", "ordered")
        )

    try:
        assert run(SCHEMA, gold, pred)["rows_match"] is True  # alone: fits (its gold now cached)
        assert run(big, "SELECT count(*) FROM big", "SELECT count(*) FROM big")["rows_match"] is True
        after = [run(SCHEMA, gold, pred), run(SCHEMA + " ", gold, pred), run(built, "SELECT 1", "SELECT 1")]
    finally:  # the limit is process-wide in SQLite: put the service's back for the tests after this one
        sql_exec._HEAP_LIMIT_BYTES = original
        for conn in sql_exec._DATABASES.values():
            conn.close()
        sqlite3.connect(":memory:").execute(f"PRAGMA hard_heap_limit={original}")
    assert [a.get("rows_match") for a in after] == [True, True, True], after


async def test_the_rows_shown_of_a_wrong_result_are_bounded(client: httpx.AsyncClient) -> None:
    """A wrong result's first rows are shown in the details, each value whole: a query of a hundred
    characters (printf of a 100 MB width) made a 200 MB result, held, cached and sent back, a group of them
    gigabytes in the service. Found in review. A value shown is now cut short, and so are the columns."""
    wide = "printf('%.1000000c', 'x')"
    pred = f"SELECT {wide}, x'{'ab' * 1000}', " + ", ".join(["name"] * 40) + " FROM singer"
    gold = f"SELECT {wide}, x'ab', " + ", ".join(["country"] * 40) + " FROM singer"
    r = await client.post(
        "/v1/score", json={"reward": "sql", "items": [_item(pred, gold)], "options": {"use_cache": False}}
    )
    assert r.status_code == 200 and len(r.content) < 100_000, len(r.content)
    (result,) = r.json()["results"]
    assert result["score"] == 0.0
    details = result["details"]
    for sample in (details["pred_sample"], details["gold_sample"]):
        assert len(sample) == 3 and all(len(row) <= 20 for row in sample)
        assert all(len(v) < 1000 for row in sample for v in row if isinstance(v, str))
    assert details["pred_sample"][0][0].startswith("xxxx")


def test_a_column_search_that_gave_up_is_no_score() -> None:
    """Past its budget the search could not say whether some column order matches: that is no verdict on
    the query (0.0 would train a possibly right query as wrong), so the item is invalid, resource_limit."""
    from rewardhub.protocol import Reason
    from rewardhub.rewards.sql import SqlConfig, SqlReward

    value = {
        "parses": True,
        "executes": True,
        "gold_rows": 100_000,
        "columns_match": True,
        "rows_match": False,
        "columns_search": "gave_up",
    }
    outcome = SqlReward._outcome(value, "SELECT b, a FROM t", SqlConfig(columns="any_order"))
    assert (outcome.score, outcome.reason) == (None, Reason.RESOURCE_LIMIT)
    assert "column" in outcome.details["message"]


async def test_a_sum_of_large_amounts_in_another_row_order_is_the_same_number(
    client: httpx.AsyncClient,
) -> None:
    """Floats compared rounded to 6 decimals: past about 1e6 a double holds fewer than that, so the last
    bits a sum's row order leaves (a subquery's, a join's) survived the rounding, and a right query over
    amounts in the billions (BIRD's financial data) scored 0: 7037035803.690001 is not 7037035803.69. Floats
    are rounded to 12 significant digits too; a different amount is still a different amount."""
    schema = (
        "CREATE TABLE tr (a REAL);INSERT INTO tr VALUES (1234567890.12), (2345678901.23), (3456789012.34);"
    )
    gold = "SELECT SUM(a) FROM tr"
    items = [
        {"response": pred, "reference": {"query": gold, "schema": schema}}
        for pred in (
            "SELECT SUM(a) FROM (SELECT a FROM tr ORDER BY a DESC)",  # the same sum, added in another order
            "SELECT 7037035803.69",
            "SELECT 7037035803.7",  # a cent off
            "SELECT 7037035803",
        )
    ]
    results = await score_results(client, "sql", items)
    assert [x["score"] for x in results] == [1.0, 1.0, 0.0, 0.0], results
    # smaller values compare at six decimals, as before
    small = await score_results(
        client,
        "sql",
        [
            {"response": f"SELECT {pred}", "reference": {"query": "SELECT 12.3456789", "schema": schema}}
            for pred in ("12.3456791", "12.345678")
        ],
    )
    assert [x["score"] for x in small] == [1.0, 0.0], small
    # a whole number is kept whole: a REAL total of 14 digits equals the INTEGER one, and not a neighbour
    whole = await score_results(
        client,
        "sql",
        [
            {
                "response": f"SELECT {pred}",
                "reference": {"query": "SELECT 12345678901234.0", "schema": schema},
            }
            for pred in ("12345678901234", "12345678901235", "12345678901234.0")
        ],
    )
    assert [x["score"] for x in whole] == [1.0, 0.0, 1.0], whole


async def test_a_query_in_a_solution_or_answer_tag_is_read(client: httpx.AsyncClient) -> None:
    """SkyRL-SQL's models answer ``<think>...</think><solution>SELECT ...</solution>`` (after ``<sql>``
    queries and their ``<observation>`` in a multi-turn rollout): with no fence, the whole answer, tags
    and all, was the query, a syntax error, so every such answer scored 0 (format). The last
    ``<solution>`` or ``<answer>`` block's text is the query when the answer has no fence."""
    skyrl = (
        "<think>Which singers?</think>\n<sql>SELECT * FROM singer LIMIT 2</sql>\n"
        "<observation>1|Ann|FR|31</observation>\n<think>French ones.</think>\n<solution>\n"
        + GOLD
        + "\n</solution>"
    )
    results = await score_results(
        client,
        "sql",
        [
            _item(skyrl),
            _item(f"<think>x</think>\n<answer>{GOLD};</answer>"),
            _item("<answer>SELECT name FROM singer</answer>"),  # read, and wrong
            _item(f"<answer>\n```sql\n{GOLD}\n```\n</answer>"),  # a fence inside (OmniSQL's): as before
            _item("<solution></solution>"),
        ],
    )
    assert [x["score"] for x in results] == [1.0, 1.0, 0.0, 1.0, 0.0], results
    assert results[2]["components"]["executes"] == 1.0
    assert results[4]["reason"] == "no_answer"


async def test_a_fence_tagged_with_a_dialect_is_read(client: httpx.AsyncClient) -> None:
    """Models fence SQL under their dialect's name (```` ```mysql ````, ```` ```postgresql ````) as often as
    under ``sql``; such a fence was not found, so the whole answer, prose and all, ran as the query and
    scored 0 (format). The query in it runs on SQLite like any other."""
    tags = ["mysql", "PostgreSQL", "sqlite3", "psql", "tsql"]
    results = await score_results(
        client,
        "sql",
        [_item(f"The French singers:\n```{tag}\n{GOLD};\n```\nDone.") for tag in tags]
        + [_item("The French singers:\n```mysql\nSELECT name FROM singer;\n```")],  # read, and wrong
    )
    assert [x["score"] for x in results] == [1.0] * len(tags) + [0.0], results
    assert results[-1]["components"]["executes"] == 1.0


async def test_an_empty_gold_result_and_ties_under_a_limit_are_scored_as_decided(
    client: httpx.AsyncClient,
) -> None:
    """Decisions pinned (see the module's docstring): an empty gold is matched by an empty result of its
    width, and details.gold_rows says it was empty; a gold ORDER BY ... LIMIT over a tie keeps SQLite's
    pick, and a prediction that breaks the tie otherwise scores 0 (BIRD's and Spider's evaluators alike)."""
    empty = "SELECT name FROM singer WHERE country = 'IT'"
    ties = "SELECT name FROM singer ORDER BY age DESC LIMIT 1"  # Bob and Dan are both 45
    results = await score_results(
        client,
        "sql",
        [
            _item("SELECT name FROM singer WHERE country = 'it'", empty),  # a wrong filter: empty too
            _item("SELECT name, age FROM singer WHERE 0", empty),
            _item("SELECT name FROM singer ORDER BY age DESC, id LIMIT 1", ties),
            _item("SELECT name FROM singer ORDER BY age DESC, id DESC LIMIT 1", ties),
        ],
    )
    assert results[0]["score"] == 1.0 and results[0]["details"]["gold_rows"] == 0, results
    assert results[1]["score"] == 0.0
    assert sorted(x["score"] for x in results[2:]) == [0.0, 1.0], results


async def test_text_that_is_not_utf8_is_compared_not_an_error(client: httpx.AsyncClient) -> None:
    """Some of Spider's databases hold TEXT in Latin-1 (Python's sqlite3 cannot decode it to a str: "Could
    not decode to UTF-8 column"), so a gold query reading it failed, and the item was invalid (parse_error)
    however right the prediction; Spider's evaluators decode such text leniently for this. Text that is
    not UTF-8 is now read with its bad bytes escaped: the same bytes compare equal, other bytes do not."""
    schema = (
        "CREATE TABLE city (id INTEGER PRIMARY KEY, name TEXT);"
        "INSERT INTO city VALUES (1, CAST(x'4361666ee9' AS TEXT)), (2, 'Oslo'), (3, CAST(x'4361666ee8' AS TEXT));"
    )
    gold = "SELECT name FROM city WHERE id = 1"
    items = [
        {"response": pred, "reference": {"query": gold, "schema": schema}}
        for pred in (
            "SELECT name FROM city WHERE id < 2",
            "SELECT name FROM city WHERE id = 3",  # another Latin-1 byte
            "SELECT 'Café'",  # the same word in UTF-8 is other bytes
            "SELECT name FROM city WHERE id = 2",
        )
    ]
    results = await score_results(client, "sql", items)
    assert [(x["valid"], x["score"]) for x in results] == [(True, 1.0)] + [(True, 0.0)] * 3, results
    assert [x["components"]["executes"] for x in results] == [1.0] * 4


@pytest.mark.parametrize("folder", ["dbs #2", "spider?v1", "100%"])
async def test_a_fixtures_directory_with_uri_characters_in_its_path(
    make_app: Any, tmp_path: Path, folder: str
) -> None:
    """A fixture is opened through an SQLite URI (read-only, immutable): its path went in unquoted, so a
    directory named with ``#``, ``?`` or ``%`` opened another file (the path cut at the ``#``: an empty
    database, "no such table", every item invalid). The path is now quoted in the URI."""
    db = tmp_path / folder / "concerts.sqlite"
    db.parent.mkdir()
    with sqlite3.connect(db) as conn:
        conn.executescript(SCHEMA)
    async with make_app(sql_fixtures_dir=str(db.parent)) as c:
        reference = {"query": GOLD, "fixture": "concerts"}
        results = await score_results(
            c,
            "sql",
            [
                {"response": "SELECT name FROM singer WHERE age < 40", "reference": reference},
                {"response": "SELECT name FROM singer", "reference": reference},
            ],
        )
    assert [(x["valid"], x["score"]) for x in results] == [(True, 1.0), (True, 0.0)], results


async def test_the_row_limit_of_a_set_comparison_counts_distinct_rows(client: httpx.AsyncClient) -> None:
    """Compared as sets (BIRD's default), a result is its distinct rows: a prediction without the gold's
    DISTINCT over a join matches it in BIRD, but when its duplicates took it past max_rows it failed ("more
    than N rows") and scored 0. Under a set comparison max_rows now bounds the distinct rows; a multiset or
    an ordered comparison still counts every row."""
    gold = "SELECT DISTINCT country FROM singer"  # FR, US, DE
    dup = "SELECT country FROM singer"  # four rows, FR twice
    items = [_item(dup, gold), _item("SELECT name FROM singer", gold)]
    as_sets = await score_results(client, "sql", items, max_rows=3)
    assert [(x["valid"], x["score"]) for x in as_sets] == [(True, 1.0), (True, 0.0)], as_sets
    assert "more than 3 rows" in as_sets[1]["details"]["error"]
    as_multisets = await score_results(client, "sql", items[:1], max_rows=3, rows="multiset")
    assert "more than 3 rows" in as_multisets[0]["details"]["error"]
    ordered = await score_results(
        client, "sql", [_item(dup + " ORDER BY country", gold + " ORDER BY country")], max_rows=3
    )
    assert "more than 3 rows" in ordered[0]["details"]["error"]
    # so does a gold's: four rows, three distinct, within the limit
    over = await score_results(client, "sql", [_item(dup, "SELECT country FROM singer")], max_rows=3)
    assert [(x["valid"], x["score"]) for x in over] == [(True, 1.0)], over


async def test_a_last_fence_of_comments_only_does_not_hide_the_query(client: httpx.AsyncClient) -> None:
    """A closing ```` ```sql ```` block of comments only ("-- the query above answers it") was taken as the
    answer over the real query before it, and the item read no_answer; an empty block was already skipped.
    A block that holds nothing but SQL comments is skipped the same way; a query with a comment is read."""
    tail = "\n```sql\n-- the query above answers it\n/* no more */\n```"
    results = await score_results(
        client,
        "sql",
        [
            _item(f"```sql\n{GOLD};\n```{tail}"),
            _item(f"```sql\n{GOLD};\n```\n```sql\n-- the same, commented\n{GOLD} -- done\n```"),
            _item("```sql\n-- only a comment\n```"),
        ],
    )
    assert [x["score"] for x in results[:2]] == [1.0, 1.0], results
    assert results[2]["score"] == 0.0 and results[2]["reason"] == "no_answer", results[2]


async def test_an_inline_sql_fence_is_read(client: httpx.AsyncClient) -> None:
    """A "Final: ```sql" line opens its block after text on the line; the block was not seen, the whole response
    ran as SQL and the item scored 0 (parse error)."""
    results = await score_results(
        client, "sql", [_item(f"The join is not needed.\nFinal: ```sql\n{GOLD};\n```")]
    )
    assert [(x["valid"], x["score"]) for x in results] == [(True, 1.0)], results
