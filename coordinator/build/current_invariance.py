"""Invariance of a current-ODF (0.39) derivative (``coord verify --invariance``): the records
its steps committed are the ones its query computes from all of its inputs in one step.

The question and its report are the 0.18 one (``transform.invariance``); what differs is how
the inputs are read, which is the 0.39 step's (``current_derivative``):

- One engine step from no state over every input slice up to where the newest
  ``ExecuteTransform`` ended in each input (``newBlockHash``, else ``prevBlockHash``), with
  the watermarks of those input blocks, at the newest step's system time, in the engine's
  scratch folder of the command: nothing in the workspace changes.
- An input that no longer holds that block (its chain was replaced) is refused, as is a chain
  whose query changed after steps ran (one step runs one query).
- What is compared is the rows each change log describes (``row_changes.current_rows``:
  appends and correct-tos add a row, retractions and correct-froms take one away), without
  ``offset`` and ``system_time``: the rule every derivative keeps is that its rows are its
  query over its inputs' rows, whichever records took it there (a recomputed derivative
  retracts and appends as its inputs change; one step over everything only appends).
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..data.odf_slice import Vocabulary
from ..data.row_changes import write_current_rows
from ..engine.port import Engine
from ..errors import Invalid
from ..metadata.odf39.events import ExecuteTransform, SetDataSchema, SetTransform
from ..store.checked import checked_current_files
from ..store.dataset import CurrentDataset
from ..store.overview import CurrentDatasets
from ..store.read import StoredBlock
from ..transform.invariance import NO_DIFFERENCE, InvarianceReport, Verdict, compare_records, judged
from ..workspace import Workspace
from .current_derivative import CurrentPlan, alias_of, engine_transform, plan_input, run_current_step, up_to


def check_current_invariance(ws: Workspace, name: str, engine: Callable[[], Engine]) -> InvarianceReport:
    """Recompute the 0.39 derivative ``name`` in one step (the engine from ``engine``, started
    only when a step ran) and compare; ``Invalid`` for a root or a chain whose query changed."""
    ds = CurrentDataset(ws, name)
    state = ds.state()
    if state.transform is None:
        raise Invalid(f"{name} is a root dataset: its data comes from outside, there is no "
                      "transform to recompute")
    in_force: SetTransform | None = None
    executed: list[StoredBlock] = []
    for stored in state.blocks:
        event = stored.block.event
        if isinstance(event, SetTransform):
            if executed and event != in_force:
                raise Invalid(f"{name}: its query changed at block {stored.block.sequence_number} "
                              f"({stored.hash}) after steps had run; --invariance recomputes a "
                              "chain computed by one query")
            in_force = event
        elif isinstance(event, ExecuteTransform):
            executed.append(stored)
    if not executed or in_force is None:
        return InvarianceReport(name, Verdict.NOTHING_TO_CHECK, 0, 0, 0, NO_DIFFERENCE,
                                NO_DIFFERENCE, None, None)
    last = executed[-1]
    assert isinstance(last.block.event, ExecuteTransform)
    inputs = CurrentDatasets(ws)
    steps = []
    for given, used in zip(in_force.inputs, last.block.event.query_inputs, strict=True):
        until = used.new_block_hash or used.prev_block_hash
        if until is None:
            raise Invalid(f"{name}: its steps read no block of input {alias_of(given)} yet")
        input_ds = inputs.input_dataset(given, name)
        steps.append(plan_input(inputs, input_ds, alias_of(given), input_ds.state(), None, until))
    # the chain before its first data: no schema, no offsets, no watermark yet
    first = next(k for k, b in enumerate(state.blocks)
                 if isinstance(b.block.event, SetDataSchema | ExecuteTransform))
    # one step as the last one ran: recomputed once a step was (what the rows then are)
    recomputed = any(b.block.event.new_checkpoint is None for b in executed
                     if isinstance(b.block.event, ExecuteTransform))
    plan = CurrentPlan(ds, up_to(state, first), engine_transform(in_force), steps, None, None,
                       recompute=recomputed)
    running = engine()
    scratch = running.workdir(f"invariance-{plan.transaction_id()}")
    out = run_current_step(running, plan, system_time=last.block.system_time, prev_checkpoint_dir=None,
                           scratch=scratch)
    v = plan.vocab
    committed = _rows(checked_current_files(ds, state.slices), v, scratch / "committed-rows.parquet")
    one_step = _rows([out.data_path] if out.data_path is not None else [], v,
                     scratch / "one-step-rows.parquet")
    comparison = compare_records(committed, one_step, v.system_time, v.event_time, offset=v.offset)
    return judged(name, len(executed), comparison, last.block.event.new_watermark,
                  out.event.new_watermark)


def _rows(files: list[Path], v: Vocabulary, target: Path) -> list[Path]:
    """The rows the records in ``files`` describe, written to ``target`` (none: no file)."""
    if not files:
        return []
    write_current_rows(files, v, target)
    return [target]
