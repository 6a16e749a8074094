"""The engine's checkpoint folder: what it holds and how a new one is derived from the previous.

Layout (opaque to the coordinator)::

    engine.json   EngineState: query fingerprint, input watermark rule, per-input watermarks,
                  output watermark
    spark/        Spark Structured Streaming checkpoint (offsets, commits, operator state)
    temporal/     the history of each temporal table (temporal.py)
    pending/      rows of streamed inputs waiting for the temporal tables' watermarks

A checkpoint keeps the per-input watermarks of one rule (``pb.Transform.InputWatermarks``):
Execute continues it only under that rule, and only MigrateQuery moves it to the other.

Exactly-once: a new checkpoint is always built in a new folder from a *copy* of the previous
one, which is never written. Re-running a transaction from the same previous checkpoint
therefore starts from the same state and produces the same output.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

from .errors import EngineFailure, Kind
from .generated import engine_pb2 as pb

STATE_FILE = "engine.json"
SPARK_DIR = "spark"
HISTORY_DIR = "temporal"
PENDING_DIR = "pending"
FORMAT = 1


@dataclass
class EngineState:
    query_fingerprint: str
    transaction_id: str = ""
    # Number of Execute calls so far; names scratch files uniquely across the chain, because
    # Spark's file source remembers every path it has read.
    runs: int = 0
    # Input watermark per dataset id (RFC 3339): the latest of its explicit watermarks and,
    # under EVENT_TIMES, the event times seen. Spark does not persist per-input watermarks,
    # so the engine re-feeds these on every call (see streaming.py).
    input_watermarks: dict[str, str] = field(default_factory=dict)
    output_watermark: str | None = None
    format: int = FORMAT
    # The rule input_watermarks follow (an InputWatermarks name); a checkpoint written before
    # the rule existed has none, and followed EVENT_TIMES.
    watermark_rule: str = "EVENT_TIMES"

    @property
    def recorded_watermarks(self) -> bool:
        """Whether an input's watermark is its recorded watermarks alone (never its event times)."""
        return self.watermark_rule == rule_name(pb.Transform.RECORDED)

    def input_watermark(self, dataset_id: str) -> datetime | None:
        text = self.input_watermarks.get(dataset_id)
        return datetime.fromisoformat(text) if text else None

    @property
    def output_watermark_time(self) -> datetime | None:
        return datetime.fromisoformat(self.output_watermark) if self.output_watermark else None


def query_fingerprint(transform: pb.Transform) -> str:
    """Identifies the query a checkpoint belongs to (engine name and version excluded)."""
    query_only = pb.Transform(queries=transform.queries, temporal_tables=transform.temporal_tables)
    return hashlib.sha256(query_only.SerializeToString(deterministic=True)).hexdigest()


def rule_name(rule: int) -> str:
    return pb.Transform.InputWatermarks.Name(rule)


def load_state(prev_dir: str, transform: pb.Transform) -> EngineState:
    """The previous checkpoint's state, or a fresh one when there is none; refused when it
    belongs to another query or keeps its input watermarks under another rule."""
    rule = rule_name(transform.input_watermarks)
    if not prev_dir:
        return EngineState(query_fingerprint=query_fingerprint(transform), watermark_rule=rule)
    path = Path(prev_dir) / STATE_FILE
    if not path.is_file():
        raise EngineFailure(Kind.INVALID_REQUEST, f"{prev_dir} is not a checkpoint of this engine")
    state = EngineState(**json.loads(path.read_text()))
    if state.format != FORMAT:
        raise EngineFailure(Kind.INVALID_REQUEST, f"checkpoint format {state.format} unknown")
    if state.query_fingerprint != query_fingerprint(transform):
        raise EngineFailure(
            Kind.INVALID_REQUEST,
            "the previous checkpoint belongs to a different query; call MigrateQuery first",
        )
    if state.watermark_rule != rule:
        raise EngineFailure(
            Kind.INVALID_REQUEST,
            f"the previous checkpoint keeps input watermarks under rule {state.watermark_rule}, the "
            f"transform asks for {rule}; call MigrateQuery first",
        )
    return state


def start_new(new_dir: str, prev_dir: str, *, copy_spark_state: bool = True) -> Path:
    """Creates the new checkpoint folder, seeded with a copy of the previous Spark state; the
    temporal tables' history and the pending rows are always carried (hard links: neither
    checkpoint is written in place)."""
    if not new_dir:
        raise EngineFailure(Kind.INVALID_REQUEST, "new_checkpoint_dir is required")
    new = Path(new_dir)
    if new.exists() and any(new.iterdir()):
        raise EngineFailure(Kind.INVALID_REQUEST, f"new checkpoint folder {new} is not empty")
    new.mkdir(parents=True, exist_ok=True)
    prev_spark = Path(prev_dir) / SPARK_DIR if prev_dir else None
    if copy_spark_state and prev_spark is not None and prev_spark.is_dir():
        shutil.copytree(prev_spark, new / SPARK_DIR, symlinks=True)
    for kept in (HISTORY_DIR, PENDING_DIR):
        if prev_dir and (Path(prev_dir) / kept).is_dir():
            shutil.copytree(Path(prev_dir) / kept, new / kept, copy_function=_link)
    return new


def _link(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system
        shutil.copy2(source, target)


def save_state(new_dir: Path, state: EngineState) -> None:
    (new_dir / STATE_FILE).write_text(json.dumps(asdict(state), indent=2, sort_keys=True) + "\n")
