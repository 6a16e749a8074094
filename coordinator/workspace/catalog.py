"""Dataset management: add definitions from manifests, delete, reset (``coord add`` etc.).

A derivative's transform always states its input watermark rule once added
(``TransformSql.inputWatermarks``, schemas/EXTENSIONS.md): a new derivative's is RECORDED; a
redefinition that names none keeps the dataset's, so an existing dataset computes as before
until a manifest asks for another rule.

A dataset is added in the ODF version the workspace stores new datasets in (config ``odf``)
and redefined in its own. The checks (names, inputs, versions, acyclicity) are one for both;
writing a current-ODF (0.39) definition is ``CurrentDefinitions``' (``store.define``: the
workspace layer cannot read those folders), as is reading such a dataset's inputs for the
graph. A dataset's inputs are stored in its own version (0.39 reads 0.39 ids).
"""
from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from ..errors import Conflict, Invalid
from ..metadata.objects import DatasetSnapshot, DatasetSourceDerivative, InputWatermarks, MetadataBlock
from ..metadata.timestamps import now_utc, parse_timestamp
from . import layout
from .config import OdfVersion
from .dataset import BlockNotFound, Dataset, DatasetNotFound
from .fsutil import remove
from .graph import DatasetGraph, inputs_of
from .lock import DatasetLock
from .state import DatasetState
from .workspace import Workspace


class CatalogError(Invalid):
    """A definition or argument the catalog cannot take (defined twice, a missing input, an
    ambiguous block prefix)."""


class CatalogConflict(Conflict):
    """The workspace as it is refuses the change: the dataset exists, changes kind, has readers."""


class AddAction(enum.StrEnum):
    ADDED = "added"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class AddResult:
    dataset_id: str
    action: AddAction
    block_hash: bytes | None


ChangeCheck = Callable[[Dataset, DatasetSnapshot, DatasetState], None]


class CurrentDefinitions(Protocol):
    """The catalog's way to current-ODF (0.39) datasets (``store.define.Definitions``)."""

    def check(self, snapshot: DatasetSnapshot) -> None:
        """Raise if ``snapshot`` cannot be a 0.39 dataset's definition (nothing is written)."""

    def add(self, snapshot: DatasetSnapshot) -> AddResult:
        """Add the dataset, or append its changed definition."""

    def inputs(self, dataset_id: str) -> tuple[str, ...]:
        """The inputs of a 0.39 dataset of the workspace, by name."""


def add_datasets(
    ws: Workspace, snapshots: list[DatasetSnapshot], *, replace: bool = False,
    check_change: ChangeCheck | None = None, current: CurrentDefinitions | None = None,
) -> list[AddResult]:
    """Add (or with ``replace`` redefine) datasets; checks everything before writing anything.

    ``check_change`` vets a new definition of an existing 0.18 dataset (the engine validates
    a changed query) and raises to refuse it; ``current`` writes 0.39 ones (needed once the
    workspace holds or adds any)."""
    by_id: dict[str, DatasetSnapshot] = {}
    for s in snapshots:
        if s.id in by_id:
            raise CatalogError(f"dataset {s.id} is defined twice")
        by_id[s.id] = s
    new_odf = ws.config().odf

    def odf_of(dataset_id: str) -> OdfVersion | None:
        return ws.odf_of(dataset_id) or (new_odf if dataset_id in by_id else None)

    for s in snapshots:
        ds = ws.dataset(s.id)
        if ds.exists() and not replace:
            raise CatalogConflict(
                f"dataset {s.id} already exists (use --replace to change its definition)"
            )
        for dep in inputs_of(s):
            if dep not in by_id and not ws.dataset(dep).exists():
                hint = _did_you_mean(ws, by_id, dep)
                raise CatalogError(f"dataset {s.id}: input {dep} does not exist{hint}")
            _check_input_version(s.id, odf_of(s.id), dep, odf_of(dep))
        if odf_of(s.id) is OdfVersion.V039:
            _current(current).check(s)
        elif s.source is None:  # a current-ODF root fed by push sources (odf39.adapt)
            raise CatalogError(f"dataset {s.id}: an ODF 0.18 dataset has no push sources; make "
                               "a 0.39 workspace (coord init --odf 0.39) or upgrade the 0.18 "
                               "datasets first (coord upgrade)")
    graph = DatasetGraph(ws, proposed={i: inputs_of(s) for i, s in by_id.items()},
                         current=current.inputs if current is not None else None)
    graph.check_acyclic()  # the whole workspace as it would be: a redefinition can close a loop
    return [_current(current).add(by_id[i]) if odf_of(i) is OdfVersion.V039
            else _add_one(ws.dataset(i), by_id[i], check_change)
            for i in graph.order(by_id, recursive=False)]


def _check_input_version(dataset_id: str, odf: OdfVersion | None, dep: str,
                         dep_odf: OdfVersion | None) -> None:
    if odf is dep_odf:
        return
    if odf is OdfVersion.V039:
        raise CatalogError(f"dataset {dataset_id}: input {dep} is an ODF 0.18 dataset, which an "
                           "ODF 0.39 derivative cannot read; upgrade it first "
                           f"(coord upgrade {dep} --into FOLDER)")
    raise CatalogError(f"dataset {dataset_id}: input {dep} is an ODF 0.39 dataset, which an "
                       "ODF 0.18 derivative cannot read; add it as a 0.39 dataset "
                       "(coord config set odf 0.39, then coord add)")


def _current(current: CurrentDefinitions | None) -> CurrentDefinitions:
    if current is None:  # a caller that cannot write 0.39 datasets was given one to write
        raise CatalogError("this command cannot write ODF 0.39 datasets; use coord add")
    return current


def _did_you_mean(ws: Workspace, adding: dict[str, DatasetSnapshot], name: str) -> str:
    import difflib

    close = difflib.get_close_matches(name, [*adding, *(ds.id for ds in ws.datasets())], n=1, cutoff=0.7)
    return f" (did you mean {close[0]}?)" if close else ""


def _add_one(ds: Dataset, snapshot: DatasetSnapshot, check_change: ChangeCheck | None) -> AddResult:
    with ds.writer() as w:
        current = w.state
        snapshot = _with_watermark_rule(snapshot, current)
        if current is None:
            block = MetadataBlock(system_time=now_utc(), source=snapshot.source, vocab=snapshot.vocab)
            return AddResult(ds.id, AddAction.ADDED, w.commit(block))
        source = snapshot.source if snapshot.source != current.source else None
        vocab = snapshot.vocab if snapshot.vocab is not None and snapshot.vocab != current.vocab else None
        if source is None and vocab is None:
            return AddResult(ds.id, AddAction.UNCHANGED, None)
        if source is not None and type(source) is not type(current.source):
            raise CatalogConflict(f"dataset {ds.id}: cannot turn a {current.kind} dataset into another kind")
        if check_change is not None:
            check_change(ds, snapshot, current)
        block = MetadataBlock(system_time=now_utc(), source=source, vocab=vocab)
        return AddResult(ds.id, AddAction.UPDATED, w.commit(block))


def _with_watermark_rule(snapshot: DatasetSnapshot, current: DatasetState | None) -> DatasetSnapshot:
    """``snapshot`` with its derivative transform's input watermark rule filled in: RECORDED
    for a new dataset, else the one in force (None, as the chain says, for a dataset added
    before the rule)."""
    source = snapshot.source
    if not isinstance(source, DatasetSourceDerivative) or source.transform.input_watermarks is not None:
        return snapshot
    if current is None:
        rule: InputWatermarks | None = InputWatermarks.RECORDED
    elif isinstance(current.source, DatasetSourceDerivative):
        rule = current.source.transform.input_watermarks
    else:
        return snapshot  # a root turned derivative: refused below
    transform = dataclasses.replace(source.transform, input_watermarks=rule)
    return dataclasses.replace(snapshot, source=dataclasses.replace(source, transform=transform))


def delete_dataset(ws: Workspace, dataset_id: str,
                   current: Callable[[str], Iterable[str]] | None = None) -> None:
    """Remove a dataset of either ODF version that no other dataset reads; ``current``: a
    current-ODF dataset's inputs (``DatasetGraph``), which this layer cannot read."""
    ds = ws.dataset(dataset_id)
    if not ds.exists():
        raise DatasetNotFound(dataset_id)
    users = DatasetGraph(ws, current=current).readers(dataset_id)
    if users:
        raise CatalogConflict(f"dataset {dataset_id} is an input of {', '.join(users)}; delete those first")
    with DatasetLock(ws.meta / layout.lock_file(dataset_id), dataset_id):
        for head in (layout.HEAD, layout.CURRENT_HEAD):  # invisible first: a crash below
            remove(ds.root / head)                       # leaves no half-dataset behind
        remove(ds.root)
        remove(ws.meta / layout.cache_dir(dataset_id))


def reset_dataset(ws: Workspace, dataset_id: str, block_prefix: str) -> bytes:
    ds = ws.dataset(dataset_id)
    block = find_block(ds, block_prefix)
    with ds.writer() as w:
        w.reset(block)
    return block


def find_block(ds: Dataset, block_prefix: str) -> bytes:
    """The block of the dataset's chain whose hash starts with ``block_prefix``."""
    matches = [h for h, _ in ds.blocks() if h.hex().startswith(block_prefix.lower())]
    if not matches:
        raise BlockNotFound(f"no block of {ds.id} starts with {block_prefix}")
    if len(matches) > 1:
        raise CatalogError(f"{block_prefix} matches {len(matches)} blocks of {ds.id}; give more digits")
    return matches[0]


def block_as_at(ds: Dataset, when: str) -> bytes | None:
    """The block ``when`` names (hex digits: a hash or its prefix), or the newest block the
    dataset had at system time ``when`` (RFC 3339); None when the dataset did not exist yet."""
    if re.fullmatch(r"[0-9a-fA-F]+", when):
        return find_block(ds, when)
    t = parse_timestamp(when)  # a malformed time is reported as one, not as an unknown block
    return next((h for h, block in ds.blocks() if block.system_time <= t), None)
