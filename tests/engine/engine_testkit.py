"""Helpers for the engine tests: writing input slices, reading outputs, chaining Execute calls."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from coordinator.engine.client import EngineClient
from coordinator.engine.port import ExecuteInput, ExecuteRequest, ExecuteResult
from coordinator.metadata.objects import DatasetVocabulary, TransformSql

VOCAB = DatasetVocabulary()
T0 = datetime(2024, 1, 1, tzinfo=UTC)
SYSTEM_TIME = datetime(2024, 6, 1, tzinfo=UTC)  # of the input slices
OUTPUT_SYSTEM_TIME = datetime(2024, 7, 1, tzinfo=UTC)  # asked of the engine



def write_slice(path: Path, rows: list[dict], schema: pa.Schema) -> Path:
    """An input slice: system_time, event_time, then the data columns of ``schema``."""
    columns = {
        name: [SYSTEM_TIME if name == "system_time" else row[name] for row in rows] for name in schema.names
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns, schema=schema), path)
    return path


def input_schema(**data_columns: pa.DataType) -> pa.Schema:
    ts = pa.timestamp("us", tz="UTC")
    return pa.schema([("system_time", ts), ("event_time", ts), *data_columns.items()])


def records(path: Path | None) -> list[dict]:
    """Output rows without system_time, as Python dicts."""
    if path is None:
        return []
    return pq.read_table(path).drop_columns(["system_time"]).to_pylist()


def hours(n: float) -> timedelta:
    return timedelta(hours=n)


@dataclass
class Chain:
    """A derivative dataset's Execute calls chained through their checkpoints, the way the
    coordinator makes them: each call starts from the previous call's checkpoint."""

    client: EngineClient
    run_dir: Path  # inside the engine's run folder
    data_dir: Path  # inside the read-only data folder
    transform: TransformSql
    schemas: dict[str, pa.Schema]  # input dataset id -> schema, in input order
    checkpoint: Path | None = None
    results: list[ExecuteResult] = field(default_factory=list)
    removals: dict[str, tuple[str, str]] = field(default_factory=dict)  # snapshot inputs' (column, value)
    calls: int = 0

    def prepare(
        self,
        slices: dict[str, list[list[dict]]] | None = None,
        watermarks: dict[str, datetime] | None = None,
    ) -> ExecuteRequest:
        """The next Execute request; ``slices`` maps an input to its new slices (lists of rows),
        ``watermarks`` an input to an explicit watermark."""
        self.calls += 1
        call = f"call{self.calls:02d}-{uuid.uuid4().hex[:6]}"
        inputs = []
        for dataset_id, schema in self.schemas.items():
            paths = [
                write_slice(self.data_dir / call / dataset_id / f"slice{k}.parquet", rows, schema)
                for k, rows in enumerate((slices or {}).get(dataset_id, []))
            ]
            marks = [(SYSTEM_TIME, watermarks[dataset_id])] if dataset_id in (watermarks or {}) else []
            inputs.append(ExecuteInput(dataset_id, VOCAB, schema, paths, marks,
                                       removal=self.removals.get(dataset_id)))
        return ExecuteRequest(
            transaction_id=call,
            dataset_id="com.example.derived",
            inputs=inputs,
            transform=self.transform,
            vocab=VOCAB,
            prev_checkpoint_dir=self.checkpoint,
            new_checkpoint_dir=self.run_dir / call / "checkpoint",
            output_data_path=self.run_dir / call / "output.parquet",
            system_time=OUTPUT_SYSTEM_TIME,
        )

    def execute(self, slices=None, watermarks=None) -> ExecuteResult:
        """Runs the next call and moves the chain to its checkpoint."""
        request = self.prepare(slices, watermarks)
        result = self.client.execute(request)
        self.checkpoint = request.new_checkpoint_dir
        self.results.append(result)
        return result

    def all_records(self) -> list[dict]:
        return [row for result in self.results for row in records(result.output_path)]
