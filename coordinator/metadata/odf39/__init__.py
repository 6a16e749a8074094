"""ODF 0.39.0 dataset metadata: typed objects, the FlatBuffers manifest codec, YAML forms.

Pinned: the spec repository's tag v0.39.0 (``schemas/dataset/v1alpha1``, ``schemas/data``,
``schemas/source``, ``schemas/legacy/v0``, ``schemas-generated/flatbuffers/opendatafabric.fbs``)
and the reference kamu-cli v0.265.0 (``src/odf/metadata``). See ``schemas/ODF-039.md``.

Modules, bottom up: ``data`` (RFC-016 schemas and extra attributes), ``source`` (polling and
push sources, transforms, merge strategies), ``events`` (the 13 events, blocks, snapshots),
``codec`` (manifest envelope, block hash), ``manifests`` (the reference's YAML forms),
``chain`` (the rules of a chain), ``adapt`` (a DatasetSnapshot as the ODF 0.18 snapshot a
workspace holds). Hashes and ids are ``multiformats.Multihash`` and
``did.DatasetId``, one level up.
The objects share the 0.18 machinery (``@odf``, ``shape.py``, the FlatBuffers and YAML
walkers); only the declarations differ.
"""
