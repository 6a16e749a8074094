"""A 0.18 dataset's definition as the ODF 0.39 events that say the same: the other direction of
``adapt.py`` (which turns 0.39 events into the 0.18 snapshot a workspace holds).

Invariants:

- Every 0.18 field maps to its 0.39 counterpart with the meaning 0.18 gives it: a default that
  differs is written out (0.18 infers a CSV's schema unless told, 0.39 reads text; a URL or
  glob without ``eventTime`` stamps records with the system time, written ``FromSystemTime``),
  DDL schema lines become ``ddlSchema``, ``jsonLines`` is ``NdJson``, a temporal table's ``id``
  its ``name``. ``adapt.adapt_snapshot`` of the result gives the 0.18 definition back.
- What 0.39 cannot say is refused with ``NoCounterpart`` naming its place in the 0.18 source
  (``source.read.multiLine``), never dropped: File Feed fetches, CSV and JSON options 0.39
  lacks, snapshot observation names other than the defaults, our late-rows extension.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields

from ...errors import Invalid
from .. import objects as o
from ..did import DatasetId
from . import events as e
from . import source as s


class NoCounterpart(Invalid):
    """A 0.18 definition holds something ODF 0.39 has no way to say."""

    def __init__(self, place: str, what: str, hint: str):
        super().__init__(f"{place}: {what} has no counterpart in ODF 0.39 ({hint}); a 0.18 "
                         "workspace (coord init --odf 0.18) keeps it")


def polling_source(source: o.DatasetSourceRoot, at: str = "source") -> e.SetPollingSource:
    """The SetPollingSource of a 0.18 root source; ``at`` names the source in errors."""
    return e.SetPollingSource(
        fetch=_fetch(source.fetch, f"{at}.fetch"),
        prepare=None if source.prepare is None else [_prepare(p) for p in source.prepare],
        read=_read(source.read, f"{at}.read"),
        preprocess=None if source.preprocess is None else _sql(source.preprocess,
                                                                f"{at}.preprocess"),
        merge=_merge(source.merge, f"{at}.merge"))


def set_transform(source: o.DatasetSourceDerivative, ids: Mapping[str, DatasetId],
                  at: str = "source") -> e.SetTransform:
    """The SetTransform of a 0.18 derivative source: each input by the ``did:odf`` ``ids``
    gives it, with its 0.18 name as the alias its query reads it by."""
    return e.SetTransform(
        inputs=[e.TransformInput(dataset_ref=str(ids[name]), alias=name) for name in source.inputs],
        transform=_sql(source.transform, f"{at}.transform"))


def set_vocab(vocab: o.DatasetVocabulary | None) -> e.SetVocab | None:
    """The SetVocab of a 0.18 vocabulary (None: the defaults, which need no event)."""
    if vocab is None or (vocab.system_time_column is None and vocab.event_time_column is None):
        return None
    return e.SetVocab(system_time_column=vocab.system_time_column,
                      event_time_column=vocab.event_time_column)


def _fetch(step: o.FetchStep, at: str) -> s.FetchStep:
    if isinstance(step, o.FetchStepUrl):
        return s.FetchStepUrl(url=step.url, event_time=_event_time(step.event_time),
                              cache=_cache(step.cache))
    if isinstance(step, o.FetchStepFilesGlob):
        order = None if step.order is None else s.SourceOrdering[step.order.name]
        return s.FetchStepFilesGlob(path=step.path, event_time=_event_time(step.event_time),
                                    cache=_cache(step.cache), order=order)
    raise NoCounterpart(at, f"fetch kind {step.KIND}",
                        "the reference polls Url, FilesGlob, Container, Mqtt and EthereumLogs")


def _event_time(source: o.EventTimeSource | None) -> s.EventTimeSource:
    if isinstance(source, o.EventTimeSourceFromMetadata):
        return s.EventTimeSourceFromMetadata()
    if isinstance(source, o.EventTimeSourceFromPath):
        return s.EventTimeSourceFromPath(pattern=source.pattern,
                                         timestamp_format=source.timestamp_format)
    return s.EventTimeSourceFromSystemTime()  # what 0.18 does without one


def _cache(cache: o.SourceCaching | None) -> s.SourceCachingForever | None:
    return None if cache is None else s.SourceCachingForever()


def _prepare(step: o.PrepStep) -> s.PrepStep:
    if isinstance(step, o.PrepStepPipe):
        return s.PrepStepPipe(command=list(step.command))
    return s.PrepStepDecompress(format=s.CompressionFormat[step.format.name],
                                sub_path=step.sub_path)


_READS: dict[type, type] = {
    o.ReadStepCsv: s.ReadStepCsv,
    o.ReadStepJsonLines: s.ReadStepNdJson,
    o.ReadStepGeoJson: s.ReadStepGeoJson,
    o.ReadStepEsriShapefile: s.ReadStepEsriShapefile,
    o.ReadStepParquet: s.ReadStepParquet,
}
_NAMES = {"schema": "ddl_schema"}  # 0.18 name -> 0.39 name, where they differ


def _read(step: o.ReadStep, at: str) -> s.ReadStep:
    target = _READS[type(step)]
    known = {f.name for f in fields(target)}
    options = {}
    for f in fields(step):
        value = getattr(step, f.name)
        name = _NAMES.get(f.name, f.name)
        if value is None:
            continue
        if name not in known:
            raise NoCounterpart(f"{at}.{_camel(f.name)}", f"the {step.KIND} option {_camel(f.name)}",
                                "leave it out of the 0.18 manifest, or convert the data first")
        options[name] = list(value) if isinstance(value, list) else value
    if isinstance(step, o.ReadStepCsv) and step.schema is None and step.infer_schema is None:
        options["infer_schema"] = True  # 0.18 infers by default, 0.39 reads text
    return target(**options)


def _sql(t: o.TransformSql, at: str) -> s.TransformSql:
    # lateRows is not carried: a 0.39 transform has no place for it (``store.late_rows``)
    # inputWatermarks is not carried: `recorded` is ODF's own rule, and the records an older
    # derivative computed under event-time watermarks are carried as computed (ODF-039.md).
    tables = None if t.temporal_tables is None else [
        s.TemporalTable(name=table.id, primary_key=list(table.primary_key))
        for table in t.temporal_tables]
    queries = None if t.queries is None else [
        s.SqlQueryStep(alias=step.alias, query=step.query) for step in t.queries]
    return s.TransformSql(engine=t.engine, version=t.version, query=t.query, queries=queries,
                          temporal_tables=tables)


def _merge(merge: o.MergeStrategy, at: str) -> s.MergeStrategy:
    if isinstance(merge, o.MergeStrategyAppend):
        return s.MergeStrategyAppend()
    if isinstance(merge, o.MergeStrategyLedger):
        return s.MergeStrategyLedger(primary_key=list(merge.primary_key))
    for name in ("observation_column", "obsv_added", "obsv_changed", "obsv_removed"):
        if getattr(merge, name) is not None:
            raise NoCounterpart(f"{at}.{_camel(name)}", f"the snapshot option {_camel(name)}",
                                "0.39 marks changes in the op column")
    compare = None if merge.compare_columns is None else list(merge.compare_columns)
    return s.MergeStrategySnapshot(primary_key=list(merge.primary_key), compare_columns=compare)


def _camel(name: str) -> str:
    """A field's name as manifests spell it (``multi_line`` -> ``multiLine``)."""
    first, *rest = name.split("_")
    return first + "".join(w.title() for w in rest)
