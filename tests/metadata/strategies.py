"""Hypothesis strategies that generate any metadata object, driven by the objects' shapes."""
from __future__ import annotations

from dataclasses import MISSING
from datetime import datetime, timedelta

from hypothesis import strategies as st

from coordinator.metadata import objects
from coordinator.metadata.did import DatasetId
from coordinator.metadata.multiformats import SHA3_256, Multihash
from coordinator.metadata.odf39 import data as data39
from coordinator.metadata.odf39 import events as events39
from coordinator.metadata.shape import Shape, fields_of
from coordinator.metadata.timestamps import UTC, IntervalType, TimeInterval, with_nanosecond

texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
timestamps = st.builds(  # down to the nanosecond, as ODF Timestamps are
    with_nanosecond,
    st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 12, 31),
                 timezones=st.just(UTC)),
    st.integers(0, 999),
)
hashes = st.binary(min_size=32, max_size=32)
# the integer range of each FlatBuffers scalar type
_INTS = {"q": (0, 2**63 - 1), "Q": (0, 2**64 - 1), "i": (-(2**31), 2**31 - 1), "I": (0, 2**32 - 1)}
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**53), 2**53) | texts,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
                     max_leaves=5)
_VALUES = {
    Multihash: st.builds(Multihash, st.just(SHA3_256), hashes),
    DatasetId: st.builds(DatasetId, hashes),
    data39.Base64Bytes: st.builds(data39.Base64Bytes, st.binary(max_size=40)),
}


@st.composite
def intervals(draw) -> TimeInterval:
    kind = draw(st.sampled_from(list(IntervalType)))
    a = draw(timestamps)
    b = a + draw(st.timedeltas(min_value=timedelta(microseconds=1), max_value=timedelta(days=999)))
    if kind in (IntervalType.EMPTY, IntervalType.UNBOUNDED):
        return TimeInterval(kind)
    if kind is IntervalType.SINGLETON:
        return TimeInterval(kind, a)
    if kind in (IntervalType.UNBOUNDED_CLOSED_RIGHT, IntervalType.UNBOUNDED_OPEN_RIGHT):
        return TimeInterval(kind, None, b)
    if kind in (IntervalType.UNBOUNDED_CLOSED_LEFT, IntervalType.UNBOUNDED_OPEN_LEFT):
        return TimeInterval(kind, a, None)
    return TimeInterval(kind, a, b)


def for_shape(shape: Shape, name: str = ""):
    k = shape.kind
    if k == "str":
        return texts
    if k == "bool":
        return st.booleans()
    if k == "int":
        return st.integers(*_INTS[shape.scalar])
    if k == "bytes":
        return hashes
    if k == "value":
        return _VALUES[shape.cls]
    if k == "json":
        return st.dictionaries(texts, _JSON, max_size=3).map(shape.cls.from_json)
    if k == "timestamp":
        return timestamps
    if k == "interval":
        return intervals()
    if k == "enum":
        return st.sampled_from(list(shape.cls))
    if k == "list":
        return st.lists(for_shape(shape.item), max_size=3)
    if k == "table":
        return st.deferred(lambda: objects_of(shape.cls))
    if k == "union":
        return st.one_of([st.deferred(lambda v=v: objects_of(v)) for v in shape.cls.variants])
    raise TypeError(k)


def objects_of(cls):
    kwargs = {}
    for f in fields_of(cls):
        value = for_shape(f.shape, f.name)
        always = f.required or f.fb_default is not MISSING
        kwargs[f.name] = value if always else st.none() | value
    return st.builds(cls, **kwargs)


blocks = objects_of(objects.MetadataBlock)
blocks39 = objects_of(events39.MetadataBlock)
snapshots39 = objects_of(events39.DatasetSnapshot)
