"""The roles a token carries (docs/integrity-and-access.md): a reviewer
rates the outputs of the review campaigns it is named in (on the web front)
and calls no scoring RPC; a submitter evaluates and reads what a corpus's
tier allows it; a maintainer also registers corpora, runs campaigns and
reads everything. Named here for the tokens file, the CLI's `token new` and
the web front alike."""

REVIEWER, SUBMITTER, MAINTAINER = "reviewer", "submitter", "maintainer"
# Least privilege first: a role may do what every role before it may.
ROLES = (REVIEWER, SUBMITTER, MAINTAINER)
