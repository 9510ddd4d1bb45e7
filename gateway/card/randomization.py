"""Paired approximate randomization over per-entry sufficient statistics, as
sacreBLEU's `--paired-ar` (`sacrebleu.significance._paired_ar_test`) does it.

In each trial every entry's two outputs are swapped with probability 1/2:
pseudo-system A takes the baseline's statistics where the trial's mask is
True and the system's elsewhere, pseudo-system B the reverse. The masks are
sacreBLEU's — one stream from ``default_rng(seed).integers(2, size=(trials,
N), dtype=bool)`` — drawn here in chunks, so memory stays bounded whatever
the corpus size. Nothing is re-scored: a pseudo-system's summed statistics
are ``B_total + mask @ (A - B)`` (exact for integer statistics), and its value
comes from the same reducer as every corpus value.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np


# Memory for one chunk of masks (bools, then floats): bounded whatever the
# corpus size.
CHUNK_BYTES = 32 * 2**20
# numpy draws 32 bools from each 32-bit word and drops a word's unused bits
# when a call ends: chunks of a multiple of 32 bools keep sacreBLEU's stream.
_WORD_BITS = 32


def swap_masks(entry_count: int, trials: int, seed: int, chunk_bytes: int = CHUNK_BYTES) -> Iterator[np.ndarray]:
    """Yields (chunk x entry_count) bool matrices, together the rows of
    sacreBLEU's single ``integers(2, size=(trials, entry_count), dtype=bool)``
    call, whatever the chunk size."""
    rng = np.random.default_rng(seed)
    # 9 bytes per cell: the mask's bool and its float copy for the product.
    rows_per_chunk = max(1, chunk_bytes // (9 * max(entry_count, 1)))
    pending = np.empty(0, dtype=bool)
    done = 0
    while done < trials:
        rows = min(rows_per_chunk, trials - done)
        needed = rows * entry_count - pending.size
        left_in_stream = (trials - done) * entry_count - pending.size
        # Whole words only, except the stream's last draw (sacreBLEU's call ends there too).
        draw = min(left_in_stream, -(-needed // _WORD_BITS) * _WORD_BITS)
        flat = np.concatenate([pending, rng.integers(2, size=draw, dtype=bool)])
        cut = rows * entry_count
        pending = flat[cut:]
        yield flat[:cut].reshape(rows, entry_count)
        done += rows


def shuffled_sums(
    stats_a: dict[str, np.ndarray], stats_b: dict[str, np.ndarray], trials: int, seed: int
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Metric id -> (trials x statistics) summed statistics of pseudo-systems
    A (baseline where the mask is True) and B (the system there), per trial."""
    metric_ids = list(stats_a)
    widths = [stats_a[m].shape[1] for m in metric_ids]
    a = np.hstack([stats_a[m] for m in metric_ids])
    b = np.hstack([stats_b[m] for m in metric_ids])
    difference, total_a, total_b = a - b, a.sum(axis=0), b.sum(axis=0)
    moved = np.vstack([mask.astype(float) @ difference for mask in swap_masks(a.shape[0], trials, seed)])
    sums_a, sums_b = total_b + moved, total_a - moved
    offsets = np.cumsum([0, *widths])

    def by_metric(sums: np.ndarray) -> dict[str, np.ndarray]:
        return {m: sums[:, offsets[i]:offsets[i + 1]] for i, m in enumerate(metric_ids)}
    return by_metric(sums_a), by_metric(sums_b)


def randomization_p_value(trial_differences: np.ndarray, observed: float) -> float:
    """sacreBLEU's AR p-value: the share of trials whose absolute difference
    exceeds the observed absolute difference (strictly: a system compared
    with itself is not significant), with +1 smoothing."""
    return float((np.sum(np.abs(trial_differences) > abs(observed)) + 1) / (trial_differences.size + 1))
