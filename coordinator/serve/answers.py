"""The API's answers, computed by the services and kept while what they depend on is unchanged.

A dataset changes only through a new head (the commit protocol), so an answer is cached under
the heads it was computed from: a dataset's summary under its head, a derivative's status
under its head and its inputs' heads, lineage and the graph under every head, records under
the head and the question. Reading the heads is one small file per dataset; nothing else is
read while they stay the same. The one answer that depends on more than heads, a root's
status (new files in its folder), is kept for ``ROOT_STATUS_S`` at most.

A dataset the service builds is shown as the service's view of it (``BuildService.view``):
its head, records and the like as of its last build, with its state and last error from the
same snapshot, so that a build's new records never show beside the error it cleared. Its
head in the keys is the view's; a dataset the service does not build (or has not yet) is
read from its chain.

Invariants: an answer is never older than the heads read at the start of the request (for a
served dataset, its view taken then), except a root's status, by at most ``ROOT_STATUS_S``;
a served dataset's head, records and error come from one view.
"""
from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from datetime import datetime
from typing import Any

from ..build import status as status_service
from ..build.pending_rows import pending_json
from ..lineage import datasets as lineage_service
from ..metadata.timestamps import format_timestamp
from ..store.overview import CurrentDatasets, Overview, overview
from ..workspace import DatasetNotFound, Workspace, layout
from ..workspace.graph import DatasetGraph
from .build_service import BuildService, DatasetView

ROOT_STATUS_S = 1.0
KEPT = 512


class Answers:
    """The answers of the read endpoints. Called from the event loop: a kept answer is
    returned at once; one not kept is computed in a worker thread, once however many
    requests ask for it meanwhile (they all wait for that one computation)."""

    def __init__(self, ws: Workspace, service: BuildService):
        self.ws, self.service = ws, service
        self._datasets = str(ws.meta / "datasets")
        self._lock = threading.Lock()  # the kept answers are also filled from worker threads
        self._kept: OrderedDict[Hashable, Any] = OrderedDict()
        self._computing: dict[Hashable, asyncio.Future[Any]] = {}

    def heads(self) -> dict[str, str]:
        """Every dataset's head (hex), read now: on every request, so with plain os calls
        (pathlib objects cost more than the reads)."""
        heads = {}
        for name in sorted(os.listdir(self._datasets)):
            for head in (layout.HEAD, layout.CURRENT_HEAD):  # ODF 0.18, current ODF
                try:
                    with open(f"{self._datasets}/{name}/{head}", "rb") as f:
                        heads[name] = f.read().decode().strip()
                    break
                except (FileNotFoundError, NotADirectoryError):
                    continue  # the other version, or being created or deleted: not a dataset now
        return heads

    async def datasets(self) -> bytes:
        views, heads = self._views(self.heads())
        key = ("datasets", tuple(heads.items()), int(time.monotonic() / ROOT_STATUS_S))
        listed = await self._answer(key, lambda: [self._dataset(d, heads, views.get(d)) for d in heads])
        return _json([_with_state(d, views.get(d["id"])) for d in listed])

    async def dataset(self, dataset_id: str) -> bytes:
        views, heads = self._views(self._heads_with(dataset_id))
        view = views.get(dataset_id)
        key = ("dataset", dataset_id, tuple(heads.items()), int(time.monotonic() / ROOT_STATUS_S))
        facts = await self._answer(key, lambda: self._dataset(dataset_id, heads, view))
        return _json(_with_state(facts, view))

    async def lineage(self, dataset_id: str, direction: str, depth: int | None,
                      since: datetime | None = None, until: datetime | None = None) -> bytes:
        heads = self._heads_with(dataset_id)

        def compute() -> bytes:
            graph = lineage_service.lineage(self.ws, dataset_id, upstream=direction != "down",
                                            downstream=direction != "up", since=since, until=until)
            if depth is not None:
                graph = lineage_service.within(graph, depth)
            return _json(lineage_service.as_json(graph))

        key = ("lineage", dataset_id, direction, depth, since, until, tuple(heads.items()))
        return await self._answer(key, compute)

    async def graph(self) -> bytes:
        heads = self.heads()

        def compute() -> bytes:
            from ..lineage.layout import layered

            current = CurrentDatasets(self.ws)
            g = DatasetGraph(self.ws, current=current.inputs)
            ids = g.ids()
            edges = sorted([i, d] for d in ids for i in g.inputs(d))
            place = layered(ids, edges)  # the web view draws it as laid out here
            kinds = {d: (current.overview(d).kind if current.holds(d) else g.state(d).kind) for d in ids}
            return _json({"nodes": [{"id": d, "kind": kinds[d], "layer": place[d][0],
                                     "order": place[d][1]} for d in ids],
                          "edges": edges})

        return await self._answer(("graph", tuple(heads.items())), compute)

    async def tail(self, dataset_id: str, n: int, as_at: str | None, state: bool = False,
                   as_of: str | None = None) -> bytes:
        from ..metadata.timestamps import parse_timestamp
        from ..query.tail import json_value, state_tail
        from ..query.tail import tail as last_records
        from ..query.values import python_rows

        head = self._heads_with(dataset_id)[dataset_id]
        event_time = parse_timestamp(as_of) if as_of is not None else None

        def compute() -> bytes:
            ds = self.ws.dataset(dataset_id)
            data = state_tail(ds, n, as_at, event_time) if state else last_records(ds, n, as_at)
            body = {"dataset": dataset_id, "records": python_rows(data)}
            return json.dumps(body, default=json_value).encode()

        return await self._answer(("tail", dataset_id, head, n, as_at, state, event_time), compute)

    # --- keeping and computing --------------------------------------------------------------------

    def _views(self, heads: dict[str, str]) -> tuple[dict[str, DatasetView], dict[str, str]]:
        """The service's views of the datasets in ``heads``, and the heads with each served
        dataset's replaced by its view's (what the answer shows of it)."""
        views = {d: v for d in heads if (v := self.service.view(d)) is not None}
        built = {d: v.summary.head for d, v in views.items() if v.summary is not None and v.summary.head}
        return views, {**heads, **built}

    def _heads_with(self, dataset_id: str) -> dict[str, str]:
        heads = self.heads()
        if dataset_id not in heads:
            raise DatasetNotFound(dataset_id)
        return heads

    async def _answer(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        future = self._computing.get(key)
        if future is None:
            future = asyncio.get_running_loop().run_in_executor(None, self._kept_or, key, compute)
            self._computing[key] = future
            future.add_done_callback(lambda _: self._computing.pop(key, None))
        return await asyncio.shield(future)  # a client that leaves does not cancel the others' answer

    def _kept_or(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """(Worker thread.) The kept answer for ``key``, else ``compute()``, kept."""
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        value = compute()
        with self._lock:
            self._kept[key] = value
            while len(self._kept) > KEPT:
                self._kept.popitem(last=False)
        return value

    # --- one dataset ------------------------------------------------------------------------------

    def _dataset(self, dataset_id: str, heads: dict[str, str], view: DatasetView | None) -> dict:
        """(Worker thread.) A dataset's facts from the service's view of it, else from its
        chain, and its status."""
        def summary() -> tuple[Overview, tuple[str, ...]]:
            current = CurrentDatasets(self.ws)
            graph = DatasetGraph(self.ws, current=current.inputs)
            return overview(self.ws, dataset_id, current), tuple(graph.inputs(dataset_id))

        if view is not None and view.summary is not None:
            s = view.summary
            inputs = self._kept_or(("inputs", dataset_id, heads[dataset_id]), lambda: tuple(
                DatasetGraph(self.ws, current=CurrentDatasets(self.ws).inputs).inputs(dataset_id)))
        else:
            s, inputs = self._kept_or(("summary", dataset_id, heads[dataset_id]), summary)
        if s.kind == "root":  # its folder may have new files
            key: tuple = ("status", dataset_id, heads[dataset_id], int(time.monotonic() / ROOT_STATUS_S))
        else:
            key = ("status", dataset_id, heads[dataset_id], tuple(heads.get(i) for i in inputs))
        st = self._kept_or(key, lambda: status_service.dataset_status(self.ws, self.ws.dataset(dataset_id)))
        return {
            "id": s.id, "kind": s.kind, "odf": s.odf.value, "head": s.head, "blocks": s.num_blocks,
            "records": s.num_records,
            "watermark": format_timestamp(s.watermark) if s.watermark else None,
            "lastUpdated": format_timestamp(s.last_updated),
            "outOfDate": not st.up_to_date, "reasons": [r.value for r in st.reasons],
            "newInput": st.new_input, "newFiles": st.new_files, "partlyIn": st.partly_in,
            "waitingFor": st.waiting_for, "lateRows": st.late_rows, "pendingRows": pending_json(st.pending),
        }



def _with_state(facts: dict, view: DatasetView | None) -> dict:
    """The facts with the state and last error of the same view of the dataset."""
    failure = view.failure if view is not None else None
    return {**facts, "state": view.state.value if view is not None else "not served",
            "lastError": None if failure is None else {
                "message": failure.message, "attempts": failure.attempts,
                "at": format_timestamp(failure.at), "retryInSeconds": failure.retry_in_s}}


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()
