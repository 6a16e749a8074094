"""What is out of date, and why (``coord status``, the status column of ``coord list``).

Decided from the metadata chains and the stored fetch state only: nothing is pulled,
computed or downloaded and no data file is opened, so this module imports no Arrow.

- A derivative is behind by the input blocks its newest executed block has not consumed
  (``transform.builds.consumed_until``: the same bound the next pull starts from), and its
  query changed when the query in force differs from the one of its last run. It waits while
  an input has no data at all (a pull would do nothing yet).
- A root is behind when its source has files a pull would ingest: local files are checked by
  the stat and hash its fetch state records (``ingest.fetch.probe``); a remote URL is not
  checked (only a download could tell); a File Feed is listed (its new complete updates).
- A dataset pulled from a repository is updated from there; the repository is not contacted.
- A current-ODF (0.39) derivative is behind by its inputs' blocks after the one its newest
  ``ExecuteTransform`` consumed (``newBlockHash`` per input) that a step would read (data or
  a watermark move: ``_news_for_readers``, the pull's own rule), its query changed when a
  ``SetTransform`` follows its last step, and input rows wait while its engine held some back
  after its last step (a temporal join's events, ``build.pending_rows``); a 0.39 root's source
  is probed as a 0.18 one's (a File Feed's source kept beside its chain, ``store.feed_source``),
  from the fetch state kept beside its chain or, when the workspace lost it, the one its chain
  records, as a pull goes on from (``store.source_state``).
"""
from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..ingest.errors import IngestError
from ..ingest.fetch import probe
from ..metadata.multiformats import Multihash
from ..metadata.objects import DatasetSourceDerivative, DatasetSourceRoot, FetchStep, LateRows
from ..metadata.odf39.events import AddData, ExecuteTransform, SetTransform
from ..store.dataset import CurrentDataset
from ..store.late_rows import kept_late_rows_policy
from ..store.overview import CurrentDatasets
from ..store.read import DatasetState as CurrentState
from ..store.read import StoredBlock
from ..store.source_state import fetch_state, pulled_source
from ..workspace import Dataset, DatasetState, Workspace
from ..workspace.graph import DatasetGraph
from ..workspace.source_state import SourceState, SourceStateError
from .pending_rows import recorded_pending

if TYPE_CHECKING:  # the engine port is imported by pending_rows when rows wait, not for a type
    from ..engine.port import PendingRows


class Reason(enum.Enum):
    NEW_INPUT = "new input blocks"
    QUERY_CHANGED = "query changed since the last run"
    SOURCE_CHANGED = "source changed"
    NEVER_PULLED = "never pulled"
    WAITING = "waiting for input data"
    ROWS_WAITING = "input rows wait for a watermark"
    NOT_CHECKED = "not checked"


@dataclass
class DatasetStatus:
    dataset_id: str
    kind: str  # root | derivative
    odf: str = "0.18"  # the ODF version the dataset is stored in
    reasons: list[Reason] = field(default_factory=list)
    new_input: dict[str, int] = field(default_factory=dict)  # input → blocks not consumed yet
    new_files: list[str] = field(default_factory=list)  # root: the files a pull would ingest
    # root: records of the first new file already in (a pull committed part of it and stopped)
    partly_in: int = 0
    waiting_for: list[str] = field(default_factory=list)  # inputs without any data yet
    unchecked: str = ""  # NOT_CHECKED: the remote URL, repository or error that stopped the check
    late_rows: int = 0  # derivative: rows its steps dropped for arriving behind a watermark, in all
    # derivative: input rows its engine holds back after its newest step, by input (ROWS_WAITING)
    pending: list[PendingRows] = field(default_factory=list)
    # a current-ODF derivative computed here: what its pulls do with late rows (store.late_rows),
    # and whether it was kept (not: added before corrections, so it drops them)
    late_rows_policy: str | None = None
    late_rows_policy_kept: bool = False

    @property
    def up_to_date(self) -> bool:
        return not self.reasons


def status(ws: Workspace, ids: list[str] | None = None) -> list[DatasetStatus]:
    """The status of the named datasets, or of every dataset of the workspace."""
    current = CurrentDatasets(ws)
    graph = DatasetGraph(ws, current=current.inputs)  # each chain is read once, also as an input
    datasets = [ws.dataset(i) for i in ids] if ids else ws.datasets()
    return [dataset_status(ws, ds, graph, current) for ds in datasets]


def dataset_status(ws: Workspace, ds: Dataset, graph: DatasetGraph | None = None,
                   current: CurrentDatasets | None = None) -> DatasetStatus:
    """``graph``, ``current``: this command's, whose read models of ``ds`` and its inputs it takes."""
    current = current or CurrentDatasets(ws)
    graph = graph or DatasetGraph(ws, current=current.inputs)
    origin = ds.remote("pull")
    if current.holds(ds.id):
        st = DatasetStatus(ds.id, current.overview(ds.id).kind, "0.39")
        if origin is None:
            _current(ws, current, ds.id, st)
        else:
            st.reasons.append(Reason.NOT_CHECKED)
            st.unchecked = f"pulled from {origin}"
        return st
    state = graph.state(ds.id)
    source = state.source
    if isinstance(source, DatasetSourceDerivative):
        st = DatasetStatus(ds.id, "derivative")
        if origin is None:
            _derivative(graph, state, source, st)
    else:
        st = DatasetStatus(ds.id, "root")
        if origin is None:
            _root(ws, ds, state, source, st)
    if origin is not None:
        st.reasons.append(Reason.NOT_CHECKED)
        st.unchecked = f"pulled from {origin}"
    return st


def _derivative(graph: DatasetGraph, state: DatasetState, source: DatasetSourceDerivative,
                st: DatasetStatus) -> None:
    from ..transform.builds import consumed_until, last_run_query  # 0.18 derivatives' only

    chain = state.blocks
    st.late_rows = sum(b.late_rows or 0 for _, b in chain)
    after = consumed_until(chain, len(source.inputs))
    for input_id, consumed in zip(source.inputs, after, strict=True):
        upstream = graph.state(input_id)
        if not upstream.data_blocks:
            st.waiting_for.append(input_id)
        new = sum(1 for cb in upstream.chain if consumed is None or cb.block.system_time > consumed)
        if new:
            st.new_input[input_id] = new
    last = last_run_query(chain)
    _input_reasons(st, query_changed=last is not None and last != source.transform)


def _root(ws: Workspace, ds: Dataset, dataset_state: DatasetState, source: DatasetSourceRoot,
          st: DatasetStatus) -> None:
    _probe(ws, source.fetch, lambda: ds.source_state(dataset_state), st)


def _probe(ws: Workspace, fetch: FetchStep, fetch_state: Callable[[], SourceState | None],
           st: DatasetStatus) -> None:
    """A root's reasons from its source (either ODF version): the files a pull would take,
    given the fetch state the newest pull left."""
    try:
        state = fetch_state()
        files = probe(fetch, root=ws.root, state=state.fetched if state is not None else None)
    except (IngestError, SourceStateError) as e:  # a state file not as coord wrote it, too
        st.reasons.append(Reason.NOT_CHECKED)
        st.unchecked = str(e)
        return
    if files is None:
        st.reasons.append(Reason.NOT_CHECKED)
        st.unchecked = f"remote source {getattr(fetch, 'url', '')}".strip()
    elif files:
        st.reasons.append(Reason.SOURCE_CHANGED if state is not None else Reason.NEVER_PULLED)
        st.new_files = files
        resume = state.resume if state is not None else None
        if resume is not None and resume.file in files:  # fetched again, skipped up to there
            st.partly_in = resume.records


def _current(ws: Workspace, current: CurrentDatasets, name: str, st: DatasetStatus) -> None:
    """A current-ODF dataset's status (see the module doc)."""
    state = current.state(name)
    if state.transform is None and state.polling_source is None and state.push_sources:
        return  # fed by push (coord ingest): no source to poll, so nothing it has not got
    if state.transform is None:
        ds = CurrentDataset(ws, name)
        source = pulled_source(ds, state)  # a File Feed's is kept beside the chain
        if source is None:
            st.reasons.append(Reason.NOT_CHECKED)
            st.unchecked = "no polling source"
            return
        fetch = source.fetch
        _probe(ws, fetch, lambda: fetch_state(ds, state, fetch), st)
        return
    consumed: dict[str, object] = {}  # input did -> the newest of its blocks a step consumed
    steps = transforms = 0  # the positions of the last ExecuteTransform and SetTransform
    last_step: Multihash | None = None
    for i, stored in enumerate(state.blocks, 1):
        event = stored.block.event
        if isinstance(event, ExecuteTransform):
            steps, last_step = i, stored.hash
            for q in event.query_inputs:
                if q.new_block_hash is not None:
                    consumed[str(q.dataset_id)] = q.new_block_hash
        elif isinstance(event, SetTransform):
            transforms = i
    for ref in state.transform.inputs:
        input_name = current.name_of(ref.dataset_ref, ref.alias)
        if not current.holds(input_name):
            st.reasons.append(Reason.NOT_CHECKED)
            st.unchecked = f"input {input_name} is not a current-ODF dataset of this workspace"
            return
        upstream = current.state(input_name)
        if not upstream.slices:
            st.waiting_for.append(input_name)
        last = consumed.get(str(upstream.id))
        seen = next((b.block.sequence_number for b in upstream.blocks if b.hash == last), -1)
        # the blocks its pull would read: those with data or a watermark move (the others
        # make no step, so counting them would leave it behind for good)
        if new := len(_news_for_readers(upstream, seen)):
            st.new_input[input_name] = new
    if last_step is not None:
        st.pending = recorded_pending(ws, name, last_step)
    policy = kept_late_rows_policy(ws, name)
    st.late_rows_policy = (policy or LateRows.DROP).value[0]
    st.late_rows_policy_kept = policy is not None
    _input_reasons(st, query_changed=bool(steps) and transforms > steps)


def _news_for_readers(state: CurrentState, after: int) -> list[StoredBlock]:
    """The blocks after sequence number ``after`` (-1: all) that a reader's next step takes
    something from: those adding data and those moving the watermark. A reader's step over an
    input that brings only other blocks (a schema, a source, a step of its own that wrote
    nothing and kept its watermark) has nothing to read and commits nothing, so they do not
    make the reader behind."""
    news: list[StoredBlock] = []
    watermark = None
    for stored in state.blocks:
        event = stored.block.event
        if not isinstance(event, AddData | ExecuteTransform):
            continue
        moved, watermark = event.new_watermark != watermark, event.new_watermark
        if stored.block.sequence_number > after and (event.new_data is not None or moved):
            news.append(stored)
    return news


def _input_reasons(st: DatasetStatus, *, query_changed: bool) -> None:
    """A derivative's reasons from what its inputs hold (either ODF version): waiting for an
    input's first data says all; else new input, and a query changed since the last step."""
    if st.waiting_for:
        st.reasons.append(Reason.WAITING)
        return
    if st.new_input:
        st.reasons.append(Reason.NEW_INPUT)
    if st.pending:
        st.reasons.append(Reason.ROWS_WAITING)
    if query_changed:
        st.reasons.append(Reason.QUERY_CHANGED)
