"""Building a review campaign's tasks (gateway/review/design.py): a stratified
sample, balanced assignment, a reviewer's queue with its quality controls,
and the degraded outputs of the controls."""
from __future__ import annotations

import random
from collections import Counter

import pytest

from gateway.review.design import (CorpusItem, assign_items, control_counts, degrade, reviewer_tasks, sample_entries,
                                   span_length, written_without_spaces)
from gateway.review.protocol import CONTROL, RATE, REPEAT

DOMAINS = ("news", "health", "legal", "chat")
SYSTEMS = ["run-a", "run-b", "run-c", "run-d"]


def uneven_corpus() -> list[CorpusItem]:
    """300 entries over 5 difficulties x 4 domains, strata of unequal sizes (3 to 27 entries)."""
    corpus = []
    for difficulty in range(1, 6):
        for k, domain in enumerate(DOMAINS):
            size = 3 + 2 * difficulty + 3 * k + (difficulty * k) % 4
            corpus.extend(CorpusItem(f"d{difficulty}-{domain}-{i}", difficulty, domain) for i in range(size))
    random.Random(0).shuffle(corpus)  # strata interleaved, as in a corpus
    extra = 300 - len(corpus)
    corpus.extend(CorpusItem(f"none-{i}", None, None) for i in range(extra))
    return corpus


# --- sampling ------------------------------------------------------------------------------------------------------


def test_every_stratum_gets_its_proportional_share_within_one():
    corpus = uneven_corpus()
    assert len(corpus) == 300
    sizes = Counter((item.difficulty, item.domain) for item in corpus)
    assert len(sizes) == 21 and len(set(sizes.values())) > 5  # 20 strata and the unlabelled one, unequal
    sample = sample_entries(corpus, 60, seed=7)
    assert len(sample) == len(set(sample)) == 60
    by_id = {item.entry_id: item for item in corpus}
    drawn = Counter((by_id[entry_id].difficulty, by_id[entry_id].domain) for entry_id in sample)
    for stratum, size in sizes.items():
        share = 60 * size / 300
        assert abs(drawn[stratum] - share) < 1, (stratum, drawn[stratum], share)


def test_sample_is_in_corpus_order_and_deterministic():
    corpus = uneven_corpus()
    order = {item.entry_id: i for i, item in enumerate(corpus)}
    sample = sample_entries(corpus, 60, seed=7)
    assert sample == sorted(sample, key=order.get)
    assert sample_entries(corpus, 60, seed=7) == sample
    assert sample_entries(corpus, 60, seed=8) != sample


def test_sample_of_at_least_the_corpus_is_the_corpus():
    corpus = uneven_corpus()
    assert sample_entries(corpus, 300, seed=1) == [item.entry_id for item in corpus]
    assert sample_entries(corpus, 1000, seed=1) == [item.entry_id for item in corpus]
    assert sample_entries(corpus, 0, seed=1) == []


def test_sampling_errors():
    with pytest.raises(ValueError, match="^count: "):
        sample_entries(uneven_corpus(), -1, seed=1)
    with pytest.raises(ValueError, match="^entries: .*'x'"):
        sample_entries([CorpusItem("x", 1, None), CorpusItem("x", 2, None)], 1, seed=1)


# --- assignment ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("reviewers, overlap", [(3, 3), (4, 3), (7, 3), (5, 2), (6, 1)])
def test_assignment_is_balanced_with_distinct_reviewers(reviewers, overlap):
    entry_ids = [f"e{i}" for i in range(61)]
    names = [f"r{i}" for i in range(reviewers)]
    assignment = assign_items(entry_ids, names, overlap, seed=3)
    assert list(assignment) == entry_ids
    for chosen in assignment.values():
        assert len(chosen) == len(set(chosen)) == overlap
        assert set(chosen) <= set(names)
    loads = Counter(name for chosen in assignment.values() for name in chosen)
    assert sum(loads.values()) == 61 * overlap
    assert max(loads.values()) - min(loads[name] for name in names) <= 1


def test_assignment_is_deterministic_and_depends_on_the_seed():
    entry_ids = [f"e{i}" for i in range(40)]
    names = ["ana", "ben", "chloe", "dev", "eli"]
    assert assign_items(entry_ids, names, 3, seed=1) == assign_items(entry_ids, names, 3, seed=1)
    assert assign_items(entry_ids, names, 3, seed=1) != assign_items(entry_ids, names, 3, seed=2)


@pytest.mark.parametrize("reviewers, overlap, message", [
    (["a", "b"], 0, "^overlap: "),
    (["a", "b"], 3, r"^overlap: .*\(2\), got 3"),
    (["a", "b", "a"], 2, "^reviewers: .*'a'"),
    (["a", ""], 1, "^reviewers: an empty name"),
    (["a", "  "], 1, "^reviewers: an empty name"),
    ([], 1, "^reviewers: "),
])
def test_assignment_errors_name_the_field(reviewers, overlap, message):
    with pytest.raises(ValueError, match=message) as raised:
        assign_items(["e1", "e2"], reviewers, overlap, seed=1)
    assert "\n" not in str(raised.value)


# --- a reviewer's queue --------------------------------------------------------------------------------------------


def test_queue_rates_every_entry_once_then_the_controls_after_their_originals():
    entry_ids = [f"e{i}" for i in range(60)]
    tasks = reviewer_tasks(entry_ids, SYSTEMS, seed=11)
    assert [task.position for task in tasks] == list(range(len(tasks)))
    rated = [task.entry_id for task in tasks if task.kind == RATE]
    assert sorted(rated) == sorted(entry_ids) and rated != entry_ids  # each once, shuffled
    repeats = [task for task in tasks if task.kind == REPEAT]
    controls = [task for task in tasks if task.kind == CONTROL]
    assert len(repeats) == len(controls) == 6  # 10% of 60
    assert len({task.entry_id for task in repeats + controls}) == 12  # each on an entry of its own
    rate_position = {task.entry_id: task.position for task in tasks if task.kind == RATE}
    for task in repeats + controls:
        assert task.position > rate_position[task.entry_id] + 1, task  # after, and not side by side
    for task in tasks:
        assert sorted(task.systems) == sorted(SYSTEMS)
        assert (task.degraded in SYSTEMS) if task.kind == CONTROL else (task.degraded is None)


def test_columns_are_shuffled_from_task_to_task():
    tasks = reviewer_tasks([f"e{i}" for i in range(60)], SYSTEMS, seed=11)
    orders = Counter(task.systems for task in tasks)
    assert len(orders) >= 15  # of 24 orders, over 72 tasks
    first_columns = Counter(task.systems[0] for task in tasks)
    assert set(first_columns) == set(SYSTEMS)
    assert len({task.degraded for task in tasks if task.kind == CONTROL}) >= 2


def test_queue_is_deterministic():
    entry_ids = [f"e{i}" for i in range(30)]
    assert reviewer_tasks(entry_ids, SYSTEMS, seed=5) == reviewer_tasks(entry_ids, SYSTEMS, seed=5)
    assert reviewer_tasks(entry_ids, SYSTEMS, seed=5) != reviewer_tasks(entry_ids, SYSTEMS, seed=6)


@pytest.mark.parametrize("entries, expected", [(0, (0, 0)), (4, (0, 0)), (9, (1, 1)), (10, (1, 1)), (14, (1, 1)),
                                               (15, (2, 2)), (25, (3, 3)), (60, (6, 6)), (200, (20, 20))])
def test_control_counts(entries, expected):
    assert control_counts(entries) == expected


def test_small_and_odd_queues():
    assert control_counts(12, repeat_share=0.0, control_share=0.0) == (1, 1)  # at least one from 10 entries
    assert control_counts(3, repeat_share=1.0, control_share=1.0) == (3, 0)  # never more than the entries
    tasks = reviewer_tasks(["only"], ["run-a"], seed=1, repeat_share=1.0)
    assert [(task.kind, task.position) for task in tasks] == [(RATE, 0), (REPEAT, 1)]  # right after: no room
    assert reviewer_tasks([], SYSTEMS, seed=1) == []


@pytest.mark.parametrize("kwargs, message", [
    ({"systems": []}, "^systems: "),
    ({"systems": ["a", "a"]}, "^systems: "),
    ({"entry_ids": ["e1", "e1"]}, "^entry_ids: "),
    ({"repeat_share": 1.5}, "^repeat_share: "),
    ({"control_share": -0.1}, "^control_share: "),
])
def test_queue_errors(kwargs, message):
    arguments = {"entry_ids": ["e1", "e2"], "systems": SYSTEMS, "seed": 1} | kwargs
    with pytest.raises(ValueError, match=message):
        reviewer_tasks(**arguments)


# --- degraded outputs ----------------------------------------------------------------------------------------------

ENGLISH = [
    "The committee approved the new budget after a long debate on Tuesday evening.",
    "Patients should take the medicine twice a day with food.",
    "She said the train would arrive late because of the snow.",
    "The contract may be terminated by either party with thirty days notice in writing to the other.",
    "Thanks, see you tomorrow!",
]
DONORS = [
    "A small boat drifted slowly across the quiet harbour at dawn while gulls circled above the pier.",
    "Nobody expected the results to change so quickly.",
]


@pytest.mark.parametrize("words, length", [(1, 1), (3, 1), (4, 2), (5, 2), (6, 3), (8, 3), (9, 4), (15, 4),
                                           (16, 5), (20, 5), (21, 5), (40, 10)])
def test_span_lengths(words, length):
    assert span_length(words) == length


@pytest.mark.parametrize("text", ENGLISH)
@pytest.mark.parametrize("seed", range(5))
def test_degraded_text_differs_keeps_its_length_and_its_spacing(text, seed):
    donor = DONORS[seed % 2]
    degraded = degrade(text, donor, seed)
    assert degraded != text
    assert abs(len(degraded.split()) - len(text.split())) <= 2  # the same span length, unless the donor is short
    assert 0.6 * len(text) <= len(degraded) <= 1.4 * len(text)
    assert "  " not in degraded and degraded == degraded.strip()
    assert degrade(text, donor, seed) == degraded


def test_degraded_span_is_a_span_of_the_donor():
    text = "one two three four five six seven eight nine ten eleven twelve"  # 12 words: 4 replaced
    donor = "alpha beta gamma delta epsilon zeta eta theta"
    degraded = degrade(text, donor, seed=3).split()
    kept = [word for word in degraded if word in text.split()]
    taken = [word for word in degraded if word in donor.split()]
    assert len(kept) == 8 and len(taken) == 4
    assert " ".join(taken) in donor
    assert " ".join(kept) == " ".join(word for word in text.split() if word in kept)  # the rest in its order


def test_spacing_outside_the_span_is_kept():
    text = "first  line\nsecond line\tends here"
    degraded = degrade(text, "x y z", seed=1)
    assert degraded != text
    assert ("  " in degraded) + ("\n" in degraded) + ("\t" in degraded) >= 2  # a span of 2 eats at most one


@pytest.mark.parametrize("text, donor", [
    ("委员会在周二晚上经过长时间辩论后批准了新预算。", "一艘小船在黎明时分慢慢地穿过安静的港口。"),
    ("患者は食事と一緒に一日二回薬を飲んでください。", "誰も結果がこんなに早く変わるとは思わなかった。"),
    ("ผู้ป่วยควรกินยาวันละสองครั้งพร้อมอาหาร", "ไม่มีใครคาดคิดว่าผลลัพธ์จะเปลี่ยนเร็วขนาดนี้"),
])
@pytest.mark.parametrize("seed", range(3))
def test_texts_without_spaces_are_degraded_by_characters(text, donor, seed):
    assert written_without_spaces(text)
    degraded = degrade(text, donor, seed)
    assert degraded != text
    assert " " not in degraded  # no spaces brought in
    assert abs(len(degraded) - len(text)) <= 3  # characters for characters (marks ride with their base)
    assert any(char in donor and char not in text for char in degraded)


def test_a_text_with_spaces_is_degraded_by_words_even_with_a_few_cjk_letters():
    assert not written_without_spaces("The word 東京 means eastern capital in Japanese")
    assert written_without_spaces("私はPythonが好きです")
    assert not written_without_spaces("Hello")


@pytest.mark.parametrize("text, donor, expected", [
    ("Yes", "Maybe later", "Maybe"),  # a one-word text: the donor's first word
    ("Yes", "Yes indeed", "seY"),  # the same word: reversed
    ("noon", "noon", "noonnoon"),  # a palindrome and the same donor: doubled, still different
    ("  Yes.", "No.", "  No."),  # the spacing around the word kept
    ("", "Some donor text", "Some"),  # an empty output: the donor's first word
])
def test_one_word_texts(text, donor, expected):
    assert degrade(text, donor, seed=1) == expected


@pytest.mark.parametrize("text, donor", [
    ("ha ha ha", "ha"),  # every word alike: nothing to rearrange
    ("good morning", "good"),
    ("a b c d e f g", "a b c d e f g"),  # the donor is the text itself
    ("same text", ""),  # no donor at all
])
@pytest.mark.parametrize("seed", range(8))
def test_degraded_text_always_differs(text, donor, seed):
    assert degrade(text, donor, seed) != text


def test_nothing_to_degrade_with():
    with pytest.raises(ValueError, match="^text: "):
        degrade("", " ", seed=1)
