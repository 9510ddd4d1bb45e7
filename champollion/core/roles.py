"""The roles a gateway token carries (README "Access control"): a submitter
evaluates and reads what a corpus's tier allows it; a maintainer also
registers corpora and reads everything. Named here for the gateway's tokens
file and the CLI's `token new` alike."""

# Least privilege first: a role may do what every role before it may.
ROLES = ("submitter", "maintainer")
