"""Bringing datasets up to date: ``pull`` (upstream first, one engine per command, each dataset
by the service that fits it: repository sync, ingest or transform) and ``status`` (what is out
of date and why, from the chains alone). ``coord pull``/``coord status`` and ``coord serve`` use
it."""
