"""Community review on the web: maintainers create campaigns and read
their results; reviewers rate their queue one source at a time
(gateway/review for the protocol, the design and the statistics).

A reviewer's page never names the systems: outputs are numbered in the
task's shuffled order and the run ids stay on the server, which maps the
ratings back. Each item is saved when it is sent, so a reload resumes at
the first item not done."""
from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse
from starlette.routing import Route

from apps.web.rendering import Front, PageError
from apps.web.sessions import Visitor
from gateway.review import protocol
from gateway.review.campaigns import CampaignRequest, check_flag, checked_ratings, create_campaign, results_of
from gateway.review.growth import change_state
from gateway.review.results import judgments_tsv
from gateway.server.access import is_maintainer
from gateway.server.readings import runs_for
from gateway.store.reviews import OPEN


def _reviewer(visitor: Visitor, campaign: dict) -> str:
    """The visitor's name when it is one of the campaign's reviewers."""
    name = visitor.caller.name
    if name is None or name not in campaign["reviewers"]:
        raise PageError(403, f"campaign {campaign['campaign_id']}: token {name!r} is not one of its reviewers")
    return name


def _int(value, field: str, default: int) -> int:
    text = "" if value is None else str(value).strip()
    if not text:
        return default
    if not text.isdigit():
        raise PageError(400, f"{field}: a whole number, got {text[:20]!r}")
    return int(text)


def routes(front: Front) -> list[Route]:
    async def campaigns(request: Request) -> HTMLResponse:
        visitor = front.signed_in(request, "review")
        maintainer = is_maintainer(visitor.caller)

        def read(store):
            mine = store.list_campaigns(reviewer=visitor.caller.name) if visitor.caller.name else []
            every = store.list_campaigns() if maintainer else []
            runs = [run for run in runs_for(store, visitor.caller) if run.get("corpus_tier")] if maintainer else []
            return mine, every, runs

        mine, every, runs = await front.call(read)
        return front.page(request, "campaigns.html.j2", title="Community review", mine=mine, every=every, runs=runs,
                          defaults={"items": protocol.DEFAULT_ITEMS, "overlap": protocol.DEFAULT_OVERLAP})

    async def create(request: Request):
        visitor = front.maintainer(request, "create campaign")
        form = await front.form(request)
        campaign_request = CampaignRequest(
            name=str(form.get("name", "")), run_ids=[str(run) for run in form.getlist("run_ids")],
            reviewers=[name for name in str(form.get("reviewers", "")).replace("\n", ",").split(",") if name.strip()],
            items=_int(form.get("items"), "items", protocol.DEFAULT_ITEMS),
            overlap=_int(form.get("overlap"), "overlap", protocol.DEFAULT_OVERLAP),
            reference_review=form.get("reference_review") == "on", created_by=visitor.caller.name)
        campaign = await front.call(lambda store: create_campaign(store, campaign_request))
        return RedirectResponse(f"/review/campaigns/{campaign['campaign_id']}", 303)

    async def campaign_page(request: Request):
        visitor = front.signed_in(request, "campaign")
        campaign_id = request.path_params["campaign_id"]
        if not is_maintainer(visitor.caller):
            return RedirectResponse(f"/review/campaigns/{campaign_id}/rate", 303)

        def read(store):
            campaign = results_of(store, campaign_id)
            return campaign, store.reference_flags(campaign["corpus_id"], campaign["corpus_version"])

        campaign, flags = await front.call(read)
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

        def read(store):
            campaign = store.campaign(campaign_id)
            reviewer = _reviewer(visitor, campaign)
            return campaign, store.reviewer_progress(campaign_id).get(reviewer)

        campaign, progress = await front.call(read)
        if progress is None or progress["next"] is None:
            return front.page(request, "review_done.html.j2", title="Thank you", campaign=campaign, progress=progress)
        return RedirectResponse(f"/review/campaigns/{campaign_id}/rate/{progress['next']}", 303)

    async def task_page(request: Request) -> HTMLResponse:
        visitor = front.signed_in(request, "rate")
        campaign_id = request.path_params["campaign_id"]
        position = request.path_params["position"]

        def read(store):
            campaign = store.campaign(campaign_id)
            reviewer = _reviewer(visitor, campaign)
            return campaign, store.review_task(campaign_id, reviewer, position), store.reviewer_progress(
                campaign_id)[reviewer]

        campaign, task, progress = await front.call(read)
        # The reference stays hidden until the item is rated (source-based assessment).
        reference = task["reference"] if campaign["reference_review"] and task["done"] else None
        shown = {"position": position, "done": task["done"], "reference_review": campaign["reference_review"],
                 "ratings": [task["ratings"].get(system) for system in task["systems"]]}
        return front.page(request, "rate.html.j2", title=f"Review: {campaign['name']}", campaign=campaign,
                          task=task, progress=progress, reference=reference, shown=shown,
                          severities=protocol.SEVERITIES, flag_names=protocol.REFERENCE_FLAGS)

    async def save_task(request: Request) -> JSONResponse:
        visitor = front.signed_in(request, "rate")
        campaign_id = request.path_params["campaign_id"]
        position = request.path_params["position"]
        body = await front.json_body(request)

        def save(store):
            campaign = store.campaign(campaign_id)
            reviewer = _reviewer(visitor, campaign)
            if campaign["state"] != OPEN:
                raise PageError(409, f"campaign {campaign_id} is {campaign['state']}")
            task = store.review_task(campaign_id, reviewer, position)
            systems, sent = task["systems"], body.get("ratings")
            if not isinstance(sent, list) or len(sent) != len(systems):
                raise PageError(400, f"ratings: one per output shown ({len(systems)})")
            ratings = checked_ratings(systems, {system: rating if isinstance(rating, dict) else {}
                                                for system, rating in zip(systems, sent)})
            store.save_ratings(campaign_id, reviewer, position, ratings)
            return campaign, task, store.reviewer_progress(campaign_id)[reviewer]

        campaign, task, progress = await front.call(save)
        answer = {"saved": position, "next": progress["next"], "done": progress["done"], "tasks": progress["tasks"]}
        if campaign["reference_review"]:
            answer["reference"] = task["reference"]
        return JSONResponse(answer)

    async def flag_reference(request: Request) -> JSONResponse:
        visitor = front.signed_in(request, "flag reference")
        campaign_id = request.path_params["campaign_id"]
        body = await front.json_body(request)

        def save(store):
            campaign = store.campaign(campaign_id)
            reviewer = _reviewer(visitor, campaign)
            if not campaign["reference_review"]:
                raise PageError(409, f"campaign {campaign_id} does not review references")
            task = store.review_task(campaign_id, reviewer, _int(body.get("position"), "position", -1))
            if not task["done"]:
                raise PageError(409, "rate the item before flagging its reference")
            flag, note = str(body.get("flag", "")), str(body.get("note", ""))
            if not flag:
                store.unflag_reference(campaign["corpus_id"], campaign["corpus_version"], task["entry_id"], reviewer)
                return None
            check_flag(flag, note)
            store.flag_reference(campaign["corpus_id"], campaign["corpus_version"], task["entry_id"], reviewer, flag,
                                 note, campaign_id)
            return flag

        flag = await front.call(save)
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
