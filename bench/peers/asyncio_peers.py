"""The peers of `npm run bench -- --peers`: the bench's workloads written for CPython's asyncio,
run on its own loop or, with --uvloop, on uvloop. Prints one JSON object: workload name -> the
median figure, in the units of the bench's table (per second, ms, µs, bytes).

Usage: python3 bench/peers/asyncio_peers.py [--uvloop]
"""
import asyncio
import concurrent.futures
import gc
import json
import statistics
import sys
import threading
import time
import tracemalloc

USE_UVLOOP = '--uvloop' in sys.argv
if USE_UVLOOP:
    import uvloop

RUNS = 5


def new_loop():
    return uvloop.new_event_loop() if USE_UVLOOP else asyncio.new_event_loop()


def median_of(runs, once):
    once()
    return statistics.median(once() for _ in range(runs))


def call_soon_chain(count):
    loop = new_loop()
    n = 0

    def tick():
        nonlocal n
        n += 1
        if n < count:
            loop.call_soon(tick)
        else:
            loop.stop()

    loop.call_soon(tick)
    started = time.perf_counter()
    loop.run_forever()
    took = time.perf_counter() - started
    loop.close()
    return count / took


def call_soon_burst(count):
    loop = new_loop()
    n = 0

    def cb():
        nonlocal n
        n += 1

    started = time.perf_counter()
    for _ in range(count):
        loop.call_soon(cb)
    loop.call_soon(loop.stop)
    loop.run_forever()
    took = time.perf_counter() - started
    loop.close()
    assert n == count
    return count / took


async def return_one():
    return 1


def task_spawn(count):
    loop = new_loop()
    batch = 10_000

    async def main():
        for created in range(0, count, batch):
            await asyncio.gather(*[loop.create_task(return_one()) for _ in range(batch)])

    started = time.perf_counter()
    loop.run_until_complete(main())
    took = time.perf_counter() - started
    loop.close()
    return count / took


def bare_yield_switches(tasks, times):
    loop = new_loop()

    async def spin():
        for _ in range(times):
            await asyncio.sleep(0)

    async def main():
        await asyncio.gather(*[spin() for _ in range(tasks)])

    started = time.perf_counter()
    loop.run_until_complete(main())
    took = time.perf_counter() - started
    loop.close()
    return tasks * times / took


def timers(count, spread):
    loop = new_loop()
    lateness = []
    expected = count >> 1
    fired = 0

    def on_timer(when):
        nonlocal fired
        lateness.append((loop.time() - when) * 1000)
        fired += 1
        if fired == expected:
            loop.stop()

    started = time.perf_counter()
    base = loop.time()
    for i in range(count):
        when = base + 0.5 + ((i * 7919) % count) * (spread / count)
        handle = loop.call_at(when, on_timer, when)
        if i % 2 == 1:
            handle.cancel()
    scheduling = time.perf_counter() - started
    cpu_started = time.process_time()
    loop.run_forever()
    firing = time.process_time() - cpu_started
    loop.close()
    lateness.sort()
    return {
        'ops': count / (scheduling + firing),
        'p50': lateness[len(lateness) // 2],
        'p99': lateness[int(len(lateness) * 0.99) - 1],
    }


def heap_per_pending_task(count):
    loop = new_loop()
    gate = loop.create_future()

    async def park():
        await gate

    async def main():
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        tasks = [loop.create_task(park()) for _ in range(count)]
        await asyncio.sleep(0)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        gate.set_result(None)
        await asyncio.gather(*tasks)
        # The list holding the tasks is not a task's: one pointer each.
        return (after - before - count * 8) / count

    result = loop.run_until_complete(main())
    loop.close()
    return result


def gather_tasks(count):
    loop = new_loop()

    async def child():
        return 1

    async def main():
        results = await asyncio.gather(*[child() for _ in range(count)])
        assert len(results) == count

    started = time.perf_counter()
    loop.run_until_complete(main())
    took = time.perf_counter() - started
    loop.close()
    return count / took


def tasks_gather(count, eager):
    loop = new_loop()
    if eager:
        loop.set_task_factory(asyncio.eager_task_factory)

    async def main():
        results = await asyncio.gather(*[return_one() for _ in range(count)])
        assert len(results) == count

    started = time.perf_counter()
    loop.run_until_complete(main())
    took = time.perf_counter() - started
    loop.close()
    return count / took


def queue_transfer(count, maxsize):
    loop = new_loop()

    async def main():
        queue = asyncio.Queue(maxsize)

        async def producer():
            for i in range(count):
                await queue.put(i)

        async def consumer():
            for _ in range(count):
                await queue.get()

        await asyncio.gather(producer(), consumer())

    started = time.perf_counter()
    loop.run_until_complete(main())
    took = time.perf_counter() - started
    loop.close()
    return count / took


class OtherLoop:
    """A second loop in its own thread, as a LoopThread is: calls reach it with call_soon_threadsafe."""

    def __init__(self):
        self.loop = new_loop()
        self.count = 0
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


def cross_thread(rounds, burst):
    other = OtherLoop()
    loop = new_loop()
    samples = []

    def call(fn, *args):
        """Run fn(*args) in the other loop; a future of this loop settles with its result."""
        future = loop.create_future()

        def there():
            value = fn(*args)
            loop.call_soon_threadsafe(future.set_result, value)

        other.loop.call_soon_threadsafe(there)
        return future

    def inc():
        other.count += 1

    def take():
        seen = other.count
        other.count = 0
        return seen

    async def main():
        for i in range(2000):
            await call(lambda v: v, i)
        for i in range(rounds):
            started = time.perf_counter()
            await call(lambda v: v, i)
            samples.append((time.perf_counter() - started) * 1e6)
        rates = []
        for _ in range(3):
            started = time.perf_counter()
            for _ in range(burst):
                other.loop.call_soon_threadsafe(inc)
            seen = await call(take)
            assert seen == burst
            rates.append(burst / (time.perf_counter() - started))
        return statistics.median(rates)

    one_way = loop.run_until_complete(main())
    loop.close()
    other.close()
    samples.sort()
    return samples[len(samples) // 2], samples[int(len(samples) * 0.99) - 1], one_way


def add(a, b):
    return a + b


def tiny_jobs(count):
    loop = new_loop()
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=2)

    async def main():
        results = await asyncio.gather(*[loop.run_in_executor(executor, add, i, 1) for i in range(count)])
        assert sum(results) == count * (count + 1) // 2

    loop.run_until_complete(main())  # warm-up: threads started
    started = time.perf_counter()
    loop.run_until_complete(main())
    took = time.perf_counter() - started
    executor.shutdown()
    loop.close()
    return count / took


def main():
    out = {}
    out['callSoon chain'] = median_of(RUNS, lambda: call_soon_chain(300_000))
    out['callSoon burst'] = median_of(RUNS, lambda: call_soon_burst(300_000))
    out['task spawn+complete'] = median_of(RUNS, lambda: task_spawn(100_000))
    out['100k tasks + gather'] = median_of(RUNS, lambda: tasks_gather(100_000, False))
    # eager_task_factory came with Python 3.12.
    if hasattr(asyncio, 'eager_task_factory'):
        out['100k eager tasks + gather'] = median_of(RUNS, lambda: tasks_gather(100_000, True))
    out['bare-yield switches'] = median_of(RUNS, lambda: bare_yield_switches(100, 2_000))
    runs = [timers(200_000, 0.2) for _ in range(3)]
    out['200k timers, half cancelled'] = statistics.median(r['ops'] for r in runs)
    out['timer lateness p50'] = statistics.median(r['p50'] for r in runs)
    out['timer lateness p99'] = statistics.median(r['p99'] for r in runs)
    out['heap per pending task'] = median_of(3, lambda: heap_per_pending_task(100_000))
    out['gather of 100k tasks'] = median_of(RUNS, lambda: gather_tasks(100_000))
    out['Queue 1M items (maxsize 1024)'] = median_of(3, lambda: queue_transfer(200_000, 1024))
    p50, p99, one_way = cross_thread(20_000, 200_000)
    out['ping-pong round trip p50'] = p50
    out['ping-pong round trip p99'] = p99
    out['one-way callSoonThreadsafe burst'] = one_way
    out['20k tiny jobs (add) via runInExecutor'] = median_of(3, lambda: tiny_jobs(20_000))
    print(json.dumps(out))


if __name__ == '__main__':
    main()
