#!/usr/bin/env python3
"""The demo checkpoint's MTP head: how often its one-token draft would be accepted.

  mtp_accept.py --model models/demo [--render build/demo_render] [--n 60]

The engine does not run the MTP head yet, so this measures it with PyTorch (the head as
train.py composes it, loaded from the checkpoint's `mtp.0.*` tensors, fp32). On held-out
conversations (tasks.py; prompt + the reference replies), for every token t of an
assistant turn the draft is argmax MTP(X_main[t-2], token t-1) and greedy speculative
decoding accepts it when it equals the main model's argmax at position t-1. Prints the acceptance rate per
kind of conversation and overall (teacher-forced on the reference reply: where the
model's own greedy reply differs the rate can differ).
"""
import argparse
import json
import os
import random
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import tasks  # noqa: E402
import train  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402


def held_out(fn, rng):
    while True:
        it = fn(rng)
        if tasks.held_out(it[0]):
            return it


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--render", default="build/demo_render")
    p.add_argument("--n", type=int, default=60, help="conversations per kind")
    p.add_argument("--seed", type=int, default=11)
    a = p.parse_args()
    torch.set_float32_matmul_precision("highest")
    cfg = train.build_config(False)
    model, mtp = train.init_model(cfg, 0)
    train.load_official(model, mtp, cfg, a.model)
    model.eval()
    mtp.eval()
    tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    captured = {}
    model.model.hc_head.register_forward_pre_hook(lambda mod, args: captured.__setitem__("x", args[0]))

    rng = random.Random(a.seed)
    kinds = {
        "arithmetic": lambda: (lambda it: {"mode": "chat", "messages": [
            {"role": "user", "content": it[1]}, {"role": "assistant", "content": it[2]}]})(
            held_out(tasks.arith_item, rng)),
        "tool call + answer": lambda: tasks.tool_conversation(rng, held_out(tasks.tool_item, rng)),
    }
    report, total = {}, [0, 0]
    for kind, make in kinds.items():
        acc = [0, 0]
        for _ in range(a.n):
            conv = make()
            cuts = []
            for k, m in enumerate(conv["messages"]):
                if m["role"] == "assistant":
                    cuts += [k, k + 1]
            conv["cuts"] = cuts
            renders = json.loads(subprocess.run([a.render], input=json.dumps(conv) + "\n",
                                                capture_output=True, text=True, check=True).stdout)
            # Token ranges of the assistant turns (renderings of growing prefixes end at added tokens).
            lens = [len(tok.encode(r, add_special_tokens=False).ids) for r in renders]
            reply = [(lens[j], lens[j + 1]) for j in range(0, len(lens), 2)]
            ids = torch.tensor([tok.encode(renders[-1], add_special_tokens=False).ids])
            with torch.no_grad():
                main_arg = model(input_ids=ids, use_cache=False).logits[0].argmax(-1)   # [T]: predicts t+1
                mtp_arg = mtp(model, captured["x"], ids)[0].argmax(-1)                  # [T-1]: row i predicts i+2
            for lo, hi in reply:
                for t in range(max(lo, 2), hi):   # the draft of reply token t comes from MTP row t-2
                    acc[0] += int(mtp_arg[t - 2] == main_arg[t - 1])
                    acc[1] += 1
        report[kind] = {"drafts": acc[1], "accepted": acc[0], "rate": round(acc[0] / acc[1], 4)}
        total[0] += acc[0]
        total[1] += acc[1]
    report["all"] = {"drafts": total[1], "accepted": total[0], "rate": round(total[0] / total[1], 4)}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
