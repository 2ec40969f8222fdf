"""Hostile clients against dsv4 serve (run on the AddressSanitizer build too):
garbage and truncated bodies, invalid UTF-8, NUL bytes, lying
Content-Length, oversized headers, a slowloris client that never finishes
its request, clients that vanish while their request runs. The server must
answer each with a 4xx in the API's format or drop the connection, keep
serving others, and exit cleanly on SIGTERM without a sanitizer report."""
import json
import os
import random
import socket
import sys
import threading
import time

sys.path.insert(0, "tests/serve")
from harness import Server, check, run_tests  # noqa: E402

S = Server("--timeout", "2", "--max-body", "8192", "--max-tokens", "32", "--max-sessions", "4",
           binary=os.environ.get("DSV4_HOSTILE_BIN"))
PATHS = ["/v1/chat/completions", "/v1/completions", "/v1/messages"]


def raw(data, read=True, timeout=10):
    s = socket.create_connection(("127.0.0.1", S.port), timeout=timeout)
    try:
        s.sendall(data)
        if not read:
            return b""
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                return out
            out += b
    except (socket.timeout, ConnectionResetError):
        return b""
    finally:
        s.close()


def post(path, body, extra=b""):
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    head = b"POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n%s\r\n" % (
        path.encode(), len(body), extra)
    return raw(head + body)


def status_of(resp):
    try:
        return int(resp.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


def test_garbage_bodies():
    rng = random.Random(3)
    seeds = [b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}',
             b'{"max_tokens": 3, "messages": [{"role": "user", "content": "hi"}], "prompt": "x"}']
    bad = []
    for k in range(150):
        body = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 6)):
            op = rng.random()
            i = rng.randrange(len(body) + 1)
            if op < 0.4 and body:
                body[min(i, len(body) - 1)] = rng.randrange(256)
            elif op < 0.7:
                body[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
            else:
                del body[i:i + rng.randint(1, 8)]
        path = PATHS[k % 3]
        r = post(path, bytes(body))
        st = status_of(r)
        if st not in (200, 400, 413):
            bad.append((path, bytes(body)[:80], r[:120]))
            continue
        if st != 200:
            err = json.loads(r.split(b"\r\n\r\n", 1)[1])
            if path == "/v1/messages":
                ok = err.get("type") == "error" and isinstance(err["error"]["message"], str)
            else:
                ok = isinstance(err["error"]["message"], str)
            if not ok:
                bad.append((path, bytes(body)[:80], r[:120]))
    check("hostile_garbage_bodies", not bad, str(bad[:2]))


def test_odd_inputs():
    cases = {
        "invalid_utf8": b'{"messages": [{"role": "user", "content": "\xff\xfe"}], "max_tokens": 2}',
        "nul_in_string": b'{"messages": [{"role": "user", "content": "a\\u0000b"}], "max_tokens": 2}',
        "lone_surrogate": b'{"messages": [{"role": "user", "content": "\\ud800"}], "max_tokens": 2}',
        "huge_number": b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 1e400}',
        "array_body": b'[1, 2, 3]',
        "empty_body": b'',
        "deep": b'{"messages": ' + b'[' * 5000 + b']' * 5000 + b'}',
    }
    bad = []
    for name, body in cases.items():
        st = status_of(post("/v1/chat/completions", body))
        if st not in (400, 413):
            bad.append((name, st))
    st = status_of(raw(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n{"))
    if st != 413:
        bad.append(("content_length_too_big", st))
    st = status_of(raw(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200000 + b"\r\n\r\n"))
    if st not in (None, 400, 413, 431):
        bad.append(("huge_header", st))
    check("hostile_odd_inputs", not bad, str(bad))


def test_slowloris():
    s = socket.create_connection(("127.0.0.1", S.port), timeout=10)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{\"mess")
    t0 = time.time()
    try:
        closed = s.recv(1024) is not None
    except (socket.timeout, ConnectionResetError):
        closed = False
    waited = time.time() - t0
    s.close()
    check("hostile_slowloris_closed", closed and waited < 8, "waited %.1f s" % waited)


def test_vanishing_clients():
    body = json.dumps({"messages": [{"role": "user", "content": "go"}], "max_tokens": 32, "stream": False})
    head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
    for k in range(10):
        raw((head + body).encode(), read=False)
    sbody = json.dumps({"messages": [{"role": "user", "content": "go"}], "max_tokens": 32, "stream": True})
    shead = "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(sbody)
    for k in range(10):
        raw((shead + sbody).encode(), read=False)
    time.sleep(1.5)
    r = post("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "still there?"}], "max_tokens": 4}')
    check("hostile_still_serving", status_of(r) == 200, r[:200])


def test_clean_exit():
    rc = S.stop()
    log = S.read_log()
    sanitizer = [x for x in ("AddressSanitizer", "LeakSanitizer", "runtime error") if x in log]
    check("hostile_clean_exit", rc == 0 and not sanitizer, "rc %s %s %s" % (rc, sanitizer, log[-1500:]))


run_tests([test_garbage_bodies, test_odd_inputs, test_slowloris, test_vanishing_clients, test_clean_exit])
