"""Which slot (worker) a call gets (services/worker_slots.py): a key's calls
wait for the slot it is pinned to, in arrival order; a new key is pinned to
the least loaded slot; no slot idles while a movable call waits (it steals,
preferring a key with no call running, and the key follows it); calls for
one slot only are never moved; a cancelled call never keeps a slot.

Pure asyncio, no processes: each test drives one scheduler from one loop."""
from __future__ import annotations

import asyncio

import pytest

from services.worker_slots import SlotScheduler


async def _settle() -> None:
    # A waiter handed a slot resumes on the loop's next turn; a few turns
    # leave every call either holding a slot or waiting for one.
    for _ in range(3):
        await asyncio.sleep(0)


async def _call(scheduler: SlotScheduler, key: object, only: int | None = None) -> asyncio.Task:
    """An acquire started as a task and run until it holds a slot or waits."""
    task = asyncio.create_task(scheduler.acquire(key, only))
    await _settle()
    return task


async def _slot_now(scheduler: SlotScheduler, key: object, only: int | None = None) -> int:
    """The slot a call gets without waiting (fails rather than hangs if it waits)."""
    task = await _call(scheduler, key, only)
    assert task.done(), f"the call for {key!r} waits, though a slot should be its at once"
    return task.result()


async def _release(scheduler: SlotScheduler, slot: int) -> None:
    scheduler.release(slot)
    await _settle()


async def _both_slots_busy() -> SlotScheduler:
    """Two slots: slot 0 running a call of key "a", slot 1 one of key "b"."""
    scheduler = SlotScheduler(2)
    assert [await _slot_now(scheduler, "a"), await _slot_now(scheduler, "b")] == [0, 1]
    return scheduler


def _holder(tasks: dict[str, asyncio.Task]) -> list[str]:
    """The names of the calls that hold a slot."""
    return sorted(name for name, task in tasks.items() if task.done())


def test_a_keys_calls_wait_for_its_slot_in_arrival_order():
    async def scenario():
        scheduler = await _both_slots_busy()
        # Interleaved arrivals: a1, b1, a2, b2 (a pinned to slot 0, b to slot 1).
        calls = {}
        for name in ("a1", "b1", "a2", "b2"):
            calls[name] = await _call(scheduler, name[0])
        assert _holder(calls) == []

        await _release(scheduler, 0)
        assert _holder(calls) == ["a1"] and calls["a1"].result() == 0
        await _release(scheduler, 0)  # a2 is younger than b1 but pinned here
        assert _holder(calls) == ["a1", "a2"] and calls["a2"].result() == 0
        await _release(scheduler, 1)
        await _release(scheduler, 1)
        assert calls["b1"].result() == 1 and calls["b2"].result() == 1
        assert scheduler.steals == 0

    asyncio.run(scenario())


def test_a_new_key_is_pinned_to_the_least_loaded_slot():
    async def scenario():
        scheduler = await _both_slots_busy()
        # Slot 0: a call running and two waiting; slot 1: one running.
        for _ in range(2):
            await _call(scheduler, "a")
        newcomer = await _call(scheduler, "c")
        assert not newcomer.done()

        await _release(scheduler, 1)
        # Its own slot, not a steal: pinned to slot 1, the lowest index
        # (slot 0) would have been wrong.
        assert newcomer.result() == 1 and scheduler.steals == 0

    asyncio.run(scenario())


def test_a_call_whose_slot_is_busy_takes_a_free_one_and_its_key_follows():
    async def scenario():
        scheduler = SlotScheduler(2)
        assert await _slot_now(scheduler, "a") == 0
        # Slot 0 busy with the key's first call, slot 1 idle: no waiting.
        assert await _slot_now(scheduler, "a") == 1
        assert scheduler.steals == 1
        await _release(scheduler, 0)
        await _release(scheduler, 1)
        # Both free (slot 0 freed first): the key is now slot 1's.
        assert await _slot_now(scheduler, "a") == 1
        assert scheduler.steals == 1

    asyncio.run(scenario())


def test_a_freed_slot_without_calls_of_its_own_steals_a_key_not_yet_started():
    async def scenario():
        scheduler = SlotScheduler(2)
        assert await _slot_now(scheduler, "c") == 0  # pins c to slot 0
        await _release(scheduler, 0)
        assert await _slot_now(scheduler, "a") == 0
        assert await _slot_now(scheduler, "b") == 1
        # Slot 0 waited for by: a (a call of a runs) and then twice c (none runs).
        calls = {name: await _call(scheduler, name[0]) for name in ("a1", "c1", "c2")}

        await _release(scheduler, 1)
        # c1 taken, though a1 is older: moving a would split a's calls.
        assert _holder(calls) == ["c1"] and calls["c1"].result() == 1
        assert scheduler.steals == 1
        # c moved to slot 1 with all its calls: slot 0 serves a1, slot 1 c2.
        await _release(scheduler, 0)
        assert _holder(calls) == ["a1", "c1"] and calls["a1"].result() == 0
        await _release(scheduler, 1)
        assert calls["c2"].result() == 1 and scheduler.steals == 1

    asyncio.run(scenario())


def test_when_every_waiting_key_has_a_call_running_the_oldest_call_is_stolen():
    async def scenario():
        scheduler = SlotScheduler(3)
        assert [await _slot_now(scheduler, key) for key in "abx"] == [0, 1, 2]
        calls = {name: await _call(scheduler, name[0]) for name in ("b1", "a1")}

        await _release(scheduler, 2)
        assert _holder(calls) == ["b1"] and calls["b1"].result() == 2
        assert scheduler.steals == 1

    asyncio.run(scenario())


def test_a_call_for_one_slot_only_waits_for_it_and_is_never_stolen():
    async def scenario():
        scheduler = await _both_slots_busy()
        warm_up = await _call(scheduler, "warm", only=0)

        await _release(scheduler, 1)
        assert not warm_up.done(), "slot 1 is free but the call is for slot 0 only"
        # Even arriving while slot 1 is free, such a call waits for its slot.
        second = await _call(scheduler, "warm again", only=0)
        assert not second.done()
        # Slot 1 stayed free for anyone else.
        assert await _slot_now(scheduler, "z") == 1

        await _release(scheduler, 0)
        assert warm_up.result() == 0 and not second.done()
        await _release(scheduler, 0)
        assert second.result() == 0
        assert scheduler.steals == 0
        # Free, its slot is taken at once.
        await _release(scheduler, 0)
        assert await _slot_now(scheduler, "warm", only=0) == 0

    asyncio.run(scenario())


def test_a_call_cancelled_while_it_waits_never_gets_a_slot():
    async def scenario():
        scheduler = SlotScheduler(1)
        await _slot_now(scheduler, "a")
        cancelled = await _call(scheduler, "b")
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        later = await _call(scheduler, "c")

        await _release(scheduler, 0)
        assert later.result() == 0, "the slot went to the call still waiting"
        await _release(scheduler, 0)
        # Nobody waits: the slot is free, not held for the cancelled call.
        assert await _slot_now(scheduler, "d") == 0

    asyncio.run(scenario())


@pytest.mark.parametrize("next_waiter", [True, False], ids=["to-the-next-waiter", "free"])
def test_a_slot_handed_to_a_call_cancelled_before_it_resumed_goes_back(next_waiter):
    async def scenario():
        scheduler = SlotScheduler(1)
        await _slot_now(scheduler, "a")
        first = await _call(scheduler, "b")
        second = await _call(scheduler, "c") if next_waiter else None

        scheduler.release(0)  # hands slot 0 to `first`...
        first.cancel()  # ...which is cancelled before it runs again
        await _settle()
        assert first.cancelled()
        if next_waiter:
            assert second.result() == 0
            await _release(scheduler, 0)
        assert await _slot_now(scheduler, "d") == 0

    asyncio.run(scenario())


def test_a_call_cancelled_just_before_its_slot_is_released_is_cancelled_cleanly():
    async def scenario():
        scheduler = SlotScheduler(1)
        await _slot_now(scheduler, "a")
        waiting = await _call(scheduler, "b")
        waiting.cancel()  # it resumes on the loop's next turn...
        scheduler.release(0)  # ...after the slot is released
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert await _slot_now(scheduler, "c") == 0

    asyncio.run(scenario())
