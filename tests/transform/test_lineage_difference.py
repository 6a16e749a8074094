"""verify compares a recorded field lineage with the engine's: what older engines recorded of a
time window (Spark's own non-null filter, as a filter) still reproduces; anything else differs."""
from __future__ import annotations

from coordinator.metadata.objects import FieldLineage, FieldOrigin, FieldSource
from coordinator.transform.record_lineage import lineage_difference


def source(field: str, kind: str, expression: str) -> FieldSource:
    return FieldSource(input="wx", field=field, kind=kind, expression=expression)


WINDOW = source("time_hour", "window", "window(time_hour, 86400000000, ...)")
NULL_CHECK = source("time_hour", "filter", "(`wx`.time_hour IS NOT NULL)")
FIELDS = [FieldOrigin(field="tmax", sources=[source("temp", "aggregate", "max(temp)")])]


def lineage(*conditions: FieldSource) -> FieldLineage:
    return FieldLineage(fields=FIELDS, conditions=list(conditions) or None)


def test_the_window_null_check_older_engines_recorded_still_reproduces():
    assert lineage_difference(lineage(WINDOW, NULL_CHECK), lineage(WINDOW)) is None


def test_a_filter_the_query_wrote_still_differs():
    user_filter = source("temp", "filter", "(temp > 0)")
    assert lineage_difference(lineage(WINDOW, user_filter), lineage(WINDOW)) == \
        "the recorded field lineage's conditions differ from the engine's"


def test_a_null_check_without_a_window_on_its_column_still_differs():
    assert lineage_difference(lineage(NULL_CHECK), lineage()) is not None
