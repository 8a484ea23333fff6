"""``_core.AsyncClient``, the asyncio client under AsyncTieredCache's native path: answers,
errors, cancellation, several event loops, and a loop that stops watching it once closed."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid

import pytest

import cachelab._core as _core
from cachelab.errors import ConnectionClosed, InvalidKey, ServerUnreachable


def _prefix() -> str:
    return f"aclient:{uuid.uuid4().hex[:8]}:"


@pytest.mark.parametrize("server", ["memcached", "memcached_unix"])
def test_answers_over_tcp_and_a_unix_socket(server: str, request: pytest.FixtureRequest) -> None:
    address = request.getfixturevalue(server).address
    p = _prefix()
    blob = bytes(range(256)) + b"\r\nEND\r\n"

    async def main() -> None:
        c = _core.AsyncClient(address, timeout=5)
        assert await c.set(p + "a", blob) is True
        assert await c.set(p + "b", b"hdr:rest") is True
        assert await c.get_multi([p + "a", p + "missing"]) == {(p + "a").encode(): blob}
        values, found, others, stripped = await c.get_multi_list(
            [p + "missing", p + "b", p + "a"], b"hdr:")
        assert (values, found, others, stripped) == ([None, b"rest", blob], 2, [2], 8)
        assert await c.delete_many([p + "a", p + "missing", p + "b"]) == [True, False, True]
        with pytest.raises(InvalidKey):  # refused before anything is sent
            c.get_multi_list(["has space"])
        await c.close()
        await c.close()  # twice is fine
        assert c.closed
        with pytest.raises(ConnectionClosed):
            await c.get_multi([p + "a"])

    asyncio.run(main())


def test_an_unreachable_server_and_no_running_loop() -> None:
    c = _core.AsyncClient("127.0.0.1:1", connect_timeout=1)

    async def main() -> None:
        with pytest.raises(ServerUnreachable):
            await c.get_multi(["k"])

    asyncio.run(main())
    with pytest.raises(RuntimeError):  # an awaitable needs the running loop
        c.get_multi(["k"])


def test_cancelled_awaits_leave_the_others_and_the_client_working(memcached) -> None:
    p = _prefix()

    async def main() -> None:
        c = _core.AsyncClient(memcached.address, timeout=5)
        for i in range(50):
            await c.set(f"{p}{i}", str(i).encode())
        tasks = [asyncio.ensure_future(c.get_multi_list([f"{p}{i}"])) for i in range(50)]
        for t in tasks[::2]:
            t.cancel()
        done = await asyncio.gather(*tasks, return_exceptions=True)
        for i, d in enumerate(done):
            if i % 2:
                assert d == ([str(i).encode()], 1, [0], 0), i
            else:
                assert isinstance(d, asyncio.CancelledError), i
        assert await c.get_multi([f"{p}7"]) == {f"{p}7".encode(): b"7"}
        await c.close()

    asyncio.run(main())


def test_one_client_serves_loops_in_turn_and_each_stops_watching_it_once_closed(
        memcached) -> None:
    p = _prefix()
    c = _core.AsyncClient(memcached.address, timeout=5)

    async def use(n: int) -> None:
        loop = asyncio.get_running_loop()
        watched = len(loop._selector.get_map())  # type: ignore[attr-defined]
        assert await c.set(f"{p}{n}", b"x") is True
        assert len(loop._selector.get_map()) == watched + 1  # type: ignore[attr-defined]
        assert await c.get_multi([f"{p}{n}"]) == {f"{p}{n}".encode(): b"x"}

    asyncio.run(use(1))
    asyncio.run(use(2))  # a new loop: a mailbox of its own

    async def close() -> None:
        loop = asyncio.get_running_loop()
        await c.get_multi([f"{p}1"])
        watched = len(loop._selector.get_map())  # type: ignore[attr-defined]
        await c.close()
        await asyncio.sleep(0)
        assert len(loop._selector.get_map()) == watched - 1  # type: ignore[attr-defined]

    asyncio.run(close())


def test_a_batch_of_answers_resumes_at_most_16_tasks_in_one_pass_of_the_loop(memcached) -> None:
    """Issue 32: a hundred answers that came in together completed a hundred futures in one
    pass of the loop, and their tasks all ran in the next: a hold of milliseconds that timers
    and other tasks waited out. A drain of the mailbox now completes at most 16 futures, and
    calls itself again for the rest on the loop's next pass."""
    p = _prefix()

    async def main() -> tuple[list[str], list[object]]:
        c = _core.AsyncClient(memcached.address, timeout=5)
        assert await c.set(p + "k", b"v") is True
        loop = asyncio.get_running_loop()
        events: list[str] = []
        futures = [c.get_multi([p + "k"]) for _ in range(100)]
        for f in futures:
            f.add_done_callback(lambda _f: events.append("done"))
        await asyncio.sleep(0)  # the pass that sends them
        time.sleep(0.5)  # the loop held: the answers queue up in its mailbox meanwhile
        running = [True]

        def tick() -> None:  # once a pass of the loop
            events.append("tick")
            if running[0]:
                loop.call_soon(tick)

        loop.call_soon(tick)
        results = await asyncio.gather(*futures)
        running[0] = False
        await c.close()
        return events, results

    events, results = asyncio.run(main())
    assert results == [{(p + "k").encode(): b"v"}] * 100
    runs = [len(list(g)) for kind, g in itertools.groupby(events) if kind == "done"]
    assert sum(runs) == 100
    assert max(runs) <= 16, runs


def _gets(address: str) -> int:
    c = _core.Client(address, timeout=5)
    try:
        return int(c.stats()["cmd_get"])
    finally:
        c.close()


def test_a_pass_of_the_loop_sends_its_requests_together_on_the_next(memcached) -> None:
    """Issue 32: each call handed its request to the runtime's thread at once, waking it once
    a call — 100 tasks starting a read in one pass woke it 100 times while the loop was busy.
    A call now queues its request, and the loop's next pass hands the whole queue over at
    once: nothing is sent while the pass that made the calls still holds the loop."""
    p = _prefix()

    async def main() -> None:
        c = _core.AsyncClient(memcached.address, timeout=5)
        assert await c.set(p + "k", b"v") is True
        before = _gets(memcached.address)
        futures = [c.get_multi([p + "k"]) for _ in range(100)]
        time.sleep(0.3)  # this pass goes on: nothing has reached the runtime
        assert _gets(memcached.address) == before
        assert not any(f.done() for f in futures)
        assert await asyncio.gather(*futures) == [{(p + "k").encode(): b"v"}] * 100
        assert _gets(memcached.address) >= before + 100
        await c.close()

    asyncio.run(main())


def test_close_in_the_pass_that_made_calls_answers_them_first(memcached) -> None:
    """Calls queued in this pass reach the runtime with close() (it flushes them ahead of its
    own task): close still waits for them to be sent and answered; later calls raise
    ConnectionClosed. 500 of them: the runtime's thread looks at its shared queue (where close's
    task waits) every 61 tasks it runs, so close's task can start before the requests' tasks
    have; without the gate it waits on first (each request holds it until its command is
    queued), close overtook some of them (1 run in 2 failed)."""
    p = _prefix()

    async def main() -> None:
        c = _core.AsyncClient(memcached.address, timeout=5)
        assert await c.set(p + "k", b"v") is True
        fresh = _core.AsyncClient(memcached.address, timeout=5)  # connects in the batch
        for client in (c, fresh):
            futures = [client.get_multi_list([p + "k"]) for _ in range(500)]
            closing = client.close()
            assert await asyncio.gather(*futures) == [([b"v"], 1, [0], 0)] * 500
            await closing
            with pytest.raises(ConnectionClosed):
                await client.get_multi([p + "k"])
        c2 = _core.AsyncClient(memcached.address, timeout=5)
        assert await c2.delete_many([p + "k"]) == [True]
        await c2.close()

    asyncio.run(main())


@pytest.mark.parametrize("then", ["stopped", "closed"])
def test_a_call_left_in_a_stopped_loops_outbox_does_not_hold_close(memcached, then: str) -> None:
    """A call made in a loop's last pass is queued for a flush that never runs once the loop
    stops. close() from another loop sends it (the loop only stopped) or forgets it (the loop
    is closed: nobody can await it) and returns: the queued request held the close gate, and,
    with the loop closed, referred to its own outbox, so close waited forever (issue 32)."""
    p = _prefix()
    c = _core.AsyncClient(memcached.address, timeout=1)
    first = asyncio.new_event_loop()

    def last_pass() -> None:
        c.get_multi([p + "k"])  # queued; the flush is scheduled for a pass that never comes
        first.stop()

    first.call_soon(last_pass)
    first.run_forever()
    if then == "closed":
        first.close()

    async def close_elsewhere() -> float:
        start = time.monotonic()
        await asyncio.wait_for(c.close(), 10)
        return time.monotonic() - start

    assert asyncio.run(close_elsewhere()) < 5  # within the timeout's bound, not 10 s or never
    assert c.closed
    if then == "stopped":
        first.close()
