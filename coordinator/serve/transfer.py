"""The ODF Simple Transfer Protocol (RFC 007) for ``coord serve``'s current-ODF (0.39) datasets:
each dataset's folder, read-only, at the routes the reference's node serves single-tenant
(kamu-cli v0.265, ``simple_protocol/handlers.rs``): ``GET /{dataset}/refs/head``,
``/{dataset}/blocks/{hash}``, ``/{dataset}/data/{hash}``, ``/{dataset}/checkpoints/{hash}``, and
ours, ``/{dataset}/signatures/{hash}`` (the reference asks for none). ``coord pull
http://host:port/{dataset}`` (``repository.fileio.HttpFileIO``) reads them like any HTTP
repository, checking every byte.

Invariants: a name becomes a path only once it matches its form (a dataset id; ``head``; a
SHA3-256 multihash); a file is served as stored (its size known before it is sent), since
``refs/head`` is replaced by a rename it is read whole, old or new; anything absent, or a
dataset of ODF 0.18 (whose layout this protocol does not describe), is a 404. The service's
guard (``api._Guard``) applies as to every route: loopback only, or a bearer token.
"""
from __future__ import annotations

import re
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, Response

from ..errors import NotFound
from ..metadata.ids import validate_dataset_id
from ..metadata.multiformats import Multihash
from ..store import layout
from ..store.dataset import CurrentDataset
from ..workspace import Workspace
from ..workspace.config import OdfVersion

_HASH = re.compile(r"f1620[0-9a-f]{64}")
TAG = "odf-transfer"


class NotServed(NotFound):
    pass


def add_routes(app: FastAPI, ws: Workspace) -> None:
    def folder(dataset: str) -> Path:
        if ws.odf_of(validate_dataset_id(dataset)) is not OdfVersion.V039:
            raise NotServed(f"no current-ODF (0.39) dataset {dataset} (the transfer protocol "
                            "serves those only)")
        return CurrentDataset(ws, dataset).root

    def stored(dataset: str, rel_of, name: str, what: str) -> FileResponse:
        if not _HASH.fullmatch(name):
            raise NotServed(f"{what} {name[:80]!r}: expected f1620 and 64 lowercase hex digits")
        path = folder(dataset) / rel_of(Multihash.parse(name))
        if not path.is_file():
            raise NotServed(f"{dataset} has no {what} {name}")
        return FileResponse(path, media_type="application/octet-stream")

    @app.get("/{dataset}/refs/{ref}", tags=[TAG], summary="The head block's hash (multibase)")
    def refs(dataset: str, ref: str) -> Response:
        if ref != "head":
            raise NotServed(f"{dataset}: no ref {ref[:80]!r} (only head)")
        path = folder(dataset) / layout.HEAD
        try:
            return Response(path.read_bytes(), media_type="text/plain")
        except FileNotFoundError:
            raise NotServed(f"{dataset} has no head yet") from None

    @app.get("/{dataset}/blocks/{block_hash}", tags=[TAG], summary="A block, as stored")
    def blocks(dataset: str, block_hash: str) -> FileResponse:
        return stored(dataset, layout.block_file, block_hash, "block")

    @app.get("/{dataset}/data/{physical_hash}", tags=[TAG], summary="A data file")
    def data(dataset: str, physical_hash: str) -> FileResponse:
        return stored(dataset, layout.data_file, physical_hash, "data file")

    @app.get("/{dataset}/checkpoints/{physical_hash}", tags=[TAG], summary="A checkpoint")
    def checkpoints(dataset: str, physical_hash: str) -> FileResponse:
        return stored(dataset, layout.checkpoint_file, physical_hash, "checkpoint")

    @app.get("/{dataset}/signatures/{block_hash}", tags=[TAG], summary="A block's signature")
    def signatures(dataset: str, block_hash: str) -> FileResponse:
        return stored(dataset, layout.signature_file, block_hash, "signature")
