"""Push-fed roots shared by the push ingest tests (``tests/ingest``, ``tests/serve``): the
reference's leaderboard example, manifests in the reference's form, and the example's
records as pyarrow's JSON reader reads them (the answer computed apart from ``coord``)."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.json as pajson

LEADERBOARD = Path(__file__).resolve().parents[2] / "examples" / "leaderboard"
PLAYER_SCORES = "player-scores"
SCORE_COLUMNS = ["match_time", "match_id", "player_id", "score"]


def push_source(name: str, read: str, merge: str = "{kind: Append}") -> str:
    """One ``AddPushSource`` event as a YAML list item."""
    return f"- kind: AddPushSource\n  sourceName: {name}\n  read: {read}\n  merge: {merge}\n"


def root_manifest(name: str, *events: str, event_time: str | None = None) -> str:
    """A reference-form Root with ``events`` (YAML list items) and, if given, its event time column."""
    if event_time:
        events = (*events, f"- kind: SetVocab\n  eventTimeColumn: {event_time}\n")
    body = textwrap.indent("".join(events), "    ")
    return f"kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: {name}\n  kind: Root\n  metadata:\n{body}"


TEMPS = root_manifest("temps", push_source(
    "sensor", "{kind: Csv, header: true, schema: {fields: [{name: t, type: {kind: Float64}}]}}"))

HIGH_SCORES = f"""\
kind: DatasetSnapshot
version: 1
content:
  name: high-scores
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{{datasetRef: {PLAYER_SCORES}}}]
      transform: {{kind: Sql, engine: spark, query: "SELECT * FROM `{PLAYER_SCORES}` WHERE score >= 90"}}
    - kind: SetVocab
      eventTimeColumn: match_time
"""


def scores(*paths: Path) -> list[dict]:
    """The files' records as pyarrow's JSON reader reads them, ``match_time`` as the UTC
    timestamp in milliseconds a 0.39 slice stores."""
    rows = []
    for p in paths:
        t = pajson.read_json(p)
        when = t.column("match_time").cast(pa.timestamp("s")).cast(pa.timestamp("ms", tz="UTC"))
        rows += t.set_column(0, "match_time", when).select(SCORE_COLUMNS).to_pylist()
    return rows
