#!/usr/bin/env python3
"""Fires parallel keep-alive GETs at a running `jikji serve`, the way Chromium does: N sockets
opened at once, each sending HTTP/1.1 requests (no `Connection: close`) and keeping the socket
open between them. Reports every request that got no complete answer within --timeout seconds.

Usage: scripts/serve-stall.py http://127.0.0.1:PORT [--conns 6] [--rounds 3] [--timeout 5] PATH...
Exit status 1 if any request went unanswered (the tiny_http stall), else 0.
"""
import argparse, socket, sys, threading, time
from urllib.parse import urlparse


def read_response(sock, deadline):
    buf = b""
    while b"\r\n\r\n" not in buf:
        sock.settimeout(max(0.01, deadline - time.time()))
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before headers")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    status = head.split(b"\r\n", 1)[0].decode()
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    while len(rest) < length:
        sock.settimeout(max(0.01, deadline - time.time()))
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("closed mid-body")
        rest += chunk
    return status, len(rest)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--conns", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=5.0)
    a = ap.parse_args()
    u = urlparse(a.base)
    addr = (u.hostname, u.port)
    socks = [socket.create_connection(addr) for _ in range(a.conns)]
    failures = []
    lock = threading.Lock()
    barrier = threading.Barrier(a.conns)

    def worker(i, s):
        for r in range(a.rounds):
            path = a.paths[(i + r) % len(a.paths)]
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                return
            t0 = time.time()
            try:
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: {u.netloc}\r\nAccept-Encoding: gzip, deflate, br, zstd\r\n\r\n".encode())
                status, n = read_response(s, t0 + a.timeout)
                print(f"conn {i} round {r} {path}: {status} {n} B in {time.time() - t0:.3f} s", flush=True)
            except Exception as e:
                with lock:
                    failures.append((i, r, path, repr(e)))
                print(f"conn {i} round {r} {path}: NO ANSWER after {time.time() - t0:.1f} s ({e!r})", flush=True)
                barrier.abort()
                return

    threads = [threading.Thread(target=worker, args=(i, s)) for i, s in enumerate(socks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"{len(failures)} of {a.conns * a.rounds} requests unanswered" if failures else
          f"all {a.conns * a.rounds} requests answered")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
