"""The public pages: the home page, sign-in, live leaderboards (HTML and
the JSON `leaderboard --json` prints), run pages (with the heatmap of the
run against its board's first runs) with their report, and corpus pages.
What a visitor may see is decided by the gateway's rules, called through
gateway/server/readings.py and comparisons.py as its RPCs call them."""
from __future__ import annotations

from collections import Counter

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse
from starlette.routing import Route

from apps.client import ranks_explained, split_floor
from apps.report.model import Run, score_rows
from apps.report.render import BOARD_COLUMNS, SHADING, board_rows, render_report
from apps.web.rendering import REPORT_CSP, Front, PageError
from gateway.card.display import column_label
from gateway.card.pairs import SeenPair, headline_metrics, ranked
from gateway.server.comparisons import board_pairs
from gateway.server.readings import corpora_for, corpus_page_for, leaderboard_for, run_for, runs_for, store_ready

ENTRY_COLUMNS = tuple((key, column_label(key)) for key in ("composite", "chrf_plus_plus", "semantic_score"))
TRUE = ("1", "true", "yes", "on")


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "").lower() in TRUE


def board_options(request: Request) -> dict:
    """RunStore.leaderboard's keywords from the page's query (the CLI's flags)."""
    params = request.query_params
    limit = params.get("limit", "0")
    if not limit.isdigit():
        raise PageError(400, f"limit: must be 0 (every row) or a positive number, got {limit[:20]!r}")
    order = params.get("order", "desc")
    if order not in ("asc", "desc"):
        raise PageError(400, f"order: asc or desc, got {order[:20]!r}")
    return {"version": params.get("version") or None, "sort": params.get("sort") or "composite_score",
            "descending": order == "desc", "all_submissions": _flag(request, "all_submissions"),
            "include_disqualified": _flag(request, "include_disqualified"), "official": _flag(request, "official"),
            "limit": int(limit) or None}


def _cell(pair: SeenPair | None) -> dict:
    """A heatmap cell (None: the diagonal); its class (web.css) darker the
    smaller a significant corrected p."""
    if pair is None:
        return {"text": "—", "shade": "self"}
    p_value = pair.p_corrected
    shade = "ns" if not pair.significant else "p001" if p_value < 0.001 else "p01" if p_value < 0.01 else "p05"
    return {"text": pair.marked, "shade": shade}


def pairs_heatmap(pairs: dict) -> dict:
    """board_pairs's comparison as the run page's heatmap: its first
    headline metric's runs best first, each row's corrected p-values
    against every run, shaded by significance."""
    result = pairs["result"]
    if result is None:
        return {"note": pairs["note"], "rows": []}
    metric_id = headline_metrics(result)[0]
    block, names = result["metrics"][metric_id], result["names"]
    runs = ranked(block)
    rows = [{"run_id": pairs["run_ids"][run], "name": names[run], "value": block["values"][run],
             "cluster": block["clusters"][run], "ranks": block["rank_ranges"][run], "current": run == pairs["run"],
             "cells": [_cell(runs.seen.get((run, other))) for other in runs.order]}
            for run in runs.order]
    return {"note": None, "metric": metric_id, "rows": rows, "test": result["test"], "warnings": result["warnings"]}


def routes(front: Front) -> list[Route]:
    async def home(request: Request) -> HTMLResponse:
        visitor = front.visitor(request, "home")

        def read(store):
            runs = runs_for(store, visitor.caller)
            corpora = corpora_for(store, visitor.caller)
            return runs, corpora

        runs, corpora = await front.call(read)
        boards = Counter(run["dataset_id"] for run in runs)
        return front.page(request, "home.html.j2", title="Champollion", boards=sorted(boards.items()),
                          corpora=corpora)

    async def signin_form(request: Request) -> HTMLResponse:
        return front.page(request, "signin.html.j2", title="Sign in", problem=None)

    async def signin(request: Request):
        form = await front.form(request)
        presented = str(form.get("token", ""))
        session = await run_in_threadpool(front.sessions.sign_in, presented, request.state.session)
        if session is None:
            return front.page(request, "signin.html.j2", status=401, title="Sign in",
                              problem="unknown or expired token")
        request.state.new_session = session
        target = str(form.get("next") or "/")
        return RedirectResponse(target if target.startswith("/") and not target.startswith("//") else "/", 303)

    async def signout(request: Request):
        await front.form(request)
        # Ended in the store: a copy of the cookie is refused on every replica from now on.
        request.state.new_session = await run_in_threadpool(front.sessions.sign_out, request.state.session)
        return RedirectResponse("/", 303)

    async def read_board(request: Request, page: str) -> dict:
        visitor = front.visitor(request, page)
        options = board_options(request)
        dataset_id = request.path_params["dataset_id"]
        return await front.call(lambda store: leaderboard_for(store, visitor.caller, dataset_id, **options))

    async def leaderboard(request: Request) -> HTMLResponse:
        board = await read_board(request, "leaderboard")
        # Floor rows (the gateway's degenerate systems): a section of their own, unranked.
        systems, floor = split_floor(board["rows"])
        rows, floor_rows = ([{**shown, "community": row.get("community_review"), "run_id": row["run_id"]}
                             for shown, row in zip(board_rows(part, board["sort"]), part)]
                            for part in (systems, floor))
        return front.page(request, "leaderboard.html.j2", title=f"Leaderboard: {board['dataset_id']}", board=board,
                          rows=rows, floor_rows=floor_rows, columns=BOARD_COLUMNS, query=dict(request.query_params),
                          ranks_explained=ranks_explained(board["sort"], SHADING))

    async def leaderboard_json(request: Request) -> JSONResponse:
        board = await read_board(request, "leaderboard")
        return JSONResponse(board)

    async def run_page(request: Request) -> HTMLResponse:
        visitor = front.visitor(request, "run")

        def read(store):
            view = run_for(store, visitor.caller, request.path_params["run_id"])
            # Its board's first runs, as the visitor may list them (none on a secret tier but for maintainers).
            return view, board_pairs(store, visitor.caller, view.card)

        view, pairs = await front.call(read)
        card = view.card
        return front.page(request, "run.html.j2", title=f"Run {card['run_id'][:12]}", card=card,
                          entries=card.get("entries") if view.entries else None,
                          score_rows=score_rows([Run(card)]), pairs=pairs_heatmap(pairs),
                          entry_columns=ENTRY_COLUMNS, review=card.get("community_review"))

    async def run_report(request: Request) -> HTMLResponse:
        visitor = front.visitor(request, "report")
        view = await front.call(lambda store: run_for(store, visitor.caller, request.path_params["run_id"]))
        html = await front.call(lambda store: render_report([view.card]))
        # The report inlines its charts' script: its own policy, still nothing from elsewhere.
        return HTMLResponse(html, headers={"content-security-policy": REPORT_CSP})

    async def corpus_page(request: Request) -> HTMLResponse:
        visitor = front.visitor(request, "corpus")
        corpus_id = request.path_params["corpus_id"]

        page = await front.call(lambda store: corpus_page_for(store, visitor.caller, corpus_id))
        return front.page(request, "corpus.html.j2", title=f"Corpus {corpus_id}", corpus_id=corpus_id, **page)

    async def healthz(request: Request) -> PlainTextResponse:
        await front.call(store_ready)  # StoreError: 503
        return PlainTextResponse("ok")

    return [
        Route("/healthz", front.endpoint(healthz)),
        Route("/", front.endpoint(home)),
        Route("/signin", front.endpoint(signin_form), methods=["GET"]),
        Route("/signin", front.endpoint(signin), methods=["POST"]),
        Route("/signout", front.endpoint(signout), methods=["POST"]),
        Route("/leaderboard/{dataset_id}", front.endpoint(leaderboard)),
        Route("/api/leaderboard/{dataset_id}", front.endpoint(leaderboard_json)),
        Route("/runs/{run_id}", front.endpoint(run_page)),
        Route("/runs/{run_id}/report", front.endpoint(run_report)),
        Route("/corpora/{corpus_id}", front.endpoint(corpus_page)),
    ]
