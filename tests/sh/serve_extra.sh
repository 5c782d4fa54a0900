#!/bin/sh
# k3 serve for browser clients and llama-server users: CORS (the OPTIONS preflight is 204
# with Allow-Origin/Methods/Headers, Allow-Origin on normal and streamed responses, --cors
# ORIGIN and off, auth kept under --api-key), one stderr line per request (method, path,
# status, tokens, TTFT, total; the chat page's files with their status), POST /tokenize
# and /detokenize (llama-server's shapes, ids equal to k3 tokenize, ids out of range 400).
. tests/sh/lib/serve.sh
start a
U=http://127.0.0.1:$PORT_a
post() { $C -H 'Content-Type: application/json' "$U$1" -d "$2"; }

$C -i -X OPTIONS -H 'Origin: http://example.com' -H 'Access-Control-Request-Method: POST' \
  -H 'Access-Control-Request-Headers: authorization, content-type' \
  "$U/v1/chat/completions" | tr -d '\r' > "$T/pre"
head -1 "$T/pre" | grep -q '^HTTP/1.1 204' || fail "preflight: $(head -1 "$T/pre")"
grep -q '^Access-Control-Allow-Origin: \*$' "$T/pre" || fail "preflight: no Allow-Origin"
grep -q '^Access-Control-Allow-Methods: .*POST' "$T/pre" || fail "preflight: no Allow-Methods"
grep -qi '^Access-Control-Allow-Headers: .*authorization.*content-type' "$T/pre" \
  || fail "preflight: no Allow-Headers"
grep -qi '^Content-Length' "$T/pre" && fail "a 204 with Content-Length"
$C -i -H 'Origin: http://example.com' "$U/v1/models" | tr -d '\r' > "$T/h"
grep -q '^Access-Control-Allow-Origin: \*$' "$T/h" || fail "no Allow-Origin on GET"
$C -i -H 'Content-Type: application/json' "$U/v1/completions" -d '{"prompt": "Hi",
  "max_tokens": 3, "temperature": 0, "stream": true}' | tr -d '\r' > "$T/s"
grep -q '^Access-Control-Allow-Origin: \*$' "$T/s" || fail "no Allow-Origin on a stream"
grep -q 'data: \[DONE\]' "$T/s" || fail "the stream did not finish"
$C -i "$U/nope" | tr -d '\r' | grep -q '^Access-Control-Allow-Origin' || fail "none on a 404"
echo "ok CORS: preflight 204 (origin *, methods, headers); Allow-Origin on replies and streams"

# the request log: one line per request, with tokens and TTFT for a generation
n_before=$(grep -c '^k3: request ' "$T/a.err")
post /v1/completions '{"prompt": "Hello", "max_tokens": 4, "temperature": 0}' > "$T/r"
$C "$U/health" > /dev/null
sleep 0.2
n_after=$(grep -c '^k3: request ' "$T/a.err")
[ $((n_after - n_before)) = 2 ] || fail "$((n_after - n_before)) log lines for 2 requests"
p=$(jnum prompt_tokens < "$T/r"); g=$(jnum completion_tokens < "$T/r")
grep -q "^k3: request POST /v1/completions 200 prompt=$p gen=$g ttft=[0-9.]*s total=[0-9.]*s$" \
  "$T/a.err" || fail "the completion's log line: $(grep 'request POST' "$T/a.err" | tail -1)"
grep -q '^k3: request GET /health 200 prompt=0 gen=0 ttft=- total=' "$T/a.err" \
  || fail "the /health log line"
grep -q '^k3: request OPTIONS /v1/chat/completions 204 ' "$T/a.err" || fail "preflight log"
grep -q '^k3: request GET /nope 404 ' "$T/a.err" || fail "404 log"
echo "ok request log: one line each (method, path, status, prompt=$p gen=$g, TTFT, total)"
# the chat page's files: their real status (they were logged as status 0)
$C "$U/" > /dev/null; $C "$U/app.js" > /dev/null; $C -I "$U/style.css" > /dev/null
for r in "GET /" "GET /app.js" "HEAD /style.css"; do
  i=0                                     # (the line follows the reply: wait for it)
  while ! grep -q "^k3: request $r " "$T/a.err"; do
    i=$((i+1)); [ $i -gt 300 ] && fail "no log line for $r"; sleep 0.1
  done
  grep -q "^k3: request $r 200 " "$T/a.err" ||
    fail "the log line of $r: $(grep "^k3: request $r " "$T/a.err")"
done
echo "ok request log: GET /, /app.js and HEAD /style.css logged with their status 200"

# /tokenize, /detokenize against k3 tokenize
printf 'Hello world, caf\303\251!' > "$T/text"
want=$("$K3" tokenize --tok $TK "$T/text")
post /tokenize '{"content": "Hello world, caf\u00e9!"}' > "$T/t"
got=$(sed -n 's/.*"tokens": \[\([^]]*\)\].*/\1/p' "$T/t" | tr -d ' ')
[ "$got" = "$want" ] || fail "/tokenize: $got, k3 tokenize: $want"
post /detokenize "{\"tokens\": [$want]}" > "$T/d"
[ "$(cat "$T/d")" = '{"content": "Hello world, café!"}' ] || fail "/detokenize: $(cat "$T/d")"
sp=$("$K3" tokenize --tok $TK --special /dev/stdin <<EOS
a<|end_of_msg|>
EOS
)
post /tokenize '{"content": "a<|end_of_msg|>\n"}' | grep -q "\"tokens\": \[$(echo "$sp" |
  sed 's/,/, /g')\]" || fail "/tokenize does not parse special tokens (parse_special)"
post /tokenize '{"content": "a<|end_of_msg|>", "parse_special": false}' > "$T/t"
grep -q ", " "$T/t" || fail "parse_special false"
bos=$(post /tokenize '{"content": "", "add_special": true}')
[ "$bos" != '{"tokens": []}' ] || fail "add_special added nothing"
post /tokenize '{"content": "Hi", "with_pieces": true}' | grep -q '"piece": "' \
  || fail "with_pieces"
echo "ok /tokenize = k3 tokenize ($want), /detokenize round-trips; parse_special, add_special," \
  "with_pieces"
for b in '{"tokens": [1, 99999]}' '{"tokens": [-1]}' '{"tokens": [1.5]}' '{"tokens": "1"}' \
  '[1]' 'nope'; do
  code=$($C -o "$T/e" -w '%{http_code}' -H 'Content-Type: application/json' "$U/detokenize" -d "$b")
  [ "$code" = 400 ] && grep -q '"error"' "$T/e" || fail "/detokenize $b: $code $(cat "$T/e")"
done
$C -H 'Content-Type: application/json' "$U/detokenize" -d '{"tokens": [1, 99999]}' > "$T/e"
grep -q 'tokens\[1\] is not a token id: ids are integers 0\.\.' "$T/e" || fail "the message"
top=$(sed -n 's/.*integers 0\.\.\([0-9]*\).*/\1/p' "$T/e")   # the last id, from the message
post /detokenize "{\"tokens\": [$top]}" | grep -q '"content": ' || fail "id $top refused"
code=$($C -o "$T/e" -w '%{http_code}' -H 'Content-Type: application/json' "$U/detokenize" \
  -d "{\"tokens\": [$((top + 1))]}")
[ "$code" = 400 ] || fail "/detokenize of id $((top + 1)) (the vocabulary's size): $code"
code=$($C -o "$T/e" -w '%{http_code}' -H 'Content-Type: application/json' "$U/tokenize" \
  -d '{"content": 5}')
[ "$code" = 400 ] || fail "/tokenize content 5: $code"
code=$($C -o "$T/e" -w '%{http_code}' "$U/tokenize")
[ "$code" = 405 ] || fail "GET /tokenize: $code"
echo "ok bad /tokenize and /detokenize bodies: 400 (ids out of range, not integers), GET 405"

# mutated bodies (seeded): every answer is 200 or 400, and the server stays up
awk 'BEGIN { srand(7); split("{\"tokens\": [1, 2]}|{\"content\": \"a<|open|>b\"}|" \
  "{\"content\": \"x\", \"with_pieces\": true}", s, "|");
  for (i = 0; i < 120; i++) { b = s[1 + i % 3]; n = 1 + int(rand() * 3);
    for (k = 0; k < n; k++) { p = 1 + int(rand() * length(b));
      c = substr("{}[]\",:-09etn\\u ", 1 + int(rand() * 18), 1);
      b = substr(b, 1, p - 1) c substr(b, p + (rand() < 0.5)) }
    print b } }' > "$T/bodies"
bad_codes=0
while IFS= read -r b; do
  for ep in tokenize detokenize; do
    code=$($C -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' "$U/$ep" \
      --data-binary "$b")
    [ "$code" = 200 ] || [ "$code" = 400 ] ||
      { bad_codes=$((bad_codes + 1)); echo "$ep $b: $code"; }
  done
done < "$T/bodies"
[ $bad_codes = 0 ] && [ "$($C "$U/health")" = '{"status": "ok"}' ] \
  || fail "$bad_codes mutated bodies got neither 200 nor 400, or the server is down"
echo "ok 240 mutated /tokenize and /detokenize bodies: 200 or 400, the server still healthy"

start k --api-key sekret --cors http://localhost:3000
K=http://127.0.0.1:$PORT_k
$C -i -X OPTIONS -H 'Origin: http://localhost:3000' "$K/v1/models" | tr -d '\r' > "$T/pre"
head -1 "$T/pre" | grep -q '^HTTP/1.1 204' || fail "preflight under --api-key: $(head -1 "$T/pre")"
grep -q '^Access-Control-Allow-Origin: http://localhost:3000$' "$T/pre" || fail "--cors ORIGIN"
code=$($C -o /dev/null -w '%{http_code}' "$K/v1/models")
[ "$code" = 401 ] || fail "--api-key: GET /v1/models without a key gave $code"
code=$($C -o /dev/null -w '%{http_code}' "$K/tokenize" -d '{"content": "a"}')
[ "$code" = 401 ] || fail "--api-key: /tokenize without a key gave $code"
$C -i -H 'Authorization: Bearer sekret' "$K/v1/models" | tr -d '\r' > "$T/h"
grep -q '^Access-Control-Allow-Origin: http://localhost:3000$' "$T/h" && grep -q '^Vary: Origin' \
  "$T/h" || fail "--cors ORIGIN on a reply"
start o --cors off
code=$($C -o /dev/null -w '%{http_code}' -X OPTIONS "http://127.0.0.1:$PORT_o/v1/models")
[ "$code" = 405 ] || fail "--cors off: OPTIONS gave $code"
$C -i "http://127.0.0.1:$PORT_o/v1/models" | grep -qi 'Access-Control' && fail "--cors off"
"$K3" serve $M --tok $TK --cors 'http://x/' 2> "$T/bad.err"; rc=$?
[ $rc = 2 ] && grep -q -- '--cors' "$T/bad.err" || fail "--cors http://x/ gave $rc"
echo "ok --cors ORIGIN (Vary: Origin), the preflight needs no key, the API still does;" \
  "--cors off; a bad --cors is exit 2"
