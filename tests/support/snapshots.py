"""A snapshot root whose table changes over four snapshots (a rename, then a delete, then an
insert), and the same files as an append root: for the tests of reading a state."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .cli import coord

AIRPORTS, SEEN = "ref.airports", "ref.seen"
SNAPSHOTS = {
    "2020-01-01": {"iata": ["AAA", "BBB", "CCC", "DDD"], "name": ["Alpha", "Bravo", "Charlie", "Delta"]},
    "2020-02-01": {"iata": ["AAA", "BBB", "CCC", "DDD"], "name": ["Alpha", "Bravo Intl", "Charlie", "Delta"]},
    "2020-03-01": {"iata": ["AAA", "BBB", "DDD"], "name": ["Alpha", "Bravo Intl", "Delta"]},
    "2020-04-01": {"iata": ["AAA", "BBB", "DDD", "EEE"], "name": ["Alpha", "Bravo Intl", "Delta", "Echo"]},
}

MANIFEST = """
apiVersion: 1
kind: DatasetSnapshot
content:
  id: {id}
  source:
    kind: root
    fetch: {{kind: filesGlob, path: "{glob}"{event_time}}}
    read: {{kind: parquet, schema: {schema}}}
    merge: {merge}
"""
FROM_PATH = r", eventTime: {kind: fromPath, pattern: '(\d{4}-\d{2}-\d{2})'}"  # the snapshot's day
NAME_SCHEMA = '["iata STRING", "name STRING"]'


def manifest(dataset: str, glob: str, merge: str, event_time: str = FROM_PATH,
             schema: str = NAME_SCHEMA) -> str:
    return MANIFEST.format(id=dataset, glob=glob, merge=merge, event_time=event_time, schema=schema)


def snapshot(day: str) -> list[dict]:
    """The table as that snapshot has it, ordered by key: what its state must be."""
    return pd.DataFrame(SNAPSHOTS[day]).sort_values("iata").to_dict("records")


def pull_airports(home: Path) -> None:
    """``AIRPORTS`` (one block per snapshot, its event time the snapshot's day) and ``SEEN``,
    added and pulled in the workspace at ``home``."""
    (home / "snaps").mkdir()
    for day, table in SNAPSHOTS.items():
        pq.write_table(pa.table(table), home / "snaps" / f"airports-{day}.parquet")
    (home / "airports.yaml").write_text(manifest(AIRPORTS, "snaps/*.parquet",
                                                 "{kind: snapshot, primaryKey: [iata]}"))
    (home / "seen.yaml").write_text(manifest(SEEN, "snaps/*.parquet", "{kind: append}"))
    coord("add", "airports.yaml", "seen.yaml", cwd=home)
    coord("pull", AIRPORTS, SEEN, cwd=home)
