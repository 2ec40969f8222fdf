# Renders every conversation of cases.json with DeepSeek-V4's reference
# encoding_dsv4.py and writes <name>.txt next to it (the exact prompt bytes).
# The reference file is not part of this repository: pass the folder that
# holds it (from the model's Hugging Face repo, encoding/encoding_dsv4.py).
#   python gen_goldens.py /path/to/folder/with/encoding_dsv4
import json, os, sys

sys.path.insert(0, sys.argv[1])
from encoding_dsv4 import encode_messages  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
cases = json.load(open(os.path.join(here, "cases.json"), encoding="utf-8"))
for c in cases:
    msgs = []
    for m in c["messages"]:
        m = dict(m)
        if "tools_json" in m:
            m["tools"] = json.loads(m.pop("tools_json"))
        if "response_format_json" in m:
            m["response_format"] = json.loads(m.pop("response_format_json"))
        msgs.append(m)
    mode = c["mode"]
    k = c.get("n_context", 0)
    out = encode_messages(
        msgs[k:], "chat" if mode == "chat" else "thinking",
        context=msgs[:k] or None,
        drop_thinking=c.get("drop_thinking", True),
        add_default_bos_token=c.get("bos", True),
        reasoning_effort="max" if mode == "thinking_max" else None)
    with open(os.path.join(here, c["name"] + ".txt"), "w", encoding="utf-8", newline="") as f:
        f.write(out)
print(len(cases), "goldens")
