"""The API's answers, computed by the services and kept while what they depend on is unchanged.

A dataset changes only through a new head (the commit protocol), so an answer is cached under
the heads it was computed from: a dataset's summary under its head, a derivative's status
under its head and its inputs' heads, lineage and the graph under every head, records under
the head and the question. Reading the heads is one small file per dataset; nothing else is
read while they stay the same. The one answer that depends on more than heads, a root's
status (new files in its folder), is kept for ``ROOT_STATUS_S`` at most. The build service's
state of each dataset (queued, running, failed) is live, never cached.

Invariant: an answer is never older than the heads read at the start of the request, except
a root's status, by at most ``ROOT_STATUS_S``.
"""
from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from .. import lineage as lineage_service
from .. import status as status_service
from ..graph import DatasetGraph
from ..metadata.timefmt import format_timestamp
from ..workspace import DatasetNotFound, DatasetSummary, Workspace
from .service import BuildService

ROOT_STATUS_S = 1.0
KEPT = 512


class Answers:
    def __init__(self, ws: Workspace, service: BuildService):
        self.ws, self.service = ws, service
        self._lock = threading.Lock()
        self._kept: OrderedDict[Hashable, Any] = OrderedDict()

    def heads(self) -> dict[str, str]:
        """Every dataset's head (hex), read now."""
        heads = {}
        for folder in sorted((self.ws.meta / "datasets").iterdir()):
            try:
                heads[folder.name] = (folder / "meta" / "refs" / "head").read_text().strip()
            except (FileNotFoundError, NotADirectoryError):
                continue  # being created or deleted: not a dataset now
        return heads

    def datasets(self) -> bytes:
        heads = self.heads()
        return _json([self._dataset(d, heads) for d in heads])

    def dataset(self, dataset_id: str) -> bytes:
        heads = self.heads()
        if dataset_id not in heads:
            raise DatasetNotFound(dataset_id)
        return _json(self._dataset(dataset_id, heads))

    def lineage(self, dataset_id: str, direction: str, depth: int | None) -> bytes:
        heads = self.heads()
        if dataset_id not in heads:
            raise DatasetNotFound(dataset_id)

        def compute() -> bytes:
            graph = lineage_service.lineage(self.ws, dataset_id, upstream=direction != "down",
                                            downstream=direction != "up")
            if depth is not None:
                graph = lineage_service.within(graph, depth)
            return _json(lineage_service.as_json(graph))

        return self._kept_or(("lineage", dataset_id, direction, depth, tuple(heads.items())), compute)

    def graph(self) -> bytes:
        heads = self.heads()

        def compute() -> bytes:
            g = DatasetGraph(self.ws)
            ids = g.ids()
            return _json({"nodes": [{"id": d, "kind": g.summary(d).kind} for d in ids],
                          "edges": sorted([i, d] for d in ids for i in g.inputs(d))})

        return self._kept_or(("graph", tuple(heads.items())), compute)

    def tail(self, dataset_id: str, n: int, as_at: str | None) -> bytes:
        from ..tail import json_value
        from ..tail import tail as last_records

        head = self.heads().get(dataset_id)
        if head is None:
            raise DatasetNotFound(dataset_id)

        def compute() -> bytes:
            data = last_records(self.ws.dataset(dataset_id), n, as_at)
            body = {"dataset": dataset_id, "records": data.to_pylist()}
            return json.dumps(body, default=json_value).encode()

        return self._kept_or(("tail", dataset_id, head, n, as_at), compute)

    # --- one dataset ------------------------------------------------------------------------------

    def _summary(self, dataset_id: str, head: str) -> DatasetSummary:
        return self._kept_or(("summary", dataset_id, head), lambda: self.ws.dataset(dataset_id).summary())

    def _dataset(self, dataset_id: str, heads: dict[str, str]) -> dict:
        s = self._summary(dataset_id, heads[dataset_id])
        inputs = getattr(s.source, "inputs", None)
        if inputs is None:  # a root: its folder may have new files
            key: tuple = ("status", dataset_id, heads[dataset_id], int(time.monotonic() / ROOT_STATUS_S))
        else:
            key = ("status", dataset_id, heads[dataset_id], tuple(heads.get(i) for i in inputs))
        st = self._kept_or(key, lambda: status_service.dataset_status(self.ws, self.ws.dataset(dataset_id)))
        running = self.service.state(dataset_id)
        state, failure = running if running is not None else (None, None)
        return {
            "id": s.id, "kind": s.kind, "head": s.head.hex(), "blocks": s.blocks, "records": s.num_records,
            "watermark": format_timestamp(s.watermark) if s.watermark else None,
            "lastUpdated": format_timestamp(s.last_updated),
            "outOfDate": not st.up_to_date, "reasons": [r.value for r in st.reasons],
            "newInput": st.new_input, "newFiles": st.new_files, "waitingFor": st.waiting_for,
            "state": state.value if state is not None else "not served",
            "lastError": None if failure is None else {
                "message": failure.message, "attempts": failure.attempts,
                "at": format_timestamp(failure.at), "retryInSeconds": failure.retry_in_s},
        }

    def _kept_or(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        value = compute()  # outside the lock: two requests may compute it, both get it right
        with self._lock:
            self._kept[key] = value
            while len(self._kept) > KEPT:
                self._kept.popitem(last=False)
        return value


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()
