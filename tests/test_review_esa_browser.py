"""An ESA campaign with suggested spans in a real browser (Debian's
Chromium driven by Playwright, issue 36's "Done when"): a maintainer creates
`esa` campaigns with `--prefill lyss` from the web form over Plains Cree
runs (the project's analyzer rejects some of their words) and Spanish ones;
a reviewer fails the attention item, is told why, passes it, then on the
campaign's items accepts one suggested span, rejects one, adds a [MISSING]
span and sees the below-66 warning, all by keyboard; the store keeps the
decisions with the detector's name and each item's start and end. No page
logs an error or asks for anything outside the front; syllabics, Han and
kana render with real fonts. An `mqm` campaign with suggestions over
outputs with an emoji and "\r\n" keeps the server's character offsets and
saves a rated item sent again."""
from __future__ import annotations

import re

import pytest
import sqlalchemy

from apps.client import Client
from apps.web.app import WebSettings
from gateway.review import protocol
from gateway.store import RunStore, default_store_url
from gateway.store.location import open_engine, parse_store_url
from gateway.store.tables import review_ratings
from tests.review_fixtures import REJECTED, SPANISH_EMOJI, store_two_runs
from tests.test_web_browser import Watched
from tests.web_fixtures import served, write_tokens


@pytest.fixture(scope="module")
def front(stack, tmp_path_factory):
    runs = {"crk": store_two_runs(stack.gateway_address, "esa-browser-crk", "crk"),
            "spa": store_two_runs(stack.gateway_address, "esa-browser-spa", "spa")}
    path = tmp_path_factory.mktemp("esa-browser") / "tokens.yaml"
    tokens = write_tokens(path)
    with served(WebSettings(default_store_url(), str(path), secret="e" * 40)) as base:
        yield {"base": base, "tokens": tokens, "runs": runs}


def sign_in(watched: Watched, token: str) -> None:
    watched.page.goto(f"{watched.base}/signin#token={token}")
    watched.page.wait_for_url(f"{watched.base}/")


def create_campaign(page, base: str, name: str, run_ids: list[str], items: int) -> str:
    """The maintainer's web form: an esa campaign with suggestions (the default share without them)."""
    page.goto(f"{base}/review")
    page.fill("#campaign-name", name)
    for run_id in run_ids:
        page.check(f"#run-{run_id}")
    page.fill("#campaign-reviewers", "rater-1")
    page.fill("input[name=items]", str(items))
    page.fill("input[name=overlap]", "1")
    page.select_option("#campaign-protocol", "esa")
    page.select_option("#campaign-prefill", "lyss")
    page.click("#create-campaign")
    page.wait_for_url(re.compile(r".*/review/campaigns/[0-9a-f]{12}$"))
    assert "esa; suggested errors: lyss (0.2 of the" in " ".join(page.locator("#campaign-protocol").text_content()
                                                                 .split())
    return page.locator("#campaign-id").text_content()


def select_text(page, output: int, start: int, end: int) -> None:
    """Selects characters (code points, the server's offsets) start..end of
    an output's text, across its marks: the DOM counts UTF-16 units."""
    page.evaluate("""([output, start, end]) => {
        const root = document.querySelector(`#output-${output} .text`);
        const range = document.createRange();
        const place = (wanted, set) => {
            const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
            let seen = 0, node;
            while ((node = walker.nextNode())) {
                const points = Array.from(node.data);
                if (wanted <= seen + points.length) { set(node, points.slice(0, wanted - seen).join("").length); return; }
                seen += points.length;
            }
        };
        place(start, (node, offset) => range.setStart(node, offset));
        place(end, (node, offset) => range.setEnd(node, offset));
        window.getSelection().removeAllRanges();
        window.getSelection().addRange(range);
    }""", [output, start, end])


def expected_of(campaign_id: str, position: int, reviewer: str = "rater-1") -> dict:
    store = RunStore.open(default_store_url())
    try:
        return store.review_task(campaign_id, reviewer, position)["expected"]
    finally:
        store.close()


def pass_the_gate(page, campaign_id: str, fail_first: bool, reviewer: str = "rater-1") -> None:
    """The tutorial (a good translation: 9 -> 90), then the attention item:
    first scored high with nothing marked (refused, with the reasons), then
    its replaced words marked major and scored 20."""
    page.wait_for_selector("#gate")
    assert page.locator("#task").get_attribute("data-kind") == protocol.TUTORIAL
    address = page.url
    page.keyboard.press("9")
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: url != address)
    assert page.locator("#task").get_attribute("data-kind") == protocol.ATTENTION
    (wanted,) = expected_of(campaign_id, 1, reviewer)["spans"]
    if fail_first:
        page.keyboard.press("9")
        page.keyboard.press("Enter")
        page.wait_for_selector("#gate-feedback:not([hidden])")
        told = page.locator("#gate-feedback").text_content()
        assert "is far from what this translation deserves" in told
        assert f"error at characters {wanted['start']}-{wanted['end']} is not marked" in told
        assert page.url.endswith("/rate/1")
    select_text(page, 0, wanted["start"], wanted["end"])
    page.keyboard.press("M")
    assert page.locator("#output-0 mark.major").count() == 1
    page.focus("#score-0")
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: not url.endswith("/rate/1"))


def suggestions_of(page, output: int) -> int:
    return page.locator(f"#suggestions-{output} li").count()


def rate_items(page, scenario: bool) -> dict | None:
    """Rates every item left by keyboard. With `scenario`, on the first item
    showing two or more suggestions on one output: accepts the first,
    rejects the others, adds a [MISSING] span and scores it 40; scores the
    other output 30 with nothing marked (the warning shows), then 90 (it
    goes). Returns what the scenario did."""
    done = None
    while True:
        page.wait_for_selector("#queue-done, #task")
        if page.locator("#queue-done").count():
            return done
        assert page.locator("#anchors dt").all_text_contents() == ["0", "33", "66", "100"]
        count = page.locator(".output").count()
        rough = next((i for i in range(count) if suggestions_of(page, i) >= 2), None)
        address = page.url
        for index in range(count):
            page.focus(f"#score-{index}")
            marks = page.locator(f"#output-{index} mark.suggestion")
            suggested = suggestions_of(page, index)
            assert marks.count() == suggested
            for mark in marks.all_text_contents():
                assert mark in REJECTED, mark
            if scenario and done is None and index == rough:
                text = page.locator(f"#output-{index}").get_attribute("data-plain")
                page.keyboard.press("s")
                page.keyboard.press("a")
                for _ in range(suggested - 1):
                    page.keyboard.press("s")
                    page.keyboard.press("r")
                assert page.locator(f"#suggestions-{index} li.accepted").count() == 1
                assert page.locator(f"#suggestions-{index} li.rejected").count() == suggested - 1
                page.keyboard.press("o")
                assert page.locator(f"#output-{index} mark.missing").text_content() == protocol.MISSING_MARKER
                page.keyboard.press("4")
                assert page.locator(f"#warning-{index}").is_hidden()  # below 66, with spans
                done = {"position": int(address.rsplit("/", 1)[1]), "output": index, "length": len(text),
                        "suggested": suggested}
            elif scenario and done is not None and "warned" not in done and suggested == 0:
                page.keyboard.press("3")
                assert page.locator(f"#warning-{index}").is_visible()  # below 66, nothing marked
                page.keyboard.press("9")
                assert page.locator(f"#warning-{index}").is_hidden()
                done["warned"] = True
            else:
                for _ in range(suggested):
                    page.keyboard.press("s")
                    page.keyboard.press("a")
                page.keyboard.press("7")
        page.keyboard.press("Enter")
        page.wait_for_url(lambda url: url != address)


def test_an_esa_campaign_with_suggestions_from_creation_to_stored_decisions(browser, front):
    base, tokens, runs = front["base"], front["tokens"], front["runs"]
    maintainer = Watched(browser, base)
    sign_in(maintainer, tokens.maintainer)
    cree = create_campaign(maintainer.page, base, "cree esa", runs["crk"], 5)
    spanish = create_campaign(maintainer.page, base, "spanish esa", runs["spa"], 3)

    reviewer = Watched(browser, base)
    sign_in(reviewer, tokens.reviewers["rater-1"])
    page = reviewer.page
    page.goto(f"{base}/review/campaigns/{cree}/rate")
    assert page.locator("#keys").text_content().count("[MISSING]") >= 1  # the keys are documented on the page
    assert page.locator(".output .text").first.get_attribute("lang").startswith("cr")
    pass_the_gate(page, cree, fail_first=True)
    scenario = rate_items(page, scenario=True)
    assert scenario is not None and scenario.get("warned"), scenario

    page.goto(f"{base}/review/campaigns/{spanish}/rate")
    pass_the_gate(page, spanish, fail_first=False)
    assert page.locator(".output .text").first.get_attribute("lang").startswith("es")
    rate_items(page, scenario=False)

    store = RunStore.open(default_store_url())
    try:
        task = store.review_task(cree, "rater-1", scenario["position"])
        every = [store.review_task(campaign, "rater-1", position) for campaign in (cree, spanish)
                 for position in range(store.reviewer_progress(campaign)["rater-1"]["tasks"])]
    finally:
        store.close()
    rating = task["ratings"][task["systems"][scenario["output"]]]
    assert [d["decision"] for d in rating["decisions"]] == ["accepted"] + ["rejected"] * (scenario["suggested"] - 1)
    assert {d["detector"] for d in rating["decisions"]} == {"fst_rejected"}
    accepted = rating["decisions"][0]["final"]
    assert {**accepted, "missing": False} in rating["spans"]
    length = scenario["length"]
    assert {"start": length, "end": length, "severity": "minor", "missing": True} in rating["spans"]
    assert rating["score"] == 40
    # Every item of both queues done, each with its start and end.
    assert all(task["done"] for task in every)
    for rated in (rating for task in every for rating in task["ratings"].values()):
        assert rated["started_at"] is not None and rated["started_at"] <= rated["rated_at"]

    maintainer_reads_the_campaign(maintainer.page, base, cree, rejected=scenario["suggested"] - 1)
    for watched in (maintainer, reviewer):
        assert watched.errors == [] and watched.outside == [], (watched.errors, watched.outside)
        watched.close()


def maintainer_reads_the_campaign(page, base: str, campaign_id: str, rejected: int) -> None:
    """The maintainer's page of the reviewed campaign: its protocol, the
    reviewer's finished queue (gate included), both systems ranked from the
    campaign's items alone, and the analyzer's suggestions judged: the
    reviewer rejected `rejected` of them and accepted every other one, so
    the confirmed share is (judged - rejected) / judged, with an interval
    around it, and the prefill bias is read beside it."""
    page.goto(f"{base}/review/campaigns/{campaign_id}")
    assert page.locator("#campaign-protocol").text_content().startswith("esa")
    done, total = page.locator("#progress tbody tr td.num").all_text_contents()
    assert done == total and int(total) >= 2 + 5  # the two gate items and the five sampled ones
    assert page.locator("#systems tbody tr").count() == 2
    ranked = [row.locator("td").nth(2).text_content() for row in page.locator("#systems tbody tr").all()]
    assert ranked == ["crk-good", "crk-rough"]
    rows = {row.locator("td").first.text_content(): [cell.text_content() for cell in row.locator("td").all()]
            for row in page.locator("#detectors tbody tr").all()}
    name, metric, judged, accepted, edited, rejected_cell, share, interval, false_rejections = rows["fst_rejected"]
    judged = int(judged)
    assert metric == "fst_acceptance_rate" and int(rejected_cell) == rejected and edited == "0"
    assert int(accepted) == judged - rejected and judged > rejected
    assert float(share) == pytest.approx((judged - rejected) / judged, abs=5e-4)
    low, high = (float(bound) for bound in interval.split(" – "))
    assert low <= float(share) <= high
    assert float(false_rejections) == pytest.approx(rejected / judged, abs=5e-4)
    bias = page.locator("#prefill-bias").text_content()
    assert "with suggestions" in bias and "without" in bias


def platform_fonts(page, selector: str) -> set[str]:
    """The fonts Chromium drew a node's text with (DevTools' CSS.getPlatformFontsForNode)."""
    session = page.context.new_cdp_session(page)
    session.send("DOM.enable")
    session.send("CSS.enable")
    root = session.send("DOM.getDocument")["root"]["nodeId"]
    node = session.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    return {font["familyName"] for font in session.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]}


def test_the_reviewer_page_draws_syllabics_han_and_kana_with_real_fonts(browser, front):
    """Syllabics with Noto Sans Canadian Aboriginal; Han and kana (an output
    in Japanese or Chinese) with Debian's Droid Sans Fallback, not boxes."""
    base, tokens, runs = front["base"], front["tokens"], front["runs"]
    reviewer = Watched(browser, base)
    sign_in(reviewer, tokens.reviewers["rater-2"])
    page = reviewer.page
    maintainer = Watched(browser, base)
    sign_in(maintainer, tokens.maintainer)
    page_m = maintainer.page
    page_m.goto(f"{base}/review")
    page_m.fill("#campaign-name", "fonts")
    for run_id in runs["crk"]:
        page_m.check(f"#run-{run_id}")
    page_m.fill("#campaign-reviewers", "rater-2")
    page_m.fill("input[name=items]", "2")
    page_m.fill("input[name=overlap]", "1")
    page_m.click("#create-campaign")
    page_m.wait_for_url(re.compile(r".*/review/campaigns/[0-9a-f]{12}$"))
    campaign_id = page_m.locator("#campaign-id").text_content()
    page.goto(f"{base}/review/campaigns/{campaign_id}/rate/0")
    # Chromium names the family by its short name ("Noto Sans CanAborig").
    assert any(font.startswith("Noto Sans CanAborig") or font == "Noto Sans Canadian Aboriginal"
               for font in platform_fonts(page, "#output-0 .text"))
    page.evaluate("""() => {
        const text = document.querySelector('#output-1 .text');
        text.textContent = '日本語の翻訳です。中文翻译。';
        text.lang = 'ja';
        return text.getBoundingClientRect().width;  // laid out before the fonts are asked for
    }""")
    assert "Droid Sans Fallback" in platform_fonts(page, "#output-1 .text")
    for watched in (maintainer, reviewer):
        assert watched.errors == [] and watched.outside == [], (watched.errors, watched.outside)
        watched.close()


def test_an_mqm_item_gets_its_categories_by_keyboard(browser, front, stack):
    """An `mqm` campaign: past the gate, the reviewer picks the next error's
    category from the list by keyboard (`c`, an arrow, `Esc`), marks a word
    and a [MISSING] span; both are stored with that category."""
    base, tokens, runs = front["base"], front["tokens"], front["runs"]
    with Client(stack.gateway_address) as client:
        campaign_id = client.create_campaign("spanish mqm", runs["spa"], ["rater-3"], items=2, overlap=1,
                                             protocol="mqm")["campaign_id"]
    reviewer = Watched(browser, base)
    sign_in(reviewer, tokens.reviewers["rater-3"])
    page = reviewer.page
    page.goto(f"{base}/review/campaigns/{campaign_id}/rate")
    store = RunStore.open(default_store_url())
    try:
        # The gate as in ESA, its spans in the list's first category.
        page.wait_for_selector("#gate")
        address = page.url
        page.keyboard.press("9")
        page.keyboard.press("Enter")
        page.wait_for_url(lambda url: url != address)
        (wanted,) = store.review_task(campaign_id, "rater-3", 1)["expected"]["spans"]
        select_text(page, 0, wanted["start"], wanted["end"])
        page.keyboard.press("M")
        page.focus("#score-0")
        page.keyboard.press("2")
        page.keyboard.press("Enter")
        page.wait_for_url(lambda url: url.endswith("/rate/2"))
        first = page.locator("#category option").first.get_attribute("value")
        page.keyboard.press("c")
        assert page.evaluate("document.activeElement.id") == "category"
        page.keyboard.press("ArrowDown")
        page.keyboard.press("Escape")
        chosen = page.locator("#category").input_value()
        assert chosen != first and page.evaluate("document.activeElement.id") == "score-0"
        select_text(page, 0, 0, 2)
        page.keyboard.press("m")
        page.focus("#score-0")
        page.keyboard.press("o")
        assert page.locator("#spans-0 li").all_text_contents()[0].startswith(f"minor ({chosen})")
        for index in range(page.locator(".output").count()):
            page.focus(f"#score-{index}")
            page.keyboard.press("5")
        page.keyboard.press("Enter")
        page.wait_for_url(lambda url: not url.endswith("/rate/2"))
        task = store.review_task(campaign_id, "rater-3", 2)
    finally:
        store.close()
    spans = task["ratings"][task["systems"][0]]["spans"]
    length = len(task["outputs"][0])
    assert spans == [{"start": 0, "end": 2, "severity": "minor", "missing": False, "category": chosen},
                     {"start": length, "end": length, "severity": "minor", "missing": True, "category": chosen}]
    assert reviewer.errors == [] and reviewer.outside == [], (reviewer.errors, reviewer.outside)
    reviewer.close()


def strip_finals(campaign_id: str, reviewer: str, position: int, system: str) -> None:
    """A rating's decisions as stored before their final spans kept [MISSING] and the category."""
    engine = open_engine(parse_store_url(default_store_url()))
    rows = review_ratings.c
    where = sqlalchemy.and_(rows.campaign_id == campaign_id, rows.reviewer == reviewer, rows.position == position,
                            rows.system == system)
    try:
        with engine.begin() as connection:
            decisions = connection.execute(sqlalchemy.select(rows.decisions).where(where)).scalar_one()
            older = [{**d, "final": d["final"] and {key: d["final"][key] for key in ("start", "end", "severity")}}
                     for d in decisions]
            connection.execute(sqlalchemy.update(review_ratings).where(where).values(decisions=older))
    finally:
        engine.dispose()


def test_mqm_suggestions_on_texts_with_emoji_and_crlf_are_saved_and_sent_again(browser, front, stack):
    """An `mqm` campaign with suggestions over outputs that start with an
    emoji (one character, two UTF-16 units) and hold "\r\n": the page keeps
    the stored text and draws each suggestion on its word; on the first
    item the reviewer picks a category, switches one suggestion to major
    (edited), accepts the others, marks the first word and a [MISSING]
    span; every item is saved with the suggestions accepted, the spans in
    the server's characters, each with the category; the rated item,
    reloaded and sent again, is saved again unchanged."""
    base, tokens = front["base"], front["tokens"]
    runs = store_two_runs(stack.gateway_address, "esa-browser-emoji", "spa", SPANISH_EMOJI)
    with Client(stack.gateway_address) as client:
        campaign_id = client.create_campaign("emoji mqm", runs, ["rater-3"], items=3, overlap=1, protocol="mqm",
                                             prefill="lyss", prefill_share=0.0)["campaign_id"]
    reviewer = Watched(browser, base)
    sign_in(reviewer, tokens.reviewers["rater-3"])
    page = reviewer.page
    page.goto(f"{base}/review/campaigns/{campaign_id}/rate")
    pass_the_gate(page, campaign_id, fail_first=False, reviewer="rater-3")
    position = int(page.url.rsplit("/", 1)[1])
    store = RunStore.open(default_store_url())
    try:
        task = store.review_task(campaign_id, "rater-3", position)
        index = next(i for i, system in enumerate(task["systems"]) if task["suggestions"][system])
        rough = task["systems"][index]
        text = task["outputs"][index]
        assert page.locator(f"#output-{index}").get_attribute("data-plain") == text
        words = [text[s["start"]:s["end"]] for s in task["suggestions"][rough]]
        assert words and set(words) <= REJECTED
        assert page.locator(f"#output-{index} mark.suggestion").all_text_contents() == words

        chosen = "Fluency/Spelling"
        page.select_option("#category", chosen)
        page.focus(f"#score-{index}")
        page.keyboard.press("s")
        page.keyboard.press("t")
        for _ in range(len(words) - 1):
            page.keyboard.press("s")
            page.keyboard.press("a")
        assert page.locator(f"#suggestions-{index} li.edited").count() == 1
        first_word = text.split()[1]  # after the emoji
        start = text.index(first_word)
        select_text(page, index, start, start + len(first_word))
        page.keyboard.press("M")
        assert page.locator(f"#output-{index} mark.major").all_text_contents() == [first_word, words[0]]
        page.focus(f"#score-{index}")
        page.keyboard.press("o")
        for other in range(page.locator(".output").count()):
            page.focus(f"#score-{other}")
            page.keyboard.press("5")
        address = page.url
        page.keyboard.press("Enter")
        page.wait_for_url(lambda url: url != address)
        rate_items(page, scenario=False)
        rating = store.review_task(campaign_id, "rater-3", position)["ratings"][rough]

        # The rated item again: its spans and decisions come back, and sending it again saves it; so does
        # an item whose decisions were stored before their final spans kept [MISSING] and the category.
        sent_again = []
        for older in (False, True):
            if older:
                strip_finals(campaign_id, "rater-3", position, rough)
            page.goto(f"{base}/review/campaigns/{campaign_id}/rate/{position}")
            assert page.locator(f"#suggestions-{index} li.edited").count() == 1
            assert page.locator(f"#output-{index} mark.missing").count() == 1
            page.focus("#score-0")
            page.keyboard.press("Enter")
            page.wait_for_url(lambda url: not url.endswith(f"/rate/{position}"))
            sent_again.append(store.review_task(campaign_id, "rater-3", position)["ratings"][rough])
        every = [store.review_task(campaign_id, "rater-3", p)
                 for p in range(2, store.reviewer_progress(campaign_id)["rater-3"]["tasks"])]
    finally:
        store.close()
    suggested = task["suggestions"][rough]
    decisions = rating["decisions"]
    assert [d["decision"] for d in decisions] == ["edited"] + ["accepted"] * (len(words) - 1)
    assert decisions[0]["final"] == {"start": suggested[0]["start"], "end": suggested[0]["end"], "severity": "major",
                                     "missing": False, "category": chosen}
    length = len(text)
    assert {"start": start, "end": start + len(first_word), "severity": "major", "missing": False,
            "category": chosen} in rating["spans"]
    assert {"start": length, "end": length, "severity": "minor", "missing": True, "category": chosen} in rating["spans"]
    assert all(d["final"] in rating["spans"] for d in decisions)
    for again in sent_again:
        assert (again["spans"], again["decisions"]) == (rating["spans"], rating["decisions"])
    # Every item saved, every suggestion on its word and accepted with a category.
    for item in every:
        assert item["done"]
        for system, output in zip(item["systems"], item["outputs"]):
            for decision in item["ratings"][system]["decisions"]:
                final = decision["final"]
                assert output[final["start"]:final["end"]] in REJECTED and final["category"]
    assert reviewer.errors == [] and reviewer.outside == [], (reviewer.errors, reviewer.outside)
    reviewer.close()
