#!/bin/sh
# Images over MPI ranks (issue 37; docs/DISTRIBUTED.md): the tower runs on rank 0 only and
# its rows go to the followers with the slot's records (k3_sched_embed), so under mpirun
# -np 2 bin/k3-mpi gives bin/k3's bytes: --chat with /image (three images over two turns, a
# turn without one after them; rank 1 at --prefill-chunk 5, so an image's rows cross a
# chunk) and serve (the same image through chat completions, /v1/messages and /v1/responses,
# two requests at once with other images, a kept state resumed). SKIP without mpirun or
# bin/k3-mpi (make mpi).
. tests/sh/lib/check.sh
KM=${K3_MPI:-./bin/k3-mpi}
if ! command -v mpirun >/dev/null 2>&1 || [ ! -x "$KM" ]; then
  echo "SKIP image_mpi: no mpirun or no $KM (make mpi)"; exit 0
fi
command -v base64 >/dev/null || { echo "SKIP image_mpi: no base64"; exit 0; }
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MV=tests/models/tiny5_vision; TK=tests/tok/tiny; D=tests/images
printf '/image %s\nWhat is this?\n/image %s\n/image %s\nAnd these?\nThanks\n' \
  $D/png_rgba8.png $D/png_g8.png $D/jpg_420.jpg > $T/chat.in
cf="--chat --tok $TK --gen 6 --greedy --no-think --no-color"
timeout 120 "$K3" $MV $cf < $T/chat.in > $T/co.1 2> $T/ce.1 || bad "chat: bin/k3 exited $?"
timeout 120 mpirun --oversubscribe -np 1 "$KM" $MV $cf : -np 1 "$KM" $MV $cf \
  --prefill-chunk 5 < $T/chat.in > $T/co.2 2> $T/ce.2 ||
  bad "chat np 2: exit $?: $(tail -c 300 $T/ce.2)"
n=$(grep -c '^(image ' $T/co.1)
[ "$n" = 3 ] && cmp -s $T/co.1 $T/co.2 &&
  ok "--chat at np 2 (rank 1 at --prefill-chunk 5): three images over two turns, bin/k3's stdout" ||
  bad "chat np 2: stdout differs from bin/k3's ($n images): $(cat $T/co.2) vs $(cat $T/co.1)"

command -v curl >/dev/null 2>&1 || { echo "SKIP image_mpi serve: no curl"; exit $fail; }
PIDS=""
trap 'for p in $PIDS; do kill $p 2>/dev/null; done; rm -rf "$T"' EXIT
srv() {   # srv TAG cmd...
  tg=$1; shift
  "$@" serve $MV --tok $TK --port 0 --max-batch 4 2>$T/se.$tg &
  PIDS="$PIDS $!"
  i=0; while ! grep -qs 'listening on http://' $T/se.$tg && [ $i -lt 300 ]; do
    sleep 0.1; i=$((i + 1)); done
  eval "PORT_$tg=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' $T/se.$tg)"
}
post() { curl -s --max-time 60 -H 'Content-Type: application/json' "http://127.0.0.1:$1$2" \
           -d @"$3" | sed 's/"created[a-z_]*": [0-9]*//g; s/"id": "[a-z]*[-_][0-9]*"//g'; }
B() { base64 -w0 $D/$1; }
iu() { printf '{"type": "image_url", "image_url": {"url": "data:image/%s;base64,%s"}}' "$1" \
         "$(B $2)"; }                                          # TYPE FILE: a chat image part
txt() { printf '{"type": "%s", "text": "%s"}' "$1" "$2"; }    # TYPE TEXT
msgs() { printf '[{"role": "user", "content": [%s, %s]}]' "$1" "$2"; }
G='"max_tokens": 6, "temperature": 0, "reasoning_effort": "none"'
printf '{"messages": %s, %s}' "$(msgs "$(iu png png_rgba8.png)" "$(txt text 'What is this?')")" \
  "$G" > $T/q1
printf '{"max_tokens": 6, "temperature": 0, "thinking": {"type": "disabled"}, "messages": %s}' \
  "$(msgs "{\"type\": \"image\", \"source\": {\"type\": \"base64\", \"media_type\": \
\"image/png\", \"data\": \"$(B png_rgba8.png)\"}}" "$(txt text 'What is this?')")" > $T/q2
printf '{"max_output_tokens": 6, "temperature": 0, "reasoning": {"effort": "none"}, "input": %s}' \
  "$(msgs "{\"type\": \"input_image\", \"image_url\": \
\"data:image/png;base64,$(B png_rgba8.png)\"}" "$(txt input_text 'What is this?')")" > $T/q3
printf '{"messages": %s, %s}' "$(msgs "$(txt text 'Two:'), $(iu jpeg jpg_420.jpg)" \
  "$(iu png png_g8.png)")" "$G" > $T/q4
printf '{"messages": %s, "max_tokens": 6, "seed": 4, "stream": true}' \
  "$(msgs "$(iu gif gif_plain.gif)" "$(txt text 'And this?')")" > $T/q5
reqs() {   # TAG PORT
  post $2 /v1/chat/completions $T/q1 > $T/r1.$1
  post $2 /v1/messages $T/q2 > $T/r2.$1
  post $2 /v1/responses $T/q3 > $T/r3.$1
  post $2 /v1/chat/completions $T/q4 > $T/r4.$1 & w4=$!
  post $2 /v1/chat/completions $T/q5 > $T/r5.$1 & w5=$!
  wait $w4 $w5
}
srv one "$K3"; srv two mpirun --oversubscribe -np 2 "$KM"
if [ -z "$PORT_one" ] || [ -z "$PORT_two" ]; then
  bad "serve: a server did not start: $(tail -c 300 $T/se.one) $(tail -c 300 $T/se.two)"
  exit $fail
fi
reqs one $PORT_one; reqs two $PORT_two
f0=$fail
for r in 1 2 3 4 5; do
  [ -s $T/r$r.one ] && ! grep -q '"error": {' $T/r$r.one && cmp -s $T/r$r.one $T/r$r.two ||
    bad "serve np 2: request $r differs from bin/k3's: '$(head -c 400 $T/r$r.two)' not" \
      "'$(head -c 400 $T/r$r.one)'"
done
grep -q '"cache_read_input_tokens": 54' $T/r2.two && grep -q '"cached_tokens": 54' $T/r3.two ||
  bad "serve np 2: the messages and responses twins did not resume chat's kept state:" \
    "$(cat $T/r2.two $T/r3.two)"
[ $fail = $f0 ] && ok "serve at np 2: an image through chat, /v1/messages and /v1/responses" \
  "(the twins resumed from chat's kept state), two image requests at once (one streamed):" \
  "bin/k3 serve's bodies"
exit $fail
