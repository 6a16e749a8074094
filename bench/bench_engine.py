"""The sandboxed Spark engine: start-up cost and the cost of a small Execute in a warm engine.

    python bench/bench_engine.py [starts] [executes]

"start → first answer" is start_engine (bubblewrap, Python, the Spark session; it returns once
the engine answered Identify) plus one Identify on a new connection. "execute" runs a small
tumbling-window transform (1,000 new rows per call) chained through checkpoints, in an engine
that has already run one. Medians of several runs; the machine is shared and noisy.
"""
from __future__ import annotations

import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from common import print_table

from coordinator.engine.client import EngineClient
from coordinator.engine.port import ExecuteInput, ExecuteRequest
from coordinator.engine.runtime import start_engine
from coordinator.engine.settings import EngineSettings
from coordinator.metadata.objects import DatasetVocabulary, TransformSql

T0 = datetime(2024, 1, 1, tzinfo=UTC)
SCHEMA = pa.schema(
    [("system_time", pa.timestamp("us", tz="UTC")), ("event_time", pa.timestamp("us", tz="UTC")),
     ("v", pa.int64())]
)
HOURLY = TransformSql(
    engine="spark",
    query="SELECT window.end AS event_time, count(*) AS n, sum(v) AS total "
          "FROM `bench.readings` GROUP BY window(event_time, '1 hour')",
)


def write_slice(path: Path, first: int, rows: int) -> Path:
    times = [T0 + timedelta(seconds=20 * i) for i in range(first, first + rows)]
    pq.write_table(pa.table({"system_time": [T0] * rows, "event_time": times,
                             "v": list(range(first, first + rows))}, schema=SCHEMA), path)
    return path


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main(starts: int = 3, executes: int = 5) -> None:
    settings = EngineSettings(runtime="sandbox")
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as scratch:
        root = Path(scratch)
        data = root / "data"
        data.mkdir()

        first_answer_times = []
        for i in range(starts):
            began = time.perf_counter()
            engine = start_engine(settings, root / f"start{i}", [data])
            with EngineClient(engine.socket_path) as client:
                client.identify()
            first_answer_times.append(time.perf_counter() - began)
            engine.stop()

        engine = start_engine(settings, root / "run", [data])
        execute_times, first_execute = [], 0.0
        try:
            with EngineClient(engine.socket_path) as client:
                checkpoint = None
                for call in range(executes + 1):
                    request = ExecuteRequest(
                        transaction_id=f"tx{call}",
                        dataset_id="bench.hourly",
                        inputs=[ExecuteInput("bench.readings", DatasetVocabulary(), SCHEMA,
                                             [write_slice(data / f"s{call}.parquet", call * 1000, 1000)])],
                        transform=HOURLY,
                        vocab=DatasetVocabulary(),
                        prev_checkpoint_dir=checkpoint,
                        new_checkpoint_dir=root / "run" / f"ck{call}",
                        output_data_path=root / "run" / f"out{call}.parquet",
                        system_time=T0 + timedelta(days=1, seconds=call),
                    )
                    began = time.perf_counter()
                    client.execute(request)
                    elapsed = time.perf_counter() - began
                    if call == 0:
                        first_execute = elapsed
                    else:
                        execute_times.append(elapsed)
                    checkpoint = request.new_checkpoint_dir
        finally:
            engine.stop()

    print_table(
        [
            {"measure": "start_engine → first answered request", "runs": starts,
             "median s": median(first_answer_times), "min s": min(first_answer_times)},
            {"measure": "first execute in a fresh engine", "runs": 1, "median s": first_execute,
             "min s": first_execute},
            {"measure": "execute, warm engine (1,000 rows, window)", "runs": executes,
             "median s": median(execute_times), "min s": min(execute_times)},
        ],
        title=f"Spark engine in the bubblewrap sandbox ({settings.spark_master})",
    )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
