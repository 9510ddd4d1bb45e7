"""Community review on the web: maintainers create campaigns and read
their results; reviewers rate their queue one source at a time. A thin
adapter: every review rule (who may rate, when ratings are taken, the gate,
what a page may show) is gateway/review's (reviewing.py, campaigns.py); this
module reads the request, calls them and renders what they return
(tests/test_review_front.py holds it to that).

A reviewer's page never names the systems: outputs are numbered in the
task's shuffled order and the run ids stay on the server, which maps the
ratings back. Each item is saved when it is sent, so a reload resumes at
the first item not done."""
from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse
from starlette.routing import Route

from apps.web.rendering import Front, PageError
from gateway.review import protocol, reviewing
from gateway.review.campaigns import CampaignRequest, create_campaign, results_of
from gateway.review.growth import change_state
from gateway.review.ratings import MQM_SPAN_CATEGORIES
from gateway.review.results import judgments_tsv
from gateway.server.readings import is_maintainer, runs_for


def _int(value, field: str, default: int | None) -> int | None:
    text = "" if value is None else str(value).strip()
    if not text:
        return default
    if not (text.isascii() and text.isdigit()) or len(text) > 9:
        raise PageError(400, f"{field}: a whole number, got {text[:20]!r}")
    return int(text)


def _share(value, field: str, default: float | None) -> float | None:
    text = "" if value is None else str(value).strip()
    if not text:
        return default
    try:
        return float(text)
    except ValueError:
        raise PageError(400, f"{field}: a number, got {text[:20]!r}") from None


def routes(front: Front) -> list[Route]:
    async def campaigns(request: Request) -> HTMLResponse:
        visitor = front.signed_in(request, "review")
        maintainer = is_maintainer(visitor.caller)

        def read(store):
            mine, every = reviewing.campaigns_of(store, visitor.caller.name, maintainer)
            runs = [run for run in runs_for(store, visitor.caller) if run.get("corpus_tier")] if maintainer else []
            return mine, every, runs

        mine, every, runs = await front.call(read)
        return front.page(request, "campaigns.html.j2", title="Community review", mine=mine, every=every, runs=runs,
                          protocols=protocol.PROTOCOLS, prefills=protocol.PREFILLS,
                          defaults={"items": protocol.DEFAULT_ITEMS, "overlap": protocol.DEFAULT_OVERLAP,
                                    "prefill_share": protocol.DEFAULT_PREFILL_SHARE})

    async def create(request: Request):
        visitor = front.maintainer(request, "create campaign")
        form = await front.form(request)
        campaign_request = CampaignRequest.given(
            name=str(form.get("name", "")), run_ids=[str(run) for run in form.getlist("run_ids")],
            reviewers=[name for name in str(form.get("reviewers", "")).replace("\n", ",").split(",") if name.strip()],
            items=_int(form.get("items"), "items", None), overlap=_int(form.get("overlap"), "overlap", None),
            reference_review=form.get("reference_review") == "on", created_by=visitor.caller.name,
            protocol=str(form.get("protocol") or "") or None, prefill=str(form.get("prefill") or "") or None,
            prefill_share=_share(form.get("prefill_share"), "prefill_share", None))
        campaign = await front.call(lambda store: create_campaign(store, campaign_request))
        return RedirectResponse(f"/review/campaigns/{campaign['campaign_id']}", 303)

    async def campaign_page(request: Request):
        visitor = front.signed_in(request, "campaign")
        campaign_id = request.path_params["campaign_id"]
        if not is_maintainer(visitor.caller):
            return RedirectResponse(f"/review/campaigns/{campaign_id}/rate", 303)
        campaign, flags = await front.call(lambda store: reviewing.campaign_with_flags(store, campaign_id))
        return front.page(request, "campaign.html.j2", title=f"Campaign {campaign['name']}", campaign=campaign,
                          results=campaign["results"], flags=flags, bar=protocol, flag_names=protocol.REFERENCE_FLAGS)

    async def set_state(request: Request):
        """Closes a campaign (its ratings are final: no more are taken) or opens it again."""
        visitor = front.maintainer(request, "close campaign")
        form = await front.form(request)
        state = str(form.get("state", ""))
        campaign_id = request.path_params["campaign_id"]
        # Audited (gateway/review/growth.py); a state other than open or closed: CampaignRefused, 400.
        await front.call(lambda store: change_state(store, campaign_id, state, visitor.caller.name))
        return RedirectResponse(f"/review/campaigns/{campaign_id}", 303)

    async def results_json(request: Request) -> JSONResponse:
        front.maintainer(request, "campaign results")
        campaign = await front.call(lambda store: results_of(store, request.path_params["campaign_id"]))
        return JSONResponse(campaign)

    async def results_tsv(request: Request) -> PlainTextResponse:
        front.maintainer(request, "campaign export")
        campaign = await front.call(lambda store: results_of(store, request.path_params["campaign_id"]))
        if campaign["results"] is None:
            raise PageError(409, f"campaign {campaign['campaign_id']} has no ratings yet")
        name = f"campaign-{campaign['campaign_id']}.tsv"
        return PlainTextResponse(judgments_tsv(campaign["results"]),
                                 headers={"content-disposition": f'attachment; filename="{name}"'})

    async def next_task(request: Request):
        visitor = front.signed_in(request, "rate")
        campaign_id = request.path_params["campaign_id"]
        campaign, progress = await front.call(lambda store: reviewing.next_item(store, campaign_id,
                                                                                visitor.caller.name))
        if progress is None or progress["next"] is None:
            return front.page(request, "review_done.html.j2", title="Thank you", campaign=campaign, progress=progress)
        return RedirectResponse(f"/review/campaigns/{campaign_id}/rate/{progress['next']}", 303)

    async def task_page(request: Request) -> HTMLResponse:
        visitor = front.signed_in(request, "rate")
        campaign_id, position = request.path_params["campaign_id"], request.path_params["position"]
        item = await front.call(lambda store: reviewing.item_page(store, campaign_id, visitor.caller.name, position))
        task = item["task"]
        shown = {"position": position, "done": task["done"], "reference_review": item["campaign"]["reference_review"],
                 "ratings": [task["ratings"].get(system) for system in task["systems"]]}
        return front.page(request, "rate.html.j2", title=f"Review: {item['campaign']['name']}", shown=shown,
                          severities=protocol.SEVERITIES, flag_names=protocol.REFERENCE_FLAGS, rules=protocol,
                          categories=MQM_SPAN_CATEGORIES, **item)

    async def save_task(request: Request) -> JSONResponse:
        visitor = front.signed_in(request, "rate")
        campaign_id, position = request.path_params["campaign_id"], request.path_params["position"]
        body = await front.json_body(request)
        answer = await front.call(lambda store: reviewing.rate(store, campaign_id, visitor.caller.name, position,
                                                               body))
        return JSONResponse(answer)

    async def flag_reference(request: Request) -> JSONResponse:
        visitor = front.signed_in(request, "flag reference")
        campaign_id = request.path_params["campaign_id"]
        body = await front.json_body(request)
        position = _int(body.get("position"), "position", -1)
        flag = await front.call(lambda store: reviewing.flag_reference(
            store, campaign_id, visitor.caller.name, position, str(body.get("flag", "")), str(body.get("note", ""))))
        return JSONResponse({"flag": flag})

    return [
        Route("/review", front.endpoint(campaigns)),
        Route("/review/campaigns", front.endpoint(create), methods=["POST"]),
        Route("/review/campaigns/{campaign_id}", front.endpoint(campaign_page)),
        Route("/review/campaigns/{campaign_id}/state", front.endpoint(set_state), methods=["POST"]),
        Route("/review/campaigns/{campaign_id}/judgments.tsv", front.endpoint(results_tsv)),
        Route("/api/review/campaigns/{campaign_id}", front.endpoint(results_json)),
        Route("/review/campaigns/{campaign_id}/rate", front.endpoint(next_task)),
        Route("/review/campaigns/{campaign_id}/rate/{position:int}", front.endpoint(task_page)),
        Route("/api/review/campaigns/{campaign_id}/rate/{position:int}", front.endpoint(save_task), methods=["POST"]),
        Route("/api/review/campaigns/{campaign_id}/flag", front.endpoint(flag_reference), methods=["POST"]),
    ]
