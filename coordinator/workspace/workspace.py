"""The workspace: a ``.coord`` folder holding datasets, the signing key and the config.

Layout (docs/architecture.md, Workspace)::

    .coord/config.yaml                 repositories, engine runtime, spark settings
    .coord/keys/ed25519.pem            the signing key (0600)
    .coord/datasets/<id>/              the spec's sharing layout (meta/, data/, checkpoint/)
    .coord/cache/<id>/                 ingest downloads, per-block source state, remotes.json
                                       (remembered repositories), signers.json (pinned keys)
    .coord/locks/<id>.lock             one writer per dataset
    .coord/run/<kind>-<id>/            a running command's scratch (engine run folder, ingest
                                       files), leased by its process (runs.py)
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from ..errors import CoordError
from ..metadata.ids import validate_dataset_id
from ..metadata.signing import SigningKey
from .dataset import CheckedBlocks, Dataset
from .fsutil import atomic_write

DIR = ".coord"
ENV = "COORD_WORKSPACE"

DEFAULT_CONFIG: dict[str, Any] = {
    "engine": {
        "runtime": "auto",  # auto | container | sandbox
        "sparkMaster": "local[2]",
        "allowNetwork": False,  # must be true for a non-local spark master
        "sparkConf": {},
    },
    "repositories": {},
    # Ed25519 public keys whose owners are trusted: "HEX [NAME]" (the key, then who it is)
    "trustedKeys": [],
    "trust": {"require": "known"},  # trusted | known | any: see coordinator/trust.py
}


class WorkspaceError(CoordError):
    pass


class Workspace:
    def __init__(self, root: Path):
        self.root = root.resolve()
        self.meta = self.root / DIR
        self._key: SigningKey | None = None
        self._checked: dict[Path, CheckedBlocks] = {}  # shared by a dataset's Dataset objects

    # --- finding and creating ---------------------------------------------------------------

    @staticmethod
    def init(root: Path) -> Workspace:
        ws = Workspace(root)
        if ws.meta.exists():
            raise WorkspaceError(f"a workspace already exists at {ws.meta}")
        for sub in ("datasets", "cache", "locks", "run", "keys"):
            (ws.meta / sub).mkdir(parents=True)
        os.chmod(ws.meta / "keys", 0o700)
        SigningKey.generate(ws.key_path)
        atomic_write(ws.config_path, yaml.safe_dump(DEFAULT_CONFIG, sort_keys=False).encode())
        return ws

    @staticmethod
    def find(start: Path | None = None) -> Workspace:
        """The workspace at $COORD_WORKSPACE, or the nearest one at or above ``start``."""
        if os.environ.get(ENV):
            return Workspace.open(Path(os.environ[ENV]))
        here = (start or Path.cwd()).resolve()
        for d in (here, *here.parents):
            if (d / DIR).is_dir():
                return Workspace(d)
        raise WorkspaceError("not in a coord workspace (run 'coord init' first)")

    @staticmethod
    def open(root: Path) -> Workspace:
        ws = Workspace(root)
        if not ws.meta.is_dir():
            raise WorkspaceError(f"no workspace at {root} (run 'coord init' there first)")
        return ws

    # --- config and keys --------------------------------------------------------------------

    @property
    def config_path(self) -> Path:
        return self.meta / "config.yaml"

    @property
    def key_path(self) -> Path:
        return self.meta / "keys" / "ed25519.pem"

    def config(self) -> dict:
        path = self.config_path
        data = yaml.load(path.read_bytes(), Loader=yaml.CSafeLoader) if path.exists() else None
        merged = {k: (dict(v) if isinstance(v, dict) else v) for k, v in DEFAULT_CONFIG.items()}
        for key, value in (data or {}).items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key].update(value)
            else:
                merged[key] = value
        return merged

    def save_config(self, config: dict) -> None:
        atomic_write(self.config_path, yaml.safe_dump(config, sort_keys=False).encode())

    @property
    def signing_key(self) -> SigningKey:
        if self._key is None:
            self._key = SigningKey.load(self.key_path)
        return self._key

    def trusted_keys(self) -> frozenset[bytes]:
        return frozenset(self.trusted_key_names())

    def trusted_key_names(self) -> dict[bytes, str]:
        """The trusted public keys and who they belong to: this workspace's own key first."""
        names = {self.signing_key.public_key: "this workspace"}
        for entry in self.config().get("trustedKeys") or []:
            key, _, name = str(entry).partition(" ")
            try:
                names.setdefault(bytes.fromhex(key), name.strip())
            except ValueError:
                raise WorkspaceError(f"{self.config_path}: trustedKeys: {key!r} is not a hex "
                                     "public key (fix it, or 'coord trust remove' it)") from None
        return names

    # --- datasets ---------------------------------------------------------------------------

    def checked_blocks(self, dataset_root: Path) -> CheckedBlocks:
        """The blocks of the dataset in that folder already checked (see ``chain.walk``)."""
        return self._checked.setdefault(dataset_root, CheckedBlocks(dataset_root))

    def dataset(self, dataset_id: str) -> Dataset:
        validate_dataset_id(dataset_id)
        return Dataset(self, dataset_id)

    def datasets(self) -> list[Dataset]:
        root = self.meta / "datasets"
        ids = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.exists() else []
        return [ds for ds in (Dataset(self, i) for i in ids) if ds.exists()]

    def cache_dir(self, dataset_id: str) -> Path:
        path = self.meta / "cache" / dataset_id
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def run_dir(self) -> Path:
        path = self.meta / "run"
        path.mkdir(parents=True, exist_ok=True)
        return path
