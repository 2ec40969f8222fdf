"""Session persistence (--kv-dir): a server killed with SIGKILL in the middle
of a load leaves only whole state files; a restarted server loads them and
continues a stored conversation exactly as a fresh server computes it; files
that are corrupt, truncated, of another format version or of another model
are rejected with a log line and never loaded. With --cache official the
files hold the packed state (FP8 KV, FP4 indexer keys) and reload alike;
they are another model's to a server in the exact mode."""
import glob
import os
import shutil
import signal
import struct
import sys
import tempfile
import threading
import time

sys.path.insert(0, "tests/serve")
import openai  # noqa: E402
from harness import Server, check, run_tests  # noqa: E402

G = dict(temperature=0, seed=1)
TURN1 = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a colour."}]
tmp = tempfile.mkdtemp(prefix="dsv4-kv-")


def client(s):
    return openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0, timeout=60)


def turn2(a1):
    return TURN1 + [{"role": "assistant", "content": a1}, {"role": "user", "content": "Another one?"}]


def fresh_answer(msgs, *args):
    f = Server(*args)
    try:
        r = client(f).chat.completions.create(model="x", messages=msgs, max_tokens=12, **G)
    finally:
        f.stop()
    return r


state = {}


def test_kill_during_load_then_reload():
    kv = os.path.join(tmp, "kv")
    a = Server("--kv-dir", kv)
    r1 = client(a).chat.completions.create(model="x", messages=TURN1, max_tokens=12, **G)
    a1 = r1.choices[0].message.content
    files_before = sorted(glob.glob(kv + "/*.kv"))
    check("persist_files_written", len(files_before) >= 1 and a.metrics()["dsv4_kv_disk_writes_total"] == len(files_before),
          "%d files" % len(files_before))

    def load(k):
        try:
            for ch in client(a).chat.completions.create(model="x", messages=[
                    {"role": "user", "content": "load %d" % k}], max_tokens=256, stream=True, temperature=0.8, seed=k):
                pass
        except Exception:
            pass  # the server dies under it
    threads = [threading.Thread(target=load, args=(k,)) for k in range(24)]
    for t in threads:
        t.start()
    running, deadline = 0, time.time() + 20
    while not running and time.time() < deadline:  # kill it while it decodes
        running = a.metrics()["dsv4_active_sessions"]
        time.sleep(0.02)
    a.stop(signal.SIGKILL)
    for t in threads:
        t.join()

    b = Server("--kv-dir", kv)
    log = b.read_log()
    m = b.metrics()
    check("persist_killed_under_load", running > 0, "%d requests were running" % running)
    check("persist_no_torn_files", "ignored" not in log and m["dsv4_kv_disk_rejects_total"] == 0,
          log[-500:])
    again = client(b).chat.completions.create(model="x", messages=TURN1, max_tokens=12, **G)
    r2 = client(b).chat.completions.create(model="x", messages=turn2(a1), max_tokens=12, **G)
    m = b.metrics()
    want = fresh_answer(turn2(a1))
    check("persist_turn1_reloaded", again.choices[0].message.content == a1
          and again.usage.prompt_tokens_details.cached_tokens > 0, str(again.usage))
    check("persist_turn2_continues_exactly", r2.choices[0].message.content == want.choices[0].message.content
          and r2.usage.prompt_tokens_details.cached_tokens > 0 and want.usage.prompt_tokens_details.cached_tokens == 0
          and m["dsv4_kv_disk_loads_total"] >= 1,
          "%r vs %r, cached %d, loads %d" % (r2.choices[0].message.content, want.choices[0].message.content,
                                            r2.usage.prompt_tokens_details.cached_tokens,
                                            m["dsv4_kv_disk_loads_total"]))
    b.stop()
    state["kv"], state["a1"], state["want"] = kv, a1, want


def fnv(h, data):
    for byte in data:
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def rewrite(path, version=None, model_id=None):
    """The file with another version or identity and a valid checksum."""
    data = bytearray(open(path, "rb").read())
    magic, ver, hb, mid, n, ilen, _ = struct.unpack_from("<8sIIQQQQ", data)
    ver = version if version is not None else ver
    mid = model_id if model_id is not None else mid
    body = data[48:]
    h = fnv(0xcbf29ce484222325, struct.pack("<QQQ", mid, n, ilen) + bytes(body))
    struct.pack_into("<8sIIQQQQ", data, 0, magic, ver, hb, mid, n, ilen, h)
    open(path, "wb").write(data)


def test_bad_files_rejected():
    kv = state["kv"]
    files = sorted(glob.glob(kv + "/*.kv"), key=os.path.getsize)
    bad = os.path.join(tmp, "bad")
    os.makedirs(bad)
    # Every stored state, each damaged in one of four ways (in turn).
    for i, f in enumerate(files):
        dst = os.path.join(bad, os.path.basename(f))
        shutil.copy(f, dst)
        kind = i % 4
        if kind == 0:
            with open(dst, "r+b") as fh:
                fh.seek(os.path.getsize(dst) - 5)
                b = fh.read(1)
                fh.seek(-1, 1)
                fh.write(bytes([b[0] ^ 0x40]))
        elif kind == 1:
            os.truncate(dst, os.path.getsize(dst) - 8)
        elif kind == 2:
            rewrite(dst, model_id=0x1234)
        else:
            rewrite(dst, version=1)  # the format before the owed MTP rows
    s = Server("--kv-dir", bad)
    log = s.read_log()
    m = s.metrics()
    reasons = ["checksum mismatch", "do not fit", "another model", "format version 1"]
    seen = [r for r in reasons[:min(4, len(files))] if r in log]
    check("persist_bad_files_logged", len(seen) == min(4, len(files)) and m["dsv4_kv_disk_rejects_total"] == len(files),
          "%s; %s" % (seen, log[-800:]))
    r = client(s).chat.completions.create(model="x", messages=turn2(state["a1"]), max_tokens=12, **G)
    m = s.metrics()
    check("persist_bad_files_not_loaded", m["dsv4_kv_disk_loads_total"] == 0
          and r.usage.prompt_tokens_details.cached_tokens == 0
          and r.choices[0].message.content == state["want"].choices[0].message.content, str(r.usage))
    s.stop()


def test_evicted_sessions_reload():
    """--cache-mb 0 keeps no idle session in memory: a conversation's next
    turn then continues from the state file alone."""
    kv = os.path.join(tmp, "evict")
    s = Server("--kv-dir", kv, "--cache-mb", "0")
    c = client(s)
    r1 = c.chat.completions.create(model="x", messages=TURN1, max_tokens=12, **G)
    m1 = s.metrics()
    r2 = c.chat.completions.create(model="x", messages=turn2(r1.choices[0].message.content), max_tokens=12, **G)
    m2 = s.metrics()
    check("persist_evicted_reload", m1["dsv4_resident_sessions"] == 0 and m2["dsv4_kv_disk_loads_total"] >= 1
          and r2.usage.prompt_tokens_details.cached_tokens > 0
          and r2.choices[0].message.content == state["want"].choices[0].message.content,
          "resident %d, loads %d, cached %d" % (m1["dsv4_resident_sessions"], m2["dsv4_kv_disk_loads_total"],
                                               r2.usage.prompt_tokens_details.cached_tokens))
    s.stop()


def test_official_state_reloads():
    kv = os.path.join(tmp, "official")
    a = Server("--kv-dir", kv, "--cache", "official")
    r1 = client(a).chat.completions.create(model="x", messages=TURN1, max_tokens=12, **G)
    a1 = r1.choices[0].message.content
    a.stop()
    b = Server("--kv-dir", kv, "--cache", "official")
    r2 = client(b).chat.completions.create(model="x", messages=turn2(a1), max_tokens=12, **G)
    m = b.metrics()
    b.stop()
    want = fresh_answer(turn2(a1), "--cache", "official")
    check("persist_official_continues_exactly", r2.choices[0].message.content == want.choices[0].message.content
          and r2.usage.prompt_tokens_details.cached_tokens > 0 and m["dsv4_kv_disk_loads_total"] >= 1,
          "%r vs %r, cached %d" % (r2.choices[0].message.content, want.choices[0].message.content,
                                   r2.usage.prompt_tokens_details.cached_tokens))
    e = Server("--kv-dir", kv, "--cache", "exact")
    log = e.read_log()
    m = e.metrics()
    e.stop()
    check("persist_official_not_exact", "another model" in log and m["dsv4_kv_disk_rejects_total"] >= 1, log[-500:])


try:
    run_tests([test_kill_during_load_then_reload, test_bad_files_rejected, test_evicted_sessions_reload,
               test_official_state_reloads])
finally:
    shutil.rmtree(tmp, ignore_errors=True)
