"""All pairs of several runs (issue 34) through the front doors: the
ComparePairs RPC (stored runs, cards, both; its refusals, each naming the
field or the run; its upload in parts), `compare --all-pairs` and
`evaluate --all-pairs`, against the session's stack. The statistics are
tests/test_pairs.py's; the secret tiers' rules are tests/test_gaming.py's."""
from __future__ import annotations

import json

import grpc
import numpy as np
import pytest

from apps.client import Client, InvalidSettings, NotFound, RequestRefused
from apps.client.upload import pairs_parts
from apps.inputs import build_request, load_corpus, load_meta, load_predictions
from champollion.core.run_card import message_to_dict, run_card_to_proto
from champollion.eval.v1 import gateway_pb2, gateway_pb2_grpc
from gateway.card.multiplicity import benjamini_hochberg, holm
from tests.conftest import EXAMPLE, evaluate

# Four systems on the example corpus: its predictions, the same with one
# entry reworded (no different from it), lower-cased, and half of them cut short.
SYSTEMS = ("base", "same", "lower", "short")
# What the tests compute (sacreBLEU's metrics, and the composite over them): a quick run.
METRICS = ("chrf", "bleu", "em")
RESAMPLES = 300
# The example corpus under an id of its own: these runs stay off the example's board, which other tests read.
CORPUS_ID = "all-pairs-eng-spa"


def _predictions(system: str) -> list[dict]:
    lines = [json.loads(line) for line in (EXAMPLE / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    changed = []
    for index, prediction in enumerate(lines):
        text = prediction.get("prediction")
        if text is not None:
            if system == "same" and index == 0:
                text += " ."
            elif system == "lower":
                text = text.lower()
            elif system == "short" and index % 2:
                text = " ".join(text.split()[:2])
        changed.append({**prediction, "prediction": text} if text is not None else prediction)
    return changed


@pytest.fixture(scope="module")
def systems(gateway, tmp_path_factory) -> dict:
    """name -> {"card": the run card, "path": its file, "predictions": its predictions file}, and
    "corpus": the corpus file."""
    folder = tmp_path_factory.mktemp("pairs")
    corpus_file = folder / "corpus.json"
    corpus_file.write_text(json.dumps({**json.loads((EXAMPLE / "corpus.json").read_text(encoding="utf-8")),
                                       "id": CORPUS_ID}), encoding="utf-8")
    corpus = load_corpus(corpus_file)
    made = {"corpus": corpus_file}
    for name in SYSTEMS:
        predictions = folder / f"{name}.jsonl"
        predictions.write_text("".join(json.dumps(line) + "\n" for line in _predictions(name)), encoding="utf-8")
        meta = load_meta(EXAMPLE / "meta.json")
        meta.model_slug = f"pairs-{name}"
        request = build_request(corpus, load_predictions(predictions), meta)
        request.options.metrics.extend(METRICS)
        card = evaluate(gateway, request)
        path = folder / f"{name}.json"
        path.write_text(json.dumps(card), encoding="utf-8")
        made[name] = {"card": card, "path": path, "predictions": predictions}
    return made


def _ids(systems) -> list[str]:
    return [systems[name]["card"]["run_id"] for name in SYSTEMS]


def refusal(call) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as refused:
        call()
    return refused.value


# --- the RPC ---------------------------------------------------------------------------

def test_stored_runs_cards_or_both_are_compared_alike(stack, systems):
    cards = [systems[name]["card"] for name in SYSTEMS]
    with Client(stack.gateway_address) as client:
        by_id = client.compare_pairs(_ids(systems), list(SYSTEMS), resamples=RESAMPLES)
        by_card = client.compare_pairs(cards, list(SYSTEMS), resamples=RESAMPLES)
        mixed = client.compare_pairs([_ids(systems)[0], *cards[1:3], _ids(systems)[3]], list(SYSTEMS),
                                     resamples=RESAMPLES)
    assert by_id == by_card == mixed
    assert by_id["names"] == list(SYSTEMS) and by_id["dataset_version"] == cards[0]["dataset"]["version"]
    assert set(by_id["metrics"]) == {"bleu", "chrf_plus_plus", "composite", "exact_match_rate"}
    chrf = by_id["metrics"]["chrf_plus_plus"]
    assert chrf["values"] == pytest.approx([card["scores"]["chrf_plus_plus"] for card in cards])
    assert [(pair["first"], pair["second"]) for pair in chrf["pairs"]] == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3),
                                                                           (2, 3)]
    # base and same differ on one entry of 36: no significant difference, one cluster; short is worst.
    verdict = {(pair["first"], pair["second"]): pair for pair in chrf["pairs"]}
    assert not verdict[0, 1]["significant"] and verdict[0, 3]["significant"]
    assert chrf["clusters"][0] == chrf["clusters"][1] < chrf["clusters"][3]
    assert by_id["test"] == {"method": "bs", "samples": RESAMPLES, "seed": 12345, "alpha": 0.05,
                             "difference_ci": "95% paired bootstrap percentile interval", "correction": "holm",
                             "tie_threshold": 0.0, "p_values": "resampled"}


def test_names_default_to_the_run_ids_and_metrics_to_every_one_compared(stack, systems):
    ids = _ids(systems)[:2]
    with Client(stack.gateway_address) as client:
        answer = client.compare_pairs([ids[0][:8], systems["same"]["card"]], metrics=["chrf", "composite"],
                                      method="ar", resamples=200)
    assert answer["names"] == [ids[0][:8], ids[1][:12]]
    assert list(answer["metrics"]) == ["chrf_plus_plus", "composite"]
    # Approximate randomization: no interval of the runs or of a difference.
    assert answer["metrics"]["composite"]["ci"] == [] and answer["metrics"]["composite"]["pairs"][0]["difference_ci"] \
        is None


@pytest.mark.parametrize("change, code, message", [
    (lambda request: request.runs.pop(), grpc.StatusCode.INVALID_ARGUMENT,
     "runs: all pairs compares 2 to 32 runs, got 1"),
    (lambda request: setattr(request, "correction", "bonferroni"), grpc.StatusCode.INVALID_ARGUMENT,
     "correction: must be one of holm, bh, none (empty: holm), got 'bonferroni'"),
    (lambda request: setattr(request, "tie_threshold", -1), grpc.StatusCode.INVALID_ARGUMENT,
     "tie_threshold: must be a finite number ≥ 0, got -1.0"),
    (lambda request: setattr(request, "method", "t-test"), grpc.StatusCode.INVALID_ARGUMENT,
     "method must be one of bs, ar (empty: bs), got 't-test'"),
    (lambda request: request.metrics.append("length_ratio"), grpc.StatusCode.INVALID_ARGUMENT,
     "metrics: 'length_ratio' is not a metric the paired test compares"),
    (lambda request: request.runs.add(name="empty"), grpc.StatusCode.INVALID_ARGUMENT,
     "runs[2]: give a stored run's run_id or a card"),
    (lambda request: request.runs.add(run_id="feedfacefeedface"), grpc.StatusCode.NOT_FOUND,
     "'feedfacefeedface'"),
])
def test_bad_requests_are_refused_naming_the_field_or_the_run(gateway, systems, change, code, message):
    request = gateway_pb2.ComparePairsRequest(runs=[gateway_pb2.PairedRun(run_id=run_id) for run_id in
                                                    _ids(systems)[:2]])
    change(request)
    error = refusal(lambda: gateway.ComparePairs(request, timeout=60))
    assert error.code() == code and message in error.details(), error.details()


def test_runs_of_different_corpus_versions_are_refused_naming_them(stack, systems):
    other = json.loads(json.dumps(systems["lower"]["card"]))
    other["dataset"]["version"] = "0" * 64
    version = systems["base"]["card"]["dataset"]["version"]
    with Client(stack.gateway_address) as client:
        with pytest.raises(RequestRefused) as refused:
            client.compare_pairs([_ids(systems)[0], other, systems["short"]["card"]], ["base", "other", "short"])
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert refused.value.details == (f"different corpus versions (base, short on {version[:12]}…; other on "
                                     f"{'0' * 12}…): scores compare only within a version")


def test_cards_larger_than_one_message_are_compared_in_parts(stack, gateway, systems):
    """With a 16 KiB limit on what the client sends, ComparePairs is refused
    and the upload in parts answers what ComparePairs answers unlimited."""
    request = gateway_pb2.ComparePairsRequest(resamples=RESAMPLES, correction="bh", runs=[
        gateway_pb2.PairedRun(card=run_card_to_proto(systems[name]["card"]), name=name) for name in SYSTEMS[1:]])
    request.runs.insert(0, gateway_pb2.PairedRun(run_id=_ids(systems)[0], name="base"))
    assert request.ByteSize() > 16 * 1024
    expected = message_to_dict(gateway.ComparePairs(request, timeout=60))
    with grpc.insecure_channel(stack.gateway_address, options=[("grpc.max_send_message_length", 16 * 1024)]) as channel:
        limited = gateway_pb2_grpc.GatewayStub(channel)
        assert refusal(lambda: limited.ComparePairs(request, timeout=60)).code() == \
            grpc.StatusCode.RESOURCE_EXHAUSTED
        parts = list(pairs_parts(request, entries_per_part=10))
        assert len(parts) == 1 + 3 * 4 and {part.run for part in parts[1:]} == {1, 2, 3}
        assert message_to_dict(limited.ComparePairsUpload(iter(parts), timeout=60)) == expected
        # Entries for the stored run (position 0), or for no run: refused, naming the part's field.
        for run in (0, 7):
            stray = gateway_pb2.ComparePairsPart(run=run, entries=parts[1].entries)
            error = refusal(lambda: limited.ComparePairsUpload(iter([parts[0], stray]), timeout=60))
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith(f"run: {run} ")
        error = refusal(lambda: limited.ComparePairsUpload(iter(parts[1:]), timeout=60))
        assert error.details() == "request: the first part of the upload carries the request"


def test_the_client_refuses_names_that_do_not_match_the_runs(stack, systems):
    with Client(stack.gateway_address) as client:
        with pytest.raises(InvalidSettings, match="names: 1 given for 2 runs"):
            client.compare_pairs(_ids(systems)[:2], ["one"])
        with pytest.raises(NotFound, match="no-such-run"):
            client.compare_pairs([_ids(systems)[0], "no-such-run"])


# --- compare --all-pairs -------------------------------------------------------------------

def _paths(systems) -> list[str]:
    return [str(systems[name]["path"]) for name in SYSTEMS]


def test_compare_all_pairs_prints_the_matrix_win_tie_loss_and_clusters(cli, stack, systems):
    args = ("compare", *_paths(systems), "--all-pairs", "--resamples", RESAMPLES, "--gateway", stack.gateway_address)
    result = cli(*args)
    assert result.exit_code == 0, result.stderr
    answer = json.loads(cli(*args, "--json").stdout)
    lines = result.stdout.splitlines()
    assert lines[0].startswith("4 systems, every pair") and lines[0].endswith("p-values corrected: Holm")
    # The composite, then chrF++: each a matrix of the four systems, best first, and a table of the six pairs.
    headers = [line for line in lines if "p (holm) of each pair" in line]
    assert headers == ["composite (higher is better): p (holm) of each pair",
                       "chrf_plus_plus (higher is better): p (holm) of each pair"]
    start = lines.index(headers[1])
    assert lines[start + 1].split() == ["system", "value", "cluster", "rank", "1", "2", "3", "4"]
    chrf = answer["metrics"]["chrf_plus_plus"]
    best_first = sorted(range(4), key=lambda i: -chrf["values"][i])
    verdict = {}
    for pair in chrf["pairs"]:
        verdict[pair["first"], pair["second"]] = verdict[pair["second"], pair["first"]] = pair
    for number, (line, run) in enumerate(zip(lines[start + 3:start + 7], best_first), start=1):
        # "N name value [ci_lower, ci_upper] cluster rank p p p p"
        cells = line.split()
        assert cells[:3] == [str(number), SYSTEMS[run], f"{chrf['values'][run]:.2f}"]
        ranks = chrf["rank_ranges"][run]
        assert cells[-6:-4] == [str(chrf["clusters"][run]), str(ranks["best"]) if ranks["best"] == ranks["worst"]
                                else f"{ranks['best']}-{ranks['worst']}"]
        assert cells[-4:] == ["—" if other == run else
                              f"{verdict[run, other]['p_corrected']:.4f}{'*' if verdict[run, other]['significant'] else ''}"
                              for other in best_first]
    # base and same: one cluster, ranks 1-2; short alone at the bottom.
    assert [SYSTEMS[run] for run in best_first] == ["base", "same", "lower", "short"]
    assert chrf["clusters"] == [1, 1, 2, 3] and chrf["rank_ranges"][3] == {"best": 4, "worst": 4}
    head = lines.index("", start + 7) + 1
    assert lines[head].split() == ["pair", "difference", "p", "p", "(holm)", "wins", "ties", "losses"]
    pairs = [line.split() for line in lines[head + 2:head + 8]]
    assert [row[:3] for row in pairs] == [["base", "vs", "same"], ["base", "vs", "lower"], ["base", "vs", "short"],
                                          ["same", "vs", "lower"], ["same", "vs", "short"], ["lower", "vs", "short"]]
    for row in pairs:
        better, worse = SYSTEMS.index(row[0]), SYSTEMS.index(row[2])
        pair = verdict[better, worse]
        wins, losses = (pair["first_better"], pair["second_better"]) if pair["first"] == better else \
            (pair["second_better"], pair["first_better"])
        assert row[4:] == [f"{pair['p_value']:.4f}", f"{pair['p_corrected']:.4f}{'*' if pair['significant'] else ''}",
                           f"{wins:.1%}", f"{pair['ties']:.1%}", f"{losses:.1%}"]
    assert lines[head + 8] == "" and lines[head + 9].startswith("p: each pair's paired bootstrap p-value")


def test_compare_all_pairs_json_p_values_are_pairwise_compares(cli, stack, systems):
    paths = _paths(systems)
    for method in ("bs", "ar"):
        answer = json.loads(cli("compare", *paths, "--all-pairs", "--method", method, "--resamples", RESAMPLES,
                                "--gateway", stack.gateway_address, "--json").stdout)
        assert answer["names"] == list(SYSTEMS) and answer["test"]["method"] == method
        for metric_id, block in answer["metrics"].items():
            assert len(block["pairs"]) == 6
        for pair in answer["metrics"]["chrf_plus_plus"]["pairs"]:
            alone = json.loads(cli("compare", paths[pair["first"]], paths[pair["second"]], "--method", method,
                                   "--resamples", RESAMPLES, "--gateway", stack.gateway_address, "--json").stdout)
            for metric_id, block in answer["metrics"].items():
                same = block["pairs"][answer["metrics"]["chrf_plus_plus"]["pairs"].index(pair)]
                assert same["p_value"] == alone["metrics"][metric_id]["p_value"], (method, metric_id, pair)
                assert same["difference"] == pytest.approx(alone["metrics"][metric_id]["difference"])


def test_holm_and_benjamini_hochberg_correct_the_same_p_values(cli, stack, systems):
    answers = {correction: json.loads(cli("compare", *_paths(systems), "--all-pairs", "--correction", correction,
                                          "--resamples", RESAMPLES, "--gateway", stack.gateway_address,
                                          "--json").stdout)["metrics"]["chrf_plus_plus"]["pairs"]
               for correction in ("none", "holm", "bh")}
    raw = np.array([pair["p_value"] for pair in answers["none"]])
    assert [pair["p_corrected"] for pair in answers["none"]] == list(raw)
    assert [pair["p_value"] for pair in answers["holm"]] == [pair["p_value"] for pair in answers["bh"]] == list(raw)
    held, discovered = (np.array([pair["p_corrected"] for pair in answers[c]]) for c in ("holm", "bh"))
    assert held == pytest.approx(holm(raw)) and discovered == pytest.approx(benjamini_hochberg(raw))
    # The five clear differences sit at the bootstrap's smallest p, 1/(R+1): Holm multiplies it by up to 6,
    # Benjamini-Hochberg by 6/5 at most; neither moves the pair that is not different.
    assert (discovered <= held).all() and (discovered < held).sum() >= 5
    assert raw.min() == pytest.approx(1 / (RESAMPLES + 1)) and held.min() == pytest.approx(6 / (RESAMPLES + 1))


def test_compare_metric_picks_what_is_compared_and_printed(cli, stack, systems):
    args = ("compare", *_paths(systems), "--all-pairs", "--metric", "bleu", "--resamples", RESAMPLES, "--gateway",
            stack.gateway_address)
    assert list(json.loads(cli(*args, "--json").stdout)["metrics"]) == ["bleu"]
    text = cli(*args).stdout
    assert "bleu (higher is better)" in text and "composite (" not in text and "chrf_plus_plus (" not in text


def test_compare_of_three_runs_without_all_pairs_compares_each_with_the_first(cli, stack, systems):
    paths = _paths(systems)[:3]
    answer = json.loads(cli("compare", *paths, "--resamples", RESAMPLES, "--gateway", stack.gateway_address,
                            "--json").stdout)
    assert [(c["baseline"], c["system"]) for c in answer["comparisons"]] == [("base", "same"), ("base", "lower")]
    alone = json.loads(cli("compare", paths[0], paths[2], "--resamples", RESAMPLES, "--gateway",
                           stack.gateway_address, "--json").stdout)
    assert {key: value for key, value in answer["comparisons"][1].items() if key not in ("baseline", "system")} == alone
    text = cli("compare", *paths, "--resamples", RESAMPLES, "--gateway", stack.gateway_address).stdout
    assert text.count(f" against {paths[0]} ") == 2


@pytest.mark.parametrize("args, message", [
    (["{base}"], "compare needs two runs or more (run card files or stored run ids)"),
    (["{base}", "{lower}", "--correction", "bh"], "--correction: goes with --all-pairs"),
    (["{base}", "{lower}", "--tie-threshold", "0.5"], "--tie-threshold: goes with --all-pairs"),
    (["{base}", "{lower}", "--all-pairs", "--tie-threshold", "-1"], "tie_threshold: must be a finite number ≥ 0"),
    (["{base}", "{lower}", "--all-pairs", "--metric", "nope"], "metrics: 'nope' is not a metric the paired test"),
    (["{base}", "{other}", "{short}", "--all-pairs"], "different corpus versions (base, short on "),
])
def test_compare_refusals_are_one_line_exit_2(cli, stack, systems, tmp_path, args, message):
    other = json.loads(json.dumps(systems["lower"]["card"]))
    other["dataset"]["version"] = "f" * 64
    files = {name: systems[name]["path"] for name in SYSTEMS}
    files["other"] = tmp_path / "other.json"
    files["other"].write_text(json.dumps(other), encoding="utf-8")
    result = cli("compare", *(arg.format(**files) for arg in args), "--gateway", stack.gateway_address)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    if "different corpus" in message:
        assert f"other on {'f' * 12}…" in result.stderr


def test_compare_all_pairs_of_stored_runs_writes_out(cli, stack, systems, tmp_path):
    out = tmp_path / "pairs.json"
    ids = [run_id[:10] for run_id in _ids(systems)]
    result = cli("compare", *ids, "--all-pairs", "--tie-threshold", "1", "--resamples", RESAMPLES, "-o", out,
                 "--gateway", stack.gateway_address)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.rstrip().endswith(f"comparison written to {out}")
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["names"] == ids and written["test"]["tie_threshold"] == 1.0
    # A chrF++ difference of at most 1 point on an entry is a tie: more ties than with no threshold.
    exact = json.loads(cli("compare", *ids, "--all-pairs", "--resamples", RESAMPLES, "--gateway",
                           stack.gateway_address, "--json").stdout)
    for wide, strict in zip(written["metrics"]["chrf_plus_plus"]["pairs"], exact["metrics"]["chrf_plus_plus"]["pairs"]):
        assert wide["ties"] >= strict["ties"] and wide["p_value"] == strict["p_value"]
        assert wide["first_better"] + wide["ties"] + wide["second_better"] == pytest.approx(1.0)


# --- evaluate --all-pairs --------------------------------------------------------------------

def test_evaluate_all_pairs_compares_every_pair_of_the_systems(cli, stack, systems):
    predictions = [systems[name]["predictions"] for name in ("base", "lower", "short")]
    args = ("evaluate", systems["corpus"], *predictions, "-m", ",".join(METRICS), "--all-pairs",
            "--correction", "bh", "--resamples", RESAMPLES, "--gateway", stack.gateway_address)
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.stderr
    answer = json.loads(result.stdout)
    assert "comparisons" not in answer and [run["name"] for run in answer["runs"]] == ["base", "lower", "short"]
    pairs = answer["pairs"]
    assert pairs["names"] == ["base", "lower", "short"] and pairs["test"]["correction"] == "bh"
    assert len(pairs["metrics"]["chrf_plus_plus"]["pairs"]) == 3
    assert pairs["metrics"]["chrf_plus_plus"]["values"] == pytest.approx(
        [run["scores"]["chrf_plus_plus"] for run in answer["runs"]])
    # The stored runs were compared: as compare --all-pairs of their ids gives it.
    ids = [run["run_id"] for run in answer["runs"]]
    again = json.loads(cli("compare", *ids, "--all-pairs", "--correction", "bh", "--resamples", RESAMPLES,
                           "--gateway", stack.gateway_address, "--json").stdout)
    assert again["metrics"] == pairs["metrics"]
    text = cli(*args).stdout
    assert text.splitlines()[0].startswith("3 systems · ") and "p (bh) of each pair" in text
    assert "Baseline: base" not in text  # the each-against-the-first table is not printed


def test_evaluate_all_pairs_needs_several_systems(cli, stack, systems):
    result = cli("evaluate", systems["corpus"], systems["base"]["predictions"], "--all-pairs", "--gateway",
                 stack.gateway_address)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "--all-pairs: compares several systems (give several --hyp or PREDICTIONS files)" in result.stderr
