"""Current-ODF (0.39) datasets on disk, in the reference's folder layout.

Modules, bottom up: ``layout`` (every path of a dataset folder), ``read`` (a dataset's state
in one pass from ``refs/head`` back to its Seed, each block checked against its name before it
is decoded, and the chain rules), ``append`` (the one append path: objects, block, then
``refs/head`` by compare-and-swap), ``verify`` (every object the chain names, hashed as
stored, then parsed and compared). See ``schemas/ODF-039.md``, "Dataset layout".

These know no workspace: a dataset is a folder, and its writer is given the lock file that
makes it the only one. Two modules sit on a workspace: ``dataset`` (a workspace's current-ODF
dataset: its folder under ``.coord/datasets``, its lock, its cache and the key of its
``did:odf``) and ``upgrade`` (``coord upgrade``: a 0.18 dataset written as such a folder).
"""
