#!/bin/sh
# GBNF grammars on tiny5 (a random model: what it writes is the mask's doing). The corpus:
# every grammar in tests/grammars/ (11) x N seeds of the server's 'grammar' field (make test:
# 2 seeds, 22 replies; K3_TEST_FULL: 20 seeds, 220 replies), each reply ended by the end
# token and checked by tools/gbnf_check.py, a recogniser of its own (when /usr/bin/python3
# is there; make test needs no Python). Then the same bits: a streamed reply; the one-shot
# --grammar-file's ids equal the server's, a batch line's, and --spec with right, half-right
# and wrong drafts; chat with and without speculation; and refusals: exit 2 and 400 naming
# line:column, both constraints at once.
. tests/sh/lib/serve.sh
N=2; [ -n "${K3_TEST_FULL:-}" ] && N=20
PY=/usr/bin/python3; [ -x $PY ] && $PY -c 'import json' 2>/dev/null || PY=
start main
U=http://127.0.0.1:$PORT_main
post() { $C -H 'Content-Type: application/json' "$U$1" -d "$2"; }
esc() { sed 's/\\/\\\\/g; s/"/\\"/g' "$1" | awk '{printf "%s\\n", $0}'; }   # as a JSON string
n=0; checked=0
for f in tests/grammars/*.gbnf; do
  g=$(basename "$f" .gbnf); G=$(esc "$f")
  i=1
  while [ $i -le $N ]; do
    post /v1/completions "{\"prompt\": \"Item $i\", \"max_tokens\": 200, \"seed\": $i,
      \"grammar\": \"$G\"}" | sed 's/"created": [0-9]*, //' >> "$T/$g.jsonl"
    echo >> "$T/$g.jsonl"
    i=$((i + 1)); n=$((n + 1))
  done
  grep -c '"finish_reason": "stop"' "$T/$g.jsonl" | grep -qx "$N" ||
    fail "$g: not every reply ended: $(grep -v '"finish_reason": "stop"' "$T/$g.jsonl" | head -n 2)"
  if [ -n "$PY" ]; then
    $PY tools/gbnf_check.py "$f" "$T/$g.jsonl" choices.0.text > "$T/chk" ||
      fail "$g: $(cat "$T/chk")"
    checked=$((checked + N))
  fi
done
[ -n "$PY" ] || echo "SKIP: /usr/bin/python3 missing: the $n replies were not validated"
echo "ok grammar: $n seeded replies under $(ls tests/grammars/*.gbnf | wc -l) grammars ended;" \
     "$checked valid by tools/gbnf_check.py"

# a streamed reply: its deltas are the corpus' first reply
post /v1/completions "{\"prompt\": \"Item 1\", \"max_tokens\": 200, \"seed\": 1, \"stream\": true,
  \"grammar\": \"$(esc tests/grammars/03_date.gbnf)\"}" > "$T/st.txt"
got=$(sed -n 's/^data: .*"text": "\([^"]*\)".*/\1/p' "$T/st.txt" | tr -d '\n')
want=$(sed -n 's/.*"text": "\([^"]*\)".*/\1/p' "$T/03_date.jsonl" | sed -n 1p)
[ -n "$got" ] && [ "$got" = "$want" ] || fail "streamed '$got', not streamed '$want'"
echo "ok grammar: a streamed reply = the same request's whole reply"

# the one-shot's ids = a batch line's (beside another, with --spec); its text = the server's
f=tests/grammars/06_object.gbnf
"$K3" $M --tok $TK --prompt "Item 1" --grammar-file $f --temperature 1 --seed 1 --gen 200 \
  --out "$T/o.json" --quiet > /dev/null 2> "$T/run.err" || fail "one-shot exited $?"
want=$(sed -n 's/.*"generated_ids": \[\([^]]*\)\].*/\1/p' "$T/o.json" | tr -d ' ')
printf '{"id": "a", "prompt": "Item 1", "gen": 200, "temperature": 1, "seed": 1, "grammar": "%s"}
{"id": "b", "ids": [1, 2, 3], "gen": 20, "temperature": 1, "seed": 2}\n' "$(esc $f)" \
  > "$T/b.jsonl"
"$K3" $M --tok $TK --batch "$T/b.jsonl" --batch-size 2 --spec --quiet > "$T/b.out" \
  2> "$T/b.err" || fail "batch exited $?: $(cat "$T/b.err")"
got=$(sed -n 's/^{"id": "a", "generated_ids": \[\([^]]*\)\].*/\1/p' "$T/b.out" | tr -d ' ')
[ -n "$got" ] && [ "$got" = "$want" ] || fail "batch line: $got, one-shot: $want"
bt=$(sed -n 's/^{"id": "a".*"text": "\(.*\)<|end_of_msg|>", "stop".*/\1/p' "$T/b.out")
st=$(sed -n 's/.*"text": "\(.*\)", "finish_reason".*/\1/p' "$T/06_object.jsonl" | sed -n 1p)
[ -n "$bt" ] && [ "$bt" = "$st" ] || fail "batch text '$bt', the server's '$st'"
# speculation: every row of a verify pass masked as its own step would be
part=$(echo "$want" | cut -d, -f1-3),7,7,7
for d in "--spec --draft-ids $want" "--spec --draft-ids $part" "--spec --draft-ids 9,9,9" \
         "--spec" "--no-spec"; do
  "$K3" $M --tok $TK --prompt "Item 1" --grammar-file $f --temperature 1 --seed 1 --gen 200 \
    $d --out "$T/s.json" > /dev/null 2> "$T/s.err" ||
    fail "$d exited $?: $(tail -n 2 "$T/s.err")"
  got=$(sed -n 's/.*"generated_ids": \[\([^]]*\)\].*/\1/p' "$T/s.json" | tr -d ' ')
  [ "$got" = "$want" ] || fail "--grammar-file $d: $got, plain: $want"
  acc=$(sed -n 's/.*"spec_accepted": \([0-9]*\).*/\1/p' "$T/s.json")
  [ -n "${full:-}" ] || { [ "${acc:-0}" -gt 3 ] || fail "right drafts: $acc accepted"; full=1; }
done
# greedy, two thread counts: the same ids
for th in 1 2; do
  "$K3" $M --tok $TK --prompt "Greedy" --grammar-file tests/grammars/04_words.gbnf --gen 60 \
    --threads $th --out "$T/g$th.json" --quiet > /dev/null 2>&1 || fail "greedy --threads $th"
done
cmp -s "$T/g1.json" "$T/g2.json" 2>/dev/null ||
  [ "$(sed -n 's/.*"generated_ids": \(\[[^]]*\]\).*/\1/p' "$T/g1.json")" = \
    "$(sed -n 's/.*"generated_ids": \(\[[^]]*\]\).*/\1/p' "$T/g2.json")" ] ||
  fail "greedy ids differ between 1 and 2 threads"
echo "ok grammar: the one-shot's ids = the server's = a batch line's = under --spec drafts"

# chat: every reply a sentence; the same replies without speculation
printf 'Give me a date\nAnother one\nAnd one more\n' > "$T/in.txt"
for sp in "" --no-spec; do
  "$K3" $M --chat --tok $TK --grammar-file tests/grammars/03_date.gbnf --seed 3 $sp \
    < "$T/in.txt" > "$T/chat$sp.out" 2> "$T/chat.err" || fail "chat $sp exited $?"
done
cmp -s "$T/chat.out" "$T/chat--no-spec.out" || fail "chat replies differ under --no-spec"
[ "$(grep -c . "$T/chat.out")" = 3 ] || fail "chat: 3 replies expected: $(cat "$T/chat.out")"
grep -vqE '^[12][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$' "$T/chat.out" &&
  fail "chat: a reply is not a date: $(cat "$T/chat.out")"
echo "ok grammar: chat's 3 replies are dates, with and without speculation"

# refusals
"$K3" $M --tok $TK --prompt x --grammar 'root ::= ("a" | "b"' --quiet > /dev/null 2> "$T/e"
[ $? -eq 2 ] && grep -q "grammar 1:20: expected ')' to close the group opened at 1:10" "$T/e" ||
  fail "bad --grammar: $(cat "$T/e")"
"$K3" $M --tok $TK --prompt x --grammar 'root ::= "a"' --json --quiet > /dev/null 2> "$T/e"
[ $? -eq 2 ] && grep -q "give one of --json" "$T/e" || fail "--grammar --json: $(cat "$T/e")"
printf 'root ::= x\n' > "$T/bad.gbnf"
"$K3" $M --tok $TK --prompt x --grammar-file "$T/bad.gbnf" --quiet > /dev/null 2> "$T/e"
[ $? -eq 2 ] && grep -q "bad.gbnf: grammar 1:10: rule 'x' is used but never defined" "$T/e" ||
  fail "bad --grammar-file: $(cat "$T/e")"
printf '{"prompt": "x", "grammar": "root ::= [z-a]"}\n' > "$T/bad.jsonl"
"$K3" $M --tok $TK --batch "$T/bad.jsonl" --quiet > /dev/null 2> "$T/e"
[ $? -eq 2 ] && grep -q 'line 1: "grammar": grammar 1:12: the range ends below' "$T/e" ||
  fail "bad batch grammar: $(cat "$T/e")"
for body in '"grammar": "root ::= a\na ::= a \"x\""' '"grammar": 5' \
            '"grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}'; do
  code=$($C -o "$T/e" -w '%{http_code}' -H 'Content-Type: application/json' \
    "$U/v1/chat/completions" -d "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}],
    $body}")
  [ "$code" = 400 ] && grep -q grammar "$T/e" || fail "$body: $code $(cat "$T/e")"
done
[ "$($C "$U/health")" = '{"status": "ok"}' ] || fail "unhealthy after the refusals"
echo "ok grammar: bad grammars exit 2 (one-shot, batch) and answer 400 with line:column"
