"""Launchers: the embedded stack (every family and the gateway in-process)
and the local multi-process topology (`champollion up`)."""
