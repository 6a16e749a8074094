"""Running transformation engines and talking to them over gRPC (proto/engine.proto).

``runtime.start_engine`` starts an engine (bubblewrap sandbox or OCI container);
``client.EngineClient`` drives it.
"""
