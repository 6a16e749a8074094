"""Whether a dataset is what its chain says and who wrote it: ``verify`` (integrity and
reproducibility, ``coord verify``) and ``authorship`` (who signed each block and whether this
workspace accepts that signer: trusted keys, keys pinned on first use); and ``slice_check``,
verify's data file check run before anything reads a local slice, once per file state."""
