#!/usr/bin/python3
# bench/support/delay_proxy.py LISTEN_PORT TARGET_PORT DELAY_MS - a TCP proxy on the loopback that
# adds a one-way latency: it listens on 127.0.0.1:LISTEN_PORT and, for each connection accepted,
# opens one to 127.0.0.1:TARGET_PORT and forwards bytes both ways, each chunk delivered DELAY_MS
# milliseconds after it was read (order kept, no bandwidth limit; DELAY_MS 0 forwards at once; a
# round trip through it takes 2 x DELAY_MS more). When either side closes, the other is closed once
# what was read from the first has been delivered. Stops on SIGTERM or SIGINT (exit status 0).
#
# What it is for: bench/llamacpp_server_race.sh with RPC=1 RPC_DELAY_MS=D puts one in front of each
# ggml-rpc-server, to measure llama-server over a link with latency. The kernel of the test hosts
# has no netem qdisc (`tc qdisc add dev lo root netem delay 1ms` fails), so the delay is added here,
# in userspace. Python's standard library only (asyncio); the timer's resolution is about 1 ms.
import asyncio
import signal
import socket
import sys

CHUNK = 1 << 18


def nodelay(writer):
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def pipe(reader, writer, delay):
    """Forwards reader to writer, each chunk `delay` seconds after it was read; closes writer at
    the end of reader's stream (or an error on either side) once the chunks read are delivered."""
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def read():
        try:
            while True:
                data = await reader.read(CHUNK)
                queue.put_nowait((loop.time(), data))
                if not data:
                    return
        except (ConnectionError, OSError):
            queue.put_nowait((loop.time(), b""))

    async def write():
        try:
            while True:
                stamp, data = await queue.get()
                wait = stamp + delay - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    return
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    reading = asyncio.ensure_future(read())
    try:
        await write()
    finally:
        reading.cancel()


async def main():
    if len(sys.argv) != 4:
        sys.exit("usage: delay_proxy.py LISTEN_PORT TARGET_PORT DELAY_MS")
    listen, target, delay_ms = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    if delay_ms < 0:
        sys.exit("delay_proxy.py: DELAY_MS is a number of milliseconds >= 0")
    delay = delay_ms / 1000
    conns = set()

    async def serve(creader, cwriter):
        task = asyncio.current_task()
        conns.add(task)
        twriter = None
        try:
            try:
                treader, twriter = await asyncio.open_connection("127.0.0.1", target)
            except OSError as e:
                print(f"delay_proxy: cannot connect to 127.0.0.1:{target}: {e}", file=sys.stderr)
                cwriter.close()
                return
            nodelay(cwriter)
            nodelay(twriter)
            # Each direction closes its destination at the end of its source's stream; the other
            # direction's reader then sees the end of its stream, delivers what it holds and closes.
            await asyncio.gather(pipe(creader, twriter, delay), pipe(treader, cwriter, delay))
        except asyncio.CancelledError:
            cwriter.close()
            if twriter is not None:
                twriter.close()
        finally:
            conns.discard(task)

    server = await asyncio.start_server(serve, "127.0.0.1", listen)
    print(f"delay_proxy: 127.0.0.1:{listen} -> 127.0.0.1:{target}, {delay_ms:g} ms each way",
          file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    for task in list(conns):
        task.cancel()
    await asyncio.gather(*conns, return_exceptions=True)
    await server.wait_closed()


if __name__ == "__main__":
    asyncio.run(main())
