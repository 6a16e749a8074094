"""Invariance (``coord verify --invariance``): the records a derivative committed step by step
are the ones the same query computes from all of its inputs in one step.

A derivative's result must not depend on how its inputs were cut into slices and pulls
(engines/spark/odf_spark_engine/streaming.py). This checks it on a dataset as it stands:

- One Execute call from no state over every input slice the chain has consumed, up to the same
  input positions (per input, the end of the newest interval a block recorded), with every
  explicit watermark of those input blocks, in the engine's scratch folder of the command:
  nothing in the workspace changes.
- Its records against the committed ones as multisets of rows (order and slicing aside) over
  every column but the system time. Floating-point sums depend on the order of their terms,
  so rows left over by the exact comparison are paired by their other columns and count as
  the same when each float agrees to a relative ``FLOAT_TOLERANCE``.
- The output watermark of the one step against that of the last executed block.

A query whose result depends on arrival (``first()`` without an order, a row dropped as late
in one cut and not in the other) is reported, not certified: the comparison itself shows it.
One step runs one query, so a chain whose query or inputs changed is refused; so is an input
that no longer holds the blocks the chain consumed (``coord verify`` names them).
"""
from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Invalid
from ..metadata.objects import DatasetSourceDerivative, MetadataBlock
from ..metadata.timestamps import IntervalType, TimeInterval
from ..trust.slice_check import checked_slices
from ..workspace import Dataset, DatasetNotFound, Workspace
from .builds import consumed_until
from .execute import execute_plan
from .plan import TransformPlan, plan_input

if TYPE_CHECKING:
    import duckdb

    from ..engine.port import Engine

FLOAT_TOLERANCE = 1e-9
SHOWN_ROWS = 5  # rows of each side a report names


class Verdict(StrEnum):
    INVARIANT = "invariant"
    NOT_INVARIANT = "not invariant"
    NOTHING_TO_CHECK = "nothing to check"  # no executed step yet


@dataclass(frozen=True)
class Difference:
    """The rows found on one side only (as many as differ there), and the first of them."""

    count: int
    first: list[dict[str, Any]]  # up to SHOWN_ROWS, in event time order


@dataclass(frozen=True)
class InvarianceReport:
    dataset_id: str
    verdict: Verdict
    steps: int  # executed blocks of the chain
    committed: int  # records committed step by step
    one_step: int  # records of the one-step run
    only_committed: Difference
    only_one_step: Difference
    committed_watermark: datetime | None  # of the last executed block
    one_step_watermark: datetime | None
    columns_differ: tuple[str, ...] = ()  # columns present on one side only

    @property
    def invariant(self) -> bool:
        return self.verdict is not Verdict.NOT_INVARIANT

    @property
    def differing_records(self) -> int:
        return self.only_committed.count + self.only_one_step.count


NO_DIFFERENCE = Difference(0, [])


def check_invariance(ws: Workspace, dataset_id: str, engine: Callable[[], Engine]) -> InvarianceReport:
    """Recompute ``dataset_id`` in one step (the engine from ``engine``, started only when
    there is a step to check) and compare; raises ``Invalid`` for a root dataset, a chain
    whose query changed or an input that changed under it."""
    ds = ws.dataset(dataset_id)
    if not ds.exists():
        raise DatasetNotFound(dataset_id)
    state = ds.state()
    source = state.source
    if not isinstance(source, DatasetSourceDerivative):
        raise Invalid(f"{dataset_id} is a root dataset: its data comes from outside, there is no "
                      "transform to recompute")
    chain = [(cb.hash, cb.block) for cb in state.chain]  # newest first
    executed = [(h, b) for h, b in reversed(chain) if b.input_slices is not None]
    if not executed:
        return InvarianceReport(dataset_id, Verdict.NOTHING_TO_CHECK, 0, 0, 0, NO_DIFFERENCE,
                                NO_DIFFERENCE, None, None)
    _refuse_changed_source(dataset_id, chain)
    positions = consumed_until(chain, len(source.inputs))
    inputs = []
    for index, (input_id, until) in enumerate(zip(source.inputs, positions, strict=True)):
        if until is None:
            raise Invalid(f"{dataset_id}: the chain records no slice of input {input_id}")
        input_ds = ws.dataset(input_id)
        if not input_ds.exists():
            raise DatasetNotFound(input_id)
        _refuse_changed_input(dataset_id, input_ds, index, executed)
        inputs.append(plan_input(input_ds, None, until))
    last_time = executed[-1][1].system_time
    plan = TransformPlan(ds, b"", last_time, source.transform, state.vocab, inputs, None, None)
    result, _ = execute_plan(engine(), plan, system_time=last_time)

    committed_files = checked_slices(ds, [(h, b) for h, b in reversed(chain)])
    one_step_files = [result.output_path] if result.output_path is not None else []
    comparison = compare_records(committed_files, one_step_files, state.vocab.system_time,
                                 state.vocab.event_time)
    return judged(dataset_id, len(executed), comparison, executed[-1][1].output_watermark,
                  result.output_watermark)


def judged(dataset_id: str, steps: int, comparison: Comparison, committed_watermark: datetime | None,
           one_step_watermark: datetime | None) -> InvarianceReport:
    """The verdict: invariant when no record differs and the output watermarks are the same."""
    same = (comparison.only_committed.count == 0 and comparison.only_one_step.count == 0
            and not comparison.columns_differ and committed_watermark == one_step_watermark)
    return InvarianceReport(
        dataset_id, Verdict.INVARIANT if same else Verdict.NOT_INVARIANT, steps,
        comparison.committed, comparison.one_step, comparison.only_committed, comparison.only_one_step,
        committed_watermark, one_step_watermark, comparison.columns_differ,
    )


def _refuse_changed_source(dataset_id: str, chain: list[tuple[bytes, MetadataBlock]]) -> None:
    """One step runs one query over one list of inputs: refuse a chain that ran several."""
    current: DatasetSourceDerivative | None = None
    ran = False
    for h, b in reversed(chain):
        if isinstance(b.source, DatasetSourceDerivative) and b.source != current:
            if ran:
                raise Invalid(f"{dataset_id}: its query changed at block {h.hex()[:12]} after steps had "
                              "run; --invariance recomputes a chain computed by one query")
            current = b.source
        ran = ran or b.input_slices is not None


def _refuse_changed_input(dataset_id: str, input_ds: Dataset, index: int,
                          executed: list[tuple[bytes, MetadataBlock]]) -> None:
    """Each step's record of the input (the hash over its slices' hashes) still matches the
    input's chain: a reset and re-pulled input would give the one step other data."""
    blocks = [(b.system_time, b.output_slice.hash if b.output_slice else b"")
              for _, b in reversed(list(input_ds.blocks()))]
    times = [t for t, _ in blocks]
    for h, b in executed:
        assert b.input_slices is not None
        recorded = b.input_slices[index]
        if recorded.interval.type is IntervalType.EMPTY:
            continue
        lo, hi = _span(times, recorded.interval)
        digest = hashlib.sha3_256(b"".join(s for _, s in blocks[lo:hi])).digest()
        if digest != recorded.hash:
            raise Invalid(f"{dataset_id}: input {input_ds.id} no longer holds the data block "
                          f"{h.hex()[:12]} consumed; coord verify {dataset_id} names the blocks")


def _span(times: list[datetime], interval: TimeInterval) -> tuple[int, int]:
    """The indexes of the input blocks (ascending system ``times``) inside ``interval``."""
    lo = 0 if interval.left is None else bisect.bisect_right(times, interval.left)
    hi = len(times) if interval.right is None else bisect.bisect_right(times, interval.right)
    return lo, hi


@dataclass(frozen=True)
class Comparison:
    committed: int
    one_step: int
    only_committed: Difference
    only_one_step: Difference
    columns_differ: tuple[str, ...]


def compare_records(committed: list[Path], one_step: list[Path], system_time: str,
                    event_time: str, *, offset: str | None = None) -> Comparison:
    """The two sets of Parquet files as multisets of rows over every column but ``system_time``
    and ``offset`` (a 0.39 dataset's: its records are numbered in the order of their steps),
    floats within FLOAT_TOLERANCE (see the module doc), in DuckDB."""
    import duckdb

    con = duckdb.connect(config={"preserve_insertion_order": False})
    con.sql("SET enable_progress_bar = false")
    left_out = (system_time,) if offset is None else (system_time, offset)
    a = _side(con, "committed", committed, left_out)
    b = _side(con, "one_step", one_step, left_out)
    for name, columns, other in (("committed", a, "one_step"), ("one_step", b, "committed")):
        if not columns:  # no records on this side: none of the other side's rows are here
            con.sql(f"CREATE VIEW {name} AS SELECT * FROM {other} LIMIT 0")
    if a and b and a != b:  # a different schema: no row can be the same
        differ = tuple(n for n in a if n not in b) + tuple(n for n in b if n not in a)
        return Comparison(_count(con, "committed"), _count(con, "one_step"), NO_DIFFERENCE,
                          NO_DIFFERENCE, differ or tuple(a))
    names = a or b
    if not names:
        return Comparison(0, 0, NO_DIFFERENCE, NO_DIFFERENCE, ())
    selected = ", ".join(map(_quote, names))
    for one, other in (("committed", "one_step"), ("one_step", "committed")):
        con.sql(f"CREATE TABLE only_{one} AS SELECT *, row_number() OVER () AS __row FROM "
                    f"(SELECT {selected} FROM {one} EXCEPT ALL SELECT {selected} FROM {other})")
    floats = [n for n, t in names.items() if t in ("FLOAT", "DOUBLE")]
    if floats:
        _pair_close_floats(con, [n for n in names if n not in floats], floats)
    order = _quote(event_time) if event_time in names else "__row"
    return Comparison(
        _count(con, "committed"), _count(con, "one_step"),
        _difference(con, "only_committed", order), _difference(con, "only_one_step", order), (),
    )


def _side(con: duckdb.DuckDBPyConnection, name: str, files: list[Path],
          left_out: tuple[str, ...]) -> dict[str, str]:
    """The view ``name`` over ``files`` without the ``left_out`` columns they have; its columns
    and their types (none and no view without files)."""
    if not files:
        return {}
    listed = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
    read = f"read_parquet([{listed}], union_by_name = true)"
    present = {row[0] for row in con.sql(f"DESCRIBE SELECT * FROM {read}").fetchall()}
    excluded = [c for c in left_out if c in present]
    con.sql(f"CREATE VIEW {name} AS SELECT * "
            + (f"EXCLUDE ({', '.join(map(_quote, excluded))}) " if excluded else "") + f"FROM {read}")
    return {row[0]: row[1] for row in con.sql(f"DESCRIBE {name}").fetchall()}


def _pair_close_floats(con: duckdb.DuckDBPyConnection, exact: list[str], floats: list[str]) -> None:
    """Drops from both leftovers the rows that pair up: the same in the ``exact`` columns, the
    same rank by their floats among those, and each float within the tolerance."""
    partition = f"PARTITION BY {', '.join(map(_quote, exact))}" if exact else ""
    ranked = (f"(SELECT *, row_number() OVER ({partition} ORDER BY {', '.join(map(_quote, floats))}) "
              "AS __rank FROM {})")
    same = [f"a.{_quote(n)} IS NOT DISTINCT FROM b.{_quote(n)}" for n in exact]
    close = [f"(a.{c} IS NOT DISTINCT FROM b.{c} OR abs(a.{c} - b.{c}) <= "
             f"{FLOAT_TOLERANCE} * greatest(abs(a.{c}), abs(b.{c})))" for c in map(_quote, floats)]
    con.sql(f"CREATE TABLE paired AS SELECT a.__row AS a_row, b.__row AS b_row "
                f"FROM {ranked.format('only_committed')} a JOIN {ranked.format('only_one_step')} b "
                f"ON {' AND '.join([*same, 'a.__rank = b.__rank'])} WHERE {' AND '.join(close)}")
    con.sql("DELETE FROM only_committed WHERE __row IN (SELECT a_row FROM paired)")
    con.sql("DELETE FROM only_one_step WHERE __row IN (SELECT b_row FROM paired)")


def _count(con: duckdb.DuckDBPyConnection, name: str) -> int:
    return int(con.sql(f"SELECT count(*) FROM {name}").fetchall()[0][0])


def _difference(con: duckdb.DuckDBPyConnection, table: str, order: str) -> Difference:
    first = con.sql(f"SELECT * EXCLUDE (__row) FROM {table} ORDER BY {order}, __row "
                    f"LIMIT {SHOWN_ROWS}").to_arrow_table()
    return Difference(_count(con, table), first.to_pylist())


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
