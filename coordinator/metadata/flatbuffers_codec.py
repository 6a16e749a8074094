"""FlatBuffers codec for MetadataBlock, following the spec's two-pass procedure exactly.

The rules (written down in ``schemas/BLOCK-HASHING.md``): per table, first create every
string, vector and child table in schema field order (depth first), then start the table and
add present fields in schema order. Unions take two slots (type tag, then offset). Scalars with a schema
default are omitted when equal to it; ``= null`` scalars are written whenever present.
No file identifier. The builder's vtable de-duplication stays on.
"""
from __future__ import annotations

import enum
from dataclasses import MISSING
from datetime import datetime, timedelta

import flatbuffers
from flatbuffers import encode
from flatbuffers import number_types as N
from flatbuffers.table import Table

from ..errors import CoordError
from . import objects
from .shape import FieldInfo, fields_of, variants
from .timefmt import UTC, IntervalType, TimeInterval, nanosecond_of, with_nanosecond


class BlockFormatError(CoordError, ValueError):
    pass


# --- encoding ----------------------------------------------------------------------------------


def encode_block(block: objects.MetadataBlock) -> bytes:
    b = flatbuffers.Builder(1024)
    root = _build_table(b, block)
    b.Finish(root)
    return bytes(b.Output())


def _slots(cls):
    """(field, first slot) pairs; a union occupies two slots."""
    slot = 0
    for f in fields_of(cls):
        yield f, slot
        slot += 2 if f.shape.kind == "union" else 1


def _build_table(b: flatbuffers.Builder, obj) -> int:
    # pass 1: out-of-line children, in field order
    children = {}
    for f, _ in _slots(type(obj)):
        value = getattr(obj, f.name)
        child = None if value is None else _build_child(b, value, f)
        if child is not None:
            children[f.name] = child
    # pass 2: the table itself
    slots = list(_slots(type(obj)))
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


def _build_wrapper(b: flatbuffers.Builder, value, union: str) -> int:
    inner = _build_table(b, value)
    b.StartObject(2)
    b.PrependUint8Slot(0, _union_tag(union, value), 0)
    b.PrependUOffsetTRelativeSlot(1, inner, 0)
    return b.EndObject()


def _union_tag(union: str, value) -> int:
    return variants(union).index(type(value)) + 1


def _write_scalar(b: flatbuffers.Builder, slot: int, value, f: FieldInfo):
    k = f.shape.kind
    if k == "enum":
        value = value.value[1]
        flags = N.Int32Flags
    elif k == "bool":
        flags = N.BoolFlags
    elif k == "int":
        flags = N.Int64Flags
    else:
        raise TypeError(f"unsupported scalar {k}")
    if f.fb_default is not MISSING and value == _raw(f.fb_default):
        return  # equal to the schema default: omitted (no force_defaults)
    b.PrependSlot(flags, slot, value, None)  # '= null' scalars: written whenever present


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


def decode_block(buf: bytes) -> objects.MetadataBlock:
    try:
        root = encode.Get(N.UOffsetTFlags.packer_type, buf, 0)
        return _read_table(objects.MetadataBlock, Table(bytearray(buf), root))
    except BlockFormatError:
        raise
    except Exception as e:  # a truncated or garbled buffer
        raise BlockFormatError(f"not a valid MetadataBlock: {e}") from None


def block_hash_position(buf: bytes) -> tuple[int, int]:
    """(start, length) of the blockHash bytes inside a serialized block."""
    try:
        root = encode.Get(N.UOffsetTFlags.packer_type, buf, 0)
        tab = Table(bytearray(buf), root)
        o = tab.Offset(4)
        position = (tab.Vector(o), tab.VectorLen(o)) if o else None
    except Exception as e:  # a garbled buffer
        raise BlockFormatError(f"not a valid MetadataBlock: {e}") from None
    if position is None:
        raise BlockFormatError("block has no blockHash")
    return position


def _read_table(cls, tab: Table):
    kwargs = {}
    for f, slot in _slots(cls):
        voff = 4 + 2 * slot
        k = f.shape.kind
        if k == "union":
            o_tag, o_val = tab.Offset(voff), tab.Offset(voff + 2)
            if not o_val:
                continue
            tag = tab.Get(N.Uint8Flags, o_tag + tab.Pos)
            kwargs[f.name] = _read_union(f.shape.cls, tag, tab, o_val)
            continue
        o = tab.Offset(voff)
        if not o:
            if f.fb_default is not MISSING:
                kwargs[f.name] = f.fb_default
            continue
        kwargs[f.name] = _read_value(tab, o, f)
    return cls(**kwargs)


def _read_union(union: str, tag: int, tab: Table, o: int):
    options = variants(union)
    if not 1 <= tag <= len(options):
        raise BlockFormatError(f"unknown {union} type tag {tag}")
    sub = Table(tab.Bytes, 0)
    tab.Union(sub, o)
    return _read_table(options[tag - 1], sub)


def _read_value(tab: Table, o: int, f: FieldInfo):
    k = f.shape.kind
    pos = o + tab.Pos
    if k == "str":
        return tab.String(pos).decode("utf-8")
    if k == "bytes":
        start = tab.Vector(o)
        return bytes(tab.Bytes[start : start + tab.VectorLen(o)])
    if k == "table":
        return _read_table(f.shape.cls, Table(tab.Bytes, tab.Indirect(pos)))
    if k == "timestamp":
        return _read_timestamp(tab.Bytes, pos)
    if k == "interval":
        return _read_interval(tab.Bytes, pos)
    if k == "enum":
        raw = tab.Get(N.Int32Flags, pos)
        for member in f.shape.cls:
            if member.value[1] == raw:
                return member
        raise BlockFormatError(f"unknown {f.shape.cls.__name__} value {raw}")
    if k == "bool":
        return bool(tab.Get(N.BoolFlags, pos))
    if k == "int":
        return tab.Get(N.Int64Flags, pos)
    if k == "list":
        start, n = tab.Vector(o), tab.VectorLen(o)
        items = []
        for i in range(n):
            elem = start + 4 * i
            target = elem + encode.Get(N.UOffsetTFlags.packer_type, tab.Bytes, elem)
            item = f.shape.element
            if item.kind == "str":
                length = encode.Get(N.UOffsetTFlags.packer_type, tab.Bytes, target)
                items.append(bytes(tab.Bytes[target + 4 : target + 4 + length]).decode("utf-8"))
            elif item.kind == "table":
                items.append(_read_table(item.cls, Table(tab.Bytes, target)))
            else:  # wrapper tables around a union value
                wrapper = Table(tab.Bytes, target)
                o_tag, o_val = wrapper.Offset(4), wrapper.Offset(6)
                tag = wrapper.Get(N.Uint8Flags, o_tag + wrapper.Pos)
                items.append(_read_union(item.cls, tag, wrapper, o_val))
        return items
    raise BlockFormatError(f"unsupported field kind {k}")


def _read_timestamp(buf, pos: int) -> datetime:
    year = encode.Get(N.Int32Flags.packer_type, buf, pos)
    ordinal = encode.Get(N.Uint16Flags.packer_type, buf, pos + 4)
    seconds = encode.Get(N.Uint32Flags.packer_type, buf, pos + 8)
    nanos = encode.Get(N.Uint32Flags.packer_type, buf, pos + 12)
    if not (1 <= ordinal <= 366 and seconds < 86400 and nanos < 1_000_000_000):
        raise BlockFormatError(f"not a valid Timestamp (year {year}, day {ordinal}, "
                               f"second {seconds}, nanosecond {nanos})")
    start = datetime(year, 1, 1, tzinfo=UTC)
    t = start + timedelta(days=ordinal - 1, seconds=seconds, microseconds=nanos // 1000)
    return with_nanosecond(t, nanos % 1000)


def _read_interval(buf, pos: int) -> TimeInterval:
    kind = IntervalType(encode.Get(N.Uint8Flags.packer_type, buf, pos))
    # unused bounds are zeroed (year 0), so read only the ones this kind has
    has_left = kind not in (
        IntervalType.EMPTY, IntervalType.UNBOUNDED,
        IntervalType.UNBOUNDED_CLOSED_RIGHT, IntervalType.UNBOUNDED_OPEN_RIGHT,
    )
    has_right = kind not in (
        IntervalType.EMPTY, IntervalType.UNBOUNDED, IntervalType.SINGLETON,
        IntervalType.UNBOUNDED_CLOSED_LEFT, IntervalType.UNBOUNDED_OPEN_LEFT,
    )
    left = _read_timestamp(buf, pos + 4) if has_left else None
    right = _read_timestamp(buf, pos + 20) if has_right else None
    return TimeInterval(kind, left, right)
