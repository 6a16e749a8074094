"""``coord add``: datasets from manifests, a changed query checked against its inputs."""
from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack

import click

from .context import writable_workspace
from .output import Output, short


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--replace", is_flag=True, help="Change the definition of datasets that exist.")
@click.pass_context
def add(ctx: click.Context, paths: tuple[str, ...], replace: bool) -> None:
    """Add datasets from manifest files or folders of them."""
    from ..engine.session import EngineOnDemand, engine_reads
    from ..ingest.errors import IngestError
    from ..ingest.schema_ddl import check_read_schema
    from ..metadata.manifest import ManifestError, manifest_files, read_manifest
    from ..metadata.objects import DatasetSnapshot, LateRows
    from ..metadata.odf39.adapt import NEEDS_039, STREAM_MERGES, account_inputs, local_name
    from ..transform.definition import derivative_problem
    from ..workspace import catalog
    from ..workspace.config import OdfVersion
    from ..workspace.graph import inputs_of

    ws = writable_workspace(ctx)
    show = Output()
    snapshots = []
    manifests = {}  # dataset -> its manifest as loaded: a refusal of its query names the file
    written = {}  # reference-form manifests' snapshots as written: what a 0.39 dataset keeps
    current_form = []  # the manifests of those, for 0.39 datasets
    new_odf = ws.config().odf
    for file in manifest_files(paths):
        # either form; a current-form one as the 0.18 snapshot (stream merges kept: below)
        loaded = read_manifest(file, target="0.39")
        snapshot = loaded.content
        if not isinstance(snapshot, DatasetSnapshot):
            raise ManifestError(str(file), "kind", "coord add takes DatasetSnapshot manifests "
                                "(a MetadataBlock's hash: coord block hash FILE)")
        if loaded.adapted is not None:
            written[snapshot.id] = loaded.adapted.written
        pushed = loaded.adapted.push_sources if loaded.adapted is not None else ()
        if (ws.odf_of(snapshot.id) or new_odf) is OdfVersion.V018:
            for source in [snapshot.source, *pushed]:
                merge = getattr(source, "merge", None)
                if isinstance(merge, STREAM_MERGES):
                    raise loaded.error("content.source.merge", f"merge kind {merge.KIND} is not "
                                       f"supported by ODF 0.18 workspaces ({NEEDS_039})")
            if loaded.adapted is not None:  # what a 0.18 dataset cannot hold is refused here
                loaded = read_manifest(file)
            for note in loaded.notes:  # what a 0.18 dataset has no place for
                show.note(note)
            transform = getattr(snapshot.source, "transform", None)
            if transform is not None and transform.late_rows is LateRows.CORRECT:
                raise loaded.error("content.source.transform.lateRows", "correct is for current-ODF "
                                   "datasets, which are recomputed when rows arrive "
                                   "late; an ODF 0.18 dataset takes drop or fail")
        elif loaded.adapted is not None:
            current_form.append((loaded, loaded.adapted))
        try:
            for source in [snapshot.source, *pushed]:
                check_read_schema(source)
        except IngestError as e:
            raise loaded.error("content.source.read", str(e)) from None
        problem = derivative_problem(snapshot.source)
        if problem is not None:
            raise loaded.error(*problem)
        snapshots.append(snapshot)
        manifests[snapshot.id] = loaded
    adding = {s.id for s in snapshots}
    for loaded, adapted in current_form:
        for place, ref in account_inputs(adapted.written):
            name = local_name(ref)
            if name not in adding and not ws.dataset(name).exists():
                raise ManifestError(loaded.name, place, f"{ref} is the dataset {name} of the account "
                                    f"{ref.rpartition('/')[0]}; this workspace (which has no accounts) "
                                    f"has no dataset {name}: add {name} first (coord add its "
                                    "manifest, or coord pull it from a repository)")
        for note in loaded.notes:  # an input of an account read as the workspace's dataset
            show.note(note)
    with ExitStack() as stack:
        def readable() -> list[str]:  # a changed query is validated against its inputs, old and new
            from ..store.overview import CurrentDatasets
            from ..workspace.graph import DatasetGraph

            return engine_reads(ws, [s.id for s in snapshots if ws.dataset(s.id).exists()],
                                graph=DatasetGraph(ws, current=CurrentDatasets(ws).inputs),
                                proposed={s.id: inputs_of(s) for s in snapshots})

        engine = EngineOnDemand(ws, stack, readable)

        def query_checked(name: str, check: Callable[[], None]) -> None:
            """``check()``, a query the engine refuses named by its dataset and manifest."""
            from ..engine.port import EngineQueryError

            try:
                check()
            except EngineQueryError as e:
                said = " ".join(str(e).split())  # one line: an engine's message may hold several
                raise manifests[name].error("content.source.transform", (
                    f"dataset {name}: the engine refuses the new query ({said}); the dataset "
                    "keeps its query: fix this one and add the manifest again")) from None

        def check_change(ds, snapshot, current):
            from ..transform.evolution import check_query_change, transform_changed  # needs gRPC

            if transform_changed(snapshot, current):
                query_checked(ds.id, lambda: check_query_change(engine.get(), ws, ds, snapshot, current))

        current = None
        if new_odf is OdfVersion.V039 or any(ws.odf_of(ds.id) is OdfVersion.V039 for ds in ws.datasets()):
            from ..build.schema_change import check_definition
            from ..store.define import Definitions

            current = Definitions(ws, written, check_change=lambda name, state, events: query_checked(
                name, lambda: check_definition(ws, engine.get, name, state, events)))
        for result in catalog.add_datasets(ws, snapshots, replace=replace, check_change=check_change,
                                           current=current):
            show.line(f"{result.action:9} {result.dataset_id} {short(result.block_hash)}")
