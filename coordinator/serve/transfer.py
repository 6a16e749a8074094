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
from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, Response

from ..errors import NotFound
from ..metadata.ids import validate_dataset_id
from ..metadata.multiformats import Multihash
from ..store import layout
from ..store.compaction import slice_files
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

    @app.get("/{dataset}/refs/{ref}", tags=[TAG], summary="The head block's hash (multibase)")
    def refs(dataset: str, ref: str) -> Response:
        if ref != "head":
            raise NotServed(f"{dataset}: no ref {ref[:80]!r} (only head)")
        path = folder(dataset) / layout.HEAD
        try:
            return Response(path.read_bytes(), media_type="text/plain")
        except FileNotFoundError:
            raise NotServed(f"{dataset} has no head yet") from None

    def serving(rel_of: Callable[[Multihash], str], what: str) -> Callable[[str, str], FileResponse]:
        def stored(dataset: str, name: str) -> FileResponse:
            if not _HASH.fullmatch(name):
                raise NotServed(f"{what} {name[:80]!r}: expected f1620 and 64 lowercase hex digits")
            path = folder(dataset) / rel_of(Multihash.parse(name))
            if rel_of is layout.data_file:  # a compacted slice: its bytes rebuilt from its rows
                path = slice_files(folder(dataset), [Multihash.parse(name)])[0]
            if not path.is_file():
                raise NotServed(f"{dataset} has no {what} {name}")
            return FileResponse(path, media_type="application/octet-stream")

        return stored

    for route, rel_of, what in (("blocks", layout.block_file, "block"),
                                ("data", layout.data_file, "data file"),
                                ("checkpoints", layout.checkpoint_file, "checkpoint"),
                                ("signatures", layout.signature_file, "signature")):
        app.add_api_route(f"/{{dataset}}/{route}/{{name}}", serving(rel_of, what), methods=["GET"],
                          tags=[TAG], summary=f"A {what}, as stored, by its hash")
