"""Running transformation engines and talking to them over gRPC (proto/engine.proto).

``port.Engine`` is what transforms use; ``factory.open_engine`` gives one: it starts the
engine (``runtime``: bubblewrap sandbox or OCI container, sharing ``process``) and drives it
through ``client.GrpcEngine``. ``session`` runs one engine for a whole command in a leased
run folder of the workspace (``EngineOnDemand``: started on first need); ``reaper`` cleans up
the engines and run folders that crashed commands left.
"""
