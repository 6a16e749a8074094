"""Derivative datasets: the coordinator's side of running transforms in an engine."""
