"""The ODF Spark engine: runs ODF SQL transforms on Spark Structured Streaming behind gRPC."""

__version__ = "0.1.0"
