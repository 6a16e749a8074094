"""Dataset management: add definitions from manifests, delete, reset (``coord add`` etc.).

A derivative's transform always states its input watermark rule once added
(``TransformSql.inputWatermarks``, schemas/EXTENSIONS.md): a new derivative's is RECORDED; a
redefinition that names none keeps the dataset's, so an existing dataset computes as before
until a manifest asks for another rule.
"""
from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import Conflict, Invalid
from ..metadata.objects import DatasetSnapshot, DatasetSourceDerivative, InputWatermarks, MetadataBlock
from ..metadata.timestamps import now_utc, parse_timestamp
from . import layout
from .dataset import BlockNotFound, Dataset, DatasetNotFound
from .fsutil import remove
from .graph import DatasetGraph, inputs_of
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


def add_datasets(
    ws: Workspace, snapshots: list[DatasetSnapshot], *, replace: bool = False,
    check_change: ChangeCheck | None = None,
) -> list[AddResult]:
    """Add (or with ``replace`` redefine) datasets; checks everything before writing anything.

    ``check_change`` vets a new definition of an existing dataset (the engine validates a
    changed query) and raises to refuse it."""
    by_id: dict[str, DatasetSnapshot] = {}
    for s in snapshots:
        if s.id in by_id:
            raise CatalogError(f"dataset {s.id} is defined twice")
        by_id[s.id] = s
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
    graph = DatasetGraph(ws, proposed={i: inputs_of(s) for i, s in by_id.items()})
    graph.check_acyclic()  # the whole workspace as it would be: a redefinition can close a loop
    return [_add_one(ws.dataset(i), by_id[i], check_change) for i in graph.order(by_id, recursive=False)]


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


def delete_dataset(ws: Workspace, dataset_id: str) -> None:
    ds = ws.dataset(dataset_id)
    if not ds.exists():
        raise DatasetNotFound(dataset_id)
    users = DatasetGraph(ws).readers(dataset_id)
    if users:
        raise CatalogConflict(f"dataset {dataset_id} is an input of {', '.join(users)}; delete those first")
    with ds.writer():
        remove(ds.head_path)  # invisible first: a crash below leaves no half-dataset behind
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
