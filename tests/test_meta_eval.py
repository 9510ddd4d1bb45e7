"""`champollion meta-eval` (issue 18): agreement of each metric with human
judgments, on run cards the session's gateway makes from small runs whose
quality is ordered by construction (each system damages more entries than
the one before it), and the judgment formats and their errors."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import sacrebleu
from scipy import stats as scipy_stats

from apps.meta_eval.human_judgments import JudgmentError, read_judgments
from champollion.core.degenerate import floor_outputs
from gateway.card.composite import weighted_composite
from tests.conftest import EXAMPLE, evaluate, make_request

# Best first: system k damages the first DAMAGED_PER_RANK * k entries.
SYSTEMS = ("sys-best", "sys-good", "sys-fair", "sys-poor")
DAMAGED_PER_RANK = 3
ENTRIES = 12
MQM = "mqm_newstest2021_ende.avg_seg_scores.tsv"


def damaged(rank: int, position: int) -> bool:
    return position < DAMAGED_PER_RANK * rank


@pytest.fixture(scope="module")
def entries() -> list[dict]:
    corpus = json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8"))
    chosen = [entry for entry in corpus["entries"] if len(entry["reference"].split()) >= 4][:ENTRIES]
    assert len(chosen) == ENTRIES
    return [{"id": entry["id"], "source": entry["source"], "reference": entry["reference"]} for entry in chosen]


def prediction(entry: dict, rank: int, position: int) -> str:
    """The reference, or without its last two words."""
    words = entry["reference"].split()
    return " ".join(words[:-2]) if damaged(rank, position) else entry["reference"]


@pytest.fixture(scope="module")
def cards(gateway, entries, tmp_path_factory, run_card_validator) -> dict[str, dict]:
    """System name -> {"path", "card"}."""
    folder = tmp_path_factory.mktemp("meta-eval-cards")
    made = {}
    for rank, name in enumerate(SYSTEMS):
        predictions = [{"id": entry["id"], "prediction": prediction(entry, rank, position)}
                       for position, entry in enumerate(entries)]
        card = evaluate(gateway, make_request(entries, predictions, meta={"model_slug": name}))
        run_card_validator.validate(card)
        path = folder / f"{name}.json"
        path.write_text(json.dumps(card), encoding="utf-8")
        made[name] = {"path": path, "card": card}
    return made


def card_paths(cards) -> list:
    return [cards[name]["path"] for name in SYSTEMS]


def segment_errors(rank: int, position: int) -> int:
    """What a human finds: two missing words where the entry is damaged."""
    return 2 if damaged(rank, position) else 0


def write_system_score(path, score) -> None:
    """`system<TAB>score`, each system's lines in segment order."""
    lines = [f"{name}\t{score(rank, position)}" for rank, name in enumerate(SYSTEMS) for position in range(ENTRIES)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def meta_eval_json(cli, *args) -> dict:
    result = cli("meta-eval", *args, "--resamples", "50", "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def error_line(cli, *args) -> str:
    result = cli("meta-eval", *args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("champollion: error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def oriented(report: dict, metric_id: str) -> list[float]:
    """The systems' metric scores, higher better (as meta-eval correlates them)."""
    sign = -1.0 if report["metrics"][metric_id]["negated"] else 1.0
    scores = report["metrics"][metric_id]["system_scores"]
    return [sign * scores[system["name"]] for system in report["systems"]]


def test_humans_ordering_systems_as_built_agree_perfectly(cli, cards, tmp_path):
    human = tmp_path / "human.tsv"
    write_system_score(human, lambda rank, position: -segment_errors(rank, position))
    report = meta_eval_json(cli, "--human", human, *card_paths(cards))
    assert report["segments"] == {"used": ENTRIES, "total": ENTRIES, "metric_segments": "all"}
    assert [system["name"] for system in report["systems"]] == list(SYSTEMS)
    for metric_id in ("chrf_plus_plus", "bleu", "ter", "composite"):
        measures = report["metrics"][metric_id]
        assert measures["system_kendall"]["value"] == pytest.approx(1.0), metric_id
        assert measures["pairwise_accuracy"]["value"] == pytest.approx(1.0), metric_id
        assert measures["system_pearson"]["value"] > 0.9, metric_id
    # TER is lower-is-better: negated before correlating, reported as the card has it.
    assert report["metrics"]["ter"]["negated"] is True
    assert report["metrics"]["chrf_plus_plus"]["negated"] is False


def test_humans_ordering_systems_in_reverse_disagree_perfectly(cli, cards, tmp_path):
    human = tmp_path / "human.tsv"
    write_system_score(human, lambda rank, position: segment_errors(rank, position))
    report = meta_eval_json(cli, "--human", human, *card_paths(cards))
    for metric_id in ("chrf_plus_plus", "ter", "composite"):
        assert report["metrics"][metric_id]["system_kendall"]["value"] == pytest.approx(-1.0)
        assert report["metrics"][metric_id]["pairwise_accuracy"]["value"] == pytest.approx(0.0)


def test_lower_is_better_turns_error_counts_around(cli, cards, tmp_path):
    human = tmp_path / "errors.tsv"
    write_system_score(human, segment_errors)
    report = meta_eval_json(cli, "--human", human, "--lower-is-better", *card_paths(cards))
    assert report["human"]["lower_is_better"] is True
    assert report["metrics"]["chrf_plus_plus"]["system_kendall"]["value"] == pytest.approx(1.0)


def test_every_correlation_is_scipys_on_the_system_scores(cli, cards, tmp_path):
    """Humans who tie two systems and swap two others: tau-b and Pearson as
    scipy computes them on the reported scores, pairwise accuracy by count."""
    human_means = {"sys-best": 0.0, "sys-good": -3.0, "sys-fair": -1.0, "sys-poor": -3.0}
    human = tmp_path / "ties.tsv"
    write_system_score(human, lambda rank, position: human_means[SYSTEMS[rank]])
    report = meta_eval_json(cli, "--human", human, *card_paths(cards))
    humans = [system["human_score"] for system in report["systems"]]
    assert humans == [human_means[name] for name in SYSTEMS]
    for metric_id, measures in report["metrics"].items():
        if None in measures["system_scores"].values():
            assert measures["system_kendall"]["value"] is None, metric_id
            continue
        scores = oriented(report, metric_id)
        if len(set(scores)) == 1:  # constant over the systems: no correlation
            assert measures["system_kendall"]["value"] is None
            continue
        tau_b = scipy_stats.kendalltau(scores, humans, variant="b").statistic
        assert measures["system_kendall"]["value"] == pytest.approx(tau_b), metric_id
        assert measures["system_pearson"]["value"] == pytest.approx(scipy_stats.pearsonr(scores, humans).statistic)
        pairs = [(i, j) for i in range(len(scores)) for j in range(i + 1, len(scores))]
        agreeing = sum(math.copysign(1, scores[i] - scores[j]) * (scores[i] != scores[j])
                       == math.copysign(1, humans[i] - humans[j]) * (humans[i] != humans[j]) for i, j in pairs)
        assert measures["pairwise_accuracy"]["value"] == pytest.approx(agreeing / len(pairs)), metric_id
    # chrF++ orders the systems as built: one tie and one swap leave tau-b strictly between 0 and 1.
    assert 0 < report["metrics"]["chrf_plus_plus"]["system_kendall"]["value"] < 1


def test_all_segments_judged_gives_the_cards_own_corpus_scores(cli, cards, tmp_path):
    human = tmp_path / "human.tsv"
    write_system_score(human, lambda rank, position: -segment_errors(rank, position))
    report = meta_eval_json(cli, "--human", human, *card_paths(cards))
    for name in SYSTEMS:
        scores = cards[name]["card"]["scores"]
        for metric_id in ("chrf_plus_plus", "bleu", "ter", "composite"):
            assert report["metrics"][metric_id]["system_scores"][name] == pytest.approx(scores[metric_id])


def test_segments_without_a_human_score(cli, cards, entries, tmp_path):
    """`system<TAB>segment<TAB>score` by entry id: a segment some system
    lacks, or has as None, counts in no system's human score; the metric
    scores cover the whole test set (WMT's convention) or, with
    --metric-segments judged, the judged segments alone."""
    unjudged_for_one = {entries[1]["id"]}  # sys-poor has no line for it
    unjudged_for_all = {entries[5]["id"], entries[7]["id"]}  # None everywhere
    lines = []
    for rank, name in enumerate(SYSTEMS):
        for position, entry in enumerate(entries):
            if name == "sys-poor" and entry["id"] in unjudged_for_one:
                continue
            score = "None" if entry["id"] in unjudged_for_all else -segment_errors(rank, position)
            lines.append(f"{name}\t{entry['id']}\t{score}")
    human = tmp_path / "by-id.tsv"
    human.write_text("\n".join(lines) + "\n", encoding="utf-8")
    used = [position for position, entry in enumerate(entries)
            if entry["id"] not in unjudged_for_one | unjudged_for_all]
    chrf = sacrebleu.CHRF(word_order=2)
    for metric_segments, positions in (("judged", used), ("all", range(ENTRIES))):
        report = meta_eval_json(cli, "--human", human, "--metric-segments", metric_segments, *card_paths(cards))
        assert report["human"]["format"] == "system-segment-score"
        assert report["segments"] == {"used": ENTRIES - 3, "total": ENTRIES, "metric_segments": metric_segments}
        for rank, name in enumerate(SYSTEMS):
            expected = chrf.corpus_score([prediction(entries[p], rank, p) for p in positions],
                                         [[entries[p]["reference"] for p in positions]]).score
            assert report["metrics"]["chrf_plus_plus"]["system_scores"][name] == pytest.approx(expected)
        # Human scores: means over the judged segments either way.
        human_scores = {system["name"]: system["human_score"] for system in report["systems"]}
        assert human_scores == pytest.approx(
            {name: np.mean([-segment_errors(rank, p) for p in used]) for rank, name in enumerate(SYSTEMS)})
    table = cli("meta-eval", "--human", human, "--resamples", "20", *card_paths(cards))
    assert table.exit_code == 0, table.stderr
    assert f"human scores over {ENTRIES - 3} of {ENTRIES} segments" in table.stdout
    assert "metric scores over all segments" in table.stdout
    assert "chrf_plus_plus" in table.stdout and "ter (negated)" in table.stdout


def test_segment_kendall_is_one_tau_over_every_system_segment_pair(cli, cards, entries, tmp_path):
    human = tmp_path / "human.tsv"
    write_system_score(human, lambda rank, position: -segment_errors(rank, position) - 0.1 * position)
    report = meta_eval_json(cli, "--human", human, *card_paths(cards))
    values, humans = [], []
    for rank, name in enumerate(SYSTEMS):
        for position, entry in enumerate(cards[name]["card"]["entries"]):
            values.append(entry["scores"]["chrf_plus_plus"])
            humans.append(-segment_errors(rank, position) - 0.1 * position)
    expected = scipy_stats.kendalltau(values, humans, variant="b").statistic
    assert report["metrics"]["chrf_plus_plus"]["segment_kendall"]["value"] == pytest.approx(expected)
    # BLEU has no per-entry value in the card: no segment-level correlation.
    assert report["metrics"]["bleu"]["segment_kendall"] is None


def test_bootstrap_intervals_are_seeded_and_hold_the_value(cli, cards, tmp_path):
    human = tmp_path / "human.tsv"
    write_system_score(human, lambda rank, position: -segment_errors(rank, position) - 0.1 * position)
    first = meta_eval_json(cli, "--human", human, "--seed", "7", *card_paths(cards))
    again = meta_eval_json(cli, "--human", human, "--seed", "7", *card_paths(cards))
    other = meta_eval_json(cli, "--human", human, "--seed", "8", *card_paths(cards))
    assert first == again
    assert first["bootstrap"]["seed"] == 7 and first["bootstrap"]["resamples"] == 50
    segment = first["metrics"]["chrf_plus_plus"]["segment_kendall"]
    assert segment["ci_lower"] <= segment["value"] <= segment["ci_upper"]
    assert segment != other["metrics"]["chrf_plus_plus"]["segment_kendall"]


def test_stored_runs_are_read_by_id(cli, stack, cards, tmp_path):
    human = tmp_path / "human.tsv"
    write_system_score(human, lambda rank, position: -segment_errors(rank, position))
    run_ids = [cards[name]["card"]["run_id"] for name in SYSTEMS]
    by_id = meta_eval_json(cli, "--human", human, "--gateway", stack.gateway_address, *run_ids)
    by_file = meta_eval_json(cli, "--human", human, *card_paths(cards))
    assert by_id["metrics"] == by_file["metrics"]


# --- formats --------------------------------------------------------------------

def test_mqm_file_reads_as_released(tmp_path):
    """The WMT21 release: a space-separated header, then system TAB score
    SPACE seg_id; scores already negated (0 best); None: not judged."""
    path = tmp_path / MQM
    path.write_text("system mqm_avg_score seg_id\nNemo\t-5.000000 1\nNemo\tNone 2\nref-A\t-0.000000 1\n",
                    encoding="utf-8")
    judgments = read_judgments(path)
    assert judgments.format == "mqm" and not judgments.by_position
    assert judgments.scores == {"Nemo": {"1": -5.0, "2": None}, "ref-A": {"1": 0.0}}


def test_system_score_lines_count_segments_per_system(tmp_path):
    path = tmp_path / "wmt.tsv"
    path.write_text("a\t0.5\nb\t0.1\na\t0.7\nb\t0.2\n", encoding="utf-8")
    judgments = read_judgments(path)
    assert judgments.format == "system-score" and judgments.by_position
    assert judgments.scores == {"a": {"1": 0.5, "2": 0.7}, "b": {"1": 0.1, "2": 0.2}}


def test_segments_by_position_when_they_are_not_entry_ids(cli, cards, tmp_path):
    human = tmp_path / "positions.tsv"
    human.write_text("".join(f"{name}\t{position + 1}\t{-segment_errors(rank, position)}\n"
                             for rank, name in enumerate(SYSTEMS) for position in range(ENTRIES)), encoding="utf-8")
    report = meta_eval_json(cli, "--human", human, *card_paths(cards))
    assert report["segments"]["used"] == ENTRIES
    assert report["metrics"]["chrf_plus_plus"]["system_kendall"]["value"] == pytest.approx(1.0)


@pytest.mark.parametrize("text, line, message", [
    ("a\t0.5\na\t0.5\t3\t4\n", 2, "expected system<TAB>score, got 4 field(s)"),
    ("a\t0.5\nb\tgood\n", 2, "score: not a number: 'good'"),
    ("a\t0.5\nb\tnan\n", 2, "score: must be finite"),
    ("a\tx1\t0.5\nb\tx1\t0.5\na\tx1\t0.3\n", 3, "system 'a' segment 'x1' is judged twice"),
    ("a 0.5\n", 1, "cannot tell the format"),
    ("system mqm_avg_score seg_id\nNemo\t-1.0\n", 2, "expected system score seg_id, got 2 field(s)"),
])
def test_bad_judgment_lines_name_file_and_line(tmp_path, text, line, message):
    path = tmp_path / "bad.tsv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(JudgmentError) as raised:
        read_judgments(path)
    assert str(raised.value).startswith(f"{path}:{line}: ")
    assert message in str(raised.value)


# --- refusals, one line and exit 2 --------------------------------------------------

def test_a_bad_line_through_the_cli(cli, cards, tmp_path):
    human = tmp_path / "bad.tsv"
    human.write_text("sys-best\t1.0\nsys-good\tgood\n", encoding="utf-8")
    assert f"{human}:2: score: not a number" in error_line(cli, "--human", human, *card_paths(cards))


def test_unmatched_systems(cli, cards, tmp_path):
    human = tmp_path / "renamed.tsv"
    write_system_score(human, lambda rank, position: -segment_errors(rank, position))
    text = human.read_text(encoding="utf-8").replace("sys-poor\t", "worst-system\t")
    human.write_text(text, encoding="utf-8")
    poor = cards["sys-poor"]["path"]
    line = error_line(cli, "--human", human, *card_paths(cards))
    assert f"{poor}: system 'sys-poor' has no judgments" in line and "--system" in line
    report = meta_eval_json(cli, "--human", human, *card_paths(cards), "--system", f"{poor}=worst-system")
    assert report["systems"][-1] == {"name": "worst-system", "card": str(poor), "human_score": pytest.approx(-2.0 * 9 / ENTRIES)}
    assert "none of the run cards" in error_line(cli, "--human", human, *card_paths(cards),
                                                 "--system", "elsewhere.json=sys-best")
    assert "expected CARD=NAME" in error_line(cli, "--human", human, *card_paths(cards), "--system", "sys-best")
    twice = error_line(cli, "--human", human, *card_paths(cards), "--system", f"{poor}=sys-best")
    assert "both matched to system 'sys-best'" in twice


def test_mixed_corpus_versions_are_refused(cli, gateway, cards, entries, tmp_path):
    other_entries = entries[:-1]
    card = evaluate(gateway, make_request(other_entries, meta={"model_slug": "sys-other"}))
    other = tmp_path / "other.json"
    other.write_text(json.dumps(card), encoding="utf-8")
    human = tmp_path / "human.tsv"
    write_system_score(human, lambda rank, position: -segment_errors(rank, position))
    human.write_text(human.read_text(encoding="utf-8") + "sys-other\t0\n", encoding="utf-8")
    line = error_line(cli, "--human", human, cards["sys-best"]["path"], other)
    assert "different corpus versions" in line


def test_segments_that_are_neither_ids_nor_positions(cli, cards, tmp_path):
    human = tmp_path / "human.tsv"
    human.write_text("sys-best\tnowhere\t1\nsys-good\tnowhere\t0\n", encoding="utf-8")
    line = error_line(cli, "--human", human, cards["sys-best"]["path"], cards["sys-good"]["path"])
    assert f"{human}: segment 'nowhere' is neither an entry id" in line


# --- the composite from the adequacy-gated statistics ---------------------------------

def composite_of_values(card: dict) -> float:
    """The composite of the card's own (ungated) metric values with its weights."""
    weights = card["composite_coverage"]["weights"]
    return float(weighted_composite({m: np.array([card["scores"][m]]) for m in weights}, weights)[0])


def test_inadequate_entries_enter_the_composite_at_their_worst(cli, cards, tmp_path):
    """Every system but the best has entries the length gate refuses: with
    every segment judged, meta-eval's composite is the card's, not the one
    the ungated statistics give; a card without the marks (older than the
    gates) reads as it did."""
    poor = cards["sys-poor"]["card"]
    assert any(entry["scores"]["adequate"] is False for entry in poor["entries"])
    assert poor["scores"]["composite"] < composite_of_values(poor) - 1e-6
    human = tmp_path / "human.tsv"
    write_system_score(human, lambda rank, position: -segment_errors(rank, position))
    report = meta_eval_json(cli, "--human", human, *card_paths(cards))
    for name in SYSTEMS:
        assert report["metrics"]["composite"]["system_scores"][name] == pytest.approx(
            cards[name]["card"]["scores"]["composite"]), name

    unmarked = json.loads(json.dumps(poor))
    for entry in unmarked["entries"]:
        entry["scores"].pop("adequate")
        entry["scores"].pop("adequacy_gates", None)
    old = tmp_path / "sys-poor-unmarked.json"
    old.write_text(json.dumps(unmarked), encoding="utf-8")
    paths = [*card_paths(cards)[:-1], old]
    report = meta_eval_json(cli, "--human", human, *paths)
    assert report["metrics"]["composite"]["system_scores"]["sys-poor"] == pytest.approx(composite_of_values(poor))


# --- degenerate systems (--floor) ------------------------------------------------------

FLOOR = ("constant", "source_copy", "half_reference", "empty")


def hand_card(name: str, exact: list[int], flagged: list[int], adequate: bool = True,
              version: str = "v-hand") -> dict:
    """A card of four entries with two metrics, statistics written by hand:
    exact_match_rate [match, 1]; hallucination_rate [flagged words, 4 words]
    (lower is better); the composite weighs them equally."""
    entries = [{"id": f"e{k}", "stats": {"exact_match_rate": [match, 1], "hallucination_rate": [words, 4]},
                "scores": {} if adequate else {"adequate": False, "adequacy_gates": {"repeated": "by hand"}}}
               for k, (match, words) in enumerate(zip(exact, flagged), start=1)]
    return {"model_slug": name, "dataset": {"id": "hand", "version": version}, "entries": entries,
            "composite_coverage": {"weights": {"exact_match_rate": 0.5, "hallucination_rate": 0.5}}}


def write_cards(folder, *cards: dict) -> list:
    paths = []
    for card in cards:
        path = folder / f"{card['model_slug']}-{card['dataset']['version']}.json"
        path.write_text(json.dumps(card), encoding="utf-8")
        paths.append(path)
    return paths


@pytest.fixture
def hand_made(tmp_path):
    """Two judged systems and a degenerate one that never matches and never
    hallucinates, its every entry inadequate:

                   exact match   hallucination (negated)   composite (gated)
      real-a       3/4 = 0.75    2/16 = 0.125 (-0.125)     (0.75 + 0.875) / 2 = 0.8125
      real-b       1/4 = 0.25    4/16 = 0.25  (-0.25)      (0.25 + 0.75) / 2  = 0.5
      degenerate   0             0            (0)          0 (every input at its worst)

    Exact match ranks it below both; hallucination above both (the best it
    beats: real-a); the composite below both, where the ungated statistics
    would give (0 + 1) / 2 = 0.5, a tie with real-b."""
    real = write_cards(tmp_path, hand_card("real-a", [1, 1, 1, 0], [0, 0, 1, 1]),
                       hand_card("real-b", [1, 0, 0, 0], [1, 1, 1, 1]))
    floor = write_cards(tmp_path, hand_card("degenerate", [0, 0, 0, 0], [0, 0, 0, 0], adequate=False))
    human = tmp_path / "hand.tsv"
    human.write_text("".join(f"{name}\t{score}\n" for name, score in (("real-a", 1), ("real-b", 0))
                             for _ in range(4)), encoding="utf-8")
    return human, real, floor


def test_floor_by_hand(cli, hand_made):
    human, real, floor = hand_made
    report = meta_eval_json(cli, "--human", human, *real, "--floor", *floor)
    metrics = report["metrics"]
    assert metrics["composite"]["system_scores"] == pytest.approx({"real-a": 0.8125, "real-b": 0.5})
    assert report["floor_systems"] == [{"name": "degenerate", "card": str(floor[0])}]
    below = {"degenerate": 1, "below_every_real_system": 1, "above_a_real_system": []}
    assert metrics["exact_match_rate"]["floor"] == below
    assert metrics["composite"]["floor"] == below
    assert metrics["hallucination_rate"]["negated"] is True
    assert metrics["hallucination_rate"]["floor"] == {
        "degenerate": 1, "below_every_real_system": 0,
        "above_a_real_system": [{"degenerate": "degenerate", "beats": "real-a"}]}

    table = cli("meta-eval", "--human", human, "--resamples", "0", *real, "--floor", *floor)
    assert table.exit_code == 0, table.stderr
    rows = {line.split()[0]: line.split() for line in table.stdout.splitlines() if line.startswith(
        ("exact_match_rate", "hallucination_rate", "composite"))}
    assert rows["exact_match_rate"][-1] == "1/1" and rows["hallucination_rate"][-1] == "0/1"
    assert rows["composite"][-1] == "1/1"
    assert "  hallucination_rate ranks degenerate at or above real-a" in table.stdout
    assert "exact_match_rate ranks" not in table.stdout


def test_floor_ties_rank_with_the_real_system_and_names_come_from_system(cli, hand_made, tmp_path):
    """Without the inadequacy marks the degenerate composite ties real-b's
    (0.5): not below every real system. --system names a --floor card."""
    human, real, _ = hand_made
    unmarked = write_cards(tmp_path, hand_card("unmarked", [0, 0, 0, 0], [0, 0, 0, 0]))
    report = meta_eval_json(cli, "--human", human, *real, "--floor", *unmarked,
                            "--system", f"{unmarked[0]}=always-silent")
    assert report["metrics"]["composite"]["floor"] == {
        "degenerate": 1, "below_every_real_system": 0,
        "above_a_real_system": [{"degenerate": "always-silent", "beats": "real-b"}]}
    without = meta_eval_json(cli, "--human", human, *real)
    assert without["floor_systems"] is None and without["metrics"]["composite"]["floor"] is None


def test_floor_cards_of_another_corpus_version_are_refused(cli, hand_made, tmp_path):
    human, real, floor = hand_made
    elsewhere = write_cards(tmp_path, hand_card("other", [0, 0, 0, 0], [0, 0, 0, 0], version="v-other"))
    line = error_line(cli, "--human", human, *real, "--floor", *floor, *elsewhere)
    assert f"--floor: {elsewhere[0]}: not of the judged cards' corpus version" in line
    assert str(floor[0]) not in line
    assert "given as a judged system's card too" in error_line(cli, "--human", human, *real, "--floor", real[0])


@pytest.fixture(scope="module")
def floor_cards(gateway, entries, tmp_path_factory) -> dict[str, dict]:
    """Kind -> {"path", "card"}: the degenerate systems of
    champollion.core.degenerate on the judged systems' corpus."""
    folder = tmp_path_factory.mktemp("meta-eval-floor")
    sources, references = [entry["source"] for entry in entries], [entry["reference"] for entry in entries]
    made = {}
    for kind in FLOOR:
        predictions = [{"id": entry["id"], "prediction": output}
                       for entry, output in zip(entries, floor_outputs(kind, sources, references))]
        card = evaluate(gateway, make_request(entries, predictions, meta={"model_slug": kind}))
        path = folder / f"{kind}.json"
        path.write_text(json.dumps(card), encoding="utf-8")
        made[kind] = {"path": path, "card": card}
    return made


def floor_from_card_scores(cards, floor_cards, metric_id: str, negated: bool) -> dict:
    """What the cards' own scores say of the degenerate systems."""
    sign = -1.0 if negated else 1.0
    real = {name: sign * cards[name]["card"]["scores"][metric_id] for name in SYSTEMS
            if cards[name]["card"]["scores"].get(metric_id) is not None}
    ranked, below, above = 0, 0, []
    for kind in FLOOR:
        value = floor_cards[kind]["card"]["scores"].get(metric_id)
        if value is None:
            continue
        ranked += 1
        beaten = [name for name in real if real[name] <= sign * value]
        if beaten:
            above.append({"degenerate": kind, "beats": max(beaten, key=real.get)})
        else:
            below += 1
    return {"degenerate": ranked, "below_every_real_system": below, "above_a_real_system": above}


def test_floor_of_scored_degenerate_systems(cli, cards, floor_cards, tmp_path):
    """With every segment judged, each metric's floor is what the cards' own
    scores give; the composite and chrF++ rank every degenerate system below
    every real one, some fluency signal does not."""
    human = tmp_path / "human.tsv"
    write_system_score(human, lambda rank, position: -segment_errors(rank, position))
    report = meta_eval_json(cli, "--human", human, *card_paths(cards),
                            "--floor", *(floor_cards[kind]["path"] for kind in FLOOR))
    for metric_id, measures in report["metrics"].items():
        assert measures["floor"] == floor_from_card_scores(cards, floor_cards, metric_id, measures["negated"]), \
            metric_id
    for metric_id in ("composite", "chrf_plus_plus"):
        assert report["metrics"][metric_id]["floor"]["below_every_real_system"] == len(FLOOR)
    assert any(measures["floor"]["above_a_real_system"] for measures in report["metrics"].values())
    # The degenerate systems enter no measure.
    without = meta_eval_json(cli, "--human", human, *card_paths(cards))
    assert without["metrics"].keys() == report["metrics"].keys()
    for metric_id, measures in without["metrics"].items():
        assert {**measures, "floor": None} == {**report["metrics"][metric_id], "floor": None}, metric_id
