#!/bin/sh
# The vision tower in the memory plan of --batch and k3 serve (issue 37 item 5, docs/VISION.md
# "Memory"), on the tiny model with its tiny tower. A batch file's images are all read first:
# the plan holds the tower, the largest image's buffers and every image's patches and rows;
# its peak RSS stays within it. With less memory an image over what the plan admits is
# answered with an error line naming it and the size that fits, the other lines run (exit 2
# at the end). A streamed batch and the server plan for images to come (the tower gets what
# the text model leaves, each sequence's images held at once): two concurrent image requests
# stay within the printed plan (VmHWM), and an image over it is a 400 in each API's shape.
. tests/sh/lib/serve.sh
MV=tests/models/tiny5_vision; D=tests/images; IMG=tests/images/mem/gradient_1000.jpg
SM=tests/images/jpg_prog_420.jpg
st=0
ok()  { echo "ok   $*"; }
bad() { echo "FAIL $*"; st=1; }
command -v base64 > /dev/null || { echo "SKIP: image_mem_batch_serve.sh needs base64"; exit 0; }
num() { sed -n "s/^  \"$1\": \([0-9]*\).*/\1/p" "$2"; }
gb() { sed -n "s/^  $1 *\([0-9.]*\) .*/\1/p" "$2" | head -n 1; }
case "$K3" in *asan*) asan=1;; *) asan=;; esac   # a sanitizer's shadow: outside any plan
cat > $T/in.jsonl <<EOF
{"id": 1, "prompt": "What is this?", "images": ["$IMG"], "gen": 2}
{"id": 2, "prompt": "Plain text", "gen": 2}
{"id": 3, "prompt": "Compare", "images": ["$SM", "$IMG"], "gen": 2}
{"id": 4, "prompt": "Small", "images": ["$SM"], "gen": 2}
EOF
bat() { "$K3" $MV --batch "$@" --tok $TK --verbose --prefill-chunk 16; }
bat $T/in.jsonl --out $T/b.json > $T/bo 2> $T/be || bad "batch: exit $? $(tail -n 3 $T/be)"
plan=$(num plan_bytes $T/b.json); peak=$(num peak_rss_bytes $T/b.json)
vis=$(num vision_plan_bytes $T/b.json)
[ "$(num vision_patches $T/b.json)" = 5184 ] && [ "$(grep -c generated_ids $T/bo)" = 4 ] &&
  grep -q 'of it: 10400 patches. patches and rows held at once' $T/be &&
  { [ "$peak" -le "$plan" ] || [ "$asan" ]; } &&
  ok "batch of 4 lines, 3 images (10400 patches held): peak RSS $peak <= plan $plan" ||
  bad "batch plan: peak '$peak' plan '$plan' $(grep -A1 '^  vision' $T/be)"

A=$((plan - vis / 2))                             # half the tower's share less
K3_MEM_AVAILABLE=$A bat $T/in.jsonl --out $T/b2.json > $T/bo2 2> $T/be2; rc=$?
adm=$(sed -n 's/.*memory admits \([0-9]*\) patches, a square of.*/\1/p' $T/be2)
e1=$(grep '^{"id": 1, "line": 1, "error": ' $T/bo2)
[ $rc = 2 ] && [ -n "$adm" ] && [ "$adm" -lt 5184 ] &&
  printf '%s' "$e1" | grep -q "$IMG is 1000x1000: 5184 patches .* at most $adm patches .* at \
most [0-9]*x[0-9]* of its shape fits" && grep -q '^{"id": 3, "line": 3, "error": ' $T/bo2 &&
  grep -q '^{"id": 2, "generated_ids"' $T/bo2 && grep -q '^{"id": 4, "generated_ids"' $T/bo2 &&
  grep -q '2 lines of .* refused: images over what the memory plan admits' $T/be2 &&
  { [ "$(num peak_rss_bytes $T/b2.json)" -le "$(num plan_bytes $T/b2.json)" ] || [ "$asan" ]; } &&
  ok "available $A: lines 1 and 3 answered with an error naming the image and the size that" \
     "fits ($adm patches), lines 2 and 4 run, exit 2, peak within the plan" ||
  bad "batch refusal: rc $rc admits '$adm' $(cat $T/bo2) $(grep -i refused $T/be2)"

# a stream: images to come; 10 MB beside the text model for 2 sequences' images
printf '%s\n' "{\"id\": 9, \"prompt\": \"Small\", \"gen\": 2}" | bat - --batch-size 2 \
  > /dev/null 2> $T/be3
A=$(awk -v t="$(gb total $T/be3)" -v v="$(gb 'vision tower' $T/be3)" \
  'BEGIN { printf "%d", (t - v) * 1e9 + 10e6 }')
K3_MEM_AVAILABLE=$A bat - --batch-size 2 < $T/in.jsonl > $T/bo4 2> $T/be4; rc=$?
grep -q 'of it: 134640 patches' $T/be3 && [ $rc = 2 ] &&
  grep -q "^{\"line\": 1, \"error\": .*$IMG is 1000x1000: 5184 patches .* at most" $T/bo4 &&
  grep -q '^{"id": 4, "generated_ids"' $T/bo4 &&
  ok "a stream plans 2 sequences' images (134640 patches); with $A available line 1 is" \
     "answered with an error, line 4 runs" || bad "stream: rc $rc $(cat $T/bo4)"

# the server: two image requests at once within the printed plan
b64=$(base64 -w0 $IMG)
TXT='{"type": "text", "text": "What?"}'
chatq() {
  printf '{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": '
  printf '{"url": "data:image/jpeg;base64,%s"}}, %s]}], "max_tokens": 2, ' "$1" "$TXT"
  printf '"temperature": 0, "reasoning_effort": "none"}'
}
chatq "$b64" > $T/q1
post() { $C -o "$3" -w '%{http_code}' "http://127.0.0.1:$1$2" -H 'Content-Type: application/json' \
  -H 'anthropic-version: 2023-06-01' -d @"$4"; }
M=$MV start a --verbose --max-batch 2
pid_a=${PIDS##* }
A=$(awk -v t="$(gb total $T/a.err)" -v v="$(gb 'vision tower' $T/a.err)" \
  'BEGIN { printf "%d", (t - v) * 1e9 + v * 1e9 / 8 }')    # about 8,000 patches
kill $pid_a
K3_MEM_AVAILABLE=$A M=$MV start b --verbose --max-batch 2
pid_b=${PIDS##* }
post $PORT_b /v1/chat/completions $T/r1 $T/q1 > $T/c1 & cpid=$!
post $PORT_b /v1/chat/completions $T/r2 $T/q1 > $T/c2
wait $cpid
hwm=$(awk '/^VmHWM:/ { print $2 }' /proc/$pid_b/status)
tot=$(gb total $T/b.err); adm=$(sed -n 's/.*memory admits \([0-9]*\) patches.*/\1/p' $T/b.err)
[ "$(cat $T/c1)$(cat $T/c2)" = 200200 ] && [ -n "$hwm" ] && [ -n "$adm" ] &&
  [ "$adm" -ge 5184 ] && awk -v h="$hwm" -v t="$tot" -v a="$asan" \
    'BEGIN { exit !(a != "" || h * 1024 <= t * 1e9) }' &&
  ok "serve, $A available (admits $adm patches a request): two 1000x1000 requests at once," \
     "peak RSS $((hwm * 1024)) <= plan $tot GB" ||
  bad "serve: $(cat $T/c1) $(cat $T/c2) hwm $hwm plan $tot admits '$adm' $(head -c 300 $T/r1)"

# two such images in one request: each fits, together over what a request is planned for
p='{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,'"$b64"'"}}'
printf '{"messages": [{"role": "user", "content": [%s, %s]}], "max_tokens": 2}' "$p" "$p" \
  > $T/q2
code=$(post $PORT_b /v1/chat/completions $T/r3 $T/q2)
[ "$code" = 400 ] && grep -q "its 2 images have 10368 patches together .* at most $adm patches \
of images per request" $T/r3 && ok "two of them in one request: 400 (10368 patches together)" ||
  bad "together: $code $(cat $T/r3)"

# 10 MB beside the text model: a 400 in each API's shape, naming the image and the size
A=$(awk -v t="$(gb total $T/a.err)" -v v="$(gb 'vision tower' $T/a.err)" \
  'BEGIN { printf "%d", (t - v) * 1e9 + 10e6 }')
K3_MEM_AVAILABLE=$A M=$MV start c --max-batch 2
src='{"type": "base64", "media_type": "image/jpeg", "data": "'"$b64"'"}'
printf '{"max_tokens": 2, "messages": [{"role": "user", "content": [{"type": "image", %s%s]}]}' \
  "\"source\": $src}, " "$TXT" > $T/qa
printf '{"max_output_tokens": 16, "input": [{"role": "user", "content": [%s, %s]}]}' \
  '{"type": "input_image", "image_url": "data:image/jpeg;base64,'"$b64"'"}' \
  '{"type": "input_text", "text": "What?"}' > $T/qr
chk() {   # PATH REQUEST SHAPE
  code=$(post $PORT_c $1 $T/rc $2)
  [ "$code" = 400 ] && grep -q "$3" $T/rc &&
    grep -q 'image 1 is 1000x1000: 5184 patches .* at most [0-9]*x[0-9]* of its shape fits' $T/rc &&
    ok "$1: 400 in its shape, naming the image and the size that fits" ||
    bad "$1: $code $(cat $T/rc)"
}
chk /v1/chat/completions $T/q1 '^{"error": {"message": '
chk /v1/messages $T/qa '"type": "error", "error": {"type": "invalid_request_error"'
chk /v1/responses $T/qr '"error": {'
chatq "$(base64 -w0 $SM)" > $T/q5
[ "$(post $PORT_c /v1/chat/completions $T/r5 $T/q5)" = 200 ] &&
  ok "the same server takes a 48x40 image" || bad "small: $(cat $T/r5)"
exit $st
