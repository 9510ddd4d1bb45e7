"""Metric family services. Each family package has a pure scorer (no gRPC)
and a ``servicer.py`` that wraps it in the shared family contract."""
