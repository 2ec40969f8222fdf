#!/usr/bin/env python3
"""Writes a deterministic corpus of varied strings, one JSON string per line,
for the tokenizer parity test. Usage: gen_corpus.py OUT.jsonl [N] [--big MB]

Covers English, Chinese, Japanese, Korean and other scripts, emoji (ZWJ,
flags, skin tones), code with tabs/CRLF/long whitespace runs, numbers in many
scripts, special tokens inside text (whole, adjacent, truncated), look-alikes
of invalid input (escaped surrogates, U+FFFD, BOM, lone combining marks) and
random code points. NUL is left out: the CLI reads lines with cJSON, which
cannot carry it (the C API itself handles NUL; the unit test covers it).
With --big MB it instead writes one large plain-text file for benchmarks."""
import json
import random
import sys
import unicodedata

SPECIALS = [
    "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<think>",
    "</think>", "｜DSML｜", "<dsml:", "</dsml:", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁end｜>",
    "<｜fim▁hole｜>", "<|EOT|>", "<｜place▁holder▁no▁7｜>", "<｜table｜>", "<｜/td｜>", "<｜▁pad▁｜>",
    "<｜latest_reminder｜>", "<｜end_of_query｜>", "<｜image｜>",
]
WORDS = ("the of and to in is was that for it with as his on be at by had are but from or have an they "
         "which one you were all she there would their we him been has when who will no more if out so up "
         "said what its about than into them can only other time new some could these two may first then do "
         "any like my now over such our man me even most made after also did many off before must well back "
         "through years much where your way down should because each just those people Mr how too little "
         "state good very make world still see own men work long here get both between life being under "
         "never day same another know while last might us great old year come since against go came right "
         "used take three don't I'm it's we'll they've she'd you're isn't O'Neil naïve café résumé coöperate "
         "Internet e-mail co-op U.S.A. Ph.D. HTTP/2 JSON-RPC GPT-4o x86_64 DeepSeek-V4").split()
ZH = ("我们的人工智能模型可以理解中文和英文。今天天气很好，我们去公园散步吧！深度求索发布了新的大语言模型，"
      "它在数学、编程和推理方面表现出色。《红楼梦》是中国古典小说的巅峰之作。这个问题的答案是：四十二。"
      "计算机科学与技术专业学生需要学习数据结构、算法、操作系统和计算机网络。")
JA = ("こんにちは、世界！今日はいい天気ですね。私は東京に住んでいます。カタカナのテキストとひらがなを混ぜる。"
      "機械学習の研究はとても面白いです。ラーメンを食べに行きましょう。ｶﾀｶﾅ半角もあります。ヴァイオリン、ゔ、ゟ。")
KO = "안녕하세요 세계! 오늘 날씨가 좋네요. 인공지능 모델을 테스트합니다. 한국어와 English 혼합."
OTHER = ["Привет, мир! Съешь же ещё этих мягких французских булок.", "Γειά σου Κόσμε! Ελληνικά κείμενα.",
         "مرحبا بالعالم! هذا نص عربي مع أرقام ١٢٣٤٥٦.", "שלום עולם! טקסט בעברית.",
         "नमस्ते दुनिया! हिन्दी पाठ १२३४ के साथ।", "สวัสดีชาวโลก ข้อความภาษาไทย", "Xin chào thế giới! Tiếng Việt có dấu.",
         "Zażółć gęślą jaźń. Příliš žluťoučký kůň.", "Ἐν ἀρχῇ ἦν ὁ λόγος", "ᚠᛇᚻ᛫ᛒᛦᚦ ᚠᚱᚩᚠᚢᚱ", "Ⓐⓑⓒ ①②③ ⅠⅡⅢ ⅰⅱ"]
EMOJI = ["😀", "🎉", "👍🏽", "👨‍👩‍👧‍👦", "🇨🇳", "🇯🇵", "❤️", "🏳️‍🌈", "🤖", "🧑🏿‍💻", "✨", "🔥", "1️⃣", "🫠", "©", "™"]
CODE = [
    "def f(x):\n\treturn x ** 2  # square\n",
    "int main(void) {\n    printf(\"%d\\n\", 42);\n    return 0;\n}\n",
    "for (let i = 0; i < n; i++) {\r\n\t\tsum += a[i];\r\n}\r\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "<div class=\"x\">&nbsp;<b>bold</b></div>",
    "if __name__ == '__main__':\n        main()\n\n\n",
    "$ ls -la | grep '^d' && echo \"done\" 2>&1 >/dev/null",
    "x=1;y=2;z=x+y*3/4-5%6^7&8|9~0",
    "    \t  \n\n  \t\t\t    mixed   whitespace\u3000\u00a0here  ",
    "{\"key\": [1, 2.5e-3, true, null], \"nested\": {\"a\": \"b\"}}",
    "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
    "#include <stdio.h>\n#define MAX(a,b) ((a)>(b)?(a):(b))\n",
]
WEIRD = ["\\ud800", "\\udfff\\ud83d", "\\x80\\xff", "%C3%28", "\ufffd", "\ufeffBOM", "a\u0301", "\u0301", "\u200b\u200c\u200d",
         "\u2028\u2029", "\u0085", "\u180e", "\u00ad", "\U0010fffd", "\uffff", "\U0001f600\ufe0f", "e\u0308\u0308",
         "\x01\x02\x1b[31m", "\x7f", "\r\n\r\n", "\r", "\t", "\x0b\x0c"]
WS = [" ", "  ", "\t", "\n", "\r\n", "\u3000", "\u00a0", "\u2009", "\u200a", "\u2003", "\u180e", "\u0085", "\x0b", "\x1c"]


def rand_cp(rng):
    """A random assigned, non-surrogate, non-NUL code point."""
    while True:
        r = rng.random()
        if r < 0.3:
            cp = rng.randrange(1, 0x800)
        elif r < 0.8:
            cp = rng.randrange(0x800, 0x10000)
        else:
            cp = rng.randrange(0x10000, 0x30000)
        if 0xD800 <= cp < 0xE000:
            continue
        ch = chr(cp)
        if unicodedata.category(ch) != "Cn":
            return ch


def number(rng):
    kind = rng.randrange(7)
    if kind == 0:
        return str(rng.randrange(10 ** rng.randrange(1, 20)))
    if kind == 1:
        return f"{rng.uniform(-1e6, 1e6):.{rng.randrange(0, 8)}f}"
    if kind == 2:
        return f"{rng.randrange(10**9):,}"
    if kind == 3:
        return "".join(rng.choice("０１２３４５６７８９") for _ in range(rng.randrange(1, 8)))
    if kind == 4:
        return "".join(rng.choice("٠١٢٣٤٥٦٧٨٩०१२३४५६७८९¹²³½¾⅓") for _ in range(rng.randrange(1, 8)))
    if kind == 5:
        return f"{rng.randrange(1900, 2100)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
    return "0x" + "".join(rng.choice("0123456789abcdefABCDEF") for _ in range(rng.randrange(1, 17)))


def english(rng, n):
    out = []
    for _ in range(n):
        w = rng.choice(WORDS)
        if rng.random() < 0.1:
            w = w.capitalize()
        if rng.random() < 0.08:
            w = w.upper()
        out.append(w)
        if rng.random() < 0.12:
            out[-1] += rng.choice([",", ".", "!", "?", ";", ":", "...", "'s", ")", "\"", "—", "–"])
    return " ".join(out)


def piece(rng, text, lo=1, hi=60):
    a = rng.randrange(len(text))
    return text[a:a + rng.randrange(lo, hi)]


def special_text(rng):
    parts = []
    for _ in range(rng.randrange(1, 7)):
        r = rng.random()
        if r < 0.4:
            parts.append(rng.choice(SPECIALS))
        elif r < 0.5:
            s = rng.choice(SPECIALS)
            parts.append(s[:rng.randrange(1, len(s))])  # truncated: must stay text
        elif r < 0.75:
            parts.append(english(rng, rng.randrange(1, 6)))
        else:
            parts.append(rng.choice([piece(rng, ZH, 1, 10), " ", "\n", "<", "｜", "<<", "think>"]))
    return "".join(parts)


def mixed(rng):
    gens = [lambda: english(rng, rng.randrange(1, 8)), lambda: piece(rng, ZH), lambda: piece(rng, JA),
            lambda: piece(rng, KO), lambda: piece(rng, rng.choice(OTHER)), lambda: rng.choice(EMOJI),
            lambda: number(rng), lambda: rng.choice(WS) * rng.randrange(1, 4), lambda: rng.choice(WEIRD),
            lambda: rand_cp(rng)]
    return "".join(rng.choice(gens)() for _ in range(rng.randrange(1, 8)))


def code(rng):
    parts = [rng.choice(CODE) for _ in range(rng.randrange(1, 4))]
    if rng.random() < 0.5:
        parts.insert(rng.randrange(len(parts) + 1), rng.choice([" ", "\t", "\n", "  \n"]) * rng.randrange(1, 200))
    s = "".join(parts)
    if rng.random() < 0.3:
        s = s.replace("    ", "\t")
    return s


def ascii_soup(rng):
    return "".join(rng.choice("abcXYZ019 \t\n\r!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") for _ in range(rng.randrange(1, 80)))


def random_unicode(rng):
    return "".join(rand_cp(rng) for _ in range(rng.randrange(1, 30)))


def corpus(n, seed=20261129):
    rng = random.Random(seed)
    fixed = ["", " ", "  ", "\n", "a", "Hello world!", "Hello, world! 你好，世界！", "  leading", "trailing  ",
             "a  b   c    d", "x" * 1000, " " * 5000, "\t" * 300 + "x", "\n" * 50, "1" * 100,
             "1234567890123", "3.14159265358979", "ｈｅｌｌｏ", "I'm can't won't y'all", "'''\"\"\"", "🎉" * 30]
    fixed += SPECIALS + [s + s for s in SPECIALS[:5]] + WEIRD + OTHER + EMOJI + CODE
    fixed += [chr(c) for c in range(1, 256)]
    out = list(fixed)
    gens = [lambda: english(rng, rng.randrange(1, 60)), lambda: piece(rng, ZH, 1, 120),
            lambda: piece(rng, JA, 1, 120), lambda: mixed(rng), lambda: code(rng),
            lambda: " ".join(number(rng) for _ in range(rng.randrange(1, 6))), lambda: special_text(rng),
            lambda: ascii_soup(rng), lambda: random_unicode(rng),
            lambda: "".join(rng.choice(EMOJI) for _ in range(rng.randrange(1, 10)))]
    while len(out) < n:
        out.append(rng.choice(gens)())
    return out


def big_text(mb, seed=7):
    rng = random.Random(seed)
    parts, size = [], 0
    while size < mb * 1_000_000:
        r = rng.random()
        s = (english(rng, rng.randrange(20, 120)) + "\n" if r < 0.6 else
             piece(rng, ZH, 20, 120) + "\n" if r < 0.75 else code(rng) if r < 0.9 else mixed(rng) + "\n")
        parts.append(s)
        size += len(s.encode())
    return "".join(parts)


def main():
    args = sys.argv[1:]
    if "--big" in args:
        i = args.index("--big")
        with open(args[0], "w", encoding="utf-8", newline="") as f:
            f.write(big_text(float(args[i + 1])))
        return
    n = int(args[1]) if len(args) > 1 else 6000
    with open(args[0], "w", encoding="utf-8") as f:
        for s in corpus(n):
            f.write(json.dumps(s, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
