"""Running a predicted and a gold SQL query on SQLite, inside a CPU worker process.

This module is imported by the CPU pool's workers (the function is pickled by reference) and keeps a
few built databases per worker, so a GRPO group that shares a schema builds it once. It never writes:

* the database is built from the reference's DDL in memory (a dump's own pragmas such as
  ``foreign_keys`` allowed, none that reach past it: no heap limits, no ``writable_schema``), or
  opened from a fixture file with ``mode=ro&immutable=1``, then locked with ``PRAGMA query_only`` and an authorizer that allows only
  reading (``SELECT``, column reads, functions other than ``load_extension``, table-valued ones such as
  ``json_each``, recursive CTEs) — no ``ATTACH``, no ``PRAGMA``, no writes, no ``VACUUM INTO``;
* a progress handler interrupts a query past its deadline (a cross join of big tables), and the
  pool's hard deadline kills the worker if SQLite ever stops checking;
* ``PRAGMA hard_heap_limit`` bounds SQLite's memory in the worker (the process's, the cached databases'
  included: a query or a build out of memory while other items' databases are held runs again without
  them, so its verdict is its own).
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import time
import urllib.parse
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any, Literal

from rewardhub.rewards.sql_columns import budget_for, match_any_column_order

__all__ = ["run_sql_pair", "without_comments"]

_MAX_DATABASES = 16
_MAX_GOLD = 512
# What the cached gold results of a worker may hold, roughly in bytes (a gold may return up to max_rows
# rows: 512 such results would not fit the worker's memory, and a MemoryError in the next prediction
# would score it 0.0). A bigger result is not cached.
_MAX_GOLD_BYTES = 256 << 20
_HEAP_LIMIT_BYTES = 512 << 20
_DATABASES: OrderedDict[str, sqlite3.Connection] = OrderedDict()
_GOLD: OrderedDict[tuple[str, str, int, int, bool], dict[str, Any]] = OrderedDict()
_gold_bytes = 0
_READ_ACTIONS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
_SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_temp_master", "sqlite_schema", "sqlite_temp_schema"})
# Pragmas a schema dump sets for its own database (``sqlite3 .dump`` starts with ``PRAGMA
# foreign_keys=OFF;``); the rest (heap limits, writable_schema, query_only, ...) stay denied.
_SCHEMA_PRAGMAS = frozenset(
    {
        "foreign_keys", "defer_foreign_keys", "encoding", "user_version", "application_id", "page_size",
        "auto_vacuum", "journal_mode", "synchronous", "locking_mode", "legacy_alter_table",
        "recursive_triggers", "ignore_check_constraints", "automatic_index",
    }
)  # fmt: skip
_DENIED_FUNCTIONS = frozenset({"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"})
_SYNTAX_MARKERS = ("syntax error", "incomplete input", "unrecognized token", "one statement at a time")


def _read_only(action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None) -> int:
    if action == sqlite3.SQLITE_UPDATE and arg1 in _SCHEMA_TABLES:
        # SQLite asks this while it connects a table-valued function (json_each, json_tree) on first use;
        # no query can write the schema table anyway (query_only, and writable_schema is a PRAGMA).
        return sqlite3.SQLITE_OK
    if action not in _READ_ACTIONS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _schema_only(action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None) -> int:
    """While building from the reference's DDL: anything but reaching outside the in-memory database."""
    if action == sqlite3.SQLITE_PRAGMA:
        return sqlite3.SQLITE_OK if (arg1 or "").lower() in _SCHEMA_PRAGMAS else sqlite3.SQLITE_DENY
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _deadline_handler(deadline: float) -> Callable[[], int]:
    return lambda: 1 if time.monotonic() > deadline else 0


def _out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError) or "out of memory" in str(exc)


def _evict_others(key: str) -> bool:
    """Close every cached database but ``key``'s; whether there was one. SQLite's heap limit is the whole
    process's: the databases earlier items left here (an in-memory one holds all its data) take from what
    this item may use, and a query or a build that fits alone ran out of memory after a big one."""
    others = [k for k in _DATABASES if k != key]
    for k in others:
        _DATABASES.pop(k).close()
    return bool(others)


def _execute_alone(
    conn: sqlite3.Connection, key: str, sql: str, deadline: float, max_rows: int, digits: int, distinct: bool
) -> dict[str, Any]:
    """:func:`_execute`, run once more without the other items' databases when it ran out of memory with
    them held (see :func:`_evict_others`): its verdict is its own query's, not what earlier items left."""
    r = _execute(conn, sql, deadline, max_rows, digits, distinct)
    if r.get("memory") and _evict_others(key):
        r = _execute(conn, sql, deadline, max_rows, digits, distinct)
    return r


def _open(kind: str, spec: str, deadline: float) -> tuple[str, sqlite3.Connection]:
    if kind == "fixture":
        st = os.stat(spec)
        key = f"fixture:{spec}:{st.st_mtime_ns}:{st.st_size}"
    else:
        key = "schema:" + hashlib.sha256(spec.encode("utf-8", "surrogatepass")).hexdigest()
    conn = _DATABASES.get(key)
    if conn is not None:
        _DATABASES.move_to_end(key)
        return key, conn
    try:
        conn = _build(kind, spec, deadline)
    except (sqlite3.Error, MemoryError) as exc:
        if not (_out_of_memory(exc) and _evict_others(key)):
            raise
        conn = _build(kind, spec, deadline)  # without the other items' databases in the heap
    _DATABASES[key] = conn
    while len(_DATABASES) > _MAX_DATABASES:
        _, old = _DATABASES.popitem(last=False)
        old.close()
    return key, conn


def _build(kind: str, spec: str, deadline: float) -> sqlite3.Connection:
    """A read-only connection to the fixture, or to an in-memory database built from the schema (closed
    when the build fails: its memory is back before a retry)."""
    if kind == "fixture":
        # quoted: a '#', '?' or '%' in the path is the URI's syntax (a '#' cut the path: another database)
        uri = f"file:{urllib.parse.quote(spec)}?mode=ro&immutable=1"
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    else:
        conn = sqlite3.connect(":memory:", check_same_thread=False)
    try:
        conn.execute(f"PRAGMA hard_heap_limit={_HEAP_LIMIT_BYTES}")
        # sorts and temporary tables past the cache stay in memory, under that limit: in files they went
        # to the host's temporary directory, unbounded but by the time limit (gigabytes in a few seconds)
        conn.execute("PRAGMA temp_store = MEMORY")
        if kind == "schema":
            conn.set_authorizer(_schema_only)
            conn.set_progress_handler(_deadline_handler(deadline), 10_000)
            try:
                conn.executescript(spec)
            finally:
                conn.set_progress_handler(None, 0)
        conn.set_authorizer(None)
        conn.execute("PRAGMA query_only = ON")
        conn.set_authorizer(_read_only)
    except BaseException:
        conn.close()
        raise
    return conn


# The significant digits a float is compared to, besides float_digits' decimals: a double holds about 16,
# and a sum leaves its last few to the order its rows were added in (a subquery's, a join's). Past 1e6,
# 6 decimals are more than a double holds: 7037035803.690001 (one order) was not 7037035803.69 (another).
_SIGNIFICANT_DIGITS = 12


def _normalise(value: Any, digits: int) -> Any:
    if isinstance(value, float):
        # the coarser of `digits` decimals and 12 significant digits: below 10^(12 - digits) (1e6, with 6
        # decimals) the decimals, which the 12 digits would keep as they are (and the formatting cost 3x).
        # A whole number stays whole: 12345678901234.0 (a REAL total) is the INTEGER 12345678901234, which
        # is compared exactly (an id), not 12345678901200. -0.0 == 0.0 and hashes alike after the + 0.0.
        value = round(value, digits)
        if abs(value) >= 10.0 ** (_SIGNIFICANT_DIGITS - digits) and not value.is_integer():
            value = float(f"{value:.{_SIGNIFICANT_DIGITS}g}")
        return value + 0.0
    return value


def _lenient_text(raw: bytes) -> str:
    """TEXT that is not UTF-8 (Latin-1 in some of Spider's databases), its bad bytes escaped (``\\xe9``):
    the same bytes give the same string and other bytes another one, where a decoding error failed the
    query (a gold's made the item invalid). Spider's evaluators decode such text leniently too."""
    return raw.decode("utf-8", "backslashreplace")


_NOT_UTF8 = "Could not decode to UTF-8"


def _execute(
    conn: sqlite3.Connection, sql: str, deadline: float, max_rows: int, digits: int, distinct: bool
) -> dict[str, Any]:
    r = _execute_once(conn, sql, deadline, max_rows, digits, distinct)
    if not r["ok"] and r["error"].startswith(_NOT_UTF8):
        # only then: a Python text factory costs about half again a text-heavy result's fetch
        conn.text_factory = _lenient_text
        try:
            r = _execute_once(conn, sql, deadline, max_rows, digits, distinct)
        finally:
            conn.text_factory = str
    return r


def _execute_once(
    conn: sqlite3.Connection, sql: str, deadline: float, max_rows: int, digits: int, distinct: bool
) -> dict[str, Any]:
    """The query's normalised rows, at most ``max_rows`` of them (of distinct rows when ``distinct``: a set
    comparison's result is its distinct rows, and duplicates past the limit did not fail it in BIRD)."""
    conn.set_progress_handler(_deadline_handler(deadline), 10_000)
    cpu0 = time.thread_time()
    try:
        cur = conn.execute(sql)
        if distinct:
            seen: dict[tuple[Any, ...], None] = {}
            while len(seen) <= max_rows and (batch := cur.fetchmany(4096)):
                for row in batch:
                    seen[tuple(_normalise(v, digits) for v in row)] = None
            rows = list(seen)
        else:
            rows = cur.fetchmany(max_rows + 1)
        columns = [d[0] for d in cur.description or ()]
    except sqlite3.Error as exc:
        message = str(exc)
        if message == "interrupted":
            message = "interrupted: the query ran past its time limit"
            cpu_s = time.thread_time() - cpu0
            return {"ok": False, "error": message, "parses": True, "timed_out": True, "cpu_s": cpu_s}
        syntax = any(m in message for m in _SYNTAX_MARKERS)
        return {"ok": False, "error": message[:300], "parses": not syntax, "memory": _out_of_memory(exc)}
    except (ValueError, MemoryError, OverflowError) as exc:  # e.g. NUL in the text, a heap limit hit
        error = f"{type(exc).__name__}: {exc}"[:300]
        return {"ok": False, "error": error, "parses": True, "memory": _out_of_memory(exc)}
    finally:
        conn.set_progress_handler(None, 0)
    if cur.description is None:  # no result columns: not a query (REINDEX, say), nothing to compare
        return {"ok": False, "error": "not a query: the statement returns no result columns", "parses": True}
    if len(rows) > max_rows:
        return {"ok": False, "error": f"more than {max_rows} rows", "parses": True, "too_many": True}
    norm = rows if distinct else [tuple(_normalise(v, digits) for v in row) for row in rows]
    return {"ok": True, "parses": True, "columns": columns, "rows": norm}


def _quoted_or_comment(sql: str, i: int) -> tuple[int, bool] | None:
    """Where a string or quoted name, or a ``--`` / ``/* */`` comment, that starts at ``i`` ends (a line
    comment at its newline), and whether it is a comment; None when none starts there."""
    n = len(sql)
    ch = sql[i]
    if ch in "'\"`[":
        j = sql.find("]" if ch == "[" else ch, i + 1)
        return (n if j < 0 else j + 1), False
    if sql.startswith("--", i):
        j = sql.find("\n", i)
        return (n if j < 0 else j), True
    if sql.startswith("/*", i):
        j = sql.find("*/", i + 2)
        return (n if j < 0 else j + 2), True
    return None


def without_comments(sql: str) -> str:
    """``sql`` less its ``--`` and ``/* */`` comments (strings and quoted names kept as they are)."""
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        skip = _quoted_or_comment(sql, i)
        if skip is None:
            out.append(sql[i])
            i += 1
            continue
        end, comment = skip
        out.append(" " if comment else sql[i:end])
        i = end
    return "".join(out)


_ORDER_BY = re.compile(r"order\s+by(?![\w$])", re.IGNORECASE)


def _has_top_level_order_by(sql: str) -> bool:
    """Whether ``sql`` sorts its result: an ``ORDER BY`` outside parentheses, strings and comments (a
    comment between the two words is whitespace; ``orderby``, ``order_by_date`` are names)."""
    sql = without_comments(sql)
    depth, i, n = 0, 0, len(sql)
    while i < n:
        skip = _quoted_or_comment(sql, i)
        if skip is not None:
            i = skip[0]
            continue
        ch = sql[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and ch in "oO" and _ORDER_BY.match(sql, i):
            before = sql[i - 1] if i else " "
            if not (before.isalnum() or before in "_$"):
                return True
        i += 1
    return False


def _approx_bytes(rows: list[tuple[Any, ...]]) -> int:
    return sum(64 + 16 * len(row) + sum(len(v) for v in row if isinstance(v, str | bytes)) for row in rows)


def _cache_gold(gkey: tuple[str, str, int, int, bool], g: dict[str, Any]) -> None:
    global _gold_bytes
    g["bytes"] = _approx_bytes(g["rows"])
    if g["bytes"] > _MAX_GOLD_BYTES:
        return
    _GOLD[gkey] = g
    _gold_bytes += g["bytes"]
    while len(_GOLD) > _MAX_GOLD or _gold_bytes > _MAX_GOLD_BYTES:
        _, old = _GOLD.popitem(last=False)
        _gold_bytes -= old["bytes"]


# A predicted query stopped at its time limit having run less than this share of it on the CPU was cut off
# by the wall clock (the worker waited for a core on a loaded host), not by its own cost: its 0 is served,
# never cached (sql.py), as the same query may finish on an idle host. An idle host's runaway query spends
# nearly all of it (the progress handler looks at the clock every 10,000 instructions).
WALL_CUT_CPU_SHARE = 0.9


def run_sql_pair(payload: tuple[str, str, str, str, float, int, int, str, bool, str, str]) -> dict[str, Any]:
    """Execute gold and predicted queries and compare them; returns a small dict of components."""
    kind, spec, gold, pred, timeout_s, max_rows, digits, order, column_names, rows, columns = payload
    deadline = time.monotonic() + timeout_s
    try:
        key, conn = _open(kind, spec, deadline)
    except FileNotFoundError:
        return {"reference_error": "missing", "message": "the fixture database does not exist"}
    except (sqlite3.Error, ValueError, MemoryError) as exc:
        if str(exc) == "interrupted":  # slow to build, not broken: a later try may score the item
            return {"reference_error": "timeout", "message": "the reference schema ran past its time limit"}
        return {"reference_error": "schema", "message": f"the reference schema does not build: {exc}"[:300]}
    ordered = order == "ordered" or (order == "auto" and _has_top_level_order_by(gold))
    distinct = not ordered and rows == "set"  # then a result is its distinct rows, and max_rows counts them
    gkey = (key, gold, digits, max_rows, distinct)  # a gold over max_rows fails, whatever ran before
    g = _GOLD.get(gkey)
    if g is None:
        g = _execute_alone(conn, key, gold, deadline, max_rows, digits, distinct)
        if g["ok"]:
            _cache_gold(gkey, g)
    else:
        _GOLD.move_to_end(gkey)
    if not g["ok"]:
        if g.get("too_many"):  # the gold ran: this configuration cannot compare so many rows
            return {
                "reference_error": "too_many",
                "message": f"the gold query returns {g['error']}: raise max_rows to score this item",
            }
        kind_of_error = "timeout" if g.get("timed_out") else "gold"
        return {"reference_error": kind_of_error, "message": f"the gold query fails: {g['error']}"}
    p = _execute_alone(conn, key, pred, time.monotonic() + timeout_s, max_rows, digits, distinct)
    out: dict[str, Any] = {"parses": p["parses"], "executes": p["ok"], "gold_rows": len(g["rows"])}
    if not p["ok"]:
        out.update(columns_match=False, rows_match=False, error=p["error"])
        if p.get("timed_out") and p["cpu_s"] < WALL_CUT_CPU_SHARE * timeout_s:
            out["by_wall"] = True  # stopped by the wall clock with CPU time to spare: a loaded host
        return out
    same_width = len(p["columns"]) == len(g["columns"])
    p_names, g_names = [c.lower() for c in p["columns"]], [c.lower() for c in g["columns"]]
    any_order = columns == "any_order"
    names_ok = Counter(p_names) == Counter(g_names) if any_order else p_names == g_names
    out["columns_match"] = same_width and (names_ok or not column_names)
    if not same_width:
        rows_match = False
    elif any_order:  # Spider's test-suite evaluation: some permutation of the predicted columns matches
        mode: Literal["ordered", "set", "multiset"] = (
            "ordered" if ordered else "multiset" if rows == "multiset" else "set"
        )
        found = match_any_column_order(
            p["rows"], g["rows"], p["columns"], g["columns"], mode, column_names, budget_for(timeout_s)
        )
        rows_match = found.permutation is not None
        if found.permutation is not None and found.permutation != list(range(len(g_names))):
            out["column_permutation"] = found.permutation[:_SAMPLE_COLUMNS]
        if found.gave_up:
            out["columns_search"] = "gave_up"
    elif ordered:
        rows_match = p["rows"] == g["rows"]
    elif rows == "set":
        rows_match = set(p["rows"]) == set(g["rows"])
    else:
        rows_match = Counter(p["rows"]) == Counter(g["rows"])
    out["rows_match"] = rows_match and out["columns_match"]
    out["ordered"] = ordered
    out["pred_rows"] = len(p["rows"])
    out["pred_columns"] = [c[:_SAMPLE_CHARS] for c in p["columns"][:_SAMPLE_COLUMNS]]
    if not rows_match:
        out["pred_sample"] = _sample(p["rows"])
        out["gold_sample"] = _sample(g["rows"])
    return out


# What the details show of a wrong result: a few rows, their first columns, each value cut short. A value
# whole was a query's to size: printf('%.100000000c', 'x') made a 200 MB result (held, cached, sent back).
_SAMPLE_ROWS, _SAMPLE_COLUMNS, _SAMPLE_CHARS = 3, 20, 200


def _sample(rows: list[tuple[Any, ...]]) -> list[list[Any]]:
    return [[_jsonable(v) for v in r[:_SAMPLE_COLUMNS]] for r in rows[:_SAMPLE_ROWS]]


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return f"x'{value[: _SAMPLE_CHARS // 2].hex()}'" + ("..." if len(value) > _SAMPLE_CHARS // 2 else "")
    if isinstance(value, str) and len(value) > _SAMPLE_CHARS:
        return value[:_SAMPLE_CHARS] + "..."
    return value
