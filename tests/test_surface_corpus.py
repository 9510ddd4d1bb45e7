"""Surface family end to end through the gateway: corpus values equal
sacreBLEU's corpus scores on the same texts, across batch boundaries."""
import random

import pytest
import sacrebleu
from sacrebleu.metrics import BLEU, CHRF, TER

from tests.conftest import evaluate, make_request

WORDS = {
    "spa": "el la los gato perro casa verde rojo corre salta come duerme hoy mañana muy rápido".split(),
    "kor": "나는 학교에 갔다 고양이가 밥을 먹었다 오늘 내일 아주 빨리 집으로 돌아왔다".split(),
    "zho": "我 今天 去 学校 猫 吃 饭 了 明天 很 快 回家 朋友 看书".split(),
}


def synthetic_corpus(language: str, size: int, seed: int = 7):
    """References and noisy predictions (word swaps, drops, empty outputs)."""
    rng = random.Random(seed)
    words = WORDS[language]
    entries, predictions = [], []
    joiner = "" if language == "zho" else " "
    for index in range(size):
        reference = [rng.choice(words) for _ in range(rng.randint(3, 14))]
        prediction = [w if rng.random() > 0.3 else rng.choice(words) for w in reference]
        if rng.random() < 0.2:
            prediction = prediction[: len(prediction) // 2]
        if index % 37 == 0:
            prediction = []
        entries.append({"id": f"e{index}", "reference": joiner.join(reference)})
        predictions.append({"id": f"e{index}", "prediction": joiner.join(prediction)})
    return entries, predictions


@pytest.mark.parametrize(
    "language, tokenizer, asian", [("spa", "13a", False), ("kor", "ko-mecab", True), ("zho", "zh", True)]
)
def test_corpus_scores_equal_sacrebleu(gateway, language, tokenizer, asian):
    entries, predictions = synthetic_corpus(language, 300)
    card = evaluate(gateway, make_request(entries, predictions, target_lang=language, batch_size=64))
    hypotheses = [p["prediction"] for p in predictions]
    references = [[e["reference"] for e in entries]]
    scores = card["scores"]
    assert scores["chrf_plus_plus"] == pytest.approx(
        CHRF(word_order=2).corpus_score(hypotheses, references).score, abs=1e-6
    )
    assert scores["bleu"] == pytest.approx(BLEU(tokenize=tokenizer).corpus_score(hypotheses, references).score, abs=1e-6)
    assert scores["ter"] == pytest.approx(TER(asian_support=asian).corpus_score(hypotheses, references).score, abs=1e-6)
    assert f"tok:{tokenizer}" in card["signatures"]["bleu"]
    # Entry-level chrF++ is sacreBLEU's sentence score.
    first = card["entries"][1]
    assert first["scores"]["chrf_plus_plus"] == pytest.approx(
        sacrebleu.sentence_chrf(hypotheses[1], [references[0][1]], word_order=2).score, abs=1e-9
    )


IDENTITY = {
    "spa": "El gato negro duerme tranquilo junto a la ventana abierta.",
    "kor": "고양이가 열린 창문 옆에서 조용히 잠을 자고 있습니다.",
    "iku": "ᐃᓄᒃᑎᑐᑦ ᐅᖃᐅᓯᖅ ᓄᓇᕗᒻᒥ ᐊᑐᖅᑕᐅᔪᖅ ᐃᓄᖕᓄᑦ ᐊᒥᓱᓄᑦ",
    "zho": "黑色的猫在打开的窗户旁边安静地睡觉。",
    "jpn": "黒い猫が開いた窓のそばで静かに眠っています。",
}


@pytest.mark.parametrize("language", sorted(IDENTITY))
def test_identical_prediction_scores_perfectly_in_every_script(gateway, language):
    entries = [{"id": "only", "reference": IDENTITY[language]}]
    card = evaluate(gateway, make_request(entries, target_lang=language))
    scores = card["scores"]
    assert scores["bleu"] == pytest.approx(100.0)
    assert scores["chrf_plus_plus"] == pytest.approx(100.0)
    assert scores["ter"] == 0.0
    assert scores["exact_match_rate"] == 1.0


def test_match_normalisation_nfc_and_whitespace_but_not_case(gateway):
    decomposed = "Cafe\u0301  con   leche"  # e + combining acute, runs of spaces
    entries = [
        {"id": "a", "reference": "Café con leche"},
        {"id": "b", "reference": "Café con leche"},
        {"id": "c", "reference": "Pan tostado", "acceptable_variants": ["Tostada"]},
    ]
    predictions = [
        {"id": "a", "prediction": f"  {decomposed}\n"},
        {"id": "b", "prediction": "café con leche"},
        {"id": "c", "prediction": "Tostada "},
    ]
    card = evaluate(gateway, make_request(entries, predictions))
    per_entry = {e["id"]: e["scores"] for e in card["entries"]}
    assert per_entry["a"]["exact_match_rate"] == 1.0
    assert per_entry["b"]["exact_match_rate"] == 0.0
    assert per_entry["c"]["exact_match_rate"] == 0.0
    assert per_entry["c"]["equivalent_match_rate"] == 1.0
    assert card["scores"]["exact_matches"] == 1
    assert card["scores"]["equivalent_matches"] == 2


def test_equivalent_match_is_null_without_variants(gateway):
    entries = [{"id": "a", "reference": "Hola mundo"}]
    card = evaluate(gateway, make_request(entries))
    assert card["scores"]["equivalent_match_rate"] is None
    assert card["scores"]["equivalent_matches"] is None
    assert "equivalent_match_rate" not in card["entries"][0]["scores"]
    assert any("equivalent_match_rate is null" in w for w in card["warnings"])


def test_length_ratio_is_the_mean_of_entry_ratios(gateway):
    entries = [{"id": "a", "reference": "abcd"}, {"id": "b", "reference": "abcdefgh"}]
    predictions = [{"id": "a", "prediction": "abcdefgh"}, {"id": "b", "prediction": "abcd"}]
    card = evaluate(gateway, make_request(entries, predictions))
    assert card["scores"]["length_ratio"] == pytest.approx((2.0 + 0.5) / 2)


def with_extra_references(entries, counts, seed=5):
    """Each entry given `counts[i]` references in all: the primary and noisy
    rewrites of it (words swapped, dropped, moved)."""
    rng = random.Random(seed)
    out = []
    for entry, count in zip(entries, counts):
        words = entry["reference"].split()
        extra = []
        for _ in range(count - 1):
            rewrite = [w if rng.random() > 0.3 else rng.choice(WORDS["spa"]) for w in words]
            if len(rewrite) > 3 and rng.random() < 0.5:
                rewrite = rewrite[2:] + rewrite[:2]
            extra.append(" ".join(rewrite) or "hoy")
        out.append({**entry, "extra_references": extra})
    return out


@pytest.mark.parametrize("counts, nrefs", [([3] * 150, "3"), ([2] * 64 + [3] * 86, "var")])
def test_several_references_equal_sacrebleu_reference_streams(gateway, counts, nrefs):
    """Batches of 32: with 2 then 3 references per entry, batches say nrefs:2
    or nrefs:3 and the run says 'var', as sacreBLEU does."""
    base, predictions = synthetic_corpus("spa", len(counts))
    entries = with_extra_references(base, counts)
    card = evaluate(gateway, make_request(entries, predictions, target_lang="spa", batch_size=32))
    hypotheses = [p["prediction"] for p in predictions]
    width = max(counts)
    streams = [[([e["reference"], *e["extra_references"]] + [None] * width)[k] for e in entries] for k in range(width)]
    scores = card["scores"]
    assert scores["chrf_plus_plus"] == pytest.approx(CHRF(word_order=2).corpus_score(hypotheses, streams).score, abs=1e-9)
    assert scores["bleu"] == pytest.approx(BLEU().corpus_score(hypotheses, streams).score, abs=1e-9)
    assert scores["ter"] == pytest.approx(TER().corpus_score(hypotheses, streams).score, abs=1e-9)
    # The primary stream alone scores differently: the further references count.
    assert scores["bleu"] != pytest.approx(BLEU().corpus_score(hypotheses, streams[:1]).score, abs=1e-6)
    for metric_id in ("chrf_plus_plus", "bleu", "ter"):
        assert card["signatures"][metric_id].startswith(f"nrefs:{nrefs}|")


def test_exact_match_and_length_ratio_use_the_primary_equivalent_match_any_reference(gateway):
    entries = [
        {"id": "a", "reference": "El gato duerme", "extra_references": ["El gato está durmiendo"]},
        {"id": "b", "reference": "Pan tostado", "acceptable_variants": ["Tostada"]},
    ]
    predictions = [{"id": "a", "prediction": "El gato está durmiendo"}, {"id": "b", "prediction": "Pan tostado"}]
    card = evaluate(gateway, make_request(entries, predictions))
    scores = {e["id"]: e["scores"] for e in card["entries"]}
    assert scores["a"]["exact_match_rate"] == 0.0
    assert scores["a"]["equivalent_match_rate"] == 1.0
    assert scores["a"]["length_ratio"] == pytest.approx(len("El gato está durmiendo") / len("El gato duerme"))
    assert scores["a"]["ter"] == 0.0  # the second reference is matched exactly
    assert scores["b"]["exact_match_rate"] == 1.0


def test_compiled_and_pure_sacrebleu_statistics_give_the_same_card(gateway, monkeypatch):
    from champollion.core.sacrebleu_adapter import PURE_SACREBLEU_ENV, native_statistics_enabled

    assert native_statistics_enabled(), "champollion.core.native._stats is not built (g++?)"
    base, predictions = synthetic_corpus("spa", 80, seed=3)
    request = make_request(with_extra_references(base, [1, 2, 3] * 26 + [1, 1]), predictions, batch_size=32)
    compiled = evaluate(gateway, request)
    monkeypatch.setenv(PURE_SACREBLEU_ENV, "1")
    calls = []
    extract = TER._extract_corpus_statistics
    monkeypatch.setattr(TER, "_extract_corpus_statistics", lambda self, *a: calls.append(1) or extract(self, *a))
    pure = evaluate(gateway, request)
    assert calls, "the second run did not use sacreBLEU's own TER"
    for metric_id in ("chrf_plus_plus", "bleu", "ter"):
        assert compiled["scores"][metric_id] == pure["scores"][metric_id]
        assert [e["scores"].get(metric_id) for e in compiled["entries"]] == [
            e["scores"].get(metric_id) for e in pure["entries"]
        ]
    assert compiled["signatures"] == pure["signatures"]
