#!/bin/sh
# An image through k3 serve's three chat APIs (issue 37) on the tiny model with its tiny
# vision tower: the same PNG and text as OpenAI chat's image_url part, Anthropic's image
# block (/v1/messages, a base64 source) and Responses' input_image part (/v1/responses)
# give one prompt: on one server the second and third are served whole from the first's
# kept state (the ids match, the image's hash among them), and each API on a fresh server
# gives the chat reply's text (greedy) and prompt count; count_tokens counts the image's
# rows; a streamed message and response carry the same text. Refusals in each API's own
# error shape: bad base64, a media_type that is not the bytes' format, a url or file
# source, a file_id, an http(s) image_url, an image outside a user message, an oversized
# body (413) and an image over the side limit.
. tests/sh/lib/serve.sh
MV=tests/models/tiny5_vision; D=tests/images
command -v base64 > /dev/null || { echo "SKIP: image_serve_apis.sh needs base64"; exit 0; }
st=0
ok()  { echo "ok   $*"; }
bad() { echo "FAIL $*"; st=1; }
M=$MV start a
M=$MV start b
M=$MV start c
B=$(base64 -w0 $D/png_rgba8.png)
TXT='What is this?'
user() { printf '{"role": "user", "content": [%s, %s]}' "$1" "$2"; }   # PART PART
txt() { printf '{"type": "%s", "text": "%s"}' "$1" "$2"; }            # TYPE TEXT
b64src() { printf '{"type": "base64", "media_type": "%s", "data": "%s"}' "$1" "$2"; }
qchat() {
  printf '{"messages": [%s], "max_tokens": 5, "temperature": 0, "reasoning_effort": "none"}' \
    "$(user "{\"type\": \"image_url\", \"image_url\": {\"url\": \"data:image/png;base64,$B\"}}" \
      "$(txt text "$TXT")")"; }
qmsg() {  # [MEDIA_TYPE [STREAM]]
  printf '{"model": "k3", "messages": [%s], "max_tokens": 5, "temperature": 0, %s%s}' \
    "$(user "{\"type\": \"image\", \"source\": $(b64src "${1:-image/png}" "$B")}" \
      "$(txt text "$TXT")")" '"thinking": {"type": "disabled"}' "${2:+, \"stream\": true}"; }
qresp() {  # [STREAM]
  printf '{"model": "k3", "input": [%s], "max_output_tokens": 5, "temperature": 0, %s%s}' \
    "$(user "{\"type\": \"input_image\", \"image_url\": \"data:image/png;base64,$B\", \
\"detail\": \"high\"}" "$(txt input_text "$TXT")")" '"reasoning": {"effort": "none"}' \
    "${1:+, \"stream\": true}"; }
post() { $C "http://127.0.0.1:$1$2" -H 'Content-Type: application/json' -d @"$3"; }
qchat > $T/qc; qmsg > $T/qm; qresp > $T/qr
post $PORT_a /v1/chat/completions $T/qc > $T/rc
post $PORT_a /v1/messages $T/qm > $T/rm
post $PORT_a /v1/responses $T/qr > $T/rr
post $PORT_b /v1/messages $T/qm > $T/rm2
post $PORT_c /v1/responses $T/qr > $T/rr2
n=$(jnum prompt_tokens < $T/rc); txt=$(jstr content < $T/rc)
[ "$n" = 54 ] && [ -n "$txt" ] && ok "chat: $n prompt tokens, $txt" || bad "chat: $(cat $T/rc)"
[ "$(jnum cache_read_input_tokens < $T/rm)" = "$n" ] && [ "$(jnum input_tokens < $T/rm)" = 0 ] &&
  [ "$(jstr text < $T/rm)" = "$txt" ] &&
  ok "/v1/messages after chat: all $n prompt ids from chat's kept state, the same text" ||
  bad "messages after chat: $(cat $T/rm)"
[ "$(jnum input_tokens < $T/rr)" = "$n" ] && [ "$(jnum cached_tokens < $T/rr)" = "$n" ] &&
  [ "$(jstr text < $T/rr)" = "$txt" ] &&
  ok "/v1/responses after them: all $n prompt ids kept, the same text" ||
  bad "responses after chat: $(cat $T/rr)"
[ "$(jnum input_tokens < $T/rm2)" = "$n" ] && [ "$(jstr text < $T/rm2)" = "$txt" ] &&
  ok "/v1/messages on a fresh server: $n prompt tokens, the chat reply's text" ||
  bad "messages fresh: $(cat $T/rm2)"
[ "$(jnum input_tokens < $T/rr2)" = "$n" ] && [ "$(jnum cached_tokens < $T/rr2)" = 0 ] &&
  [ "$(jstr text < $T/rr2)" = "$txt" ] &&
  ok "/v1/responses on a fresh server: $n prompt tokens, the chat reply's text" ||
  bad "responses fresh: $(cat $T/rr2)"
post $PORT_b /v1/messages/count_tokens $T/qm > $T/ct
[ "$(jnum input_tokens < $T/ct)" = "$n" ] && ok "count_tokens with the image: $n" ||
  bad "count_tokens: $(cat $T/ct)"
# streams: the text deltas joined are the plain reply's (ASCII compared: a delta may split
# a character the joined text writes whole)
qmsg image/png 1 > $T/qms; qresp 1 > $T/qrs
post $PORT_b /v1/messages $T/qms > $T/sm
post $PORT_c /v1/responses $T/qrs > $T/sr
asc() { LC_ALL=C tr -cd ' -~'; }
want=$(printf '%s' "$txt" | asc)
sm=$(grep '"text_delta"' $T/sm | sed -n 's/.*"text": "\(\([^"\\]\|\\.\)*\)".*/\1/p' |
     tr -d '\n' | asc)
sr=$(grep '"response.output_text.delta"' $T/sr |
     sed -n 's/.*"delta": "\(\([^"\\]\|\\.\)*\)".*/\1/p' | tr -d '\n' | asc)
[ "\"$sm\"" = "$want" ] && grep -q 'message_stop' $T/sm && ok "a streamed message: the same text" ||
  bad "streamed message '$sm' != $want: $(tail -c 400 $T/sm)"
[ "\"$sr\"" = "$want" ] && grep -q 'response.completed\|response.incomplete' $T/sr &&
  ok "a streamed response: the same text" ||
  bad "streamed response '$sr' != $want: $(tail -c 400 $T/sr)"

# ---- refusals, each in its API's error shape ----
chk() {   # PATH WHAT STATUS TEXT: the body in $T/q refused with STATUS, TEXT in its message
  code=$($C -o $T/rb -w '%{http_code}' "http://127.0.0.1:$PORT_a$1" \
    -H 'Content-Type: application/json' -d @$T/q)
  case $1 in /v1/messages*) shape='^{"type": "error", "error": {"type": "[a-z_]*", "message": ';;
             *) shape='^{"error": {"message": .*"param": null, "code": null}}';; esac
  [ "$code" = "$3" ] && grep -qF -- "$4" $T/rb && grep -q "$shape" $T/rb &&
    ok "$1 refused ($code): $2" || bad "$1 $2: $code $(head -c 300 $T/rb)"
}
img() { printf '{"type": "image", "source": {"type": "%s", %s}}' "$1" "$2"; }
b64() { img base64 "$(printf '"media_type": "%s", "data": "%s"' "$1" "$2")"; }   # MEDIA DATA
am() { printf '{"max_tokens": 5, "messages": [%s]}' "$(user "$1" "$(txt text hi)")" > $T/q; }
am "$(b64 image/png 'iVBO*w==')"
chk /v1/messages "bad base64" 400 "messages[0].content[0].source.data: base64: '*'"
am "$(b64 image/jpeg "$B")"
chk /v1/messages "media_type image/jpeg on PNG bytes" 400 \
  "source.media_type is image/jpeg but the data is an image of type image/png"
am "$(b64 image/png "$(printf 'hello world!' | base64 -w0)")"
chk /v1/messages "bytes of no image format" 400 "not a PNG, JPEG, GIF or WebP image"
am "$(b64 image/bmp "$B")"
chk /v1/messages "media_type image/bmp" 400 "image/jpeg, image/png, image/gif or image/webp"
am "$(img url '"url": "https://example.com/a.png"')"
chk /v1/messages "a url source" 400 "k3 does not fetch images"
am "$(img file '"file_id": "file_1"')"
chk /v1/messages "a file source" 400 "no Files API"
am "$(b64 image/webp "$(base64 -w0 $D/refuse.webp)")"
chk /v1/messages "a WebP (its media_type right)" 400 "looks like WebP"
am "$(b64 image/png "$(base64 -w0 $D/bad_png_side.png)")"
chk /v1/messages "an image over the side limit" 400 "a side"
printf '{"max_tokens": 5, "messages": [{"role": "user", "content": [%s]}]}' \
  "{\"type\": \"tool_result\", \"tool_use_id\": \"u\", \"content\": [$(b64 image/png "$B")]}" > $T/q
chk /v1/messages "an image in a tool_result" 400 "images go in a user message"
printf '{"max_tokens": 5, "messages": [%s]}' "$(user "$(b64 image/png @)" "$(txt text hi)")" |
  tr '@' '\n' > $T/q.t
{ head -n 1 $T/q.t | tr -d '\n'; head -c 3500000 /dev/zero | base64 -w0; tail -n 1 $T/q.t; } > $T/q
chk /v1/messages "an oversized body (about 4.7 MB)" 413 ""
rp() {   # ROLE PART
  printf '{"input": [%s]}' "$(user "$2" "$(txt input_text hi)" | sed "s/\"user\"/\"$1\"/")" \
    > $T/q; }
rp user '{"type": "input_image", "image_url": "data:image/png;base64,iVBO*w=="}'
chk /v1/responses "bad base64" 400 "input[0].content[0].image_url: base64: '*'"
rp user '{"type": "input_image", "image_url": "https://example.com/a.png"}'
chk /v1/responses "an https image_url" 400 "does not fetch"
rp user '{"type": "input_image", "file_id": "file-1"}'
chk /v1/responses "a file_id" 400 "no Files API"
rp user '{"type": "input_image", "image_url": "data:image/png;base64,'"$B"'", "detail": 3}'
chk /v1/responses "a detail not a string" 400 "detail must be a string"
rp assistant '{"type": "input_image", "image_url": "data:image/png;base64,'"$B"'"}'
chk /v1/responses "an image in an assistant message" 400 "user messages only"
rp system '{"type": "input_image", "image_url": "data:image/png;base64,'"$B"'"}'
chk /v1/responses "an image in a system message" 400 "user messages only"
exit $st
