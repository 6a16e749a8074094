"""Reading a dataset's records: ``sql`` (``coord sql``: DuckDB views over the slices, locked
down) and ``tail`` (the last records, for ``coord tail`` and the API)."""
