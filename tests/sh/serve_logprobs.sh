#!/bin/sh
# logprobs on tiny5: /v1/completions with echo and max_tokens 0 (prompt scoring), with
# logprobs on generated tokens, and /v1/chat/completions' logprobs + top_logprobs, each
# value checked against the log-softmax of the one-shot command's --dump-logits rows at
# that position, computed here in awk from the dumped float32 bytes (in double, libm's
# exp and log): within one float32 ulp (the server sums in its own fixed order without
# libm, then rounds once to float32; %.9g reads back as that float). The top alternatives
# are the largest logits, lower id on ties. Streamed chunks carry the same entries; the
# ids equal the one-shot greedy run's; bad values are refused (400 naming the field).
. tests/sh/lib/serve.sh
V=1024
# lsm DUMP QUERIES: each query line "ROW ID" -> "ROW ID LOGPROB"; "top ROW K" -> the K
# best ids of ROW, comma-separated. The floats are decoded from their bits (od's decimal
# for f4 is the shortest that reads back as a float, not the float's exact value).
lsm() {
  od -An -v -t u4 -w$((4 * V)) "$1" | awk -v q="$2" '
    function f32(u,  s, e, f) { s = u >= 2147483648 ? -1 : 1; e = int(u / 8388608) % 256
      f = u % 8388608; return s * (e ? (1 + f / 8388608) * 2 ^ (e - 127) : f * 2 ^ -149) }
    { n++; for (i = 1; i <= NF; i++) x[n - 1, i - 1] = f32($i); nf = NF }
    END {
      while ((getline l < q) > 0) {
        split(l, f, " ")
        if (f[1] == "top") { r = f[2]; s = ""
          for (k = 0; k < f[3]; k++) { b = -1
            for (i = 0; i < nf; i++) if (!(i in used) && (b < 0 || x[r, i] > x[r, b])) b = i
            used[i = b] = 1; s = s (k ? "," : "") b }
          delete used; print s; continue }
        r = f[1]; m = x[r, 0]; for (i = 1; i < nf; i++) if (x[r, i] > m) m = x[r, i]
        z = 0; for (i = 0; i < nf; i++) z += exp(x[r, i] - m)
        printf "%d %d %.17g\n", r, f[2], x[r, f[2]] - (m + log(z))
      }
    }'
}
# near GOT WANT: |got - want| <= one float32 ulp of want
near() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; w = b < 0 ? -b : b
  u = 1; while (u > w && u > 1e-30) u /= 2; while (u * 2 <= w) u *= 2
  exit !(d <= u * 2 ^ -23) }'; }
arr() { sed -n "s/.*\"$1\": \[\([^]]*\)\].*/\1/p" | head -n 1 | tr -d ' '; }

start main
U=http://127.0.0.1:$PORT_main
post() { $C -H 'Content-Type: application/json' "$U$1" -d "$2"; }

# 1. prompt scoring: echo, max_tokens 0, logprobs 0
post /v1/completions '{"prompt": "The capital of France is", "max_tokens": 0, "echo": true,
  "logprobs": 0}' > "$T/echo.json"
ids=$(arr token_ids < "$T/echo.json"); lps=$(arr token_logprobs < "$T/echo.json")
[ -n "$ids" ] && [ "$(jstr text < "$T/echo.json")" = '"The capital of France is"' ] ||
  fail "echo: $(cat "$T/echo.json")"
[ "$(echo "$lps" | cut -d, -f1)" = null ] || fail "echo: the first token's logprob: $lps"
"$K3" $M --ids "$ids" --gen 0 --dump-logits "$T/p.bin" --quiet 2> "$T/dump.err" ||
  fail "dump"
n=$(echo "$ids" | tr ',' '\n' | wc -l)
i=1; : > "$T/q"
while [ $i -lt "$n" ]; do
  echo "$((i - 1)) $(echo "$ids" | cut -d, -f$((i + 1)))" >> "$T/q"; i=$((i + 1)); done
lsm "$T/p.bin" "$T/q" > "$T/want"
i=2
while read -r _ _ w; do
  g=$(echo "$lps" | cut -d, -f$i)
  near "$g" "$w" || fail "echo: token $i logprob $g, the dump's log-softmax $w"
  i=$((i + 1))
done < "$T/want"
[ $i -eq $((n + 1)) ] && [ "$n" -ge 4 ] || fail "echo: $n tokens, $i checked"
echo "ok logprobs: echo with max_tokens 0 scores $n prompt tokens = the dump's log-softmax"
# rows of 2 a step (--max-batch 2: two rows of logits), the same bytes
start small --max-batch 2
$C -H 'Content-Type: application/json' "http://127.0.0.1:$PORT_small/v1/completions" -d \
  '{"prompt": "The capital of France is", "max_tokens": 0, "echo": true, "logprobs": 0}' |
  sed 's/"created": [0-9]*//' > "$T/echo2.json"
sed 's/"created": [0-9]*//' "$T/echo.json" | cmp -s - "$T/echo2.json" ||
  fail "echo with 2 rows a step: $(cat "$T/echo2.json")"

# 2. generated tokens (greedy) with 3 alternatives: ids = the one-shot run's, values = the
# rows of a dump over prompt + reply
post /v1/completions "{\"prompt\": \"The capital of France is\", \"max_tokens\": 6,
  \"temperature\": 0, \"logprobs\": 3}" > "$T/gen.json"
gids=$(arr token_ids < "$T/gen.json"); glps=$(arr token_logprobs < "$T/gen.json")
want=$("$K3" $M --ids "$ids" --gen 6 --quiet 2> "$T/run.err") || fail "one-shot"
[ "$gids" = "$want" ] || fail "greedy ids $gids, one-shot $want"
[ "$(arr text_offset < "$T/gen.json" | cut -d, -f1)" = 24 ] ||
  fail "text_offset: $(cat "$T/gen.json")"
"$K3" $M --ids "$ids,$gids" --gen 0 --dump-logits "$T/g.bin" --quiet 2> "$T/dump.err" ||
  fail "dump 2"
: > "$T/q"; k=1
for id in $(echo "$gids" | tr ',' ' '); do echo "$((n + k - 2)) $id" >> "$T/q"; k=$((k + 1)); done
lsm "$T/g.bin" "$T/q" > "$T/want"
k=1
while read -r _ _ w; do
  g=$(echo "$glps" | cut -d, -f$k)
  near "$g" "$w" || fail "reply token $k: logprob $g, the dump's log-softmax $w"
  k=$((k + 1))
done < "$T/want"
[ $k -eq 7 ] || fail "reply: $k checked"
# the one-shot command's --logprobs: the same bytes (one code, one row)
"$K3" $M --ids "$ids" --gen 6 --logprobs 3 --out "$T/lp.json" --quiet > /dev/null \
  2> "$T/run.err" || fail "one-shot --logprobs"
olps=$(sed -n 's/.*"logprobs": \[//p' "$T/lp.json" | grep -o '"logprob": [^,]*' |
       sed 's/"logprob": //' | paste -sd, -)
[ "$olps" = "$glps" ] || fail "--logprobs $olps, the server's $glps"
[ "$(grep -o '"top": \[\[[0-9]*' "$T/lp.json" | head -n 1 | sed 's/.*\[//')" = \
  "$(echo "$gids" | cut -d, -f1)" ] || fail "--logprobs: the greedy token is not the top one"
"$K3" $M --ids "$ids" --gen 2 --logprobs 21 > /dev/null 2>&1; [ $? -eq 2 ] || fail "--logprobs 21"
"$K3" $M --ids "$ids" --gen 2 --logprobs 1 --spec > /dev/null 2>&1; [ $? -eq 2 ] ||
  fail "--logprobs with --spec"
echo "ok logprobs: 6 greedy reply tokens = the one-shot's, logprobs = the dump's = --logprobs'"

# 3. chat, thinking off, logprobs + top_logprobs 3: the prompt as --system-file renders it
printf 'You are terse.' > "$T/sys.txt"
"$K3" $M --tok $TK --system-file "$T/sys.txt" --prompt "Hi" --gen 5 --greedy \
  --out "$T/o.json" --quiet > /dev/null 2> "$T/run.err" || fail "one-shot chat"
cp=$(arr prompt_ids < "$T/o.json"); cg=$(arr generated_ids < "$T/o.json")
B='"messages": [{"role": "system", "content": "You are terse."}, {"role": "user",
  "content": "Hi"}], "reasoning_effort": "none", "temperature": 0, "max_tokens": 5,
  "logprobs": true, "top_logprobs": 3'
post /v1/chat/completions "{$B}" > "$T/chat.json"
# the entries, one a line: "ID LOGPROB" for a token, "+ ID LOGPROB" for an alternative
entries() { sed 's/"top_logprobs": \[/\n+/g; s/{"id": /\n/g' | awk '
  /^\+/ { alt = 1; next } /^[0-9]/ { lp = $0; sub(/.*"logprob": /, "", lp); sub(/[},\]].*/, "", lp)
  split($0, a, ","); print (alt ? "+ " : "") a[1], lp; if ($0 ~ /\]\}/) alt = 0 }'; }
entries < "$T/chat.json" > "$T/ent"
[ "$(grep -v '^+' "$T/ent" | cut -d' ' -f1 | paste -sd, -)" = "$cg" ] ||
  fail "chat ids $(cat "$T/ent"), one-shot $cg: $(cat "$T/chat.json")"
"$K3" $M --ids "$cp,$cg" --gen 0 --dump-logits "$T/c.bin" --quiet 2> "$T/dump.err" ||
  fail "dump 3"
np=$(echo "$cp" | tr ',' '\n' | wc -l)
: > "$T/q"; row=$((np - 2))               # the row each token was drawn from
while read -r a b _; do
  if [ "$a" = + ]; then echo "$row $b" >> "$T/q"
  else row=$((row + 1)); printf 'top %d 3\n%d %d\n' $row $row "$a" >> "$T/q"; fi
done < "$T/ent"
lsm "$T/c.bin" "$T/q" > "$T/want"
k=0
exec 4< "$T/want"
while read -r a b c; do
  if [ "$a" != + ]; then
    read -r tops <&4; read -r _ _ w <&4; got=$a; lp=$b; k=$((k + 1)); t=0
    near "$lp" "$w" || fail "chat token $k ($got): logprob $lp, the dump's $w"
  else
    t=$((t + 1)); read -r _ _ w <&4
    [ "$b" = "$(echo "$tops" | cut -d, -f$t)" ] ||
      fail "chat token $k: alternative $t is $b, want $tops"
    near "$c" "$w" || fail "chat token $k alternative $b: $c, the dump's $w"
  fi
done < "$T/ent"
exec 4<&-
[ $k -eq 5 ] && [ "$(grep -c '^+' "$T/ent")" -eq 15 ] || fail "chat: $k tokens checked"
# thinking on, cut inside the reasoning: no answer, so no content entries
post /v1/chat/completions '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5,
  "temperature": 0, "logprobs": true}' > "$T/think.json"
grep -q '"content": "", "reasoning_content": "[^"]' "$T/think.json" &&
  grep -q '"logprobs": {"content": \[\], "refusal": null}' "$T/think.json" ||
  fail "reasoning tokens in logprobs.content: $(cat "$T/think.json")"
echo "ok logprobs: chat's 5 tokens and 3 alternatives each = the dump's log-softmax"

# 4. a stream carries the same entries
post /v1/chat/completions "{$B, \"stream\": true}" > "$T/s.txt"
entries < "$T/s.txt" > "$T/sent"
cmp -s "$T/ent" "$T/sent" || fail "streamed entries differ: $(diff "$T/ent" "$T/sent")"
post /v1/completions '{"prompt": "The capital of France is", "max_tokens": 3, "echo": true,
  "logprobs": 2, "stream": true, "temperature": 0}' > "$T/s2.txt"
[ "$(grep -o '"token_ids": \[[^]]*\]' "$T/s2.txt" | sed 's/.*\[//; s/\]//' | paste -sd, - |
     tr -d ' ')" = "$ids,$(echo "$gids" | cut -d, -f1-3)" ] ||
  fail "streamed echo: $(cat "$T/s2.txt")"
echo "ok logprobs: streamed chunks carry the same entries"

MX='"messages": [{"role": "user", "content": "x"}]'
for bad in '"top_logprobs": 2' '"logprobs": true, "top_logprobs": 21' '"logprobs": 3'; do
  code=$($C -o "$T/e" -w '%{http_code}' -H 'Content-Type: application/json' \
         "$U/v1/chat/completions" -d "{$MX, $bad}")
  [ "$code" = 400 ] && grep -q logprobs "$T/e" || fail "chat $bad: $code $(cat "$T/e")"
done
for bad in '"logprobs": true' '"logprobs": 21' '"echo": 1' '"max_tokens": -1'; do
  code=$($C -o "$T/e" -w '%{http_code}' -H 'Content-Type: application/json' \
         "$U/v1/completions" -d "{\"prompt\": \"x\", $bad}")
  key=$(echo "$bad" | sed 's/^"\([a-z_]*\)".*/\1/')
  [ "$code" = 400 ] && grep -q "$key" "$T/e" || fail "completions $bad: $code $(cat "$T/e")"
done
code=$($C -o "$T/e" -w '%{http_code}' -H 'Content-Type: application/json' \
       "$U/v1/chat/completions" -d "{$MX, \"max_tokens\": 0}")
[ "$code" = 400 ] || fail "chat max_tokens 0: $code"
echo "ok logprobs: 8 bad values answered 400"
