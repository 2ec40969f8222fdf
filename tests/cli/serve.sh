#!/usr/bin/env bash
# dsv4 serve end to end: the OpenAI and Anthropic SDKs and curl against a
# server on 127.0.0.1 (tests/serve/test_api.py), invariance under a load of
# 32 streaming clients with aborts (test_load.py), persistence across kill -9
# and rejection of bad state files (test_persist.py), tool_choice on the demo
# model (test_tool_choice.py), --spec against plain decoding (test_spec.py),
# hostile clients
# (test_hostile.py; tests/cli/sanitized.sh runs it on the ASan build too).
# The Python packages are in tests/requirements.txt.
set -u
. tests/python.sh
export DSV4_BIN=${DSV4_BIN:-build/dsv4}
if ! "$PY" -c 'import openai, anthropic' 2>/dev/null; then
    echo "FAIL serve_python: $PY lacks the openai/anthropic packages (pip install -r tests/requirements.txt)"
    exit 0
fi
for t in test_api test_tool_choice test_spec test_load test_persist test_hostile; do
    timeout 240 "$PY" tests/serve/$t.py 2>&1
    rc=$?
    [ $rc -eq 124 ] && echo "FAIL serve_$t: timed out"
done
exit 0
