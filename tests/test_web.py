"""The web front (apps/web) over the session's store, driven
in-process (Starlette's test client, real store, real tokens file): the
live leaderboard equals `leaderboard --json`; the access rules are the
gateway's (a submitter opens no gold board and no holdout run's entries);
every form and script request needs its CSRF token; sessions are signed,
HttpOnly and SameSite; a revoked token ends its sessions."""
from __future__ import annotations

import json
import os
import re

import pytest
from starlette.testclient import TestClient

from apps.client import Client, rank_text
from apps.web.app import WebSettings, create_app
from apps.web.sessions import COOKIE
from champollion.eval.v1 import gateway_pb2
from gateway.card.compare import ComparableRun
from gateway.card.pairs import compare_all
from gateway.store import RunStore, default_store_url
from tests.conftest import run_cli
from tests.test_board_ranks import page_ranks
from tests.web_fixtures import CORPUS_ID, HOSTILE, corpus, store_four_runs, system_predictions, write_tokens

HOLDOUT_ID, GOLD_ID = "web-holdout-crk", "web-gold-crk"


@pytest.fixture(scope="module")
def runs(stack) -> dict:
    """Four runs on a dev corpus, and one each on a holdout and a gold one."""
    four = store_four_runs(stack.gateway_address)
    secret = {}
    with Client(stack.gateway_address) as client:
        for corpus_id, tier in ((HOLDOUT_ID, "holdout"), (GOLD_ID, "gold")):
            client.register_corpus({**corpus(), "id": corpus_id}, tier,
                                   accept_check_failures="a small test corpus")
            secret[tier] = client.evaluate(gateway_pb2.CorpusRef(id=corpus_id), system_predictions(1),
                                           {"model_slug": f"{tier}-system"})["run_id"]
    return {"dev": four, **secret}


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    path = tmp_path_factory.mktemp("web") / "tokens.yaml"
    return path, write_tokens(path)


@pytest.fixture(scope="module")
def app(runs, tokens):
    return create_app(WebSettings(default_store_url(), str(tokens[0]), secret="s" * 40))


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html) or re.search(r'data-csrf="([^"]+)"', html)
    assert found, "the page has no CSRF token"
    return found.group(1)


def signed_in(app, token: str | None) -> TestClient:
    client = TestClient(app)
    if token is not None:
        page = client.get("/signin")
        answer = client.post("/signin", data={"csrf": csrf_of(page.text), "token": token}, follow_redirects=False)
        assert answer.status_code == 303, answer.text
    return client


def test_the_live_leaderboard_equals_leaderboard_json(app, tokens, runs, capsys):
    capsys.readouterr()
    assert run_cli("leaderboard", "--dataset", CORPUS_ID, "--json") == 0
    cli_rows = json.loads(capsys.readouterr().out)
    # The CLI's embedded gateway is open (a maintainer): so is alice.
    with signed_in(app, tokens[1].maintainer) as alice:
        web = alice.get(f"/api/leaderboard/{CORPUS_ID}").json()
        page = alice.get(f"/leaderboard/{CORPUS_ID}").text
    assert len(cli_rows) == 4 and web["rows"] == cli_rows
    assert {row["run_id"] for row in web["rows"]} == set(runs["dev"])
    assert re.findall(r'<tr data-run-id="([0-9a-f]+)"', page) == [row["run_id"] for row in cli_rows]
    # Issue 34: the page shows the rank ranges and intervals the JSON gives (tests/test_board_ranks.py).
    shown = page_ranks(page)
    assert all(row["rank_range"] and row["ci"] for row in cli_rows)
    assert [shown[row["run_id"]][:2] for row in cli_rows] == [
        (rank_text(row), " ".join(map(str, row["rank_range"]))) for row in cli_rows]
    # Sorted as the CLI sorts, by any of its columns.
    capsys.readouterr()
    assert run_cli("leaderboard", "--dataset", CORPUS_ID, "--json", "--sort", "bleu", "--asc") == 0
    by_bleu = json.loads(capsys.readouterr().out)
    with signed_in(app, tokens[1].maintainer) as alice:
        assert alice.get(f"/api/leaderboard/{CORPUS_ID}?sort=bleu&order=asc").json()["rows"] == by_bleu


def test_the_public_sees_the_rows_without_the_maintainers_columns(app, runs):
    with TestClient(app) as visitor:
        assert visitor.get("/healthz").text == "ok"
        rows = visitor.get(f"/api/leaderboard/{CORPUS_ID}").json()["rows"]
        assert rows and not any("submitted_by" in row or "review" in row for row in rows)
        assert visitor.get("/api/leaderboard/web-no-such-corpus").status_code == 404
        # Its runs are dev runs: the official board has none, and says so rather than name an empty version.
        empty = visitor.get(f"/leaderboard/{CORPUS_ID}?official=1").text
        assert re.search(r'<p id="no-run">No run to rank on this board: official runs only', empty)
        assert "Corpus version <code></code>" not in empty and "<tr data-run-id" not in empty
        bad = visitor.get(f"/api/leaderboard/{CORPUS_ID}?sort=no_such_metric")
        assert bad.status_code == 400 and "sort" in bad.json()["error"]


def test_a_submitter_opens_no_gold_board_and_no_holdout_entries(app, tokens, runs):
    with signed_in(app, tokens[1].submitter) as bob:
        gold_board = bob.get(f"/leaderboard/{GOLD_ID}")
        assert gold_board.status_code == 403 and "needs the maintainer role" in gold_board.text
        assert bob.get(f"/api/leaderboard/{GOLD_ID}").status_code == 403
        assert bob.get(f"/runs/{runs['gold']}").status_code == 403
        assert bob.get(f"/corpora/{GOLD_ID}").status_code == 403
        assert GOLD_ID not in bob.get("/").text
        holdout = bob.get(f"/runs/{runs['holdout']}")
        assert holdout.status_code == 200 and 'id="entries-withheld"' in holdout.text
        assert "crk-01" not in holdout.text
        report = bob.get(f"/runs/{runs['holdout']}/report")
        assert report.status_code == 200 and "crk-01" not in report.text
    with signed_in(app, tokens[1].maintainer) as alice:
        assert alice.get(f"/leaderboard/{GOLD_ID}").status_code == 200
        whole = alice.get(f"/runs/{runs['holdout']}")
        assert 'id="entries"' in whole.text and "crk-01" in whole.text


def test_a_run_page_draws_the_heatmap_of_every_pair_of_its_board(app, tokens, runs, stack):
    """The run against the other runs of its board: each cell the corrected
    p-value of the row's run against the column's, as compare_all gives it
    on the stored cards; none on a holdout run for a submitter."""
    with Client(stack.gateway_address) as client:
        cards = {run_id: client.show(run_id) for run_id in runs["dev"]}
    with TestClient(app) as visitor:
        page = visitor.get(f"/runs/{runs['dev'][2]}").text
    table = page[page.index('<table id="pairs-heatmap"'):]
    table = table[:table.index("</table>")]
    rows = re.findall(r'<tr( class="current")? data-run-id="([0-9a-f]+)">(.*?)</tr>', table, re.S)
    order = [run_id for _, run_id, _ in rows]
    assert set(order) == set(runs["dev"]) and [current for current, run_id, _ in rows if current] == [' class="current"']
    assert [run_id for current, run_id, _ in rows if current] == [runs["dev"][2]]
    expected = compare_all([ComparableRun.from_card(cards[run_id]) for run_id in order],
                           names=[cards[run_id]["model_slug"] for run_id in order])["metrics"]["composite"]
    # Best first, by composite.
    values = [cards[run_id]["scores"]["composite"] for run_id in order]
    assert values == sorted(values, reverse=True)
    for row, (_, run_id, cells) in enumerate(rows):
        shown = re.findall(r'<td class="num (\w+)">([^<]*)</td>', cells)
        assert shown[row] == ("self", "—")
        for column, (shade, text) in enumerate(shown):
            if column == row:
                continue
            pair = next(pair for pair in expected["pairs"] if {pair["first"], pair["second"]} == {row, column})
            assert text == f"{pair['p_corrected']:.3g}{'*' if pair['significant'] else ''}"
            assert (shade == "ns") is (not pair["significant"])
        assert f">{expected['clusters'][row]}</td>" in cells
    with signed_in(app, tokens[1].submitter) as bob:
        holdout = bob.get(f"/runs/{runs['holdout']}").text
    assert 'id="pairs-heatmap"' not in holdout
    assert "Not compared: the runs of a holdout corpus are compared by maintainers only." in holdout
    with signed_in(app, tokens[1].maintainer) as alice:
        alone = alice.get(f"/runs/{runs['holdout']}").text
    assert "Not compared: no other run on its corpus version&#39;s board to compare it with." in alone


def test_forms_and_script_requests_need_their_csrf_token(app, tokens, runs):
    with TestClient(app) as visitor:
        visitor.get("/signin")
        refused = visitor.post("/signin", data={"token": tokens[1].maintainer}, follow_redirects=False)
        assert refused.status_code == 403 and "CSRF" in refused.text
        forged = visitor.post("/signin", data={"csrf": "x" * 32, "token": tokens[1].maintainer},
                              follow_redirects=False)
        assert forged.status_code == 403
        assert visitor.get("/review").status_code == 401  # still not signed in
    with signed_in(app, tokens[1].maintainer) as alice:
        form = {"name": "no csrf", "run_ids": runs["dev"], "reviewers": "rater-1,rater-2,rater-3", "items": "4"}
        assert alice.post("/review/campaigns", data=form, follow_redirects=False).status_code == 403
        assert "no csrf" not in alice.get("/review").text
        page = alice.get("/review")
        created = alice.post("/review/campaigns", data={**form, "name": "with csrf", "csrf": csrf_of(page.text)},
                             follow_redirects=False)
        assert created.status_code == 303
        campaign_id = created.headers["location"].rsplit("/", 1)[1]
    with signed_in(app, tokens[1].reviewers["rater-1"]) as rater:
        task = rater.get(f"/review/campaigns/{campaign_id}/rate", follow_redirects=True)
        position = int(re.search(r'data-position="(\d+)"', task.text).group(1))
        ratings = {"ratings": [{"score": 60, "usable": True, "spans": []}] * 4}
        url = f"/api/review/campaigns/{campaign_id}/rate/{position}"
        assert rater.post(url, json=ratings).status_code == 403
        assert rater.post(url, json=ratings, headers={"x-csrf-token": csrf_of(task.text)}).status_code == 200


def test_the_session_cookie_is_signed_httponly_and_samesite(app, tokens):
    with TestClient(app) as visitor:
        answer = visitor.get("/")
        header = answer.headers["set-cookie"]
        assert header.startswith(f"{COOKIE}=") and "HttpOnly" in header and "SameSite=strict" in header
        assert "default-src 'self'" in answer.headers["content-security-policy"]
        signin = visitor.get("/signin")
        visitor.post("/signin", data={"csrf": csrf_of(signin.text), "token": tokens[1].submitter})
        assert 'id="who">bob (submitter)' in visitor.get("/").text
        # An altered cookie is not a session: the visitor is anonymous again.
        value = visitor.cookies.get(COOKIE)
        visitor.cookies.set(COOKIE, value[:-2] + ("AA" if not value.endswith("AA") else "BB"))
        assert 'id="who"' not in visitor.get("/").text


def test_a_token_deleted_from_the_file_ends_its_sessions(runs, tmp_path):
    path = tmp_path / "tokens.yaml"
    tokens = write_tokens(path)
    original = path.read_text(encoding="utf-8")
    app = create_app(WebSettings(default_store_url(), str(path), secret="t" * 40))
    with signed_in(app, tokens.submitter) as bob:
        assert 'id="who">bob' in bob.get("/").text
        lines = [line for line in original.splitlines() if "name: bob" not in line]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.utime(path, ns=(1, 1))  # a new modification time, whatever the clock's resolution
        assert 'id="who"' not in bob.get("/").text
        # Issue 33, finding 8: the line put back revived the old cookie; now it signs in anew.
        path.write_text(original, encoding="utf-8")
        os.utime(path, ns=(2, 2))
        assert 'id="who"' not in bob.get("/").text


def test_sign_out_ends_the_session_of_a_copied_cookie(app, tokens):
    """Issue 33, finding 8: a cookie copied before /signout stayed a session for its 12 h."""
    with signed_in(app, tokens[1].submitter) as bob, TestClient(app) as thief:
        thief.cookies.set(COOKIE, bob.cookies.get(COOKIE))
        assert 'id="who">bob' in thief.get("/").text
        assert bob.post("/signout", data={"csrf": csrf_of(bob.get("/").text)}).status_code == 200
        assert 'id="who"' not in bob.get("/").text and 'id="who"' not in thief.get("/").text


def test_a_run_on_a_client_sent_corpus_has_its_pages(app, tokens, stack):
    """Issue 33, finding 10: /runs/RUN answered 500 for a run on a client-sent corpus."""
    with Client(stack.gateway_address) as client:
        run_id = client.evaluate({**corpus(), "id": "web-client-sent-crk"}, system_predictions(2),
                                 {"model_slug": "client-sent"})["run_id"]
    with TestClient(app) as visitor, signed_in(app, tokens[1].submitter) as bob:
        for who in (visitor, bob):
            page = who.get(f"/runs/{run_id}")
            assert page.status_code == 200 and "web-client-sent-crk" in page.text and 'id="entries"' in page.text
            assert who.get(f"/runs/{run_id}/report").status_code == 200


def test_a_200_mb_form_is_refused_before_it_is_parsed(runs, tokens):
    """Issue 33, finding 12: a 200 MB urlencoded POST to /signin was parsed before the
    CSRF check (403 after 51 s). A small limit, and bodies just over it."""
    app = create_app(WebSettings(default_store_url(), str(tokens[0]), secret="s" * 40, max_body_bytes=2048))
    with TestClient(app) as visitor:
        csrf = csrf_of(visitor.get("/signin").text)
        # Chunked (no Content-Length), counted as it comes. (The test client reads a body whole
        # before the app sees it; tests/test_web_access.py sends 200 MB to uvicorn by hand.)
        chunks = iter([b"csrf=" + csrf.encode() + b"&token="] + [b"a" * 1024] * 8)
        refused = visitor.post("/signin", content=chunks, headers={"content-type": "application/x-www-form-urlencoded"})
        assert refused.status_code == 413 and "too large" in refused.text
        declared = visitor.post("/signin", data={"csrf": csrf, "token": tokens[1].submitter, "pad": "x" * 3000})
        assert declared.status_code == 413
        assert visitor.post("/signin", data={"csrf": csrf, "token": tokens[1].submitter},
                            follow_redirects=False).status_code == 303


def test_a_reviewer_rates_only_its_own_campaigns_and_bad_ratings_are_refused(app, tokens, runs, stack):
    with Client(stack.gateway_address) as client:
        campaign = client.create_campaign("rater-1 and rater-2 only", runs["dev"], ["rater-1", "rater-2"], items=3,
                                          overlap=2)
    with signed_in(app, tokens[1].reviewers["rater-3"]) as outsider:
        refused = outsider.get(f"/review/campaigns/{campaign['campaign_id']}/rate/0")
        assert refused.status_code == 403 and "not one of its reviewers" in refused.text
        created = outsider.post("/review/campaigns", data={"csrf": csrf_of(outsider.get("/review").text)})
        assert created.status_code == 403 and "maintainer" in created.text
    with signed_in(app, tokens[1].reviewers["rater-1"]) as rater:
        page = rater.get(f"/review/campaigns/{campaign['campaign_id']}/rate/0")
        headers = {"x-csrf-token": csrf_of(page.text)}
        url = f"/api/review/campaigns/{campaign['campaign_id']}/rate/0"
        for body, field in (({"ratings": [{"score": 101}] * 4}, "ratings[0].score"),
                            ({"ratings": [{"score": 50}] * 3}, "ratings: one per output"),
                            ({"ratings": [{"score": 50, "spans": [{"start": 3, "end": 1, "severity": "minor"}]}] * 4},
                             "ratings[0].spans[0]"),
                            ({"ratings": [{"score": 50, "usable": "maybe"}] * 4}, "ratings[0].usable")):
            answer = rater.post(url, json=body, headers=headers)
            assert answer.status_code == 400 and field in answer.json()["error"]
        # Nothing was saved: the item is still the first not done.
        assert rater.get(f"/review/campaigns/{campaign['campaign_id']}/rate",
                         follow_redirects=False).headers["location"].endswith("/rate/0")
        shown = rater.get(f"/review/campaigns/{campaign['campaign_id']}/rate/0").text
        assert all(run_id not in shown for run_id in runs["dev"])  # blind: no run id on the page


def test_a_hostile_output_is_text_in_the_page(app, tokens, runs, stack):
    with Client(stack.gateway_address) as client:
        campaign = client.create_campaign("hostile", runs["dev"], ["rater-2"], items=8, overlap=1)
    with signed_in(app, tokens[1].reviewers["rater-2"]) as rater:
        pages = [rater.get(f"/review/campaigns/{campaign['campaign_id']}/rate/{position}").text
                 for position in range(8)]
    shown = next(page for page in pages if "window.__pwned" in page)
    assert HOSTILE not in shown
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in shown


def test_a_closed_campaign_takes_no_more_ratings(app, tokens, runs, stack):
    with Client(stack.gateway_address) as client:
        campaign = client.create_campaign("to close", runs["dev"], ["rater-3"], items=2, overlap=1)
    url = f"/review/campaigns/{campaign['campaign_id']}"
    with signed_in(app, tokens[1].maintainer) as alice:
        page = alice.get(url)
        assert alice.post(f"{url}/state", data={"state": "closed"}, follow_redirects=False).status_code == 403
        closed = alice.post(f"{url}/state", data={"state": "closed", "csrf": csrf_of(page.text)})
        assert closed.status_code == 200 and 'id="open-campaign"' in closed.text
    with signed_in(app, tokens[1].reviewers["rater-3"]) as rater:
        task = rater.get(f"{url}/rate/0")
        refused = rater.post(f"/api{url}/rate/0", json={"ratings": [{"score": 50}] * 4},
                             headers={"x-csrf-token": csrf_of(task.text)})
        assert refused.status_code == 409 and "closed" in refused.json()["error"]
        assert rater.get(f"{url}/rate", follow_redirects=False).headers["location"].endswith("/rate/0")


def test_unknown_pages_and_anonymous_review_pages_answer_with_a_status(app):
    with TestClient(app) as visitor:
        missing = visitor.get("/no/such/page")
        assert missing.status_code == 404 and 'id="error"' in missing.text
        assert visitor.get("/runs/ffffffffffffffff").status_code == 404
        review = visitor.get("/review")
        assert review.status_code == 401 and 'href="/signin"' in review.text


# --- campaigns that grow, from the campaign page (apps/web/growth.py) -------------------------------------------------


def test_a_maintainer_grows_a_campaign_from_its_page(app, tokens, runs, stack):
    """Adds a reviewer, extends the items and closes the campaign from its page, each audited with the
    maintainer's name; a reviewer may not; bad input and a closed campaign answer with a status."""
    with Client(stack.gateway_address) as client:
        campaign = client.create_campaign("to grow", runs["dev"], ["rater-1"], items=3, overlap=1)
    url = f"/review/campaigns/{campaign['campaign_id']}"
    with signed_in(app, tokens[1].reviewers["rater-1"]) as rater:
        csrf = csrf_of(rater.get("/review").text)
        refused = rater.post(f"{url}/reviewers", data={"csrf": csrf, "reviewers": "rater-2"})
        assert refused.status_code == 403 and "maintainer" in refused.text
    with signed_in(app, tokens[1].maintainer) as alice:
        page = alice.get(url)
        assert 'id="add-reviewers"' in page.text and 'id="extend-items"' in page.text
        added = alice.post(f"{url}/reviewers", data={"csrf": csrf_of(page.text), "reviewers": "rater-2, rater-3"})
        assert added.status_code == 200 and "rater-1, rater-2, rater-3" in added.text
        extended = alice.post(f"{url}/items", data={"csrf": csrf_of(added.text), "items": "2"})
        assert extended.status_code == 200 and "5 items" in extended.text
        bad = alice.post(f"{url}/items", data={"csrf": csrf_of(extended.text), "items": "two"})
        assert bad.status_code == 400 and "items: a whole number" in bad.text
        again = alice.post(f"{url}/reviewers", data={"csrf": csrf_of(extended.text), "reviewers": "rater-2"})
        assert again.status_code == 400 and "reviewers: already in campaign" in again.text
        closed = alice.post(f"{url}/state", data={"state": "closed", "csrf": csrf_of(extended.text)})
        assert 'id="add-reviewers"' not in closed.text
        late = alice.post(f"{url}/items", data={"csrf": csrf_of(closed.text), "items": "1"})
        assert late.status_code == 409 and "closed" in late.text
    store = RunStore.open(default_store_url())
    try:
        changes = store.campaign_audit(campaign["campaign_id"])
    finally:
        store.close()
    assert [(change["action"], change["by"]) for change in changes] == [
        ("reviewers_added", "alice"), ("items_extended", "alice"), ("state_changed", "alice")]
    assert changes[2]["details"] == {"from": "open", "to": "closed"}


def test_an_mqm_campaigns_page_shows_its_scores_from_the_spans(app, tokens, runs, stack):
    with Client(stack.gateway_address) as client:
        campaign = client.create_campaign("mqm", runs["dev"], ["rater-1"], items=2, overlap=1)
    store = RunStore.open(default_store_url())
    try:
        # The protocol is chosen at creation (docs/community-review.md); set here through the store.
        store.grow_campaign(campaign["campaign_id"], {}, {"protocol": "mqm"}, [], "test", "protocol_set", {})
        task = store.review_task(campaign["campaign_id"], "rater-1", 0)
        major = {"start": 0, "end": 1, "severity": "major", "category": "Accuracy/Mistranslation"}
        store.save_ratings(campaign["campaign_id"], "rater-1", 0, {
            system: {"score": 50.0, "usable": None, "spans": [major] if k == 0 else []}
            for k, system in enumerate(task["systems"])})
    finally:
        store.close()
    with signed_in(app, tokens[1].maintainer) as alice:
        page = alice.get(f"/review/campaigns/{campaign['campaign_id']}")
    rows = re.findall(r"<tr><td class=\"num\">(\d)</td><td>(\w+)</td>\s*<td class=\"num\">(\d)</td>"
                      r"<td class=\"num\">([-\d.]+)</td></tr>", page.text.split('id="mqm"')[1].split("</table>")[0])
    assert [(rank, system, items) for rank, system, items, _ in rows][-1] == ("4", task["systems"][0][:12], "1")
    assert [float(score) for *_, score in rows] == [0.0, 0.0, 0.0, -5.0]
