"""FlatBuffers codec for metadata objects, following the spec's two-pass procedure exactly.

The rules (written down in ``schemas/BLOCK-HASHING.md``): per table, first create every
string, vector and child table in schema field order (depth first), then start the table and
add present fields in schema order. Unions take two slots (type tag, then offset). Scalars with a schema
default are omitted when equal to it; ``= null`` scalars are written whenever present.
No file identifier. The builder's vtable de-duplication stays on.

The walkers are generic over the object model (``shape.py``): ``encode_table`` and
``decode_table`` serve ODF 0.18 blocks here and ODF 0.39 manifests (``odf39/codec.py``).
"""
from __future__ import annotations

import enum
import json
import struct
from dataclasses import MISSING
from datetime import datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING

from ..errors import CoordError
from . import objects
from .shape import FieldInfo, Union, fields_of, union_tag, variant_by_tag
from .timestamps import UTC, IntervalType, TimeInterval, nanosecond_of, with_nanosecond

if TYPE_CHECKING:
    import flatbuffers


class BlockFormatError(CoordError, ValueError):
    pass


# --- encoding ----------------------------------------------------------------------------------


def encode_block(block: objects.MetadataBlock) -> bytes:
    return encode_table(block)


def encode_table(obj) -> bytes:
    """A metadata object as a finished FlatBuffer (root table, no file identifier)."""
    import flatbuffers  # only writers need the runtime (it imports numpy)

    b = flatbuffers.Builder(1024)
    root = _build_table(b, obj)
    b.Finish(root)
    return bytes(b.Output())


@cache
def _slots(cls: type) -> tuple[tuple[FieldInfo, int], ...]:
    """(field, first slot) pairs; a union occupies two slots."""
    out, slot = [], 0
    for f in fields_of(cls):
        out.append((f, slot))
        slot += 2 if f.shape.kind == "union" else 1
    return tuple(out)


def _build_table(b: flatbuffers.Builder, obj) -> int:
    slots = _slots(type(obj))  # type: ignore[arg-type]  # a class is hashable
    # pass 1: out-of-line children, in field order
    children = {}
    for f, _ in slots:
        value = getattr(obj, f.name)
        child = None if value is None else _build_child(b, value, f)
        if child is not None:
            children[f.name] = child
    # pass 2: the table itself
    b.StartObject(sum(2 if f.shape.kind == "union" else 1 for f, _ in slots))
    for f, slot in slots:
        value = getattr(obj, f.name)
        if value is None:
            continue
        k = f.shape.kind
        if k == "union":
            b.PrependUint8Slot(slot, _union_tag(f.shape.cls, value), 0)
            b.PrependUOffsetTRelativeSlot(slot + 1, children[f.name], 0)
        elif f.name in children:
            b.PrependUOffsetTRelativeSlot(slot, children[f.name], 0)
        elif k == "timestamp":
            _write_timestamp(b, value)
            b.PrependStructSlot(slot, b.Offset(), 0)
        elif k == "interval":
            _write_interval(b, value)
            b.PrependStructSlot(slot, b.Offset(), 0)
        else:
            _write_scalar(b, slot, value, f)
    return b.EndObject()


def _build_child(b: flatbuffers.Builder, value, f: FieldInfo):
    k = f.shape.kind
    if k == "str":
        return b.CreateString(value)
    if k == "bytes":
        return b.CreateByteVector(value)
    if k == "value":
        return b.CreateByteVector(value.to_bytes())
    if k == "json":  # a table of one string: the JSON text
        text = b.CreateString(value.to_json())
        b.StartObject(1)
        b.PrependUOffsetTRelativeSlot(0, text, 0)
        return b.EndObject()
    if k == "table":
        return _build_table(b, value)
    if k == "union":
        return _build_table(b, value)
    if k == "list":
        item = f.shape.element.kind
        if item == "str":
            offsets = [b.CreateString(s) for s in value]  # first element first
        elif item == "table":
            offsets = [_build_table(b, t) for t in value]
        elif item == "union":  # vector of unions -> vector of wrapper tables {value: Union}
            offsets = [_build_wrapper(b, v, f.shape.element.cls) for v in value]
        else:
            raise TypeError(f"unsupported list of {item}")
        b.StartVector(4, len(offsets), 4)
        for off in reversed(offsets):
            b.PrependUOffsetTRelative(off)
        return b.EndVector()
    return None  # scalars and structs are written inline in pass 2


def _build_wrapper(b: flatbuffers.Builder, value, union: Union) -> int:
    inner = _build_table(b, value)
    b.StartObject(2)
    b.PrependUint8Slot(0, _union_tag(union, value), 0)
    b.PrependUOffsetTRelativeSlot(1, inner, 0)
    return b.EndObject()


def _union_tag(union: Union, value) -> int:
    return union_tag(type(value))


_PREPEND_SLOT = {"q": "PrependInt64Slot", "Q": "PrependUint64Slot", "i": "PrependInt32Slot",
                 "I": "PrependUint32Slot", "h": "PrependInt16Slot", "B": "PrependUint8Slot",
                 "?": "PrependBoolSlot"}


def _write_scalar(b: flatbuffers.Builder, slot: int, value, f: FieldInfo):
    if f.shape.kind == "enum":
        value = value.value[1]
    prepend = _PREPEND_SLOT.get(f.shape.scalar)
    if prepend is None:
        raise TypeError(f"unsupported scalar {f.shape.kind}")
    if f.fb_default is not MISSING and value == _raw(f.fb_default):
        return  # equal to the schema default: omitted (no force_defaults)
    getattr(b, prepend)(slot, value, None)  # '= null' scalars: written whenever present


def _raw(default):
    return default.value[1] if isinstance(default, enum.Enum) else default


def _timestamp_parts(t: datetime):
    utc = t.astimezone(UTC)
    ordinal = utc.timetuple().tm_yday
    seconds = utc.hour * 3600 + utc.minute * 60 + utc.second
    return utc.year, ordinal, seconds, utc.microsecond * 1000 + nanosecond_of(t)


def _write_timestamp(b: flatbuffers.Builder, t: datetime):
    year, ordinal, seconds, nanos = _timestamp_parts(t)
    b.Prep(4, 16)
    b.PrependUint32(nanos)
    b.PrependUint32(seconds)
    b.Pad(2)
    b.PrependUint16(ordinal)
    b.PrependInt32(year)


def _write_zero_timestamp(b: flatbuffers.Builder):
    b.Prep(4, 16)
    b.Pad(16)


def _write_interval(b: flatbuffers.Builder, iv: TimeInterval):
    b.Prep(4, 36)
    for bound in (iv.right, iv.left):  # back to front
        if bound is None:
            _write_zero_timestamp(b)
        else:
            _write_timestamp(b, bound)
    b.Pad(3)
    b.PrependUint8(int(iv.type))


# --- decoding ----------------------------------------------------------------------------------
#
# Reading needs no FlatBuffers runtime: a table is a signed offset to its vtable, the vtable
# lists each field's offset inside the table, and strings and vectors are reached through one
# unsigned offset and start with their length. Reading with ``struct`` keeps the commands
# that only read chains (list, status, log) from importing the runtime, which imports numpy.

_U8, _U16, _I32, _U32 = (struct.Struct(f) for f in ("<B", "<H", "<i", "<I"))


@cache
def _scalar(fmt: str) -> struct.Struct:
    return struct.Struct("<" + fmt)


class _Table:
    """A table at ``pos`` in ``buf`` (the same reads as ``flatbuffers.table.Table``)."""

    __slots__ = ("buf", "pos", "vtable", "vtable_size")

    def __init__(self, buf: bytes, pos: int):
        self.buf, self.pos = buf, pos
        # every field lookup goes through the vtable: located once (a chain walk decodes
        # tens of tables per block)
        self.vtable = pos - self.get(_I32, pos)
        self.vtable_size = self.get(_U16, self.vtable)

    def get(self, kind: struct.Struct, at: int) -> int:
        if at < 0:  # struct counts negative offsets from the end; a garbled offset is an error
            raise BlockFormatError(f"offset {at} outside the block")
        return kind.unpack_from(self.buf, at)[0]

    def offset(self, voffset: int) -> int:
        """The field's offset inside the table, 0 when it is absent."""
        return self.get(_U16, self.vtable + voffset) if voffset < self.vtable_size else 0

    def indirect(self, at: int) -> int:
        return at + self.get(_U32, at)

    def bytes_at(self, at: int) -> bytes:
        """The string or byte vector whose offset is stored at ``at``."""
        start = self.indirect(at)
        length = self.get(_U32, start)
        end = start + 4 + length
        if end > len(self.buf):
            raise BlockFormatError("a vector runs past the end of the block")
        return bytes(self.buf[start + 4 : end])

    def vector(self, o: int) -> tuple[int, int]:
        """(start of the items, their number) of the vector field at offset ``o``."""
        start = self.indirect(self.pos + o)
        return start + 4, self.get(_U32, start)


def decode_block(buf: bytes) -> objects.MetadataBlock:
    return decode_table(objects.MetadataBlock, buf)


def decode_table(cls, buf: bytes):
    """The ``cls`` object a FlatBuffer holds as its root table."""
    try:
        return _read_table(cls, _root(buf))
    except BlockFormatError:
        raise
    except Exception as e:  # a truncated or garbled buffer
        raise BlockFormatError(f"not a valid {cls.__name__}: {e}") from None


def block_hash_position(buf: bytes) -> tuple[int, int]:
    """(start, length) of the blockHash bytes inside a serialized block."""
    try:
        tab = _root(buf)
        o = tab.offset(4)
        position = tab.vector(o) if o else None
    except Exception as e:  # a garbled buffer
        raise BlockFormatError(f"not a valid MetadataBlock: {e}") from None
    if position is None:
        raise BlockFormatError("block has no blockHash")
    return position


def _root(buf: bytes) -> _Table:
    return _Table(buf, _U32.unpack_from(buf, 0)[0])


def _read_table(cls, tab: _Table):
    kwargs = {}
    for f, slot in _slots(cls):
        voff = 4 + 2 * slot
        k = f.shape.kind
        if k == "union":
            o_tag, o_val = tab.offset(voff), tab.offset(voff + 2)
            if not o_val:
                continue
            tag = tab.get(_U8, o_tag + tab.pos)
            kwargs[f.name] = _read_union(f.shape.cls, tag, _Table(tab.buf, tab.indirect(tab.pos + o_val)))
            continue
        o = tab.offset(voff)
        if not o:
            if f.fb_default is not MISSING:
                kwargs[f.name] = f.fb_default
            continue
        kwargs[f.name] = _read_value(tab, o, f)
    return cls(**kwargs)


def _read_union(union: Union, tag: int, tab: _Table):
    cls = variant_by_tag(union, tag)
    if cls is None:
        later = dict(union.later_tags).get(tag)
        if later is not None:
            raise BlockFormatError(f"{union.name} {later!r} (a later ODF version's) is not supported")
        raise BlockFormatError(f"unknown {union.name} type tag {tag}")
    return _read_table(cls, tab)


def _read_value(tab: _Table, o: int, f: FieldInfo):
    k = f.shape.kind
    pos = o + tab.pos
    if k == "str":
        return tab.bytes_at(pos).decode("utf-8")
    if k == "bytes":
        return tab.bytes_at(pos)
    if k == "value":
        return f.shape.cls.from_bytes(tab.bytes_at(pos))
    if k == "json":
        inner = _Table(tab.buf, tab.indirect(pos))
        o_text = inner.offset(4)
        return f.shape.cls.from_json(json.loads(inner.bytes_at(inner.pos + o_text)) if o_text else {})
    if k == "table":
        return _read_table(f.shape.cls, _Table(tab.buf, tab.indirect(pos)))
    if k == "timestamp":
        return _read_timestamp(tab, pos)
    if k == "interval":
        return _read_interval(tab, pos)
    if k == "enum":
        raw = tab.get(_scalar(f.shape.scalar), pos)
        for member in f.shape.cls:
            if member.value[1] == raw:
                return member
        raise BlockFormatError(f"unknown {f.shape.cls.__name__} value {raw}")
    if k == "bool":
        return bool(tab.get(_U8, pos))
    if k == "int":
        return tab.get(_scalar(f.shape.scalar), pos)
    if k == "list":
        start, n = tab.vector(o)
        items = []
        item = f.shape.element
        for i in range(n):
            elem = start + 4 * i
            if item.kind == "str":
                items.append(tab.bytes_at(elem).decode("utf-8"))
            elif item.kind == "table":
                items.append(_read_table(item.cls, _Table(tab.buf, tab.indirect(elem))))
            else:  # wrapper tables around a union value
                wrapper = _Table(tab.buf, tab.indirect(elem))
                o_tag, o_val = wrapper.offset(4), wrapper.offset(6)
                tag = wrapper.get(_U8, o_tag + wrapper.pos)
                target = _Table(tab.buf, wrapper.indirect(wrapper.pos + o_val))
                items.append(_read_union(item.cls, tag, target))
        return items
    raise BlockFormatError(f"unsupported field kind {k}")


def _read_timestamp(tab: _Table, pos: int) -> datetime:
    year = tab.get(_I32, pos)
    ordinal = tab.get(_U16, pos + 4)
    seconds = tab.get(_U32, pos + 8)
    nanos = tab.get(_U32, pos + 12)
    if not (1 <= ordinal <= 366 and seconds < 86400 and nanos < 1_000_000_000):
        raise BlockFormatError(f"not a valid Timestamp (year {year}, day {ordinal}, "
                               f"second {seconds}, nanosecond {nanos})")
    start = datetime(year, 1, 1, tzinfo=UTC)
    t = start + timedelta(days=ordinal - 1, seconds=seconds, microseconds=nanos // 1000)
    return with_nanosecond(t, nanos % 1000)


def _read_interval(tab: _Table, pos: int) -> TimeInterval:
    kind = IntervalType(tab.get(_U8, pos))
    # unused bounds are zeroed (year 0), so read only the ones this kind has
    has_left = kind not in (
        IntervalType.EMPTY, IntervalType.UNBOUNDED,
        IntervalType.UNBOUNDED_CLOSED_RIGHT, IntervalType.UNBOUNDED_OPEN_RIGHT,
    )
    has_right = kind not in (
        IntervalType.EMPTY, IntervalType.UNBOUNDED, IntervalType.SINGLETON,
        IntervalType.UNBOUNDED_CLOSED_LEFT, IntervalType.UNBOUNDED_OPEN_LEFT,
    )
    left = _read_timestamp(tab, pos + 4) if has_left else None
    right = _read_timestamp(tab, pos + 20) if has_right else None
    return TimeInterval(kind, left, right)
