"""Flagging a plain join with a change-log input.

A snapshot root's records are change events (the merge's observation column says added,
changed, removed) and a ledger root keyed on a primary key keeps every version of a key; so a
plain stream-stream join with either matches every version of a row, not the one in force at
each event's time, which is what a temporal table gives. That may be wanted, so it is a
warning, not a refusal.

Which inputs a query joins on comes from the engine's field lineage (its conditions of kind
``join``), derived from Spark's analysed plan at every executed step of a pull: a join inside a
CTE, a subquery or an earlier step counts, and a column merely named like a key in the SQL text
does not. A query the engine cannot trace column by column (no lineage) is not checked.
"""
from __future__ import annotations

from collections.abc import Mapping

from ..metadata.objects import (
    DatasetSource,
    DatasetSourceRoot,
    FieldLineage,
    FieldUse,
    MergeStrategyLedger,
    MergeStrategySnapshot,
)


def change_log_words(source: DatasetSource | None) -> str | None:
    """Why a dataset's records are a change log rather than a table (None: they are not)."""
    if not isinstance(source, DatasetSourceRoot):
        return None
    merge = source.merge
    if isinstance(merge, MergeStrategySnapshot):
        return "a snapshot root: each change of a row is a record"
    if isinstance(merge, MergeStrategyLedger) and merge.primary_key:
        return f"a ledger root keyed on {', '.join(merge.primary_key)}: every version of a key is a record"
    return None


def change_log_join_warnings(lineage: FieldLineage | None, sources: Mapping[str, DatasetSource | None],
                             temporal_tables: set[str]) -> list[str]:
    """One line per change-log input that the query joins as a plain stream; ``sources``: each
    input's source, ``temporal_tables``: the inputs already read as temporal tables."""
    if lineage is None:
        return []
    joined = {c.input for c in lineage.conditions or [] if c.kind == FieldUse.JOIN.value}
    warnings = []
    for input_id in sorted(joined - temporal_tables):
        why = change_log_words(sources.get(input_id))
        if why is not None:
            warnings.append(
                f"{input_id} is {why}; a plain join with it matches every version of a row, not the "
                f"one in force at each event's time: list it under temporalTables (with its primaryKey) "
                f"to join each event with its state as of the event time")
    return warnings
