#!/bin/sh
# Images through k3 serve (issue 37): OpenAI chat content parts {"type": "image_url",
# "image_url": {"url": "data:image/png;base64,..."}} on the tiny model with its tiny vision
# tower. The reply equals the one-shot run's (k3 --prompt --image, thinking off); a repeat is
# served from the kept state (all cached); another image of the same size shares the ids'
# template but not the key (nothing of the image reused); the same text at 1 and 2 threads;
# refusals: an http(s) URL (the server does not fetch), bad base64, an image outside a user
# message, a model without a tower.
. tests/sh/lib/serve.sh
MV=tests/models/tiny5_vision; D=tests/images
st=0
ok()  { echo "ok   $*"; }
bad() { echo "FAIL $*"; st=1; }
command -v base64 > /dev/null || { echo "SKIP: image_serve.sh needs base64"; exit 0; }
req() {   # FILE TEXT IMAGE...: a chat request, thinking off, greedy, 5 tokens
  out=$1 text=$2; shift 2
  parts=""
  for f in "$@"; do
    parts="$parts{\"type\": \"image_url\", \"image_url\": {\"url\": \"data:image/png;base64,$(base64 -w0 "$f")\"}}, "
  done
  printf '{"messages": [{"role": "user", "content": [%s{"type": "text", "text": "%s"}]}], "max_tokens": 5, "temperature": 0, "reasoning_effort": "none"}' \
    "$parts" "$text" > "$out"
}
post() { $C "http://127.0.0.1:$1/v1/chat/completions" -H 'Content-Type: application/json' \
  -d @"$2"; }
M=$MV start a --threads 1
M=$MV start b --threads 2
req $T/q1 'What is this?' $D/png_rgba8.png
post $PORT_a $T/q1 > $T/r1; post $PORT_a $T/q1 > $T/r2; post $PORT_b $T/q1 > $T/r3
$K3 $MV --tok $TK --prompt 'What is this?' --image $D/png_rgba8.png --gen 5 --greedy --quiet \
  > $T/one 2>&1
# the text's ASCII (the server writes an ill-formed byte as U+FFFD, the CLI as it is)
asc() { LC_ALL=C tr -cd ' -~'; }
c1=$(jstr content < $T/r1)
[ "$(printf '%s' "$c1" | asc)" = "\"$(asc < $T/one)\"" ] &&
  [ "$(jnum prompt_tokens < $T/r1)" = 54 ] &&
  ok "the reply is the one-shot run's ($c1; 54 prompt tokens, as run_one's ids)" ||
  bad "reply $c1, one-shot $(cat $T/one): $(cat $T/r1)"
[ "$(jnum cached_tokens < $T/r2)" = "$(jnum prompt_tokens < $T/r2)" ] &&
  [ "$(jstr content < $T/r2)" = "$c1" ] && ok "a repeat: every prompt token from the kept state" ||
  bad "repeat: $(cat $T/r2)"
[ "$(jstr content < $T/r3)" = "$c1" ] && ok "the same reply at 2 threads" || bad "2 threads: $(cat $T/r3)"
# another 19x13 image: the same template ids, another key: the cache stops before its rows
req $T/q4 'What is this?' $D/png_rgb8.png
post $PORT_a $T/q4 > $T/r4
c4=$(jnum cached_tokens < $T/r4); p4=$(jnum prompt_tokens < $T/r4)
[ -n "$c4" ] && [ "$c4" -lt 20 ] && [ "$p4" = "$(jnum prompt_tokens < $T/r1)" ] &&
  ok "another image of the same size: $c4 of $p4 tokens cached (the key holds the pixels)" ||
  bad "other image: $(cat $T/r4)"

chk() {   # WHAT TEXT: the request in $T/q is refused with 400 and TEXT
  code=$($C -o $T/rb -w '%{http_code}' "http://127.0.0.1:$PORT_a/v1/chat/completions" \
    -H 'Content-Type: application/json' -d @$T/q)
  [ "$code" = 400 ] && grep -qF -- "$2" $T/rb && ok "refused (400): $1" ||
    bad "$1: $code $(cat $T/rb)"
}
u='{"type": "image_url", "image_url": {"url": "%s"}}'
printf '{"messages": [{"role": "user", "content": [%s]}]}' "$(printf "$u" https://x/a.png)" > $T/q
chk "an https URL" "does not fetch"
printf '{"messages": [{"role": "user", "content": [%s]}]}' \
  "$(printf "$u" 'data:image/png;base64,iVBO*w==')" > $T/q
chk "bad base64" "not in the alphabet"
printf '{"messages": [{"role": "system", "content": [%s]}, {"role": "user", "content": "hi"}]}' \
  "$(printf "$u" "data:image/png;base64,$(base64 -w0 $D/png_g8.png)")" > $T/q
chk "an image in a system message" "user messages only"
printf '{"messages": [{"role": "user", "content": [%s]}]}' \
  "$(printf "$u" "data:image/webp;base64,$(base64 -w0 $D/refuse.webp)")" > $T/q
chk "a WebP" "looks like WebP"
M=tests/models/tiny5 start c
PORT_a=$PORT_c
printf '{"messages": [{"role": "user", "content": [%s]}]}' \
  "$(printf "$u" "data:image/png;base64,$(base64 -w0 $D/png_g8.png)")" > $T/q
chk "a model without a vision tower" "vision tower"
exit $st
