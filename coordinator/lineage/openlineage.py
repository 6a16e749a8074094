"""Field lineage as OpenLineage RunEvents (``coord lineage -o openlineage``).

One COMPLETE RunEvent per recorded field-lineage version (a query version: a changed query or
changed input schemas starts a new one) of the dataset asked about and of every derivative
upstream of it. The output dataset carries the ``columnLineage`` facet (column sources per
output column; conditions as dataset-level INDIRECT fields), and every dataset the ``schema``
facet (from its newest data file) and the ``dataSource`` facet (the workspace, or a root's
fetch URL/glob). The events are built with the official ``openlineage-python`` model classes
(imported here only: ``coord --help`` must not load them), and are deterministic: the run id is
derived from the recording block's hash.
"""
from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from ..metadata.objects import FieldSource
from ..metadata.timestamps import format_timestamp
from ..workspace import Workspace
from .fields import FieldGraph, FieldVersion, root_origin

PRODUCER = "https://github.com/open-data-fabric/coord"
JOB_NAMESPACE = "coord"
# FieldUse -> OpenLineage transformation (type, subtype), spec ColumnLineageDatasetFacet 1-2-0
TRANSFORMATIONS = {
    "copy": ("DIRECT", "IDENTITY"), "transform": ("DIRECT", "TRANSFORMATION"),
    "aggregate": ("DIRECT", "AGGREGATION"), "window": ("INDIRECT", "WINDOW"),
    "filter": ("INDIRECT", "FILTER"), "join": ("INDIRECT", "JOIN"),
    "groupBy": ("INDIRECT", "GROUP_BY"),
}


def openlineage_events(fields: FieldGraph, ws: Workspace, dataset_id: str,
                       since: datetime | None = None, until: datetime | None = None) -> list[Any]:
    """RunEvents of ``dataset_id`` and its upstream derivatives, oldest version first
    (then by dataset id)."""
    graph = fields.graph
    involved = [dataset_id, *sorted({a for a, _ in graph.upstream(dataset_id)})]
    namespace = ws.root.resolve().as_uri()
    events = []
    for d in involved:
        for version in fields.every_version(d):
            if (until is None or version.since <= until) and (
                    since is None or version.until is None or version.until > since):
                events.append(_event(ws, fields, namespace, version))
    events.sort(key=lambda e: (e.eventTime, e.job.name))
    return events


def to_json(events: list[Any]) -> str:
    from openlineage.client.serde import Serde
    return json.dumps([json.loads(Serde.to_json(e)) for e in events], indent=2)


def _event(ws: Workspace, fields: FieldGraph, namespace: str, version: FieldVersion):
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import column_lineage_dataset as cl

    def input_field(s: FieldSource):
        kind, subtype = TRANSFORMATIONS[s.kind]
        return cl.InputField(namespace=namespace, name=s.input, field=s.field, transformations=[
            cl.Transformation(type=kind, subtype=subtype, description=s.expression or "")])

    lineage = version.lineage
    column_lineage = cl.ColumnLineageDatasetFacet(
        fields={o.field: cl.Fields(inputFields=[input_field(s) for s in o.sources],
                                   transformationDescription="", transformationType="")
                for o in lineage.fields},
        dataset=[input_field(s) for s in lineage.conditions or []],
    )
    inputs = fields.graph.inputs(version.dataset)
    return RunEvent(
        eventType=RunState.COMPLETE,
        eventTime=format_timestamp(version.since),
        run=Run(runId=str(uuid.uuid5(uuid.NAMESPACE_URL, namespace + "#" + version.block_hash.hex()))),
        job=Job(namespace=JOB_NAMESPACE, name=version.dataset),
        inputs=[InputDataset(namespace=namespace, name=i, facets=_facets(fields, namespace, i))
                for i in inputs],
        outputs=[OutputDataset(namespace=namespace, name=version.dataset, facets={
            **_facets(fields, namespace, version.dataset), "columnLineage": column_lineage})],
        producer=PRODUCER,
    )


def _facets(fields: FieldGraph, namespace: str, dataset_id: str) -> dict[str, Any]:
    from openlineage.client.facet_v2 import datasource_dataset, schema_dataset

    origin = root_origin(fields, dataset_id)
    facets: dict[str, Any] = {"dataSource": datasource_dataset.DatasourceDatasetFacet(
        name=dataset_id, uri=origin.fetch if origin else namespace)}
    schema = fields.newest_schema(dataset_id) if fields.graph.exists(dataset_id) else None
    if schema is not None:
        facets["schema"] = schema_dataset.SchemaDatasetFacet(fields=[
            schema_dataset.SchemaDatasetFacetFields(name=f.name, type=str(f.type)) for f in schema])
    return facets
