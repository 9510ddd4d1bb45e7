"""The gateway's server: gRPC servicer, intake and validation, fan-out to the
families, the per-run spill, merging and one evaluation end to end."""
