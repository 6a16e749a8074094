"""Field-level lineage: derived by a running engine, and queried from the chains without one.

    python bench/bench_lineage.py [--quick]

"derive (5-step query)": DeriveLineage of a five-step transform (filter, expression, join,
window function, aggregate) in a warm sandboxed engine; targets < 1 s. "coord lineage --field"
runs the real CLI over a 20-dataset chain whose blocks carry recorded field lineage (no
engine): the backward walk from the last dataset's column to the root; targets < 0.5 s, the
Python start-up included.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from common import median_time, print_table

from coordinator.engine.client import EngineClient
from coordinator.engine.port import InputSchema, LineageRequest
from coordinator.engine.runtime import start_engine
from coordinator.engine.settings import EngineSettings
from coordinator.lineage.fields import FieldGraph
from coordinator.metadata.objects import (
    DatasetVocabulary,
    FieldLineage,
    FieldOrigin,
    FieldSource,
    MetadataBlock,
    SqlQueryStep,
    TransformSql,
)
from coordinator.workspace import Workspace

TS = pa.timestamp("us", tz="UTC")
ORDERS = InputSchema("b.orders", DatasetVocabulary(), pa.schema(
    [("system_time", TS), ("event_time", TS), ("order_id", pa.int64()), ("customer", pa.string()),
     ("amount", pa.float64())]))
CUSTOMERS = InputSchema("b.customers", DatasetVocabulary(), pa.schema(
    [("system_time", TS), ("event_time", TS), ("customer", pa.string()), ("city", pa.string())]))
FIVE_STEPS = TransformSql(engine="spark", queries=[
    SqlQueryStep(alias="big", query="SELECT * FROM `b.orders` WHERE amount > 10"),
    SqlQueryStep(alias="taxed",
                 query="SELECT event_time, order_id, customer, amount * 1.2 AS gross FROM big"),
    SqlQueryStep(alias="placed", query="SELECT t.*, c.city FROM taxed t JOIN `b.customers` c "
                                       "ON t.customer = c.customer"),
    SqlQueryStep(alias="ranked", query="SELECT *, sum(gross) OVER (PARTITION BY city ORDER BY event_time) "
                                       "AS running FROM placed"),
    SqlQueryStep(query="SELECT max(event_time) AS event_time, city, sum(gross) AS total, max(running) "
                       "AS peak FROM ranked GROUP BY city"),
])
CHAIN = 20


def derive_times(repeat: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="bench-lineage-") as scratch:
        engine = start_engine(EngineSettings(runtime="sandbox"), Path(scratch) / "run", [])
        try:
            with EngineClient(engine.socket_path) as client:
                def derive() -> None:
                    client.derive_field_lineage(LineageRequest(
                        transaction_id="bench", dataset_id="b.out", inputs=[ORDERS, CUSTOMERS],
                        transform=FIVE_STEPS, vocab=DatasetVocabulary(),
                    ))
                began = time.perf_counter()
                derive()
                first = time.perf_counter() - began
                return first, median_time(derive, repeat)
        finally:
            engine.stop()


def chain_workspace(home: Path) -> None:
    """A root and 20 derivatives in a line, each with field lineage recorded on its chain."""
    subprocess.run([sys.executable, "-m", "coordinator.cli", "init", "--odf", "0.18"], cwd=home, check=True,
                   capture_output=True)
    folder = home / "manifests"
    folder.mkdir()
    ids = ["c.d00"] + [f"c.d{i:02d}" for i in range(1, CHAIN + 1)]
    docs = [{"apiVersion": 1, "kind": "DatasetSnapshot", "content": {"id": ids[0], "source": {
        "kind": "root", "fetch": {"kind": "filesGlob", "path": "in/*.csv"},
        "read": {"kind": "csv", "header": True, "schema": ["event_time TIMESTAMP", "a BIGINT", "b BIGINT"]},
        "merge": {"kind": "append"}}}}]
    for prev, cur in zip(ids, ids[1:], strict=False):
        docs.append({"apiVersion": 1, "kind": "DatasetSnapshot", "content": {"id": cur, "source": {
            "kind": "derivative", "inputs": [prev], "transform": {
                "kind": "sql", "engine": "spark",
                "query": f"SELECT event_time, a + 1 AS a, b FROM `{prev}` WHERE b > 0"}}}})
    for doc in docs:
        (folder / f"{doc['content']['id']}.yaml").write_text(yaml.safe_dump(doc))
    subprocess.run([sys.executable, "-m", "coordinator.cli", "add", str(folder)], cwd=home, check=True,
                   capture_output=True)
    ws = Workspace.open(home)
    for prev, cur in zip(ids, ids[1:], strict=False):
        lineage = FieldLineage(fields=[
            FieldOrigin(field="event_time",
                        sources=[FieldSource(input=prev, field="event_time", kind="copy")]),
            FieldOrigin(field="a", sources=[FieldSource(input=prev, field="a", kind="transform",
                                                        expression="a + 1")]),
            FieldOrigin(field="b", sources=[FieldSource(input=prev, field="b", kind="copy")]),
        ], conditions=[FieldSource(input=prev, field="b", kind="filter", expression="b > 0")])
        with ws.dataset(cur).writer() as w:
            w.commit(MetadataBlock(system_time=datetime(2030, 1, 1, tzinfo=UTC), field_lineage=lineage))


def main(quick: bool) -> None:
    repeat = 3 if quick else 7
    first, warm = derive_times(repeat)
    with tempfile.TemporaryDirectory(prefix="bench-lineage-chain-") as scratch:
        home = Path(scratch)
        chain_workspace(home)
        command = [sys.executable, "-m", "coordinator.cli", "lineage", f"c.d{CHAIN:02d}", "--field", "a"]
        out = subprocess.run(command, cwd=home, check=True, capture_output=True, text=True).stdout
        assert "c.d00.a" in out, out
        walk = median_time(lambda: subprocess.run(command, cwd=home, check=True, capture_output=True),
                           repeat)
        help_ = median_time(lambda: subprocess.run([sys.executable, "-m", "coordinator.cli", "--help"],
                                                   cwd=home, check=True, capture_output=True), repeat)
        in_process = median_time(lambda: FieldGraph(Workspace.open(home)).backward(f"c.d{CHAIN:02d}", "a"),
                                 repeat)
    print_table([
        {"measure": "derive field lineage, 5-step query, first call", "runs": 1, "median s": first,
         "target s": 1.0},
        {"measure": "derive field lineage, 5-step query, warm engine", "runs": repeat, "median s": warm,
         "target s": 1.0},
        {"measure": f"coord lineage --field across a {CHAIN}-dataset chain", "runs": repeat,
         "median s": walk, "target s": 0.5},
        {"measure": "  of which the backward walk itself (in process)", "runs": repeat,
         "median s": in_process, "target s": None},
        {"measure": "  baseline: coord --help (process start)", "runs": repeat, "median s": help_,
         "target s": None},
    ], title="Field-level lineage")


if __name__ == "__main__":
    main("--quick" in sys.argv)
