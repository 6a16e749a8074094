"""The workspace: a ``.coord`` folder holding datasets, the signing key and the config.

Every path under ``.coord`` is named in ``layout.py``. The config (``config.py``) and the
trusted keys are read once per Workspace object: again only when the file has changed.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..errors import Conflict, CoordError, NotFound
from ..metadata.ids import validate_dataset_id
from ..metadata.signing import SigningKey, read_key_file
from . import layout
from .config import Config, OdfVersion
from .dataset import CheckedBlocks, Dataset
from .fsutil import atomic_write
from .instance import instance_id

DIR = ".coord"
ENV = "COORD_WORKSPACE"


class WorkspaceError(CoordError):
    pass


class WorkspaceExists(WorkspaceError, Conflict):
    pass


class NoWorkspace(WorkspaceError, NotFound):
    pass


class Workspace:
    def __init__(self, root: Path):
        self.root = root.resolve()
        self.meta = self.root / DIR
        self._key: SigningKey | None = None
        self._checked: dict[str, CheckedBlocks] = {}  # shared by a dataset's Dataset objects
        self._config: tuple[tuple, Config] | None = None  # (file stamp, what it said)
        self._trusted: tuple[Config, dict[bytes, str]] | None = None
        self._instance: str | None = None

    # --- finding and creating ---------------------------------------------------------------

    @staticmethod
    def init(root: Path, odf: OdfVersion = OdfVersion.V018) -> Workspace:
        """A new workspace whose new datasets are stored in ODF ``odf``."""
        ws = Workspace(root)
        if ws.meta.exists():
            raise WorkspaceExists(f"a workspace already exists at {ws.meta}")
        for sub in layout.WORKSPACE_FOLDERS:
            (ws.meta / sub).mkdir(parents=True)
        os.chmod(ws.meta / layout.KEYS, 0o700)
        key = SigningKey.generate(ws.key_path)
        ws._remember_public_key(ws.key_path.read_bytes(), key.public_key)  # no reader writes it
        ws.save_config(Config(odf=odf))
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
        raise NoWorkspace("not in a coord workspace (run 'coord init' first)")

    @staticmethod
    def open(root: Path) -> Workspace:
        ws = Workspace(root)
        if not ws.meta.is_dir():
            raise NoWorkspace(f"no workspace at {root} (run 'coord init' there first)")
        return ws

    # --- config and keys --------------------------------------------------------------------

    @property
    def config_path(self) -> Path:
        return self.meta / layout.CONFIG

    @property
    def key_path(self) -> Path:
        return self.meta / layout.SIGNING_KEY

    def config(self) -> Config:
        """The settings, parsed once and again only when the file changes."""
        try:
            st = self.config_path.stat()
            stamp: tuple = (st.st_ino, st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            stamp = ()
        if self._config is None or self._config[0] != stamp:
            self._config = (stamp, Config.load(self.config_path))
        return self._config[1]

    def save_config(self, config: Config) -> None:
        import yaml

        atomic_write(self.config_path, yaml.safe_dump(config.to_dict(), sort_keys=False).encode())
        self._config = None

    @property
    def signing_key(self) -> SigningKey:
        if self._key is None:
            self._key = SigningKey.load(self.key_path)
        return self._key

    @property
    def public_key(self) -> bytes:
        """The signing key's public key. Deriving it needs the Ed25519 primitive, whose import
        is a tenth of a metadata command's start, so ``keys/ed25519.pub`` remembers it with
        the SHA3-256 of the key file it was derived from (a key file replaced is derived anew)."""
        if self._key is not None:
            return self._key.public_key
        pem = read_key_file(self.key_path)
        try:
            of, key = (self.meta / layout.PUBLIC_KEY).read_text().split()
            if of == hashlib.sha3_256(pem).hexdigest() and len(public := bytes.fromhex(key)) == 32:
                return public
        except (OSError, ValueError):
            pass
        self._key = SigningKey.from_pem(pem, self.key_path)
        self._remember_public_key(pem, self._key.public_key)
        return self._key.public_key

    def _remember_public_key(self, pem: bytes, public: bytes) -> None:
        try:
            atomic_write(self.meta / layout.PUBLIC_KEY,
                         f"{hashlib.sha3_256(pem).hexdigest()} {public.hex()}\n".encode())
        except OSError:
            pass  # a read-only workspace: derived again next time

    def trusted_keys(self) -> frozenset[bytes]:
        return frozenset(self.trusted_key_names())

    def trusted_key_names(self) -> dict[bytes, str]:
        """The trusted public keys and who they belong to: this workspace's own key first."""
        config = self.config()
        if self._trusted is None or self._trusted[0] is not config:
            names = {self.public_key: "this workspace"}
            for entry in config.trusted_keys:  # checked as hex when the config was loaded
                key, _, name = entry.partition(" ")
                names.setdefault(bytes.fromhex(key), name.strip())
            self._trusted = (config, names)
        return dict(self._trusted[1])

    # --- datasets ---------------------------------------------------------------------------

    def checked_blocks(self, dataset_id: str) -> CheckedBlocks:
        """The dataset's blocks already checked (see ``chain.walk``) and its file of
        signatures found valid."""
        if dataset_id not in self._checked:
            self._checked[dataset_id] = CheckedBlocks(
                self.meta / layout.dataset_dir(dataset_id),
                self.meta / layout.cache_dir(dataset_id, layout.VERIFIED))
        return self._checked[dataset_id]

    def dataset(self, dataset_id: str) -> Dataset:
        validate_dataset_id(dataset_id)
        return Dataset(self, dataset_id)

    def odf_of(self, dataset_id: str) -> OdfVersion | None:
        """The version the dataset is stored in; None when the workspace has no such dataset."""
        folder = self.meta / layout.dataset_dir(dataset_id)
        if (folder / layout.HEAD).exists():
            return OdfVersion.V018
        if (folder / layout.CURRENT_HEAD).exists():
            return OdfVersion.V039
        return None

    def datasets(self) -> list[Dataset]:
        root = self.meta / layout.DATASETS
        ids = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.exists() else []
        return [ds for ds in (Dataset(self, i) for i in ids) if ds.exists()]

    def cache_dir(self, dataset_id: str) -> Path:
        path = self.meta / layout.cache_dir(dataset_id)
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def instance_id(self) -> str:
        """This workspace's random id, which a copy of it does not share (instance.py)."""
        if self._instance is None:
            self._instance = instance_id(self.meta)
        return self._instance

    @property
    def run_dir(self) -> Path:
        path = self.meta / layout.RUN
        path.mkdir(parents=True, exist_ok=True)
        return path
