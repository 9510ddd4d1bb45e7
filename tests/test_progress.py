"""Entries scored, as the gateway's progress reports them (FanOut): an
entry counts once every family has answered its batch, or has failed and
owes nothing more, so the count reaches the run's size and never runs ahead."""
import asyncio

from champollion.eval.v1 import family_pb2
from gateway.server.fanout import FanOut


class Family:
    """A family answering each batch after `delay` seconds; failing on batch `fail_on`."""

    def __init__(self, name: str, delay: float, fail_on: int | None = None):
        self.name, self.delay, self.fail_on = name, delay, fail_on

    async def score_batch(self, request):
        await asyncio.sleep(self.delay)
        if request.run_id == str(self.fail_on):
            raise RuntimeError("analyzer crashed")
        response = family_pb2.ScoreBatchResponse()
        for entry in request.entries:
            response.entries.add(id=entry.id)
        return response


def scored_counts(families, sizes: list[int]) -> tuple[list[tuple[int, int, int]], FanOut]:
    """(entries_scored, entries_sent, entries of the batches every family
    has answered so far) at every progress report."""
    reports, answered = [], {family.name: set() for family in families}

    def report(*_):
        everyone = set.intersection(*answered.values())
        reports.append((fan_out.entries_scored, fan_out.entries_sent, sum(sizes[index] for index in everyone)))

    async def main():
        nonlocal fan_out
        fan_out = FanOut({family.name: family for family in families}, 4,
                         lambda name, index, _: answered[name].add(index), report)
        for index, size in enumerate(sizes):
            batch = family_pb2.ScoreBatchRequest(run_id=str(index))
            for position in range(size):
                batch.entries.add(id=f"b{index}-{position}")
            await fan_out.submit(index, batch)
        await fan_out.finish()
        return fan_out

    fan_out = None
    fan_out = asyncio.run(main())
    return reports, fan_out


def test_entries_count_when_every_family_has_answered_their_batch():
    sizes = [5, 5, 5, 2]
    reports, fan_out = scored_counts([Family("surface", 0.001), Family("semantic", 0.02)], sizes)
    assert fan_out.entries_scored == fan_out.entries_sent == sum(sizes)
    assert [done for done, _, expected in reports] == [expected for _, _, expected in reports]
    assert all(done <= sent for done, sent, _ in reports)
    assert len({done for done, _, _ in reports}) > 2  # it moved while the run went on


def test_a_failed_family_does_not_hold_the_count_back():
    sizes = [3, 3, 3, 3]
    reports, fan_out = scored_counts([Family("surface", 0.001), Family("structural", 0.01, fail_on=1)], sizes)
    assert "structural" in fan_out.failures
    assert fan_out.entries_scored == 12 and reports[-1][0] == 12
