"""Running transformation engines and talking to them over gRPC (proto/engine.proto).

``port.Engine`` is what transforms use; ``factory.open_engine`` gives one: it starts the
engine (``runtime``: bubblewrap sandbox or OCI container, sharing ``process``) and drives it
through ``client.GrpcEngine``.
"""
