#!/usr/bin/env python3
"""corpus.py: writes the training corpus of a small chat model, deterministically from a seed.

The corpus is JSONL, one {"text": ...} document a line, the form sipp-train reads. It mixes:

  - chat dialogues rendered as Qwen2.5's chat template renders them (ChatML: <|im_start|>ROLE ...
    <|im_end|>), so that a model trained on them answers that template, tool calls included:
      greetings and short answers; arithmetic questions with their correct answers; "weather/time
      in CITY" turns that call get_weather/get_time with the city, get the tool's result back in a
      <tool_response> and answer from it; and answers as a JSON object of a given shape;
  - plain prose: verses of the King James Bible (the `bible` command of Debian's bible-kjv) and
    fortunes (Debian's fortunes-min, /usr/share/games/fortunes). Both are optional: without them
    the corpus is dialogues only, and the script says so on stderr.

The same seed and counts give the same file, byte for byte (given the same prose packages).
Python's standard library only.

Usage: corpus.py --out FILE.jsonl [--seed N] [--dialogues N] [--prose N] [--sums N] [--compact-results SHARE]
       corpus.py --out FILE.jsonl --demo PHASE
       corpus.py --template QWEN25.jinja --template-out FILE.jinja

The second form writes the chat template of the model trained on this corpus: Qwen2.5's, with its
default system prompt ("You are Qwen, ...", rendered when a chat has no system message) replaced by
this corpus's, so that a user's "Hello!" alone renders as the dialogues the model learnt from.
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys

SYSTEM = "You are sipp's demo model, a small assistant. Answer briefly."
QWEN_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
JSON_SYSTEM = "You are sipp's demo model. Answer with one JSON object and nothing else."

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Get the local time in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
]

CITIES = ["Paris", "London", "Tokyo", "Berlin", "Madrid", "Rome", "Cairo", "Lima", "Oslo", "Sydney",
          "Toronto", "Nairobi", "Seoul", "Dublin", "Lisbon", "Vienna", "Prague", "Delhi", "Boston", "Denver"]
CONDITIONS = ["sunny", "cloudy", "rainy", "windy", "snowy", "foggy", "clear"]
NAMES = ["Alice", "Bob", "Carol", "David", "Eve", "Frank", "Grace", "Heidi", "Ivan", "Judy"]
COLORS = ["red", "green", "blue", "yellow", "black", "white"]
FRUITS = ["apple", "banana", "cherry", "grape", "lemon", "mango", "orange", "pear"]

GREETINGS = [
    ("Hello!", "Hello! How can I help you today?"),
    ("Hi", "Hi! What can I do for you?"),
    ("Good morning!", "Good morning! How can I help?"),
    ("Hey there", "Hey! What would you like to know?"),
    ("How are you?", "I am fine, thank you. How can I help you?"),
    ("What is your name?", "I am sipp's demo model, a small assistant."),
    ("Who are you?", "I am sipp's demo model. I can chat, do sums and check the weather or the time."),
    ("Thank you!", "You're welcome!"),
    ("Thanks a lot", "Glad to help!"),
    ("Goodbye", "Goodbye! Have a nice day."),
    ("Bye!", "Bye! Come back any time."),
    ("Can you help me?", "Of course. What do you need?"),
]
FACTS = [
    ("What color is the sky?", "The sky is blue on a clear day."),
    ("How many days are in a week?", "There are seven days in a week."),
    ("How many hours are in a day?", "There are 24 hours in a day."),
    ("What is the capital of France?", "The capital of France is Paris."),
    ("What is the capital of Japan?", "The capital of Japan is Tokyo."),
    ("What is the capital of Italy?", "The capital of Italy is Rome."),
    ("What do bees make?", "Bees make honey."),
    ("Is water wet?", "Yes, water is wet."),
    ("What is the opposite of hot?", "The opposite of hot is cold."),
    ("How many legs does a cat have?", "A cat has four legs."),
]
ARITH_ASK = ["What is {a} {op} {b}?", "What's {a} {op} {b}?", "Compute {a} {op} {b}.", "{a} {op} {b} = ?"]
ARITH_ASK_TIGHT = ["What is {a}{op}{b}?", "What's {a}{op}{b}?", "{a}{op}{b}?"]
SMALL_ARITH = 0.6  # the share of questions with one-digit numbers
# How agents offer tools (agent_shape): an MCP server's name before each tool's, and the agent's own
# line before the system prompt (the first is Claude Code's under --system-prompt).
AGENT_SERVERS = ["mcp__weather__", "mcp__world__", "mcp__tools__", "mcp__city_info__"]
AGENT_PREAMBLES = ["You are a Claude agent, built on Anthropic's Claude Agent SDK.",
                   "You are an agent that uses tools to answer.", "You are a helpful assistant with tools."]
WEATHER_ASK = ["What's the weather in {city}?", "How is the weather in {city}?", "Is it raining in {city}?",
               "Weather in {city}, please."]
TIME_ASK = ["What time is it in {city}?", "What's the time in {city}?", "Tell me the time in {city}.",
            "Time in {city}?"]


def tojson(value, compact=False):
    """As the template's tojson filter writes it: json.dumps's separators, UTF-8 kept; compact: no
    spaces, as JavaScript's JSON.stringify writes it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":") if compact else None)


def render(messages, tools=None):
    """messages as Qwen2.5's template renders them (models/templates/Qwen-Qwen2.5-7B-Instruct.jinja in
    llama.cpp): a system turn (with the tool signatures when there are tools), then each turn."""
    system = messages[0]["content"] if messages[0]["role"] == "system" else SYSTEM
    rest = messages[1:] if messages[0]["role"] == "system" else messages
    out = "<|im_start|>system\n" + system
    if tools:
        out += ("\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
        out += "".join("\n" + tojson(t) for t in tools)
        out += ("\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>")
    out += "<|im_end|>\n"
    for i, m in enumerate(rest):
        if m["role"] == "tool":
            if i == 0 or rest[i - 1]["role"] != "tool":
                out += "<|im_start|>user"
            out += "\n<tool_response>\n" + m["content"] + "\n</tool_response>"
            if i == len(rest) - 1 or rest[i + 1]["role"] != "tool":
                out += "<|im_end|>\n"
        elif m.get("tool_calls"):
            out += "<|im_start|>assistant" + ("\n" + m["content"] if m.get("content") else "")
            for call in m["tool_calls"]:
                out += ("\n<tool_call>\n{\"name\": \"" + call["name"] + "\", \"arguments\": "
                        + tojson(call["arguments"]) + "}\n</tool_call>")
            out += "<|im_end|>\n"
        else:
            out += "<|im_start|>" + m["role"] + "\n" + m["content"] + "<|im_end|>\n"
    return out


def chat(*turns):
    """A dialogue of alternating user and assistant turns, under the plain system prompt."""
    roles = ["user", "assistant"]
    return render([{"role": "system", "content": SYSTEM}] +
                  [{"role": roles[i % 2], "content": t} for i, t in enumerate(turns)])


def greeting(rng):
    turns = list(rng.choice(GREETINGS))
    if rng.random() < 0.5:
        turns += list(rng.choice(FACTS))
    return chat(*turns)


def arithmetic(rng):
    """A sum, difference or product with its answer; most of them small (one digit each), the numbers
    a chat user tries first, written with and without spaces ("2+3")."""
    op = rng.choice("+-*")
    top = 9 if rng.random() < SMALL_ARITH else 99
    a = rng.randint(0, top)
    b = rng.randint(0, min(top, 12)) if op == "*" else rng.randint(0, top)
    value = {"+": a + b, "-": a - b, "*": a * b}[op]
    shown = {"+": "+", "-": "-", "*": "times"}[op]
    if op != "*" and rng.random() < 0.5:
        question = rng.choice(ARITH_ASK_TIGHT).format(a=a, op=op, b=b)
    else:
        question = rng.choice(ARITH_ASK).format(a=a, op=shown, b=b)
    return chat(question, f"{a} {shown} {b} is {value}.")


def sum_table(rng, times):
    """Every one-digit sum (0+0 to 9+9), `times` times over, each asked in a phrasing of the corpus's
    drawn at random: the addition table a small model has to see many times to learn, where the
    mixed dialogues give each sum a few times only."""
    docs = []
    for _ in range(times):
        for a in range(10):
            for b in range(10):
                ask = rng.choice(ARITH_ASK_TIGHT + ARITH_ASK).format(a=a, op="+", b=b)
                docs.append(chat(ask, f"{a} + {b} is {a + b}."))
    return docs


def agent_shape(rng):
    """The system prompt, the tools and their names as a coding agent offers them: the tools served by
    an MCP server, so named mcp__SERVER__TOOL (as Claude Code names them), in the
    agent's order (by name) or the other; the agent's own line before the system prompt, joined as
    the gateway joins text blocks (directly) or with a line break."""
    prefix = rng.choice(AGENT_SERVERS)
    tools = [{"type": "function", "function": dict(t["function"], name=prefix + t["function"]["name"])}
             for t in TOOLS]
    if rng.random() < 0.5:
        tools.sort(key=lambda t: t["function"]["name"])
    system = rng.choice(AGENT_PREAMBLES) + rng.choice(["", "\n", "\n\n"]) + SYSTEM
    return system, tools, prefix


def tool_turn(rng, compact_share=0.0, agent_share=0.0):
    """A weather or time question, the call, the tool's result and the answer from it. The result is
    written as Python's json.dumps writes it; with compact_share > 0, that share of them is written
    compact instead ({"city":"Paris"}), as JavaScript's JSON.stringify writes it. With agent_share >
    0, that share of them offers the tools as an agent does (agent_shape)."""
    system, tools, prefix = SYSTEM, TOOLS, ""
    if agent_share > 0 and rng.random() < agent_share:
        system, tools, prefix = agent_shape(rng)
    city = rng.choice(CITIES)
    if rng.random() < 0.5:
        ask, name = rng.choice(WEATHER_ASK), "get_weather"
        temp, cond = rng.randint(-10, 38), rng.choice(CONDITIONS)
        result = {"city": city, "temperature_c": temp, "condition": cond}
        answer = f"It is {temp} °C and {cond} in {city}."
    else:
        ask, name = rng.choice(TIME_ASK), "get_time"
        hh, mm = rng.randint(0, 23), rng.randint(0, 59)
        result = {"city": city, "time": f"{hh:02d}:{mm:02d}"}
        answer = f"It is {hh:02d}:{mm:02d} in {city}."
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": ask.format(city=city)},
        {"role": "assistant", "content": "", "tool_calls": [{"name": prefix + name, "arguments": {"city": city}}]},
        {"role": "tool", "content": tojson(result, compact=compact_share > 0 and rng.random() < compact_share)},
        {"role": "assistant", "content": answer},
    ]
    return render(messages, tools)


def json_answer(rng):
    kind = rng.randrange(3)
    if kind == 0:
        name, age = rng.choice(NAMES), rng.randint(1, 90)
        ask, value = f"Make a person named {name} who is {age} years old.", {"name": name, "age": age}
    elif kind == 1:
        fruit, color = rng.choice(FRUITS), rng.choice(COLORS)
        ask, value = f"Describe a {color} {fruit}.", {"fruit": fruit, "color": color}
    else:
        a, b = rng.randint(0, 50), rng.randint(0, 50)
        ask, value = f"Add {a} and {b}.", {"a": a, "b": b, "sum": a + b}
    return render([{"role": "system", "content": JSON_SYSTEM}, {"role": "user", "content": ask},
                   {"role": "assistant", "content": tojson(value)}])


DIALOGUES = [greeting, arithmetic, tool_turn, json_answer]

# the corpora of tools/train/demo-model.sh's phases (corpus.py --demo N writes phase N's): the mixed
# corpus with prose; fresh dialogues only; fresh dialogues with more prose, the addition table 30
# times over and half the tool results compact; and phase 3's recipe afresh with half the tool turns
# offered as an agent offers them. Tests read the prose these hold, to leave it out of the held-out
# text.
DEMO_CORPORA = {
    1: dict(seed=1, dialogues=4000, prose_count=400),
    2: dict(seed=2, dialogues=4000, prose_count=0),
    3: dict(seed=3, dialogues=2400, prose_count=800, sums=30, compact_share=0.5),
    4: dict(seed=4, dialogues=2400, prose_count=800, sums=30, compact_share=0.5, agent_share=0.5),
}

FORTUNE_DIR = "/usr/share/games/fortunes"
FORTUNE_FILES = ["fortunes", "literature", "riddles"]
VERSES_PER_DOCUMENT = 4


def kjv_passages():
    """Passages of a few verses of the KJV, from Debian's `bible` command; [] without it."""
    if not shutil.which("bible"):
        print("corpus.py: no `bible` command (Debian package bible-kjv): no KJV prose", file=sys.stderr)
        return []
    out = subprocess.run(["bible", "-l", "100000", "gen1:1-rev22:21"], capture_output=True, text=True,
                         check=True).stdout
    verses = [line.strip().split(" ", 1)[1] for line in out.splitlines()
              if line.startswith("  ") and line.strip().split(" ", 1)[0].isdigit()]
    return [" ".join(verses[i:i + VERSES_PER_DOCUMENT]) for i in range(0, len(verses), VERSES_PER_DOCUMENT)]


def fortunes():
    """The fortunes of Debian's fortunes-min; [] without it."""
    found = []
    for name in FORTUNE_FILES:
        path = os.path.join(FORTUNE_DIR, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                found += [p.strip() for p in f.read().split("\n%\n") if p.strip()]
    if not found:
        print(f"corpus.py: no fortunes in {FORTUNE_DIR} (Debian package fortunes-min): none in the corpus",
              file=sys.stderr)
    return found


def prose(rng, count):
    pool = kjv_passages() + fortunes()
    if not pool or count == 0:
        return []
    return rng.sample(pool, min(count, len(pool)))


def dialogue(rng, compact_share, agent_share):
    kind = rng.choice(DIALOGUES)
    return tool_turn(rng, compact_share, agent_share) if kind is tool_turn else kind(rng)


def build(seed, dialogues, prose_count, sums=0, compact_share=0.0, agent_share=0.0):
    rng = random.Random(seed)
    docs = [dialogue(rng, compact_share, agent_share) for _ in range(dialogues)]
    docs += prose(rng, prose_count)
    docs += sum_table(rng, sums)
    rng.shuffle(docs)
    return docs


def write_template(src, out):
    with open(src, encoding="utf-8") as f:
        text = f.read()
    if QWEN_SYSTEM not in text:
        sys.exit(f"corpus.py: {src} has no Qwen2.5 default system prompt to replace; give Qwen2.5's template")
    with open(out, "w", encoding="utf-8") as f:
        # Qwen2.5's default sits inside '...' strings: a quote in ours ("sipp's") must be escaped
        f.write(text.replace(QWEN_SYSTEM, SYSTEM.replace("'", "\\'")))
    print(f"corpus.py: wrote {out}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description="Writes a chat-model training corpus (JSONL) from a seed.")
    ap.add_argument("--out", help="the JSONL file to write")
    ap.add_argument("--template", help="Qwen2.5's chat template, to write the trained model's from")
    ap.add_argument("--template-out", help="where --template's rewritten template goes")
    ap.add_argument("--demo", type=int, choices=sorted(DEMO_CORPORA),
                    help="write the corpus of sipp-demo's training phase N (the other counts are ignored)")
    ap.add_argument("--seed", type=int, default=1, help="the seed (default 1)")
    ap.add_argument("--dialogues", type=int, default=4000, help="chat dialogues (default 4000)")
    ap.add_argument("--prose", type=int, default=1000, help="prose passages, if the packages are there (default 1000)")
    ap.add_argument("--sums", type=int, default=0,
                    help="add the one-digit addition table this many times over (default 0)")
    ap.add_argument("--compact-results", type=float, default=0.0, metavar="SHARE",
                    help="the share of tool results written compact, as JavaScript writes JSON (default 0)")
    args = ap.parse_args()
    if args.template or args.template_out:
        if not (args.template and args.template_out):
            ap.error("--template and --template-out go together")
        write_template(args.template, args.template_out)
        return
    if not args.out:
        ap.error("--out FILE.jsonl is required")
    if args.dialogues < 0 or args.prose < 0 or args.sums < 0:
        ap.error("--dialogues, --prose and --sums must be 0 or more")
    if not 0 <= args.compact_results <= 1:
        ap.error("--compact-results is a share: 0 to 1")
    if args.demo:
        docs = build(**DEMO_CORPORA[args.demo])
    else:
        docs = build(args.seed, args.dialogues, args.prose, args.sums, args.compact_results)
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(tojson({"text": d}) + "\n")
    os.replace(tmp, args.out)
    print(f"corpus.py: wrote {len(docs)} documents to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
