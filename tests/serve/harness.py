"""Starts `dsv4 serve` on 127.0.0.1 and a free port for a test script, and
kills it (by its pid) when the script ends, whatever happens. Test results are
printed as "PASS name" / "FAIL name: why" lines for tests/run.sh."""
import atexit
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

BIN = os.environ.get("DSV4_BIN", "build/dsv4")
FIXTURE = "tests/fixtures/tiny-chat"
_servers = []


class Server:
    def __init__(self, *args, model=FIXTURE, binary=None, env=None):
        self.log_path = tempfile.mktemp(prefix="dsv4-serve-", suffix=".log")
        self.log = open(self.log_path, "wb")
        cmd = [binary or BIN, "serve", "--model", model, "--host", "127.0.0.1", "--port", "0",
               "--device", "cpu", "--threads", "1", *args]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log, env=env)
        _servers.append(self)
        self.port = None
        deadline = time.time() + 60
        while time.time() < deadline and self.proc.poll() is None:
            m = re.search(r"on http://127\.0\.0\.1:(\d+) ", self.read_log())
            if m:
                self.port = int(m.group(1))
                break
            time.sleep(0.05)
        if self.port is None:
            raise RuntimeError("server did not start: " + self.read_log()[-2000:])
        self.url = "http://127.0.0.1:%d" % self.port

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def get(self, path, headers=None):
        req = urllib.request.Request(self.url + path, headers=headers or {})
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()

    def metrics(self, headers=None):
        _, text = self.get("/metrics", headers)
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


@atexit.register
def _cleanup():
    """Stops every server still running (SIGTERM, so a sanitizer build
    reports leaks) and fails on any sanitizer report in any server's log."""
    for s in _servers:
        if s.proc.poll() is None:
            s.stop()
        log = s.read_log()
        for mark in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
            if mark in log:
                print("FAIL server_sanitizer: %s in the log of %s:\n%s" % (
                    mark, " ".join(s.proc.args[1:4]), log[log.index(mark) - 200:][:1500]), flush=True)
                break
        try:
            os.unlink(s.log_path)
        except OSError:
            pass


failures = 0


def check(name, cond, why=""):
    global failures
    if cond:
        print("PASS " + name, flush=True)
    else:
        failures += 1
        print("FAIL %s: %s" % (name, why), flush=True)
    return cond


def run_tests(tests):
    """Runs each test function; an exception is a failure of that test."""
    for t in tests:
        try:
            t()
        except Exception as e:  # a crash in one test must not hide the others
            check(t.__name__, False, "%s: %s" % (type(e).__name__, str(e)[:300]))
    sys.exit(1 if failures else 0)
