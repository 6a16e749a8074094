"""``coord serve``: the build service, its HTTP API and web view (imports FastAPI lazily)."""
