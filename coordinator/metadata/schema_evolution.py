"""How a dataset's schema may change (spec: Dataset Evolution), decided in one place for both
ODF versions: ``added_columns``.

Invariants:

- A schema may only gain columns, and a column gained is optional: the records written before
  it have no value for it (readers show null). Every column it had stays with its type and its
  nullability. Dropping a column (renaming is a drop and an add), changing its type, making
  an optional column required or a required one optional are refused, as the reference's chain
  rules refuse such a ``SetDataSchema`` (kamu-cli ``ValidateSetDataSchemaVisitor``: only optional
  fields may be added; order and attributes are free).
- The refusal is one line naming the dataset, the column, its old and new type, and what to do.
- Columns are compared as ``Column``s, which each version makes from its own schemas: ODF 0.39
  from a ``DataSchema`` (``odf_columns``: the type without ``Option``, nullability apart), ODF
  0.18 from an Arrow schema (``data.odf_schema.arrow_columns``: 0.18 records no nullability, so
  none is compared). Either way a message names a type as the ODF schema does (``type_text``:
  ``Int64``, ``String``), whichever version and command refuses. The system columns are the
  caller's to leave out.
- A 0.39 slice is fitted to the schema in force before it is compared
  (``data.odf_schema.grown_schema``). This module imports no Arrow: ``coord schema`` of a 0.39
  dataset reads metadata only.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import Conflict
from .odf39 import data as d

# what to do instead, the end of every refusal
REMEDY = ("a schema may only gain optional columns: keep the column and add a new one, or add "
          "the changed definition as a new dataset")


class SchemaChangeRefused(Conflict):
    """A change of a dataset's schema that its records do not allow."""


@dataclass(frozen=True)
class Column:
    name: str
    type: object  # compared with ==: an ODF DataType without its Option, or an Arrow DataType
    text: str  # how a message names the type
    required: bool | None  # None: not recorded (ODF 0.18)


def added_columns(dataset: str, old: Sequence[Column], new: Sequence[Column], subject: str,
                  remedy: str = REMEDY) -> tuple[Column, ...]:
    """The columns ``new`` adds to ``old`` (in ``new``'s order); any other change is refused,
    ``subject`` being what brings the new schema (``the new query``, ``the new data``...)."""
    have = {c.name: c for c in new}
    for c in old:
        n = have.get(c.name)
        if n is None:
            _refuse(f"{dataset}: {subject} drops column {c.name!r}, {_words(c)}", remedy)
        elif n.type != c.type or n.required != c.required:
            _refuse(f"{dataset}: {subject} changes column {c.name!r} from {_words(c)} to "
                    f"{_words(n)}", remedy)
    known = {c.name for c in old}
    added = tuple(c for c in new if c.name not in known)
    for c in added:
        if c.required:
            _refuse(f"{dataset}: {subject} adds column {c.name!r} as {_words(c)}, but the earlier "
                    "records have no value for it", remedy)
    return added


def _words(c: Column) -> str:
    return c.text if c.required is None else f"{c.text} ({'required' if c.required else 'optional'})"


def _refuse(what: str, remedy: str) -> None:
    raise SchemaChangeRefused(f"{what}; {remedy}")


def odf_columns(schema: d.DataSchema, leave_out: Iterable[str] = ()) -> list[Column]:
    """The columns of an ODF schema, but those named in ``leave_out``."""
    skip = set(leave_out)
    return [Column(f.name, plain(f.type), type_text(plain(f.type)),
                   not isinstance(f.type, d.DataTypeOption))
            for f in schema.fields if f.name not in skip]


def plain(t: d.DataType) -> d.DataType:
    """A type without its ``Option``."""
    return t.inner if isinstance(t, d.DataTypeOption) else t


_UNITS = {d.TimeUnit.SECOND: "s", d.TimeUnit.MILLISECOND: "ms", d.TimeUnit.MICROSECOND: "us",
          d.TimeUnit.NANOSECOND: "ns"}


def type_text(t: d.DataType) -> str:
    """An ODF type as a short text: ``Int64``, ``Timestamp(ms, UTC)``, ``Decimal(10, 2)``,
    ``List<String?>`` (``?``: an optional item or field inside a type)."""
    if isinstance(t, d.DataTypeOption):
        return type_text(t.inner) + "?"
    if isinstance(t, d.DataTypeTimestamp):
        unit = _UNITS.get(t.unit, "ms") if t.unit is not None else "ms"
        return f"Timestamp({unit}, {t.timezone})" if t.timezone else f"Timestamp({unit})"
    if isinstance(t, d.DataTypeTime | d.DataTypeDuration):
        return f"{t.KIND}({_UNITS[t.unit] if t.unit is not None else 'ms'})"
    if isinstance(t, d.DataTypeDecimal):
        return f"Decimal({t.precision}, {t.scale})"
    if isinstance(t, d.DataTypeBinary) and t.fixed_length is not None:
        return f"Binary({t.fixed_length})"
    if isinstance(t, d.DataTypeList):
        size = f", {t.fixed_length}" if t.fixed_length is not None else ""
        return f"List<{type_text(t.item_type)}{size}>"
    if isinstance(t, d.DataTypeMap):
        return f"Map<{type_text(t.key_type)}, {type_text(t.value_type)}>"
    if isinstance(t, d.DataTypeStruct):
        return "Struct<" + ", ".join(f"{f.name}: {type_text(f.type)}" for f in t.fields) + ">"
    return t.KIND
