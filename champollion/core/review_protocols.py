"""The names a review campaign's protocol and suggestions are chosen by
(docs/community-review.md), here for the CLI's options, the gateway's
request and the web form alike; what each protocol asks is
gateway/review/protocol.py's.

"da": direct assessment, the first campaigns' protocol. "esa": error span
annotation as WMT24-25 ran it in Appraise. "mqm": the ESA page with an MQM
category on every span. Suggestions: "none", or "lyss" (the metric
families' findings), with a share of the items shown without them."""
from __future__ import annotations

DA, ESA, MQM = "da", "esa", "mqm"
PROTOCOLS = (DA, ESA, MQM)

PREFILL_NONE, PREFILL_LYSS = "none", "lyss"
PREFILLS = (PREFILL_NONE, PREFILL_LYSS)
DEFAULT_PREFILL_SHARE = 0.2  # of the sampled items, shown WITHOUT suggestions

# The formats a campaign's ratings are exported in (gateway/review/exports.py):
# WMT's ESA JSON lines.
WMT_ESA = "wmt-esa"
EXPORT_FORMATS = (WMT_ESA,)
