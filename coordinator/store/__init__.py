"""Current-ODF (0.39) datasets on disk, in the reference's folder layout.

Modules, bottom up: ``layout`` (every path of a dataset folder), ``read`` (a dataset's state
in one pass from ``refs/head`` back to its Seed, each block checked against its name before it
is decoded, and the chain rules), ``append`` (the one append path: objects, block, then
``refs/head`` by compare-and-swap), ``verify`` (every object the chain names, hashed as
stored, then parsed and compared). See ``schemas/ODF-039.md``, "Dataset layout".

These know no workspace: a dataset is a folder, and its writer is given the lock file that
makes it the only one. One module sits on a workspace: ``dataset`` (a workspace's current-ODF
dataset: its folder under ``.coord/datasets``, its lock, its cache and the key of its
``did:odf``). ``coord upgrade`` (a 0.18 dataset written as such a folder) is ``build.upgrade``,
above the services: it reads a derivative's build catalog (``transform.builds``), and the
services (ingest, transform, repository) sit on this package, never under it.
"""
