"""``.coord/config.yaml`` as one typed, frozen ``Config``: defaults declared here and only here.

On disk the file keeps the keys it always had (``engine.sparkMaster``, ``trustedKeys``, ...);
a file written by an earlier version, which lacks newer sections, loads with their defaults.
Every value is checked when the file is loaded, so a bad value is refused as one line naming
the file and the key path (``config.yaml: engine.runtime: ...``) before any command uses it.
Settings are read and changed by dotted path in the on-disk spelling (``engine.runtime``).

The default Spark master is ``local[2]`` for both engine runtimes: two worker threads, what a
small machine shared with other work can give an engine without starving the coordinator.
"""
from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..errors import Invalid

RUNTIMES = ("auto", "container", "sandbox")
DEFAULT_RUNTIME = "auto"
DEFAULT_SPARK_MASTER = "local[2]"
DEFAULT_KEEP_WARM_S = 120.0
TRUST_POLICIES = ("trusted", "known", "any")  # see coordinator/trust/authorship.py


class OdfVersion(enum.StrEnum):
    """The Open Data Fabric version a dataset is stored in (docs/architecture.md, ODF versions)."""

    V018 = "0.18"  # the seed's: meta/blocks, data and checkpoint folders named by block hash
    V039 = "0.39"  # the current specification, in the reference's folder layout (coordinator/store)


class ConfigError(Invalid):
    pass


def _frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class EngineConfig:
    # "sandbox": a local process under bubblewrap; "container": an OCI container through the
    # Docker Engine API; "auto": a container when a container API answers, else the sandbox.
    runtime: str = DEFAULT_RUNTIME
    spark_master: str = DEFAULT_SPARK_MASTER
    # Engines run without network. A non-local Spark master needs it, which the user must
    # allow explicitly; blocks then record network_isolated=False.
    allow_network: bool = False
    spark_conf: Mapping[str, str] = field(default_factory=lambda: _frozen({}))
    image: str | None = None  # the container runtime's image (None: the engine's default)
    # A command's engine stays up this long after its last use, for the workspace's next
    # commands (engine/warm.py); 0: each command starts and stops its own.
    keep_warm_s: float = DEFAULT_KEEP_WARM_S


@dataclass(frozen=True)
class TrustConfig:
    require: str = "known"


@dataclass(frozen=True)
class Schedule:
    """When a root is polled: every ``every_s`` seconds, or at the times of a 5-field cron
    expression (minute hour day-of-month month day-of-week, in UTC)."""

    every_s: float | None = None
    cron: str | None = None

    def next_delay(self, now: datetime) -> float:
        """Seconds from ``now`` (aware) to the next poll."""
        if self.cron is None:
            assert self.every_s is not None
            return self.every_s
        from croniter import croniter

        return (croniter(self.cron, now).get_next(datetime) - now).total_seconds()

    def to_config(self) -> object:
        return {"cron": self.cron} if self.cron is not None else _seconds(self.every_s or 0)


@dataclass(frozen=True)
class ServeConfig:
    """``coord serve``: when roots are polled, how long an idle engine is kept.

        serve:
          poll: 30s             # every root is pulled this often (local filesGlob sources are
                                # also watched, so a dropped file is ingested at once)
          engineIdle: 60s       # the warm engine stops after this long without work
          retryMax: 5m          # a failing dataset is retried after 1 s, 2 s, 4 s ... up to this
          sqlMaxRows: 10000     # GET /api/sql: rows one answer holds at most (its limit= up to this)
          sqlMaxBytes: 16MiB    #   the rows' JSON at most
          sqlTimeout: 30s       #   parse, plan and run at most (its timeout_s= up to this)
          sqlConcurrency: 2     #   queries running at once (one more is answered 503)
          sqlMemory: 2GiB       #   memory one query's process may take (DuckDB half of it)
          datasets:
            org.example.prices: {poll: 5s}                    # per root, overrides poll
            org.example.daily: {poll: {cron: "15 6 * * *"}}   # at 06:15 UTC every day

    A duration is a number of seconds or a number with ``ms``, ``s``, ``m``, ``h`` or ``d``; a poll
    is a duration or ``{cron: EXPRESSION}`` (5 fields, UTC)."""

    poll: Schedule = Schedule(every_s=30.0)
    engine_idle_s: float = 60.0
    retry_max_s: float = 300.0
    poll_per_dataset: Mapping[str, Schedule] = field(default_factory=lambda: MappingProxyType({}))
    sql_max_rows: int = 10_000
    sql_max_bytes: int = 16 << 20
    sql_timeout_s: float = 30.0
    sql_concurrency: int = 2
    sql_memory: int = 2 << 30

    def poll_of(self, dataset_id: str) -> Schedule:
        return self.poll_per_dataset.get(dataset_id, self.poll)


class IngestEngine(enum.Enum):
    COORDINATOR = "coordinator"
    SPARK = "spark"
    AUTO = "auto"


@dataclass(frozen=True)
class IngestConfig:
    """``coord pull`` of roots.

        ingest:
          maxSliceBytes: 128MiB   # the most data one block of an append or ledger pull holds
          engine: coordinator     # who reads the files: coordinator, spark, or auto
          engineThreshold: 4GiB   # with auto: files at least this large are read by Spark
          eventTimeHorizon: 1d    # a record whose event time is further ahead of the clock is
                                  # refused (it would hold the watermark there for good)

    A pull with more new data commits several blocks (``docs/architecture.md``, Bounded
    memory). A size is a number of bytes or a number with KB, MB, GB, KiB, MiB or GiB;
    ``auto`` (the default) chooses from the machine's memory. Files read by Spark go through
    the SQL engine (``engine.sparkMaster``: a cluster does the parsing); the coordinator
    still merges, hashes and commits (``docs/architecture.md``, Reading in the engine)."""

    max_slice_bytes: int | None = None  # None: auto
    engine: IngestEngine = IngestEngine.COORDINATOR
    engine_threshold: int = 4 << 30
    event_time_horizon_s: float = 86400.0

    def reads_in_engine(self, size: int) -> bool:
        """Whether a file of ``size`` bytes is read by the SQL engine."""
        return self.engine is IngestEngine.SPARK or \
            (self.engine is IngestEngine.AUTO and size >= self.engine_threshold)


@dataclass(frozen=True)
class CompactionConfig:
    """``coord compact`` of a 0.39 dataset's data files.

        compaction:
          targetBytes: 128MiB   # the original files' bytes one compacted file gathers at most

    Consecutive slices with one schema are merged until the next would take their files'
    bytes (as their blocks record them) past this; a size as for ``ingest.maxSliceBytes``."""

    target_bytes: int = 128 << 20


@dataclass(frozen=True)
class Config:
    engine: EngineConfig = field(default_factory=EngineConfig)
    repositories: Mapping[str, str] = field(default_factory=lambda: _frozen({}))
    # Ed25519 public keys whose owners are trusted: "HEX [NAME]" (the key, then who it is)
    trusted_keys: tuple[str, ...] = ()
    trust: TrustConfig = field(default_factory=TrustConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)
    ingest: IngestConfig = field(default_factory=IngestConfig)
    compaction: CompactionConfig = field(default_factory=CompactionConfig)
    # the version ``coord add`` stores a new dataset in (a pulled dataset keeps its own);
    # a file without the key is a workspace made before 0.39 existed here: 0.18
    odf: OdfVersion = OdfVersion.V018

    # --- the on-disk form ---------------------------------------------------------------------

    def to_dict(self, *, every_key: bool = False) -> dict[str, Any]:
        """The YAML document, in the spelling and order the file has always had; with
        ``every_key``, also the keys a file leaves out while they hold their defaults."""
        engine: dict[str, Any] = {
            "runtime": self.engine.runtime,
            "sparkMaster": self.engine.spark_master,
            "allowNetwork": self.engine.allow_network,
            "sparkConf": dict(self.engine.spark_conf),
        }
        if self.engine.image is not None:
            engine["image"] = self.engine.image
        if every_key or self.engine.keep_warm_s != DEFAULT_KEEP_WARM_S:
            engine["keepWarm"] = _seconds(self.engine.keep_warm_s)
        doc: dict[str, Any] = {
            # a 0.18 workspace's file keeps the form it always had
            **({"odf": self.odf.value} if every_key or self.odf is not OdfVersion.V018 else {}),
            "engine": engine,
            "repositories": dict(self.repositories),
            "trustedKeys": list(self.trusted_keys),
            "trust": {"require": self.trust.require},
        }
        if every_key or self.serve != ServeConfig():  # a file never served keeps its old form
            doc["serve"] = {
                "poll": self.serve.poll.to_config(), "engineIdle": _seconds(self.serve.engine_idle_s),
                "retryMax": _seconds(self.serve.retry_max_s),
                "datasets": {d: {"poll": p.to_config()} for d, p in self.serve.poll_per_dataset.items()},
                "sqlMaxRows": self.serve.sql_max_rows, "sqlMaxBytes": self.serve.sql_max_bytes,
                "sqlTimeout": _seconds(self.serve.sql_timeout_s),
                "sqlConcurrency": self.serve.sql_concurrency, "sqlMemory": self.serve.sql_memory,
            }
        if every_key or self.ingest != IngestConfig():
            doc["ingest"] = {"maxSliceBytes": self.ingest.max_slice_bytes or "auto",
                             "engine": self.ingest.engine.value,
                             "engineThreshold": self.ingest.engine_threshold,
                             "eventTimeHorizon": _seconds(self.ingest.event_time_horizon_s)}
        if every_key or self.compaction != CompactionConfig():
            doc["compaction"] = {"targetBytes": self.compaction.target_bytes}
        return doc

    @staticmethod
    def from_dict(data: object, where: str = "config.yaml") -> Config:
        """Check and type a document; ``where`` names it in errors. Absent keys take defaults."""
        doc = _section(data, "", where)
        _known(doc, ("odf", "engine", "repositories", "trustedKeys", "trust", "serve", "ingest",
                     "compaction"), "", where)
        odf = str(doc.get("odf", OdfVersion.V018.value))
        if odf not in {v.value for v in OdfVersion}:
            raise ConfigError(f"{where}: odf: expected {' or '.join(v.value for v in OdfVersion)} "
                              f"(the version new datasets are stored in), not {odf!r}")
        engine = _section(doc.get("engine"), "engine", where)
        _known(engine, ("runtime", "sparkMaster", "allowNetwork", "sparkConf", "image", "keepWarm"),
               "engine.", where)
        runtime = _string(engine.get("runtime", DEFAULT_RUNTIME), "engine.runtime", where)
        if runtime not in RUNTIMES:
            raise ConfigError(f"{where}: engine.runtime: must be one of {', '.join(RUNTIMES)}, "
                              f"not {runtime!r}")
        master = _string(engine.get("sparkMaster", DEFAULT_SPARK_MASTER), "engine.sparkMaster", where)
        allow_network = engine.get("allowNetwork", False)
        if not isinstance(allow_network, bool):
            raise ConfigError(f"{where}: engine.allowNetwork: expected true or false, not {allow_network!r}")
        if not master.startswith("local") and not allow_network:
            raise ConfigError(f"{where}: engine.sparkMaster: {master!r} needs network access; allow it "
                              "to use a non-local master (coord config set engine.allowNetwork true)")
        spark_conf = _section(engine.get("sparkConf"), "engine.sparkConf", where)
        image = engine.get("image")
        repositories = _section(doc.get("repositories"), "repositories", where)
        keys = doc.get("trustedKeys") or []
        if not isinstance(keys, list):
            raise ConfigError(f"{where}: trustedKeys: expected a list of \"HEX [NAME]\" lines")
        for entry in keys:
            key = str(entry).partition(" ")[0]
            try:
                bytes.fromhex(key)
            except ValueError:
                raise ConfigError(f"{where}: trustedKeys: {key!r} is not a hex public key (fix it, "
                                  "or 'coord trust remove' it)") from None
        trust = _section(doc.get("trust"), "trust", where)
        _known(trust, ("require",), "trust.", where)
        require = trust.get("require", "known")
        if require not in TRUST_POLICIES:
            raise ConfigError(f"{where}: trust.require: {require!r} is not one of "
                              f"{', '.join(TRUST_POLICIES)}")
        return Config(
            engine=EngineConfig(
                runtime=runtime, spark_master=master, allow_network=allow_network,
                spark_conf=_frozen({str(k): str(v) for k, v in spark_conf.items()}),
                image=None if image is None else _string(image, "engine.image", where),
                keep_warm_s=_duration(engine.get("keepWarm", DEFAULT_KEEP_WARM_S), "engine.keepWarm", where,
                                      zero=True),
            ),
            repositories=_frozen({str(k): _string(v, f"repositories.{k}", where)
                                  for k, v in repositories.items()}),
            trusted_keys=tuple(str(e) for e in keys),
            trust=TrustConfig(require=require),
            serve=_serve(_section(doc.get("serve"), "serve", where), where),
            ingest=_ingest(_section(doc.get("ingest"), "ingest", where), where),
            compaction=_compaction(_section(doc.get("compaction"), "compaction", where), where),
            odf=OdfVersion(odf),
        )

    @staticmethod
    def load(path: Path) -> Config:
        import yaml

        if not path.exists():
            return Config()
        try:
            data = yaml.load(path.read_bytes(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            at = f" (line {mark.line + 1})" if mark is not None else ""
            raise ConfigError(f"{path}: not valid YAML{at}; fix or remove the file") from None
        return Config.from_dict(data or {}, str(path))

    # --- by dotted path -----------------------------------------------------------------------

    def get(self, key: str | None = None) -> Any:
        """The value at a dotted path of the on-disk form (all of it for None)."""
        value: Any = self.to_dict(every_key=True)
        for part in key.split(".") if key else ():
            if not isinstance(value, dict) or part not in value:
                raise ConfigError(f"no setting {key}")
            value = value[part]
        return value

    def set(self, key: str, value: Any, where: str = "config.yaml") -> Config:
        """A new Config with ``key`` (a dotted path) set to ``value``, checked as a load is."""
        doc = self.to_dict()
        *parents, last = key.split(".")
        node = doc
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{key}: {part} is not a group of settings")
        node[last] = value
        return Config.from_dict(doc, where)


def _serve(section: dict, where: str) -> ServeConfig:
    _known(section, ("poll", "engineIdle", "retryMax", "datasets", "sqlMaxRows", "sqlMaxBytes",
                     "sqlTimeout", "sqlConcurrency", "sqlMemory"), "serve.", where)
    per_dataset = {}
    for dataset_id, value in _section(section.get("datasets"), "serve.datasets", where).items():
        key = f"serve.datasets.{dataset_id}.poll"
        if not isinstance(value, dict) or "poll" not in value:
            raise ConfigError(f"{where}: {key}: expected {{poll: DURATION}} "
                              "or {poll: {cron: EXPRESSION}}")
        per_dataset[str(dataset_id)] = _schedule(value["poll"], key, where)
    default = ServeConfig()
    return ServeConfig(
        poll=_schedule(section.get("poll", default.poll.every_s), "serve.poll", where),
        engine_idle_s=_duration(section.get("engineIdle", default.engine_idle_s), "serve.engineIdle", where),
        retry_max_s=_duration(section.get("retryMax", default.retry_max_s), "serve.retryMax", where),
        poll_per_dataset=MappingProxyType(per_dataset),
        sql_max_rows=_count(section.get("sqlMaxRows", default.sql_max_rows), "serve.sqlMaxRows", where),
        sql_max_bytes=_size(section.get("sqlMaxBytes", default.sql_max_bytes), "serve.sqlMaxBytes", where),
        sql_timeout_s=_duration(section.get("sqlTimeout", default.sql_timeout_s), "serve.sqlTimeout", where),
        sql_concurrency=_count(section.get("sqlConcurrency", default.sql_concurrency), "serve.sqlConcurrency",
                               where),
        sql_memory=_size(section.get("sqlMemory", default.sql_memory), "serve.sqlMemory", where),
    )


def _ingest(section: dict, where: str) -> IngestConfig:
    _known(section, ("maxSliceBytes", "engine", "engineThreshold", "eventTimeHorizon"), "ingest.",
           where)
    value = section.get("maxSliceBytes", "auto")
    engine = section.get("engine", IngestEngine.COORDINATOR.value)
    if engine not in {e.value for e in IngestEngine}:
        raise ConfigError(f"{where}: ingest.engine: expected coordinator, spark or auto "
                          f"(got {engine!r})")
    threshold = section.get("engineThreshold")
    return IngestConfig(
        max_slice_bytes=None if value == "auto" else _size(value, "ingest.maxSliceBytes", where),
        engine=IngestEngine(engine),
        engine_threshold=IngestConfig.engine_threshold if threshold is None
        else _size(threshold, "ingest.engineThreshold", where),
        event_time_horizon_s=_duration(section.get("eventTimeHorizon",
                                                   IngestConfig.event_time_horizon_s),
                                       "ingest.eventTimeHorizon", where))


def _compaction(section: dict, where: str) -> CompactionConfig:
    _known(section, ("targetBytes",), "compaction.", where)
    value = section.get("targetBytes", CompactionConfig.target_bytes)
    return CompactionConfig(target_bytes=_size(value, "compaction.targetBytes", where))


def _schedule(value: object, key: str, where: str) -> Schedule:
    """A duration, or ``{cron: "m h dom mon dow"}``."""
    if not isinstance(value, dict):
        return Schedule(every_s=_duration(value, key, where))
    _known(value, ("cron",), f"{key}.", where)
    expression = value.get("cron")
    from croniter import croniter

    if not isinstance(expression, str) or len(expression.split()) != 5 or not croniter.is_valid(expression):
        raise ConfigError(f"{where}: {key}.cron: expected 5 fields, minute hour day-of-month month "
                          f"day-of-week, such as \"*/5 * * * *\" (got {expression!r})")
    return Schedule(cron=" ".join(expression.split()))


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def _duration(value: object, key: str, where: str, *, zero: bool = False) -> float:
    """Seconds from ``30``, ``30s``, ``500ms``, ``5m``, ``1h`` or ``1d``; it must be positive (or, with
    ``zero``, may be 0)."""
    match = _DURATION.match(str(value)) if isinstance(value, int | float | str) else None
    seconds = float(match.group(1)) * _UNIT[match.group(2)] if match else -1.0
    if seconds < 0 or (seconds == 0 and not zero):
        what = "a duration" if zero else "a positive duration"
        raise ConfigError(f"{where}: {key}: expected {what} such as 30s, 500ms or 5m (got {value!r})")
    return seconds


def _count(value: object, key: str, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{where}: {key}: expected a whole number of at least 1 (got {value!r})")
    return value


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]i?B)?\s*$", re.I)
_SIZE_UNIT = {None: 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}


def _size(value: object, key: str, where: str) -> int:
    """Bytes from ``1000000``, ``512MB`` or ``256MiB``; at least 1 MiB."""
    match = _SIZE.match(str(value)) if isinstance(value, int | str) and not isinstance(value, bool) \
        else None
    size = int(float(match.group(1)) * _SIZE_UNIT[(match.group(2) or "").upper() or None]) \
        if match else 0
    if size < 2**20:
        raise ConfigError(f"{where}: {key}: expected a size of at least 1MiB such as 256MiB or "
                          f"1GB, or auto (got {value!r})")
    return size


def _seconds(value: float) -> str:
    return f"{value:g}s"


def _section(value: object, key: str, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {key or 'the document'}: expected a mapping, not {value!r}")
    return value


def _known(section: dict, keys: tuple[str, ...], prefix: str, where: str) -> None:
    for name in section:
        if name not in keys:
            raise ConfigError(f"{where}: {prefix}{name}: unknown setting (known: {', '.join(keys)})")


def _string(value: object, key: str, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where}: {key}: expected a string, not {value!r}")
    return value
