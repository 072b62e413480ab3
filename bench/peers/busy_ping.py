"""A ping to a loop that runs K CPU-slicing tasks, in rounds of that loop (the bench's busy row):
a task per ping sent with run_coroutine_threadsafe from the main thread; rounds are counted by a
callback that reschedules itself every iteration. Prints the median over the pings as JSON."""
import asyncio, json, statistics, sys, threading, time

TASKS, MICROS, PINGS = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rounds = 0

def burn(micros):
    end = time.perf_counter() + micros / 1e6
    while time.perf_counter() < end:
        pass

async def slicing(stop):
    while not stop.is_set():
        burn(MICROS)
        await asyncio.sleep(0)

async def ping():
    return rounds

def main():
    loop = asyncio.new_event_loop()
    stop = threading.Event()
    def tick():
        global rounds
        rounds += 1
        loop.call_soon(tick)
    def serve():
        asyncio.set_event_loop(loop)
        loop.call_soon(tick)
        for _ in range(TASKS):
            loop.create_task(slicing(stop))
        loop.run_forever()
    thread = threading.Thread(target=serve)
    thread.start()
    while rounds < 3:
        time.sleep(0.005)
    seen = []
    for _ in range(PINGS):
        sent = rounds
        ran = asyncio.run_coroutine_threadsafe(ping(), loop).result()
        seen.append(ran - sent)
    stop.set()
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    print(json.dumps({'median': statistics.median(seen), 'min': min(seen), 'max': max(seen)}))

main()
