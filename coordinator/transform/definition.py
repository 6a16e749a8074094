"""What can be told of a derivative's definition without an engine, checked at ``coord add``.

The engine refuses the same things at the first pull (engines/spark ``check_transform``), but
only after Spark has started; here they are refused before anything is written, each as
``(place in the manifest, what is wrong)``.
"""
from __future__ import annotations

from ..metadata.objects import DatasetSourceDerivative


def derivative_problem(source) -> tuple[str, str] | None:
    """The first thing wrong with a derivative source, or None (also for a root)."""
    if not isinstance(source, DatasetSourceDerivative):
        return None
    transform = source.transform
    if not source.inputs:
        return "content.source.inputs", "a derivative needs at least one input"
    if transform.query is not None and transform.queries is not None:
        return "content.source.transform", "give query or queries, not both"
    steps = transform.steps()
    if not steps or not any(step.query.strip() for step in steps):
        return "content.source.transform", "give a query (or queries)"
    if sum(1 for step in steps if not step.alias) > 1:
        return "content.source.transform.queries", "only one query step may have no alias (the output)"
    for k, table in enumerate(transform.temporal_tables or []):
        place = f"content.source.transform.temporalTables[{k}]"
        if not table.primary_key:
            return f"{place}.primaryKey", "give the columns that identify a row of the temporal table"
        if table.id not in source.inputs:
            inputs = ", ".join(source.inputs)
            return f"{place}.id", f"{table.id} is not an input of this dataset (inputs: {inputs})"
    return None
