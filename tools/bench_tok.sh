#!/bin/sh
# bench_tok.sh — tokenizer benchmarks, results to docs/data/tok_bench.txt.
#   1. load a 200k-rank file (all 199,998 o200k_base ranks, made by tools/tok/gen_cases.js --full)
#   2. tokenize 1 MB of mixed-script text (deterministic, made below)
# Needs: bin/k3 (make), node + npm (tools/tok) for the o200k file, python3 for the text.
set -eu
cd "$(dirname "$0")/.."
K3=${K3:-./bin/k3}
V=build/tok_o200k
if [ ! -f $V/tiktoken.model ]; then
  (cd tools/tok && [ -d node_modules ] || npm ci --no-audit --no-fund) >/dev/null
  (cd tools/tok && node gen_cases.js --full ../../$V) 2>/dev/null
  git checkout -- tests/tok 2>/dev/null || true   # gen_cases.js rewrites identical files
fi
T=build/tok_bench_1mb.txt
python3 - "$T" <<'PY'
import random, sys
random.seed(1)
parts = ["The quick brown fox jumps over the lazy dog. ", "getUserName(iPhone, HTTPServer); ", "中文字符测试，你好世界！",
         "こんにちは、カタカナとひらがな。", "한국어 문장입니다. ", "مرحبا بالعالم ", "नमस्ते दुनिया ", "สวัสดีครับ ",
         "Привет, мир! ", "emoji 🙂🚀👨‍👩‍👧 ", "def f(x):\n    return x**2  # comment\n", "1234567 3.14159 ",
         "https://example.com/a?b=c&d=e ", "  \t  \n\n", "It's they're CAN'T ", "naïve café Zürich ",]
out, n = [], 0
while n < 1 << 20:
    s = random.choice(parts); out.append(s); n += len(s.encode())
open(sys.argv[1], "w", encoding="utf-8").write("".join(out))
PY
: > build/tok_empty.txt
best() { b=999999; for i in 1 2 3 4 5; do s=$(date +%s%N); "$@" > /dev/null; e=$(date +%s%N); t=$(( (e - s) / 1000 )); [ $t -lt $b ] && b=$t; done; echo $b; }
load_us=$(best $K3 tokenize --tok $V build/tok_empty.txt)
enc_us=$(best $K3 tokenize --tok $V $T)
bytes=$(wc -c < $T); ids=$($K3 tokenize --tok $V $T | tr ',' '\n' | wc -l)
tok_us=$((enc_us - load_us))
{
  echo "# tools/bench_tok.sh on $(uname -m), $(nproc) cores, $(date -u +%Y-%m-%d); best of 5, wall clock"
  echo "# command: sh tools/bench_tok.sh   (k3 tokenize --tok build/tok_o200k FILE)"
  echo "load_200k_ranks_ms $(awk "BEGIN{printf \"%.1f\", $load_us/1000}")   (199998 ranks, $(wc -c < $V/tiktoken.model) bytes, process start included)"
  echo "tokenize_1mb_ms $(awk "BEGIN{printf \"%.1f\", $tok_us/1000}")   ($bytes bytes mixed-script -> $ids ids, load excluded)"
  echo "tokenize_mb_per_s $(awk "BEGIN{printf \"%.1f\", $bytes/$tok_us}")"
} | tee docs/data/tok_bench.txt
