"""What the review rules refuse, as domain errors: the web front maps them
to HTTP statuses (apps/web/rendering.py), the gateway's servicer to gRPC
status codes. No front door decides a review rule itself."""
from __future__ import annotations


class CampaignRefused(ValueError):
    """A campaign or rating that cannot be accepted: the message names the
    field first ("run_ids: ..."). HTTP 400, INVALID_ARGUMENT."""


class NotAReviewer(PermissionError):
    """The caller is not one of the campaign's reviewers. HTTP 403,
    PERMISSION_DENIED."""


class NotNow(RuntimeError):
    """A request the campaign's state or the reviewer's progress does not
    allow yet (a closed campaign, an item before the gate is passed, a flag
    before the item is rated). HTTP 409, FAILED_PRECONDITION."""


class CampaignClosed(NotNow):
    """A change to a campaign that is closed (it takes no ratings and does
    not grow until reopened). HTTP 409, FAILED_PRECONDITION."""
