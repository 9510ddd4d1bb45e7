"""Campaigns that grow, on the web (maintainers): the campaign page's two
forms, reviewers added and items extended (gateway/review/growth.py holds
the rules; each change is audited there)."""
from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Route

from apps.web.rendering import Front, PageError
from gateway.review.growth import add_reviewers, extend_items


def routes(front: Front) -> list[Route]:
    async def grow(request: Request, page: str, change):
        visitor = front.maintainer(request, page)
        form = await front.form(request)
        campaign_id = request.path_params["campaign_id"]
        # A closed campaign, or another change meanwhile: 409 (rendering.py's table).
        await front.call(lambda store: change(store, campaign_id, form, visitor.caller.name))
        return RedirectResponse(f"/review/campaigns/{campaign_id}", 303)

    async def more_reviewers(request: Request):
        def change(store, campaign_id, form, by):
            names = [name for name in str(form.get("reviewers", "")).replace("\n", ",").split(",") if name.strip()]
            return add_reviewers(store, campaign_id, names, by)

        return await grow(request, "add reviewers", change)

    async def more_items(request: Request):
        def change(store, campaign_id, form, by):
            text = str(form.get("items", "")).strip()
            if not (text.isascii() and text.isdigit()) or len(text) > 9:
                raise PageError(400, f"items: a whole number, got {text[:20]!r}")
            return extend_items(store, campaign_id, int(text), by)

        return await grow(request, "extend campaign", change)

    return [
        Route("/review/campaigns/{campaign_id}/reviewers", front.endpoint(more_reviewers), methods=["POST"]),
        Route("/review/campaigns/{campaign_id}/items", front.endpoint(more_items), methods=["POST"]),
    ]
