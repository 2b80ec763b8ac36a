"""``sql``: execution match of a predicted query against a gold query on SQLite (text-to-SQL).

Reference: ``{"query": "<gold SQL>", "schema": "<CREATE/INSERT statements>"}`` (built in memory) or
``{"query": ..., "fixture": "<name>"}``, a database file in ``REWARDHUB_SQL_FIXTURES_DIR`` (``<name>.sqlite``,
``<name>.db`` or Spider's ``<name>/<name>.sqlite``). The query is the last fenced ``sql`` block of the
response (``mysql``, ``postgresql``, ``sqlite3`` and other dialects' tags count as ``sql``; else the last untagged block, else, with ``extract: auto``, the text of the last
``<solution>...</solution>`` or ``<answer>...</answer>`` block, SkyRL-SQL's answer, else the whole
response), outside the reasoning: after the last ``</think>`` and before a ``<think>`` that never closes
(:mod:`.code_extract`).

Both queries run in the CPU worker pool (a killable process, hard deadline) on a read-only database
(see :mod:`.sql_exec`). Components: ``parses``, ``executes``, ``columns_match`` (same number of columns,
and same names when ``column_names``), ``rows_match`` (the same set of rows as in BIRD's execution
accuracy, or the same multiset with ``rows: multiset`` as in Spider's test-suite evaluation, or the same
list when the comparison is ordered: ``order: auto`` orders exactly when the gold query has a top-level
``ORDER BY``), the rows' columns in the gold's order (BIRD) or, with ``columns: any_order`` (Spider's
test-suite evaluation), in any order some permutation of the predicted columns matches (:mod:`.sql_columns`:
a bounded search; ``details.column_permutation`` the predicted column of each gold column when not theirs).
Floats compare rounded to ``float_digits`` decimals and to 12 significant digits (a sum's last bits are
its row order's; a whole number stays whole); ``1`` equals ``1.0``, ``NULL`` is not ``''``, strings compare exactly (case included;
TEXT that is not UTF-8, Latin-1 in some of Spider's databases, is read with its bad bytes escaped).
An empty gold result is matched by any empty result of the same width (BIRD's and Spider's evaluators
accept any empty one, whatever its columns); ``details.gold_rows`` (0) marks such items, weak signal: a
filter that is wrong returns nothing too. A gold ``ORDER BY ... LIMIT`` over tied values keeps the rows
SQLite picked, and a prediction that breaks the tie otherwise (or, ordered, orders tied rows otherwise)
scores 0, as in both evaluators: the ordering key is not in the result to tell a tie.
The score is ``component_weights``-weighted (default: ``rows_match`` only, i.e. execution accuracy).

A response with no query (nothing, or only SQL comments) is a valid ``0.0`` with ``reason: no_answer``; a
predicted query that does not parse is a valid ``0.0`` with ``reason: format``; one that fails, runs out of
time or is no query (a statement without result columns, e.g. ``REINDEX``: it does not execute) is a
valid ``0.0`` (one the wall clock stopped having run under 90% of its limit on the CPU, a loaded host's,
is served but not cached); a gold query or schema that fails is ``invalid: parse_error``, one that runs out of time
``invalid: timeout``, one with more than ``max_rows`` rows ``invalid: unsupported`` (raise ``max_rows``); a
missing fixture is ``missing_reference``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from rewardhub import jsonutil
from rewardhub.protocol import Reason, ScoreItem
from rewardhub.rewards.base import Outcome, Reward, RewardConfig, ScoreContext, register
from rewardhub.rewards.code_extract import ExtractMode, extract_block
from rewardhub.rewards.sql_exec import run_sql_pair, without_comments

__all__ = ["SqlConfig", "SqlReward", "fixtures_digest"]

_COMPONENTS = ("parses", "executes", "columns_match", "rows_match")
_FIXTURE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


class SqlConfig(RewardConfig):
    order: Literal["auto", "ordered", "unordered"] = Field(
        "auto", description="Row order: `auto` = ordered when the gold query has a top-level ORDER BY."
    )
    rows: Literal["set", "multiset"] = Field(
        "set",
        description="Unordered comparison: `set` (BIRD: duplicates ignored) or `multiset` (Spider: counts "
        "must agree).",
    )
    columns: Literal["ordered", "any_order"] = Field(
        "ordered",
        description="Column order: `ordered` (BIRD: rows compared as tuples, column by column) or `any_order` "
        "(Spider's test-suite evaluation: right when some permutation of the predicted columns makes the rows "
        "match, e.g. `SELECT b, a` for `SELECT a, b`; each predicted column stands for one gold column, "
        "widths must agree; the search is bounded by timeout_s, past it the item is invalid: resource_limit).",
    )
    column_names: bool = Field(
        False,
        description="Also require the same column names (case-insensitive; with `columns: any_order`, "
        "the permuted ones).",
    )
    float_digits: int = Field(
        6,
        ge=0,
        le=15,
        description="Floats are compared rounded to this many decimals, and to 12 significant digits where "
        "those are fewer (past 1e6 with 6: a sum's last bits depend on the order its rows were added in); a "
        "whole number stays whole.",
    )
    timeout_s: float = Field(5.0, gt=0, le=60, description="Per query, seconds.")
    max_rows: int = Field(
        100_000,
        ge=1,
        le=10_000_000,
        description="A result with more rows counts as failed (more distinct rows, when rows compare as a set).",
    )
    component_weights: dict[str, float] = Field(
        default_factory=lambda: {"rows_match": 1.0},
        description="Score = weighted mean of these components (parses, executes, columns_match, rows_match).",
    )
    extract: ExtractMode = Field(
        "auto",
        description="Where the query is: `auto` (the last sql fence (or mysql, postgresql, ...), else an untagged one, else the last "
        "<solution> or <answer> block's text, else the answer), `fenced` or `raw`.",
    )

    @field_validator("component_weights")
    @classmethod
    def _known(cls, v: dict[str, float]) -> dict[str, float]:
        unknown = set(v) - set(_COMPONENTS)
        if unknown:
            raise ValueError(f"unknown components {sorted(unknown)}; known: {list(_COMPONENTS)}")
        if any(w < 0 for w in v.values()) or sum(v.values()) <= 0:
            raise ValueError("weights must be non-negative and not all zero")
        return v


def _sql_fence(tag: str) -> bool:
    return tag in SQL_FENCE_TAGS


def _no_query(sql: str) -> bool:
    """Whether ``sql`` is only comments and whitespace: no query to run."""
    return not _clean(without_comments(sql))


def _clean(sql: str) -> str:
    sql = sql.strip()
    while sql.endswith(";"):
        sql = sql[:-1].rstrip()
    return sql


# Fence tags read as a query: models fence SQL under their dialect's name as often as under ``sql`` (a
# ```` ```mysql ```` fence was not found, so the whole answer, prose and all, ran as the query: 0, format).
SQL_FENCE_TAGS = frozenset(
    {"sql", "sqlite", "sqlite3", "mysql", "postgresql", "postgres", "psql", "pgsql", "tsql", "plsql"}
)

# The tags an answer may hold its query in without a fence: SkyRL-SQL's <solution>, and <answer>
_ANSWER_TAGS = ("solution", "answer")


def _tagged_answer(text: str) -> str | None:
    """The text of the last ``<solution>...</solution>`` or ``<answer>...</answer>`` block in ``text`` (the
    one that closes last); None when there is none. (rfind: linear whatever the openers left unclosed.)"""
    best: tuple[int, str] | None = None
    for tag in _ANSWER_TAGS:
        end = text.rfind(f"</{tag}>")
        start = text.rfind(f"<{tag}>", 0, end) if end >= 0 else -1
        if start >= 0 and (best is None or end > best[0]):
            best = (end, text[start + len(tag) + 2 : end])
    return None if best is None else best[1]


def fixtures_digest(root: str) -> str:
    """A short hash of the fixture databases ``root`` offers (each one's name, size and modification
    time, where :meth:`SqlReward._fixture` looks: ``<name>.sqlite``, ``<name>.db``,
    ``<name>/<name>.sqlite``) and of the directory itself. A fixture saved over, added or removed, or
    another directory, is another version: only the fixture's name is in the item, and the verdicts of
    the old database were served from the cache (the CPU workers already reopened the new one)."""
    found: list[tuple[str, int, int]] = []
    with contextlib.suppress(OSError), os.scandir(root) as entries:
        for e in entries:
            with contextlib.suppress(OSError):
                if e.is_dir():
                    name = f"{e.name}/{e.name}.sqlite"
                    st = os.stat(os.path.join(e.path, f"{e.name}.sqlite"))
                elif e.name.endswith((".sqlite", ".db")):
                    name, st = e.name, e.stat()
                else:
                    continue
                found.append((name, st.st_size, st.st_mtime_ns))
    h = hashlib.sha256(os.path.realpath(root).encode("utf-8", "surrogateescape"))
    h.update(jsonutil.canonical(sorted(found)))
    return h.hexdigest()[:10]


@register
class SqlReward(Reward[SqlConfig]):
    name: ClassVar[str] = "sql"
    # 1.2.1: fence extraction (code_extract) fixes; 1.3.0: a name such as `orderby` no longer makes the gold
    # ordered, an ORDER BY with a comment between its words does; sorts past the heap limit fail as out of
    # memory instead of spilling to the host's disk
    # 1.3.1: a line of ``` indented 4+ columns past the opening fence no longer closes it (code_extract)
    # 1.3.2: a query or a schema out of memory while other items' databases are cached in the worker runs
    # again without them (it scored 0.0, or invalid, for a big database an earlier item left); the rows shown
    # of a wrong result are cut short (a value was whole: 200 MB from a printf)
    # 1.3.3: `columns: any_order` (default `ordered`: scores unchanged); details.column_permutation
    # 1.3.4: floats are also rounded to 12 significant digits (whole ones kept whole): a sum in the billions added in another row
    # order (7037035803.690001 for 7037035803.69) scored 0; a query in a <solution> or <answer> block without
    # a fence (SkyRL-SQL's answers) is read (the tags were read as part of the query: 0, format); fences
    # tagged sqlite3, mysql, postgresql/postgres/psql/pgsql, tsql or plsql are read as sql ones
    # 1.3.5: TEXT that is not UTF-8 (Spider's Latin-1) is read with its bad bytes escaped: a query reading
    # it failed ("Could not decode to UTF-8"), a gold's made the item invalid; a fixtures directory whose path
    # has a '#', '?' or '%' opens its databases (the path went into the SQLite URI unquoted); compared as sets,
    # max_rows bounds a result's distinct rows (duplicates past it failed a query BIRD counts right); a last
    # fence of SQL comments only is skipped as an empty one (it hid the query before it: no_answer)
    # 1.3.7: a gold query past max_rows is unsupported, its message says to raise max_rows (it was
    # parse_error, "the reference could not be read", though it was read and ran)
    # 1.3.8: `columns: any_order`: a column search that a column settled (the rows pair one way) is charged
    # the columns after it, not one more: a 100,000-row result of 20 columns with a key column gave up at
    # the default budget (resource_limit), where one no prefix of columns tells apart fit
    version: ClassVar[str] = "1.3.8"
    description: ClassVar[str] = (
        "Text-to-SQL execution match on SQLite: the predicted and the gold query run on a read-only "
        "database built from the reference's schema (or a named fixture); result sets compared ordered or "
        "unordered, with parses/executes/columns/rows components."
    )
    config_model = SqlConfig
    reads = ("response", "reference")

    def version_for(self, config: SqlConfig) -> str:
        # a fixture's verdicts are its database's: the fixtures in the cache key (through the version)
        root = self.runtime.settings.sql_fixtures_dir
        return f"{self.version}+{fixtures_digest(root)}" if root else self.version

    def _fixture(self, name: str) -> Path | None:
        root = self.runtime.settings.sql_fixtures_dir
        if not root or not _FIXTURE_NAME.match(name) or ".." in name:
            return None
        base = Path(root)
        for path in (base / f"{name}.sqlite", base / f"{name}.db", base / name / f"{name}.sqlite"):
            if path.is_file():
                return path
        return None

    async def score(self, items: Sequence[ScoreItem], config: SqlConfig, ctx: ScoreContext) -> list[Outcome]:
        outcomes: list[Outcome | None] = [None] * len(items)
        todo: list[int] = []
        payloads: list[tuple[str, str, str, str, float, int, int, str, bool, str, str]] = []
        for i, item in enumerate(items):
            ref = item.reference
            if ref is None:
                outcomes[i] = Outcome.invalid(Reason.MISSING_REFERENCE, "sql needs {query, schema|fixture}")
                continue
            if not isinstance(ref, dict) or not isinstance(ref.get("query"), str) or not ref["query"].strip():
                outcomes[i] = Outcome.invalid(Reason.PARSE_ERROR, "the sql reference needs a `query` string")
                continue
            if isinstance(ref.get("schema"), str):
                kind, spec = "schema", ref["schema"]
            elif isinstance(ref.get("fixture"), str):
                path = self._fixture(ref["fixture"])
                if path is None:
                    outcomes[i] = Outcome.invalid(
                        Reason.MISSING_REFERENCE,
                        f"no fixture database {ref['fixture']!r} (REWARDHUB_SQL_FIXTURES_DIR)",
                    )
                    continue
                kind, spec = "fixture", str(path)
            else:
                outcomes[i] = Outcome.invalid(
                    Reason.PARSE_ERROR, "the sql reference needs `schema` or `fixture`"
                )
                continue
            found = extract_block(item.response, _sql_fence, config.extract, empty=_no_query)
            pred = _clean(found.code) if found is not None else ""
            if found is not None and found.source == "raw" and config.extract == "auto":
                tagged = _tagged_answer(found.code)
                pred = pred if tagged is None else _clean(tagged)
            if _no_query(pred):  # nothing, or only comments: no query to run
                outcomes[i] = Outcome(
                    0.0, Reason.NO_ANSWER, dict.fromkeys(_COMPONENTS, 0.0), {"predicted": None}
                )
                continue
            todo.append(i)
            payloads.append(
                (kind, spec, _clean(ref["query"]), pred, config.timeout_s, config.max_rows, config.float_digits,
                 config.order, config.column_names, config.rows, config.columns)
            )  # fmt: skip
        if payloads:
            # Two queries per item; the pool's hard deadline is the backstop for SQLite's own interrupt.
            # A request's own options.timeout_s caps it: an item past it is invalid (timeout, not cached),
            # never a 0.0, since the per-query limit that decides "too slow" is the config's.
            deadline = 2 * config.timeout_s + 1.0
            if ctx.explicit_deadline:
                deadline = min(deadline, ctx.deadline_s)
            results = await self.runtime.cpu_pool.run(run_sql_pair, payloads, deadline)
            for i, payload, res in zip(todo, payloads, results, strict=True):
                if not res.ok:
                    outcomes[i] = Outcome.pool_failure(res.error, res.message or res.error)
                    continue
                outcomes[i] = self._outcome(res.value, payload[3], config)
                outcomes[i].latency_ms = res.elapsed_s * 1000  # type: ignore[union-attr]
        return [o if o is not None else Outcome.invalid(Reason.INTERNAL_ERROR) for o in outcomes]

    @staticmethod
    def _outcome(value: dict[str, Any], pred: str, config: SqlConfig) -> Outcome:
        ref_error = value.get("reference_error")
        if ref_error is not None:
            reason = {
                "missing": Reason.MISSING_REFERENCE,
                "timeout": Reason.TIMEOUT,
                "too_many": Reason.UNSUPPORTED,
            }.get(ref_error, Reason.PARSE_ERROR)
            return Outcome.invalid(reason, value.get("message"))
        if value.get("columns_search") == "gave_up":
            # no verdict on the query: some column order may match, the search's bound came first
            return Outcome.invalid(
                Reason.RESOURCE_LIMIT,
                "columns: any_order: the search for a column order that matches passed its bound "
                f"({value.get('gold_rows')} gold rows); raise timeout_s or compare ordered columns",
            )
        components: dict[str, float | None] = {c: 1.0 if value.get(c) else 0.0 for c in _COMPONENTS}
        weights = config.component_weights
        score = sum((components[c] or 0.0) * w for c, w in weights.items()) / sum(weights.values())
        details = {k: v for k, v in value.items() if k not in _COMPONENTS and k != "by_wall"}
        details["predicted"] = pred[:2000]
        # a predicted query the wall clock cut off on a loaded host (sql_exec.WALL_CUT_CPU_SHARE): its 0
        # is this moment's, served but never cached, as a code case's wall-clock timeout is
        return Outcome(
            score,
            None if value.get("parses") else Reason.FORMAT,
            components,
            details,
            transient=bool(value.get("by_wall")),
        )
