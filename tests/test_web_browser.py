"""The web front in a real browser (Debian's Chromium driven by
Playwright, nothing downloaded): a maintainer signs in and creates a
campaign over four stored runs; three reviewers sign in by token link or
form and rate their queues with the keyboard, one reloading mid-way and
resuming; the maintainer then reads per-system means with intervals,
Krippendorff's alpha and the controls' verdicts. No page logs an error or
asks for anything outside the front; a hostile output stays text; Arabic
runs right to left and syllabics carry their language."""
from __future__ import annotations

import re
import subprocess

import pytest

from apps.web.app import WebSettings
from gateway.store import RunStore, default_store_url
from tests.web_fixtures import ARABIC, corpus, served, store_four_runs, write_tokens

CORPUS_ID = "web-browser-crk"
REFERENCES = {entry["reference"] for entry in corpus(CORPUS_ID)["entries"]}


@pytest.fixture(scope="module")
def front(stack, tmp_path_factory):
    runs = store_four_runs(stack.gateway_address, CORPUS_ID)
    path = tmp_path_factory.mktemp("browser") / "tokens.yaml"
    tokens = write_tokens(path)
    with served(WebSettings(default_store_url(), str(path), secret="b" * 40)) as base:
        yield {"base": base, "tokens": tokens, "runs": runs}


class Watched:
    """A browser context whose pages may load only the front: every other
    request is aborted and recorded, and so is every console or page error."""

    def __init__(self, browser, base: str):
        self.base = base
        self.context = browser.new_context()
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", lambda message: message.type == "error" and self.errors.append(message.text))
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))

    def _route(self, route):
        if route.request.url.startswith(self.base):
            route.continue_()
        else:
            self.outside.append(route.request.url)
            route.abort()

    def close(self):
        self.context.close()


def score_for(text: str) -> int:
    """How the simulated reviewers judge an output they read: a reference
    copy is good, markup or another language bad, anything else middling."""
    if text in REFERENCES:
        return 9
    if "<script>" in text or text == ARABIC:
        return 1
    return 5


def rate_current_item(page) -> None:
    """Scores every output with the keyboard (digit, y/n, ] to the next), then Enter."""
    outputs = page.locator(".output .text")
    for index in range(outputs.count()):
        digit = score_for(outputs.nth(index).text_content())
        page.keyboard.press(str(digit))
        page.keyboard.press("y" if digit >= 7 else "n")
        page.keyboard.press("]")
    page.keyboard.press("Enter")


def test_a_campaign_from_creation_to_results_in_the_browser(browser, front):
    base, tokens, runs = front["base"], front["tokens"], front["runs"]
    watched = []

    # The maintainer signs in with a link (the token after '#') and creates the campaign.
    maintainer = Watched(browser, base)
    watched.append(maintainer)
    page = maintainer.page
    page.goto(f"{base}/signin#token={tokens.maintainer}")
    page.wait_for_url(f"{base}/")
    assert page.locator("#who").text_content().startswith("alice")
    page.goto(f"{base}/review")
    page.fill("#campaign-name", "browser pilot")
    for run_id in runs:
        page.check(f"#run-{run_id}")
    page.fill("#campaign-reviewers", "rater-1, rater-2, rater-3")
    page.fill("input[name=items]", "8")  # every entry: the hostile and Arabic outputs among them
    page.check("input[name=reference_review]")
    page.click("#create-campaign")
    page.wait_for_url(re.compile(r".*/review/campaigns/[0-9a-f]{12}$"))
    campaign_id = page.locator("#campaign-id").text_content()
    assert page.locator("#no-results").is_visible()

    # Three reviewers rate their queues by keyboard; rater-2 reloads mid-way.
    hostile_seen = rtl_checked = False
    for name, token in tokens.reviewers.items():
        reviewer = Watched(browser, base)
        watched.append(reviewer)
        page = reviewer.page
        page.goto(f"{base}/signin")
        page.fill("#token", token)
        page.click("#signin button[type=submit]")
        page.wait_for_url(f"{base}/")
        page.goto(f"{base}/review")
        page.click(f"a[href='/review/campaigns/{campaign_id}/rate']")
        rated = 0
        while True:
            page.wait_for_selector("#queue-done, #task")
            if page.locator("#queue-done").count():
                break
            assert page.evaluate("window.__pwned") is None
            texts = [text.text_content() for text in page.locator(".output .text").all()]
            if any("<script>" in text for text in texts):
                hostile_seen = True
                assert page.locator(".output .text", has_text="<script>window.__pwned = 1</script>").count() == 1
            if ARABIC in texts:
                arabic = page.locator(".output .text", has_text=ARABIC)
                assert arabic.evaluate("element => getComputedStyle(element).direction") == "rtl"
                rtl_checked = True
            assert page.locator(".output .text").first.get_attribute("lang").startswith("cr")
            if name == "rater-2" and rated == 2:
                # Half-scored, then reloaded: nothing of the item was saved; the same item comes back.
                progress = page.locator("#progress").text_content()
                page.keyboard.press("3")
                page.reload()
                assert page.locator("#progress").text_content() == progress
                assert page.locator("#score-shown-0").text_content() == "—"
                page.goto(f"{base}/review/campaigns/{campaign_id}/rate")
                assert page.locator("#progress").text_content() == progress
            if name == "rater-1" and rated == 0:
                # An error span: select the first output's first character, then 'm' (minor).
                page.evaluate("""() => {
                    const text = document.querySelector('#output-0 .text');
                    const range = document.createRange();
                    range.setStart(text.firstChild, 0);
                    range.setEnd(text.firstChild, 1);
                    window.getSelection().removeAllRanges();
                    window.getSelection().addRange(range);
                }""")
                page.keyboard.press("m")
                assert page.locator("#output-0 mark.minor").count() == 1
                page.focus("#score-0")
            address = page.url
            rate_current_item(page)
            # Reference review: the reference is shown once the item is rated; Enter goes on.
            page.wait_for_selector("#reference-panel:not([hidden])")
            assert page.locator("#reference").text_content() in REFERENCES
            if name == "rater-3" and rated == 0:
                page.select_option("#flag", "too_literal")
                page.fill("#flag-note", "follows the English word order")
                page.focus("#continue")
            page.keyboard.press("Enter")
            page.wait_for_url(lambda url: url != address)
            rated += 1
        assert rated >= 8
    assert hostile_seen and rtl_checked

    # The maintainer reads the results.
    page = maintainer.page
    page.goto(f"{base}/review/campaigns/{campaign_id}")
    rows = page.locator("#systems tbody tr")
    assert rows.count() == 4
    for row in rows.all():
        cells = row.locator("td").all_text_contents()
        assert re.fullmatch(r"-?[\d.]+ – -?[\d.]+", cells[5]), cells  # the mean's interval
    ranked = [row.locator("td").nth(2).text_content() for row in rows.all()]
    assert ranked[0] in ("system-0", "system-1") and ranked[-1] == "system-3"
    assert re.search(r"Krippendorff's alpha: -?[\d.]+", page.locator("#alpha").text_content())
    verdicts = page.locator("#raters tbody tr .verdict").all_text_contents()
    assert len(verdicts) == 3 and all(verdict in ("reliable", "unreliable", "not enough controls")
                                      for verdict in verdicts)
    wmt = page.locator("#raters tbody tr .wmt-verdict").all_text_contents()  # WMT's check, beside ours
    assert len(wmt) == 3 and all(verdict in ("passes", "fails", "too few controls") for verdict in wmt)
    flags = page.locator("#flags tbody tr").all_text_contents()
    assert len(flags) == 1 and "rater-3" in flags[0] and "follows the English word order" in flags[0]

    for seen in watched:
        assert seen.errors == [] and seen.outside == [], (seen.errors, seen.outside)
        seen.close()

    store = RunStore.open(default_store_url())
    try:
        spans = [rating["spans"] for rating in store.campaign_ratings(campaign_id) if rating["spans"]]
    finally:
        store.close()
    assert spans == [[{"start": 0, "end": 1, "severity": "minor"}]]


def test_a_runs_report_draws_its_charts_under_the_reports_policy(browser, front):
    """The run report's page, with its own content security policy: plotly.js
    inflated in the page (report/templates/charts.js) and every figure drawn,
    nothing asked of anywhere else, no error."""
    watched = Watched(browser, front["base"])
    page = watched.page
    answer = page.goto(f"{front['base']}/runs/{front['runs'][0]}/report")
    assert "unsafe-inline" in answer.headers["content-security-policy"]
    page.wait_for_function("() => document.documentElement.dataset.charts !== 'loading'")
    assert page.evaluate("() => document.documentElement.dataset.charts") == "drawn"
    drawn = page.evaluate("() => Array.from(document.querySelectorAll('.figure .js-plotly-plot'))"
                          ".map(plot => plot.data.length)")
    assert drawn and all(drawn)
    assert watched.errors == [] and watched.outside == []
    watched.close()


def test_the_fonts_the_pages_need_are_installed():
    """Syllabics and Arabic render with Debian's Noto fonts (fonts-noto-core, installed by `make test`)."""
    families = subprocess.run(["fc-list", ":", "family"], capture_output=True, text=True, check=True).stdout
    assert "Noto Sans Canadian Aboriginal" in families and "Noto Sans Arabic" in families
