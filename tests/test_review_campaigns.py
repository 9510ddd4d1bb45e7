"""Community review campaigns end to end over the store, on SQLite and on
PostgreSQL: four real runs (scored by the session's stack, copied into a
fresh store), a campaign created as the gateway creates it, three simulated
raters with known biases and noise rating every task of their queues
(controls included) as the web front saves them, then the results, the
judgments `meta-eval --human campaign:ID` reads, and the run card's
`community_review` block. A 200-item campaign shows the "community
validated" label appear where the bar is met, and only there."""
from __future__ import annotations

import json

import numpy as np
import pytest

from apps.client import Client
from champollion.eval.v1 import gateway_pb2
from gateway.review import protocol
from gateway.review.campaigns import CampaignRequest, create_campaign, results_of
from gateway.review.ratings import checked_ratings
from gateway.store import RunStore, default_store_url
from tests.conftest import run_cli

CORPUS_ID = "review-script-eng-spa"
DOMAINS = ("ui", "admin", "edu", "lit", "news")
WORDS = ("la casa", "el perro", "un libro", "mi amiga", "el río", "la mesa", "su coche", "el tren", "una carta",
         "la ciudad", "el mercado", "la escuela")
# Each system's true quality (0-100), best first; systems drop more words the worse they are.
QUALITY = (86, 74, 61, 45)
# Each simulated rater's bias and scale (WMT's raters differ in both; z-scores remove them).
RATERS = {"rater-a": (-5.0, 0.9), "rater-b": (0.0, 1.0), "rater-c": (6.0, 1.1)}
NOISE_SD, ITEM_SD, DEGRADED_DROP = 6.0, 8.0, 25.0


def scripted_corpus(size: int) -> dict:
    entries = []
    for i in range(size):
        words = [WORDS[(i * 7 + k * 5) % len(WORDS)] for k in range(3 + i % 4)]
        entries.append({"id": f"rs-{i + 1:03d}", "source": f"sentence {i + 1} in English about " + ", ".join(words),
                        "reference": f"frase {i + 1}: " + ", ".join(words), "domain": DOMAINS[i % len(DOMAINS)],
                        "difficulty": 1 + (i * 3) % 5})
    return {"id": CORPUS_ID, "source_lang": "eng", "target_lang": "spa", "entries": entries}


def predictions(corpus: dict, system: int) -> list[dict]:
    """System k keeps the reference's first words and drops k of its last ones."""
    found = []
    for entry in corpus["entries"]:
        words = entry["reference"].split()
        found.append({"id": entry["id"], "prediction": " ".join(words[: max(2, len(words) - 2 * system)])})
    return found


@pytest.fixture(scope="module")
def scored(stack) -> dict:
    """A 210-entry dev corpus and four systems' runs in the session's store."""
    corpus = scripted_corpus(210)
    with Client(stack.gateway_address) as client:
        client.register_corpus(corpus, "dev")
        run_ids = [client.evaluate(gateway_pb2.CorpusRef(id=CORPUS_ID), predictions(corpus, system),
                                   {"model_slug": f"scripted-{system}"})["run_id"] for system in range(4)]
    return {"corpus": corpus, "runs": run_ids}


def copied_store(url: str, scored: dict) -> RunStore:
    """A fresh store holding the corpus and the four runs, outputs included."""
    source = RunStore.open(default_store_url())
    target = RunStore.open(url)
    try:
        target.register_corpus(scored["corpus"], "dev")
        for run_id in scored["runs"]:
            card = source.get_run(run_id)
            outputs = source.run_predictions(run_id)
            target.save_run(card, [[{**entry, "prediction": outputs[entry["id"]]} for entry in card["entries"]]])
    finally:
        source.close()
    return target


def rate_everything(store: RunStore, campaign: dict, quality: dict[str, float], seed: int = 2,
                    raters: dict = RATERS) -> None:
    """Every task of every reviewer's queue rated as the web front saves it:
    the system's quality, the item's difficulty, the rater's bias and scale,
    noise; a degraded output scored lower; usable when the score is 70+."""
    rng = np.random.default_rng(seed)
    item_offset = {}
    outputs = {run_id: store.run_predictions(run_id) for run_id in campaign["systems"]}
    for reviewer, (bias, scale) in raters.items():
        progress = store.reviewer_progress(campaign["campaign_id"])[reviewer]
        for position in range(progress["tasks"]):
            task = store.review_task(campaign["campaign_id"], reviewer, position)
            offset = item_offset.setdefault(task["entry_id"], rng.normal(0, ITEM_SD))
            form = {}
            for system, shown in zip(task["systems"], task["outputs"]):
                score = (quality[system] + offset - 60) * scale + 60 + bias + rng.normal(0, NOISE_SD)
                if shown != outputs[system][task["entry_id"]]:
                    score -= DEGRADED_DROP  # the control's degraded output
                score = float(np.clip(round(score), 0, 100))
                form[system] = {"score": score, "usable": score >= 70, "spans": []}
            store.save_ratings(campaign["campaign_id"], reviewer, position, checked_ratings(task["systems"], form))


def test_a_scripted_campaign_ranks_the_systems_and_meta_eval_reads_it(scored, store_url, capsys, tmp_path,
                                                                      run_card_validator):
    store = copied_store(store_url, scored)
    try:
        campaign = create_campaign(store, CampaignRequest("scripted", scored["runs"], list(RATERS), items=60,
                                                          overlap=3, seed=11))
        assert campaign["items"] == 60 and campaign["reviewers"] == list(RATERS)
        quality = dict(zip(scored["runs"], QUALITY))
        rate_everything(store, campaign, quality)
        found = results_of(store, campaign["campaign_id"])
    finally:
        store.close()
    results = found["results"]
    assert all(progress["next"] is None for progress in found["progress"].values())
    assert [system["system"] for system in results["systems"]] == scored["runs"]  # the true order
    assert results["items"] == 60 and results["reviewers_per_item"]["min"] == 3
    # The simulation's expected agreement is about 0.8 (score variance between items and systems
    # against the noise); seeds give 0.76-0.81.
    assert 0.65 <= results["alpha"]["da"] <= 0.9, results["alpha"]
    assert all(rater["reliable"] and not rater["excluded"] for rater in results["raters"])
    assert all(rater["control_pairs"] >= protocol.MIN_CONTROL_PAIRS for rater in results["raters"])
    for system in results["systems"]:
        low, high = system["mean_ci"]
        assert low <= system["mean"] <= high
    assert results["meets_bar"] == {"reviewers_per_item": True, "items": False, "agreement": True}
    assert not any(system["validates"] for system in results["systems"])

    capsys.readouterr()
    assert run_cli("meta-eval", "--human", f"campaign:{campaign['campaign_id']}", "--store", store_url,
                   "--resamples", "50", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    human = {system["name"]: system["human_score"] for system in report["systems"]}
    assert sorted(human, key=human.get, reverse=True) == scored["runs"]
    assert report["segments"]["used"] == 60
    assert report["metrics"]["chrf_plus_plus"]["system_kendall"]["value"] == pytest.approx(1.0)

    # The exported judgments name systems by run id: meta-eval matches the runs to them with no --system.
    exported = tmp_path / "campaign.tsv"
    assert run_cli("review", "results", campaign["campaign_id"], "--tsv", "-o", exported, "--store", store_url) == 0
    capsys.readouterr()
    assert run_cli("meta-eval", *scored["runs"], "--human", exported, "--store", store_url, "--resamples", "50",
                   "--metric-draws", "0", "--json") == 0
    from_file = json.loads(capsys.readouterr().out)
    assert [system["name"] for system in from_file["systems"]] == scored["runs"]
    assert from_file["metrics"]["chrf_plus_plus"]["system_kendall"]["value"] == pytest.approx(1.0)

    # The run card read back carries the campaign, and still says heuristic.
    capsys.readouterr()
    assert run_cli("show", scored["runs"][0], "--store", store_url, "--json", "--entries") == 0
    card = json.loads(capsys.readouterr().out)
    run_card_validator.validate(card)
    review = card["community_review"]
    assert review["validated"] is False and review["label"] == protocol.HEURISTIC_LABEL
    assert review["campaigns"][0]["reviewers"] == 3 and review["campaigns"][0]["items"] == 60
    assert "items: 60 rated, the bar is 200" in review["campaigns"][0]["reasons"]
    assert card["quality_tier_basis"].startswith("heuristic")


def test_a_campaign_meeting_the_bar_validates_a_usable_deployable_run(scored, tmp_path, capsys, run_card_validator):
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    store = copied_store(url, scored)
    try:
        campaign = create_campaign(store, CampaignRequest("the bar", scored["runs"], list(RATERS), items=200,
                                                          overlap=3, seed=5))
        rate_everything(store, campaign, dict(zip(scored["runs"], QUALITY)), seed=3)
        results = results_of(store, campaign["campaign_id"])["results"]
        tiers = {run["run_id"]: run["quality_tier"] for run in store.list_runs(CORPUS_ID)}
    finally:
        store.close()
    assert results["meets_bar"] == {"reviewers_per_item": True, "items": True, "agreement": True}
    best, second = results["systems"][0], results["systems"][1]
    assert best["system"] == scored["runs"][0] and best["validates"] and best["usable_share"] >= 0.8
    assert not second["validates"] and any("usable" in reason for reason in second["reasons"])

    capsys.readouterr()
    assert run_cli("leaderboard", "--dataset", CORPUS_ID, "--store", url, "--json") == 0
    rows = {row["run_id"]: row for row in json.loads(capsys.readouterr().out)}
    for run_id in scored["runs"]:
        expected = (protocol.VALIDATED_LABEL if run_id == best["system"] and tiers[run_id] in
                    protocol.VALIDATABLE_TIERS else protocol.HEURISTIC_LABEL)
        assert rows[run_id]["community_review"] == expected
    assert tiers[best["system"]] in protocol.VALIDATABLE_TIERS, tiers  # the reference copy scores deployable+
    assert run_cli("show", best["system"], "--store", url, "--json", "--entries") == 0
    card = json.loads(capsys.readouterr().out)
    run_card_validator.validate(card)
    assert card["community_review"]["validated"] is True
    assert card["quality_tier_basis"].startswith(f"{protocol.VALIDATED_LABEL}: campaign {campaign['campaign_id']}")


def test_campaigns_refuse_what_cannot_be_reviewed(scored, stack, tmp_path):
    store = copied_store(f"sqlite:///{tmp_path / 'runs.sqlite'}", scored)
    try:
        for request, message in (
            (CampaignRequest("one run", scored["runs"][:1], ["a"]), "run_ids: give two or more"),
            (CampaignRequest("overlap", scored["runs"], ["a", "b"], overlap=3), "overlap: each item needs 3"),
            (CampaignRequest("no reviewer", scored["runs"], []), "reviewers: give one or more"),
            (CampaignRequest("", scored["runs"], ["a"]), "name: required"),
            (CampaignRequest("x" * 201, scored["runs"], ["a"]), "name: required, at most 200"),
        ):
            with pytest.raises(ValueError, match=message):
                create_campaign(store, request)
        assert store.list_campaigns() == []
    finally:
        store.close()
    # Through the gateway: INVALID_ARGUMENT naming the field, CLI exit 2 with one line.
    assert run_cli("review", "create", "--name", "x", "--run", scored["runs"][0], "--reviewers", "a") == 2
    assert run_cli("review", "create", "--name", "x", "--run", "0000000000", "--run", scored["runs"][0],
                   "--reviewers", "a") == 2
