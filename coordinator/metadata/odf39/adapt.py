"""An ODF 0.39 dataset snapshot as the ODF 0.18 snapshot a workspace holds today.

Workspaces store ODF 0.18 chains (``objects.py`` and our extensions); users may write a
dataset in the reference's current form (``{name, kind, metadata: [events]}``). ``adapt_snapshot``
turns one into the other:

- Every field with a 0.18 (or extension) counterpart maps to it, with the meaning the current
  form gives it: a default that differs is written out (a CSV without a schema is read as
  text unless ``inferSchema``), an ODF schema becomes DDL lines, ``FromSystemTime`` is the
  0.18 default (no ``eventTime``), ``rfc3339`` formats are the 0.18 default (no format).
- A root fed by push sources (``AddPushSource``, each with a distinct ``sourceName``) has no
  0.18 source: its snapshot's ``source`` is None and each push source is adapted to the steps
  the ingest pipeline runs (``PushSource``); only a 0.39 dataset can keep it (``coord add``
  refuses it for 0.18). A root has a polling source or push sources, not both.
- What a 0.18 workspace cannot hold yet is refused as a ``NotSupported`` naming its place in
  the file, never dropped: stream merges, fetch and read kinds 0.18 lacks, a
  Seed, a SetDataSchema, data events, an input named by ``did:odf`` or by an alias.
- For a 0.39 dataset (``target="0.39"``) a stream merge (``ChangelogStream``, ``UpsertStream``),
  which the 0.18 model has no kind for, stays the current form's object in the adapted source:
  only 0.39 code paths (ingest into a 0.39 root, its state) are given such a source. A
  ``Json`` or ``NdGeoJson`` read becomes an ``NdJson`` one (the pipeline rewrites the file
  first: ``ingest.reshape``); an input may have an alias other than its name (the query
  reads it so; a temporal table named by the alias is that input) and may be named
  ``account/name``, which is the workspace's dataset ``name`` (a workspace has no accounts;
  noted). What coord cannot do for it either is refused in the same way, in words
  that do not speak of ODF 0.18.
- A ``FileFeed`` fetch (coord's extension, docs/feeds.md) becomes the 0.18 ``fileFeed`` one
  in either version: a 0.39 dataset keeps it beside its chain, not in it (``store.define``).
- Descriptive events (SetInfo, SetLicense, SetAttachments) change no data and have no place
  in 0.18: they are left out, each with a note for the user (``Adapted.notes``).
- Every place of the result, as the 0.18 loader and ``coord add`` name them
  (``content.source.inputs[0]``), maps back to the place in the file it came from
  (``content.metadata[0].inputs[0].datasetRef``): ``Adapted.place``.
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace

from .. import objects as o
from ..schema_evolution import type_text
from ..yaml_codec import DecodeError
from . import data as d
from . import events as e
from . import source as s


class NotSupported(DecodeError):
    """Something the current form holds that an ODF 0.18 workspace (``by``) cannot hold yet."""

    def __init__(self, path: str, what: str, hint: str, by: str = "ODF 0.18 workspaces"):
        super().__init__(path, f"{what} is not supported by {by} yet ({hint})")
        self.what, self.hint = what, hint

    def for_039(self) -> NotSupported:
        """The same refusal for a 0.39 dataset, which is coord's to hold, not 0.18's."""
        return NotSupported(self.path, self.what, self.hint, "coord")


@dataclass(frozen=True)
class PushSource:
    """An ``AddPushSource`` as the ingest pipeline's steps (0.18 read, preprocess and merge);
    a push has no fetch and no prepare step. A ``Json`` or ``NdGeoJson`` read (which 0.18 has
    not) is read as ``NdJson`` once the file is rewritten so (``given`` says which the file is)."""

    name: str
    given: s.ReadStep  # the read step as written
    read: o.ReadStep
    preprocess: o.TransformSql | None
    merge: o.MergeStrategy
    prepare: None = None


@dataclass(frozen=True)
class Adapted:
    snapshot: o.DatasetSnapshot
    notes: tuple[tuple[str, str], ...]  # (place in the file, what was left out)
    places: Mapping[str, str]  # a 0.18 path (prefix) -> the place in the file it came from
    written: e.DatasetSnapshot  # the snapshot as the file writes it (what a 0.39 dataset keeps)
    push_sources: tuple[PushSource, ...] = ()  # a push-fed root's sources, in the file's order

    def place(self, path: str) -> str:
        """The place in the file of a 0.18 path (``content.source.merge.primaryKey``)."""
        for prefix in sorted(self.places, key=len, reverse=True):
            if path == prefix or path.startswith((prefix + ".", prefix + "[")):
                return self.places[prefix] + path[len(prefix):]
        return path


DESCRIPTIVE = (e.SetInfo, e.SetLicense, e.SetAttachments)

# why each event kind without a 0.18 counterpart is refused, and what to do instead
_REFUSED = {
    e.Seed: "a 0.18 dataset is identified by its name; leave the Seed out",
    e.SetDataSchema: "a 0.18 dataset's schema is that of its data; declare columns in the read step",
    e.AddData: "data enters a dataset through coord pull",
    e.ExecuteTransform: "data enters a dataset through coord pull",
    e.DisablePushSource: "a 0.18 root has no push sources",
    e.DisablePollingSource: "a 0.18 root keeps its source; leave the event out",
}


STREAM_MERGES = (s.MergeStrategyChangelogStream, s.MergeStrategyUpsertStream)
StreamMerge = s.MergeStrategyChangelogStream | s.MergeStrategyUpsertStream
NEEDS_039 = "a 0.39 dataset merges them: make the workspace with coord init --odf 0.39"


def adapt_snapshot(snapshot: e.DatasetSnapshot, target: str = "0.18") -> Adapted:
    """The 0.18 snapshot of ``snapshot`` for a dataset of ODF ``target`` (a 0.39 one keeps
    stream merges); raises ``NotSupported`` (or ``DecodeError``) naming the place in the file."""
    try:
        return _adapted(snapshot, target)
    except NotSupported as err:
        raise err.for_039() if target == "0.39" else err from None


def _adapted(snapshot: e.DatasetSnapshot, target: str) -> Adapted:
    places = {"content.id": "content.name"}
    notes: list[tuple[str, str]] = []
    source: o.DatasetSource | None = None
    vocab: o.DatasetVocabulary | None = None
    push: dict[str, PushSource] = {}
    for i, event in enumerate(snapshot.metadata):
        at = f"content.metadata[{i}]"
        if isinstance(event, e.AddPushSource):
            if snapshot.kind is e.DatasetKind.DERIVATIVE:
                raise DecodeError(at, "a Derivative dataset has no AddPushSource (kind: Root "
                                      "ingests data)")
            if event.source_name in push:
                raise DecodeError(f"{at}.sourceName", f"a second push source named "
                                                      f"{event.source_name!r}")
            push[event.source_name] = push_source(event, at, places if not push else {}, target)
        elif isinstance(event, e.SetPollingSource | e.SetTransform):
            if source is not None:
                raise NotSupported(at, f"a second source ({event.KIND})",
                                   "a 0.18 snapshot holds one: keep the one in force")
            _check_kind(snapshot.kind, event, at)
            places["content.source"] = at
            source = (_root(event, at, places, target) if isinstance(event, e.SetPollingSource)
                      else _derivative(event, at, places, notes, target))
        elif isinstance(event, e.SetVocab):
            if "content.vocab" in places:
                raise NotSupported(at, "a second SetVocab",
                                   "a 0.18 snapshot holds one: keep the one in force")
            places["content.vocab"] = at
            vocab = _vocab(event, at)
        elif isinstance(event, DESCRIPTIVE):
            if target == "0.39":
                continue  # a 0.39 dataset keeps it as written
            notes.append((at, f"{event.KIND} left out: an ODF 0.18 workspace has no place for "
                              "descriptive metadata (it changes no data)"))
        else:
            raise NotSupported(at, event.KIND, _REFUSED[type(event)])
    if push and source is not None:
        raise NotSupported("content.metadata", "a root with both a SetPollingSource and push "
                           "sources", "give one or the other")
    if source is None and not push:
        if snapshot.kind is e.DatasetKind.DERIVATIVE:
            raise DecodeError("content.metadata", "a Derivative dataset needs a SetTransform")
        raise NotSupported("content.metadata", "a Root dataset without a SetPollingSource "
                           "or an AddPushSource", "coord ingests a root from the source its "
                           "manifest gives")
    return Adapted(o.DatasetSnapshot(id=snapshot.name, source=source, vocab=vocab), tuple(notes), places,
                   snapshot, tuple(push.values()))


def _check_kind(kind: e.DatasetKind, event: e.SetPollingSource | e.SetTransform, at: str) -> None:
    if kind is e.DatasetKind.ROOT and isinstance(event, e.SetTransform):
        raise DecodeError(at, "a Root dataset has no SetTransform (kind: Derivative computes "
                              "a dataset from others)")
    if kind is e.DatasetKind.DERIVATIVE and isinstance(event, e.SetPollingSource):
        raise DecodeError(at, "a Derivative dataset has no SetPollingSource (kind: Root ingests data)")


# --- roots ---------------------------------------------------------------------------------


def _root(event: e.SetPollingSource, at: str, places: dict[str, str],
          target: str) -> o.DatasetSourceRoot:
    preprocess = None
    if event.preprocess is not None:
        preprocess = _sql(event.preprocess, f"{at}.preprocess", "content.source.preprocess", places)
    read = event.read
    if isinstance(read, REWRITTEN_READS) and target != "0.39":
        raise NotSupported(f"{at}.read", f"read kind {read.KIND}",
                           "a 0.39 dataset reads it: make the workspace with coord init --odf 0.39")
    return o.DatasetSourceRoot(
        fetch=_fetch(event.fetch, f"{at}.fetch", target),
        prepare=None if event.prepare is None else [_prepare(step) for step in event.prepare],
        read=_read(as_ndjson(read), f"{at}.read", places),
        preprocess=preprocess,
        merge=_merge(event.merge, f"{at}.merge", target),  # type: ignore[arg-type]  # see module
    )


def push_source(event: e.AddPushSource, at: str = "source",
                places: dict[str, str] | None = None, target: str = "0.39") -> PushSource:
    """``event`` as the pipeline's steps; ``places`` (the first push source's) maps the 0.18
    paths of its read and preprocess to the file; ``target`` as for ``adapt_snapshot`` (a
    dataset that has push sources is a 0.39 one)."""
    places = {} if places is None else places
    places["content.source"] = at
    preprocess = None
    if event.preprocess is not None:
        preprocess = _sql(event.preprocess, f"{at}.preprocess", "content.source.preprocess", places)
    return PushSource(event.source_name, event.read, _read(as_ndjson(event.read), f"{at}.read", places),
                      preprocess, _merge(event.merge, f"{at}.merge", target))  # type: ignore[arg-type]


# read steps the pipeline takes once the file is rewritten as NdJson (``ingest.reshape``)
REWRITTEN_READS = (s.ReadStepJson, s.ReadStepNdGeoJson)


def as_ndjson(read: s.ReadStep) -> s.ReadStep:
    """The ``NdJson`` read of the file a ``Json`` or ``NdGeoJson`` one is rewritten as (in
    UTF-8: the rewrite decodes it), else ``read``."""
    if isinstance(read, s.ReadStepJson):
        return s.ReadStepNdJson(ddl_schema=read.ddl_schema, date_format=read.date_format,
                                timestamp_format=read.timestamp_format, schema=read.schema)
    if isinstance(read, s.ReadStepNdGeoJson):
        return s.ReadStepNdJson(ddl_schema=read.ddl_schema, schema=read.schema)
    return read


def _fetch(step: s.FetchStep, at: str, target: str) -> o.FetchStep:
    if isinstance(step, s.FetchStepUrl):
        if step.headers:
            raise NotSupported(f"{at}.headers", "request headers", "a 0.18 url fetch sends none")
        return o.FetchStepUrl(url=step.url, event_time=_event_time(step.event_time),
                              cache=_cache(step.cache))
    if isinstance(step, s.FetchStepFilesGlob):
        order = None if step.order is None else o.SourceOrdering[step.order.name]
        return o.FetchStepFilesGlob(path=step.path, event_time=_event_time(step.event_time),
                                    cache=_cache(step.cache), order=order)
    if isinstance(step, s.FetchStepFileFeed):  # coord's extension in both versions
        marker = None if step.success_marker is None else o.SuccessMarker[step.success_marker.name]
        return o.FetchStepFileFeed(url=step.url, partitions=step.partitions, success_marker=marker)
    if isinstance(step, s.FetchStepContainer):
        if target != "0.39":
            raise NotSupported(at, "fetch kind Container",
                               "a 0.39 dataset runs it: make the workspace with coord init --odf 0.39")
        env = None if step.env is None else [o.EnvVar(name=v.name, value=v.value) for v in step.env]
        return o.FetchStepContainer(image=step.image, command=step.command, args=step.args,
                                    env=env)
    raise NotSupported(at, f"fetch kind {step.KIND}",
                       "coord fetches Url, FilesGlob and Container sources")


def _event_time(source: s.EventTimeSource | None) -> o.EventTimeSource | None:
    if isinstance(source, s.EventTimeSourceFromMetadata):
        return o.EventTimeSourceFromMetadata()
    if isinstance(source, s.EventTimeSourceFromPath):
        return o.EventTimeSourceFromPath(pattern=source.pattern, timestamp_format=source.timestamp_format)
    return None  # FromSystemTime, or none: records without an event time get the pull's system time


def _cache(cache: s.SourceCachingForever | None) -> o.SourceCaching | None:
    return None if cache is None else o.SourceCachingForever()


def _prepare(step: s.PrepStep) -> o.PrepStep:
    if isinstance(step, s.PrepStepPipe):
        return o.PrepStepPipe(command=list(step.command))
    return o.PrepStepDecompress(format=o.CompressionFormat[step.format.name], sub_path=step.sub_path)


_READS: dict[type, type] = {
    s.ReadStepCsv: o.ReadStepCsv,
    s.ReadStepNdJson: o.ReadStepJsonLines,
    s.ReadStepGeoJson: o.ReadStepGeoJson,
    s.ReadStepEsriShapefile: o.ReadStepEsriShapefile,
    s.ReadStepParquet: o.ReadStepParquet,
}
_FORMATS = ("date_format", "timestamp_format")


def _read(step: s.ReadStep, at: str, places: dict[str, str]) -> o.ReadStep:
    target = _READS.get(type(step))
    if target is None:
        raise NotSupported(at, f"read kind {step.KIND}",
                           "coord reads Csv, NdJson, GeoJson, EsriShapefile and Parquet")
    if step.schema is not None and step.ddl_schema is not None:
        raise DecodeError(at, "give schema or ddlSchema, not both")
    if step.ddl_schema is not None:
        schema: list[str] | None = list(step.ddl_schema)
        places["content.source.read.schema"] = f"{at}.ddlSchema"
    else:
        schema = None if step.schema is None else ddl_lines(step.schema, f"{at}.schema")
        places["content.source.read.schema"] = f"{at}.schema"
    # the options both forms have are named alike; ``schema`` is the one that differs in type
    shared = {f.name for f in fields(target)} & {f.name for f in fields(step)} - {"schema"}
    options = {name: getattr(step, name) for name in shared}
    for name in options.keys() & set(_FORMATS):
        if (options[name] or "").lower() == "rfc3339":  # the current form's default; 0.18's reads it
            options[name] = None
    if isinstance(step, s.ReadStepCsv) and schema is None and step.infer_schema is None:
        options["infer_schema"] = False  # the current form's default (0.18 infers by default)
    return target(schema=schema, **options)


def _merge(merge: s.MergeStrategy, at: str, target: str) -> o.MergeStrategy | StreamMerge:
    if isinstance(merge, s.MergeStrategyAppend):
        return o.MergeStrategyAppend()
    if isinstance(merge, s.MergeStrategyLedger):
        return o.MergeStrategyLedger(primary_key=list(merge.primary_key))
    if isinstance(merge, s.MergeStrategySnapshot):
        compare = None if merge.compare_columns is None else list(merge.compare_columns)
        return o.MergeStrategySnapshot(primary_key=list(merge.primary_key), compare_columns=compare)
    if target == "0.39":
        return merge
    raise NotSupported(at, f"merge kind {merge.KIND}", NEEDS_039)


# --- read schemas ----------------------------------------------------------------------------

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DDL_TYPES: dict[type, str] = {
    d.DataTypeBool: "BOOLEAN", d.DataTypeInt8: "TINYINT", d.DataTypeInt16: "SMALLINT",
    d.DataTypeInt32: "INT", d.DataTypeInt64: "BIGINT", d.DataTypeFloat32: "FLOAT",
    d.DataTypeFloat64: "DOUBLE", d.DataTypeString: "STRING", d.DataTypeDate: "DATE",
}
_PRECISION = {d.TimeUnit.SECOND: 0, d.TimeUnit.MILLISECOND: 3, d.TimeUnit.MICROSECOND: 6,
              d.TimeUnit.NANOSECOND: 9}
# The reference's defaults (kamu-cli 0.263 on): a Timestamp, Time or Duration without a unit is
# in milliseconds, a Timestamp without a timezone in UTC.
_UTC = (None, "UTC", "+00:00")
_DDL_HINT = ("a 0.18 read schema has BOOLEAN, signed integers, FLOAT, DOUBLE, DECIMAL, STRING, "
             "BINARY, DATE, TIME and TIMESTAMP in UTC")


def ddl_lines(schema: d.DataSchema, at: str) -> list[str]:
    """An ODF schema as 0.18 DDL lines (``name TYPE``). DDL columns are all nullable, so a
    required field (one without ``Option``) is read as nullable; a 0.39 ingest refuses its
    nulls and records it required (``ingest.current.declared_required``)."""
    if schema.extra is not None:
        raise NotSupported(f"{at}.extra", "extra attributes", "a 0.18 read schema is DDL text")
    lines = []
    for k, f in enumerate(schema.fields):
        where = f"{at}.fields[{k}]"
        if f.extra is not None:
            raise NotSupported(f"{where}.extra", "extra attributes", "a 0.18 read schema is DDL text")
        if "`" in f.name or "," in f.name:
            raise NotSupported(f"{where}.name", f"the column name {f.name!r}",
                               "a DDL column name holds no backquote or comma")
        name = f.name if _PLAIN_NAME.fullmatch(f.name) else f"`{f.name}`"
        lines.append(f"{name} {_ddl_type(f.type, f'{where}.type')}")
    return lines


def _ddl_type(t: d.DataType, at: str) -> str:
    inner = t.inner if isinstance(t, d.DataTypeOption) else t
    if type(inner) in _DDL_TYPES:
        return _DDL_TYPES[type(inner)]
    if isinstance(inner, d.DataTypeDecimal):
        return f"DECIMAL({inner.precision},{inner.scale})"
    if isinstance(inner, d.DataTypeTimestamp) and inner.timezone in _UTC:
        return f"TIMESTAMP({_PRECISION[inner.unit or d.TimeUnit.MILLISECOND]})"
    if isinstance(inner, d.DataTypeTime):
        unit = inner.unit or d.TimeUnit.MILLISECOND
        return "TIME" if unit is d.TimeUnit.MICROSECOND else f"TIME({_PRECISION[unit]})"
    if isinstance(inner, d.DataTypeDuration):
        raise NotSupported(at, f"the data type {type_text(inner)}",
                           "no data slice can hold a duration: the reference's logical hash has "
                           "no encoding for one, nor its CSV reader a way to read one; declare "
                           "the column Int64, a count of its unit")
    if isinstance(inner, d.DataTypeBinary) and inner.fixed_length is None:
        return "BINARY"
    raise NotSupported(at, f"the data type {_describe(inner)}", _DDL_HINT)


def _describe(t: d.DataType) -> str:
    details = ", ".join(f"{f.name}={getattr(t, f.name)}" for f in fields(t)
                        if isinstance(getattr(t, f.name), str | int | d.TimeUnit))
    return f"{t.KIND}({details})" if details else t.KIND


# --- derivatives -------------------------------------------------------------------------------


def _derivative(event: e.SetTransform, at: str, places: dict[str, str],
                notes: list[tuple[str, str]], target: str) -> o.DatasetSourceDerivative:
    inputs, by_alias = [], {}
    for k, given in enumerate(event.inputs):
        where = f"{at}.inputs[{k}]"
        ref = given.dataset_ref
        if ref.startswith("did:"):
            raise NotSupported(f"{where}.datasetRef", f"an input named by its id ({ref})",
                               "name it by its dataset name")
        name = local_name(ref)
        if name != ref:
            if target != "0.39":
                raise NotSupported(f"{where}.datasetRef", f"an input of another account ({ref})",
                                   "name a dataset of this workspace")
            notes.append((f"{where}.datasetRef", f"{ref} is read as this workspace's dataset "
                                                 f"{name} (a workspace has no accounts)"))
        if given.alias is not None and given.alias != ref:
            if target != "0.39":
                raise NotSupported(f"{where}.alias", f"an alias ({given.alias}) other than the "
                                   "input's name", f"the query reads each input by its name: `{ref}`")
            by_alias[given.alias] = name
        inputs.append(name)
        places[f"content.source.inputs[{k}]"] = f"{where}.datasetRef"
    transform = _sql(event.transform, f"{at}.transform", "content.source.transform", places)
    if transform.temporal_tables and by_alias:  # one named by its input's alias is that input
        transform = replace(transform, temporal_tables=[
            replace(table, id=by_alias.get(table.id, table.id)) for table in transform.temporal_tables])
    return o.DatasetSourceDerivative(inputs=inputs, transform=transform)


def local_name(ref: str) -> str:
    """The workspace dataset an input's ``datasetRef`` (a name or ``account/name``) names."""
    return ref.rpartition("/")[2]


def account_inputs(snapshot: e.DatasetSnapshot) -> Iterator[tuple[str, str]]:
    """Each input named ``account/name``: its place in the file and its ``datasetRef``."""
    for i, event in enumerate(snapshot.metadata):
        if isinstance(event, e.SetTransform):
            for k, given in enumerate(event.inputs):
                if local_name(given.dataset_ref) != given.dataset_ref:
                    yield f"content.metadata[{i}].inputs[{k}].datasetRef", given.dataset_ref


def transform_sql(t: s.TransformSql) -> o.TransformSql:
    """The 0.18 form of a 0.39 SQL transform: what the engine port takes (the same fields)."""
    return _sql(t, "transform", "transform", {})


def _sql(t: s.TransformSql, at: str, path: str, places: dict[str, str]) -> o.TransformSql:
    if t.query is not None and t.queries is not None:
        raise DecodeError(at, "give query or queries, not both")
    tables = None
    if t.temporal_tables is not None:
        tables = [o.TemporalTable(id=table.name, primary_key=list(table.primary_key))
                  for table in t.temporal_tables]
        for k in range(len(tables)):
            places[f"{path}.temporalTables[{k}].id"] = f"{at}.temporalTables[{k}].name"
    queries = None
    if t.queries is not None:
        queries = [o.SqlQueryStep(alias=step.alias, query=step.query) for step in t.queries]
    return o.TransformSql(engine=t.engine, version=t.version, query=t.query, queries=queries,
                          temporal_tables=tables)


def vocab_of(event: e.SetVocab | None) -> o.DatasetVocabulary | None:
    """A dataset's SetVocab (None: none) as the 0.18 vocabulary the pipeline takes."""
    return None if event is None else _vocab(event, "SetVocab")


def _vocab(event: e.SetVocab, at: str) -> o.DatasetVocabulary | None:
    for name, value in (("offsetColumn", event.offset_column),
                        ("operationTypeColumn", event.operation_type_column)):
        if value is not None:
            raise NotSupported(f"{at}.{name}", name, "records of a 0.18 dataset have no such column")
    if event.system_time_column is None and event.event_time_column is None:
        return None
    return o.DatasetVocabulary(system_time_column=event.system_time_column,
                               event_time_column=event.event_time_column)
