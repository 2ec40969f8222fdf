#!/usr/bin/env python3
"""The demo model behind `dsv4 serve`, asked through the official OpenAI SDK.

  build/dsv4 serve --model models/demo --port 8000 &
  python3 tools/demo/openai_tools.py [--base-url http://127.0.0.1:8000/v1]

Asks one arithmetic question, then a weather question with the demo tools offered:
the reply must be a tool call, which gets a made-up result, and the model answers
from it. Exits 1 when the tool call or the answer is not the expected one.
"""
import argparse
import json
import os
import sys

from openai import OpenAI

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tasks  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    a = p.parse_args()
    c = OpenAI(base_url=a.base_url, api_key="none")
    r = c.chat.completions.create(model="demo", temperature=0,
                                  messages=[{"role": "user", "content": "What is 347 + 285?"}])
    print("What is 347 + 285? ->", r.choices[0].message.content)

    msgs = [{"role": "system", "content": tasks.SYSTEM}, {"role": "user", "content": "What's the weather in Paris?"}]
    r = c.chat.completions.create(model="demo", temperature=0, messages=msgs, tools=tasks.TOOLS)
    m = r.choices[0].message
    calls = [(t.function.name, json.loads(t.function.arguments)) for t in (m.tool_calls or [])]
    print("What's the weather in Paris? ->", r.choices[0].finish_reason, calls)
    if calls != [("get_weather", {"city": "Paris"})]:
        sys.exit("not the expected tool call")
    result = {"city": "Paris", "temperature_c": 18, "condition": "cloudy"}
    msgs += [{"role": "assistant", "content": m.content or "", "tool_calls": [t.model_dump() for t in m.tool_calls]},
             {"role": "tool", "tool_call_id": m.tool_calls[0].id, "content": json.dumps(result)}]
    r = c.chat.completions.create(model="demo", temperature=0, messages=msgs, tools=tasks.TOOLS)
    answer = r.choices[0].message.content
    print(f"tool result {json.dumps(result)} ->", answer)
    if answer != "It is 18°C and cloudy in Paris.":
        sys.exit("not the expected answer")


if __name__ == "__main__":
    main()
