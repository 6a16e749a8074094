"""Push ingest: data handed to a current-ODF (0.39) root through one of its push sources
(``AddPushSource``), by the steps of a pull (``pipeline.push_root``: read, preprocess, event
time, merge, conform, commit through ``ingest.current``'s target). ``coord ingest`` and
``coord serve``'s ``POST /api/datasets/DS/ingest`` call ``push``.

As the reference does (kamu-cli v0.265: ``ingest_command.rs``, ``WriterSourceEventVisitor``,
``DataFormatRegistryImpl``, ``ingest_handler.rs``):

- the source is the one named (``--source-name``, ``?sourceName=``), else the root's only
  push source; a name the root lacks, several sources and no name, or none are refused;
- a format given (``--input-format``, the request's Content-Type) other than the source's read
  step's reads the data with that format's defaults and the source's schema (CSV: a header
  row only when the source gives no schema); the same format keeps the source's step;
- the event time given (``--event-time``, the ``odf-event-time`` header) is that of records
  without one of their own (no event time column), else the block's system time;
- each input is one block (``AddData``) or none when the merge leaves nothing new; an input
  is read whole (a push has no fetch state to resume a file from), and the block is committed
  by the one append path, so a crash leaves the dataset as it was before that input.

A ``Json`` or ``NdGeoJson`` input is rewritten as NdJson before the read step, as a polled
file is (``reshape``).
"""
from __future__ import annotations

import dataclasses
from datetime import datetime
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import Invalid
from ..metadata.odf39 import events as e
from ..metadata.odf39 import source as s
from ..metadata.odf39.adapt import PushSource, push_source
from ..workspace.config import OdfVersion
from ..workspace.dataset import DatasetNotFound
from .errors import IngestError
from .fetched import FetchedFile

if TYPE_CHECKING:
    from ..store.read import DatasetState
    from ..workspace.progress import Progress
    from ..workspace.workspace import Workspace
    from .pipeline import EngineSource, IngestResult


class InputFormat(StrEnum):
    """The formats a push reads, by the reference's short names (``--input-format``)."""

    CSV = "csv"
    JSON = "json"
    NDJSON = "ndjson"
    GEOJSON = "geojson"
    NDGEOJSON = "ndgeojson"
    PARQUET = "parquet"


MEDIA_TYPES = {  # the reference's media types (file_utils::MediaType)
    "text/csv": InputFormat.CSV,
    "application/json": InputFormat.JSON,
    "application/x-ndjson": InputFormat.NDJSON,
    "application/geo+json": InputFormat.GEOJSON,
    "application/x-ndgeojson": InputFormat.NDGEOJSON,
    "application/vnd.apache.parquet": InputFormat.PARQUET,
}

_READS: dict[InputFormat, type] = {
    InputFormat.CSV: s.ReadStepCsv, InputFormat.JSON: s.ReadStepJson,
    InputFormat.NDJSON: s.ReadStepNdJson, InputFormat.GEOJSON: s.ReadStepGeoJson,
    InputFormat.NDGEOJSON: s.ReadStepNdGeoJson, InputFormat.PARQUET: s.ReadStepParquet,
}


class UnsupportedFormat(Invalid):
    """A format (or media type) no push reads."""


def format_of_media_type(media_type: str) -> InputFormat:
    """The format of a Content-Type (its parameters, ``; charset=...``, aside)."""
    bare = media_type.split(";", 1)[0].strip().lower()
    if bare not in MEDIA_TYPES:
        raise UnsupportedFormat(f"unsupported media type {bare!r}: send one of "
                                f"{', '.join(MEDIA_TYPES)}")
    return MEDIA_TYPES[bare]


@dataclasses.dataclass(frozen=True)
class PushedInput:
    """Bytes to ingest: a local file, read in place, and how messages name it."""

    path: Path
    name: str


def push(ws: Workspace, dataset_id: str, inputs: list[PushedInput], *,
         source_name: str | None = None, input_format: InputFormat | None = None,
         event_time: datetime | None = None, engine: EngineSource | None = None,
         progress: Progress | None = None) -> IngestResult:
    """Ingest ``inputs`` in order, each as one block or none (module doc)."""
    from .current import open_current
    from .pipeline import push_root

    _check_target(ws, dataset_id)

    def choose(state: DatasetState) -> PushSource:
        event = select_source(dataset_id, state, source_name)
        if input_format is not None:
            event = dataclasses.replace(event, read=compatible_read(event.read, input_format))
        return push_source(event, f"{dataset_id}: push source {event.source_name!r}")

    files = [FetchedFile(i.path, i.name, event_time, None) for i in inputs]
    # the source is chosen under the dataset's writer lock (open_current)
    return push_root(ws, dataset_id, files, target=partial(open_current, push=choose),
                     progress=progress, engine=engine)


def _check_target(ws: Workspace, dataset_id: str) -> None:
    odf = ws.odf_of(dataset_id)
    if odf is None:
        raise DatasetNotFound(dataset_id)
    if odf is OdfVersion.V018:
        raise IngestError(f"{dataset_id} is an ODF 0.18 dataset, which has no push sources; make "
                          "a 0.39 workspace (coord init --odf 0.39) or upgrade it (coord upgrade)")


def select_source(dataset_id: str, state: DatasetState, name: str | None) -> e.AddPushSource:
    """The push source to ingest through, as the reference picks it."""
    if state.kind is not e.DatasetKind.ROOT:
        raise IngestError(f"{dataset_id} is a derivative: data is pushed into root datasets only")
    sources = state.push_sources
    if name is not None:
        found = [p for p in sources if p.source_name == name]
        if not found:
            known = ", ".join(repr(p.source_name) for p in sources) or "none"
            raise IngestError(f"{dataset_id} has no push source {name!r} (its push sources: "
                              f"{known})")
        return found[0]
    if not sources:
        polled = " (it has a polling source: coord pull)" if state.polling_source else ""
        raise IngestError(f"{dataset_id} has no push source{polled}; add one (AddPushSource) "
                          "with coord add --replace")
    if len(sources) > 1:
        raise IngestError(f"{dataset_id} has several push sources "
                          f"({', '.join(p.source_name for p in sources)}); name one with "
                          "--source-name")
    return sources[0]


def compatible_read(step: s.ReadStep, fmt: InputFormat) -> s.ReadStep:
    """``step`` when it reads ``fmt``, else ``fmt``'s defaults with ``step``'s schema."""
    kind = _READS[fmt]
    if isinstance(step, kind):
        return step
    schema, ddl = getattr(step, "schema", None), getattr(step, "ddl_schema", None)
    if kind is s.ReadStepCsv:
        return s.ReadStepCsv(schema=schema, ddl_schema=ddl, header=schema is None and ddl is None)
    return kind(schema=schema, ddl_schema=ddl)
