"""Pure run-card arithmetic, no gRPC: the metric table, corpus values,
composite and tier, bootstrap, compare, breakdowns, costs, identity and the
run card's dict/proto forms."""
