"""How the coordinator runs engines (the workspace's engine settings)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import Invalid
from ..workspace.config import DEFAULT_RUNTIME, DEFAULT_SPARK_MASTER, RUNTIMES


@dataclass
class EngineSettings:
    # "sandbox": a local process under bubblewrap; "container": an OCI container through the
    # Docker Engine API; "auto": a container when a container API answers, else the sandbox.
    runtime: str = DEFAULT_RUNTIME
    spark_master: str = DEFAULT_SPARK_MASTER  # the same for both runtimes (workspace/config.py)
    spark_conf: dict[str, str] = field(default_factory=dict)
    # Engines run without network. A non-local Spark master needs it, which the user must
    # allow explicitly; blocks then record network_isolated=False.
    allow_network: bool = False
    image: str = "odf-spark-engine:latest"  # container runtime
    startup_timeout: float = 180.0  # seconds; Spark takes 10-20 s on a busy small machine
    # > 0: a warm engine (engine/warm.py), which outlives the command that starts it and ends
    # once no command has used it for this many seconds; 0: it ends with its command.
    keep_warm: float = 0.0

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIMES:
            raise Invalid(f"engine runtime must be one of {', '.join(RUNTIMES)}, not {self.runtime!r}")
        if not self.spark_master.startswith("local") and not self.allow_network:
            raise Invalid(
                f"Spark master {self.spark_master!r} needs network access; "
                "allow it to use a non-local master (coord config set engine.allowNetwork true)"
            )

    @property
    def network_isolated(self) -> bool:
        return not self.allow_network
