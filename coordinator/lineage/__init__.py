"""Lineage read from the metadata chains: ``datasets`` (which datasets feed which), ``fields``
(column-level lineage, recorded by ``transform.record_lineage``), ``provenance`` (the input
records behind output records, by replay in the engine), ``openlineage`` (field lineage as
OpenLineage events), and the lineage page: its JSON ``document`` and the HTML ``page``."""
