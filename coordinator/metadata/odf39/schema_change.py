"""Whether a ``SetDataSchema`` may follow the one in force: the reference's rule (kamu-cli
v0.265.0 ``ValidateSetDataSchemaVisitor``, over ``DataSchema::compare`` in ``schema_cmp.rs``).

- A schema equal to the one in force in every way (fields, their order, types and attributes)
  is a no-op the reference refuses: "New schema is identical to the current".
- Otherwise attributes and field order are free; a field (at the top or inside a struct) may
  be added only when it is optional; a field may not be removed, change its type, nor become
  optional or required (``ignore_optionality``: the schema in force was a pre-RFC-016 Arrow
  one, which recorded no optionality, so none is compared).

This is the chain rule, over what other writers write; ``metadata.schema_evolution`` is what
coord's own writers allow, with its own remedies.
"""
from __future__ import annotations

from collections.abc import Sequence

from ..schema_evolution import type_text
from . import data as d

IDENTICAL = "New schema is identical to the current"
INCOMPATIBLE = "New schema is not compatible with the current schema"


def schema_change_problem(old: d.DataSchema, new: d.DataSchema, *,
                          ignore_optionality: bool = False) -> str | None:
    """Why ``new`` may not follow ``old`` (one line), or None."""
    if new == old:
        return IDENTICAL
    change = _fields_change(old.fields, new.fields, "", ignore_optionality)
    return f"{INCOMPATIBLE}: {change}" if change else None


def _fields_change(old: Sequence[d.DataField], new: Sequence[d.DataField], prefix: str,
                   ignore_optionality: bool) -> str | None:
    by_name = {f.name: f for f in new}
    for f in old:
        n = by_name.pop(f.name, None)
        where = f"{prefix}{f.name}"
        if n is None:
            return f"column {where!r} ({type_text(f.type)}) is removed"
        change = _type_change(f.type, n.type, where, ignore_optionality)
        if change:
            return change
    for n in by_name.values():  # what is left is added
        if not isinstance(n.type, d.DataTypeOption):
            return f"column {prefix + n.name!r} is added as required ({type_text(n.type)})"
    return None


def _type_change(old: d.DataType, new: d.DataType, where: str,
                 ignore_optionality: bool) -> str | None:
    if old == new:
        return None
    old_optional, new_optional = isinstance(old, d.DataTypeOption), isinstance(new, d.DataTypeOption)
    if old_optional != new_optional and not ignore_optionality:
        became = "optional" if new_optional else "required"
        return f"column {where!r} becomes {became} ({type_text(old)} to {type_text(new)})"
    inner_old = old.inner if isinstance(old, d.DataTypeOption) else old
    inner_new = new.inner if isinstance(new, d.DataTypeOption) else new
    if inner_old == inner_new:
        return None
    if isinstance(inner_old, d.DataTypeStruct) and isinstance(inner_new, d.DataTypeStruct):
        return _fields_change(inner_old.fields, inner_new.fields, f"{where}.", ignore_optionality)
    if (isinstance(inner_old, d.DataTypeList) and isinstance(inner_new, d.DataTypeList)
            and inner_old.fixed_length == inner_new.fixed_length):
        return _type_change(inner_old.item_type, inner_new.item_type, f"{where}[]",
                            ignore_optionality)
    return f"column {where!r} changes type from {type_text(old)} to {type_text(new)}"
