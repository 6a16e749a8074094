"""The ``serve`` section of ``.coord/config.yaml``: how often roots are polled, and for how long
an idle engine is kept.

    serve:
      poll: 30s             # every root is pulled this often (local filesGlob sources are
                            # also watched, so a dropped file is ingested at once)
      engineIdle: 60s       # the warm engine stops after this long without work
      retryMax: 5m          # a failing dataset is retried after 1 s, 2 s, 4 s ... up to this
      datasets:
        org.example.prices: {poll: 5s}   # per root, overrides poll

A duration is a number of seconds or a number with ``ms``, ``s``, ``m`` or ``h``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CoordError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


class ServeConfigError(CoordError):
    pass


@dataclass(frozen=True)
class ServeSettings:
    poll_s: float = 30.0
    engine_idle_s: float = 60.0
    retry_max_s: float = 300.0
    poll_per_dataset: dict[str, float] = field(default_factory=dict)

    def poll_of(self, dataset_id: str) -> float:
        return self.poll_per_dataset.get(dataset_id, self.poll_s)


def serve_settings(config: dict, config_path: Path) -> ServeSettings:
    section = config.get("serve") or {}
    if not isinstance(section, dict):
        raise ServeConfigError(f"{config_path}: serve: expected a mapping of settings")
    per_dataset = {}
    datasets = section.get("datasets") or {}
    if not isinstance(datasets, dict):
        raise ServeConfigError(f"{config_path}: serve.datasets: expected a mapping of dataset ids")
    for dataset_id, value in datasets.items():
        where = f"serve.datasets.{dataset_id}.poll"
        if not isinstance(value, dict) or "poll" not in value:
            raise ServeConfigError(f"{config_path}: {where}: expected {{poll: DURATION}}")
        per_dataset[str(dataset_id)] = duration(value["poll"], config_path, where)
    defaults = ServeSettings()
    return ServeSettings(
        poll_s=duration(section.get("poll", defaults.poll_s), config_path, "serve.poll"),
        engine_idle_s=duration(section.get("engineIdle", defaults.engine_idle_s), config_path,
                               "serve.engineIdle"),
        retry_max_s=duration(section.get("retryMax", defaults.retry_max_s), config_path, "serve.retryMax"),
        poll_per_dataset=per_dataset,
    )


def duration(value: object, config_path: Path, where: str) -> float:
    """Seconds from ``30``, ``30s``, ``500ms``, ``5m`` or ``1h``; it must be positive."""
    match = _DURATION.match(str(value)) if isinstance(value, int | float | str) else None
    seconds = float(match.group(1)) * _UNIT[match.group(2)] if match else 0.0
    if seconds <= 0:
        raise ServeConfigError(f"{config_path}: {where}: expected a positive duration such as 30s, "
                               f"500ms or 5m (got {value!r})")
    return seconds
