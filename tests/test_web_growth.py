"""The campaign page's growth forms (apps/web/growth.py): a maintainer adds a
reviewer and extends the items, both audited with the maintainer's name; a
reviewer may not; bad input and a closed campaign answer with a status."""
from __future__ import annotations

from apps.client import Client
from gateway.store import RunStore, default_store_url
from tests.test_web import app, csrf_of, runs, signed_in, tokens  # noqa: F401


def test_a_maintainer_grows_a_campaign_from_its_page(app, tokens, runs, stack):
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
    assert [(change["action"], change["by"]) for change in changes] == [("reviewers_added", "alice"),
                                                                         ("items_extended", "alice")]
