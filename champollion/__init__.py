"""Shared core of Champollion: the generated gRPC contract (``champollion.eval.v1``,
built by ``make proto``), language cards, the sacreBLEU adapter and server helpers."""

__version__ = "0.1.0"
