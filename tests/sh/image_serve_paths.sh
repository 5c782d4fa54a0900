#!/bin/sh
# Image files named in requests (issue 37): k3 serve --image-dir DIR takes an image_url (chat)
# or input_image (Responses) as an absolute path or a file:// URL of a file inside DIR, on
# the tiny model with its tiny vision tower. The file's bytes are the data: URL's: a path
# first, then the same PNG as a data: URL, a file:// URL (percent-escaped) and a Responses
# path are all served whole from the first's kept state (the same ids, the image's hash
# among them) with the same text. Refusals, 400 in each API's error shape: without the flag
# (naming it), outside DIR, a '..' traversal, a symbolic link out of DIR, a folder, a
# missing file, a pipe, a file over the byte limit, a relative path, a file URL with a host;
# --image-dir that is no folder stops the server at its start (exit 2).
. tests/sh/lib/serve.sh
MV=tests/models/tiny5_vision; D=tests/images
command -v base64 > /dev/null || { echo "SKIP: image_serve_paths.sh needs base64"; exit 0; }
st=0
ok()  { echo "ok   $*"; }
bad() { echo "FAIL $*"; st=1; }
I=$T/imgs
mkdir -p $I/sub
cp $D/png_rgba8.png $I/cat.png
cp $D/png_rgba8.png "$I/my cat.png"
cp $D/png_rgba8.png $T/outside.png
ln -s $T/outside.png $I/link.png              # leads out of DIR
ln -s cat.png $I/alias.png                    # stays inside DIR
mkfifo $I/pipe.png 2>/dev/null || true
: > $I/big.png; truncate -s 65M $I/big.png 2>/dev/null || dd if=/dev/zero of=$I/big.png \
  bs=1 count=0 seek=65M 2>/dev/null
M=$MV start a --image-dir $I
M=$MV start b
B=$(base64 -w0 $D/png_rgba8.png)
body() {   # URL: a chat request with that image_url, thinking off, greedy, 5 tokens
  printf '{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": %s}, %s' \
    "{\"url\": \"$1\"}" \
    '{"type": "text", "text": "What is this?"}]}], "max_tokens": 5, "temperature": 0, '
  printf '"reasoning_effort": "none"}'
}
rbody() {  # URL: the Responses request with that input_image
  printf '{"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "%s"}, %s' \
    "$1" '{"type": "input_text", "text": "What is this?"}]}], "max_output_tokens": 5, '
  printf '"temperature": 0, "reasoning": {"effort": "none"}}'
}
post() { $C "http://127.0.0.1:$1$2" -H 'Content-Type: application/json' -d @"$3"; }
body "$I/cat.png" > $T/q1
body "data:image/png;base64,$B" > $T/q2
body "file://$I/my%20cat.png" > $T/q3
body "$I/alias.png" > $T/q4
rbody "$I/sub/../cat.png" > $T/q5
post $PORT_a /v1/chat/completions $T/q1 > $T/r1
post $PORT_a /v1/chat/completions $T/q2 > $T/r2
post $PORT_a /v1/chat/completions $T/q3 > $T/r3
post $PORT_a /v1/chat/completions $T/q4 > $T/r4
post $PORT_a /v1/responses $T/q5 > $T/r5
n=$(jnum prompt_tokens < $T/r1); txt=$(jstr content < $T/r1)
[ "$n" = 54 ] && [ -n "$txt" ] && [ "$(jnum cached_tokens < $T/r1)" = 0 ] &&
  ok "a path: $n prompt tokens (as a data: URL's), $txt" || bad "path: $(cat $T/r1)"
for k in 2 3 4; do
  case $k in 2) w="the same PNG as a data: URL";; 3) w="a file:// URL with %20";;
              4) w="a symbolic link inside DIR";; esac
  [ "$(jnum prompt_tokens < $T/r$k)" = "$n" ] && [ "$(jnum cached_tokens < $T/r$k)" = "$n" ] &&
    [ "$(jstr content < $T/r$k)" = "$txt" ] &&
    ok "$w after the path: all $n ids from its kept state, the same text" ||
    bad "$w: $(cat $T/r$k)"
done
[ "$(jnum input_tokens < $T/r5)" = "$n" ] && [ "$(jnum cached_tokens < $T/r5)" = "$n" ] &&
  [ "$(jstr text < $T/r5)" = "$txt" ] &&
  ok "/v1/responses input_image as a path (sub/../ inside DIR): all $n ids kept, the same text" ||
  bad "responses path: $(cat $T/r5)"

# ---- refusals, each in its API's error shape ----
chk() {   # PORT PATH WHAT TEXT: the body in $T/q refused with 400, TEXT in its message
  code=$($C -o $T/rb -w '%{http_code}' "http://127.0.0.1:$1$2" \
    -H 'Content-Type: application/json' -d @$T/q)
  case $2 in /v1/messages*) shape='^{"type": "error", "error": {"type": "[a-z_]*", "message": ';;
             /v1/responses) shape='^{"error": {"message": .*"param": null, "code": null}}';;
             *) shape='^{"error": {"message": ';; esac
  [ "$code" = 400 ] && grep -qF -- "$4" $T/rb && grep -q "$shape" $T/rb &&
    ok "$2 refused (400): $3" || bad "$2 $3: $code $(head -c 400 $T/rb)"
}
body "$I/cat.png" > $T/q
chk $PORT_b /v1/chat/completions "a path without --image-dir" \
  "k3 serve reads image files only when started with --image-dir DIR"
body "file://$I/cat.png" > $T/q
chk $PORT_b /v1/chat/completions "a file:// URL without --image-dir" "with --image-dir DIR"
rbody "$I/cat.png" > $T/q
chk $PORT_b /v1/responses "a Responses path without --image-dir" "with --image-dir DIR"
body "$T/outside.png" > $T/q
chk $PORT_a /v1/chat/completions "a file outside DIR" "outside.png' is outside --image-dir"
body "$I/../outside.png" > $T/q
chk $PORT_a /v1/chat/completions "a ../ traversal" "/../outside.png' is outside --image-dir"
body "file://$I/sub/../../outside.png" > $T/q
chk $PORT_a /v1/chat/completions "a file:// ../ traversal" "is outside --image-dir"
body "$I/link.png" > $T/q
chk $PORT_a /v1/chat/completions "a symbolic link out of DIR" \
  "link.png' leads outside --image-dir"
body "$I/sub" > $T/q
chk $PORT_a /v1/chat/completions "a folder" "is not a regular file (a folder)"
body "$I/nope.png" > $T/q
chk $PORT_a /v1/chat/completions "a missing file" "nope.png': no such file in --image-dir"
if [ -p $I/pipe.png ]; then
  body "$I/pipe.png" > $T/q
  chk $PORT_a /v1/chat/completions "a pipe" "is not a regular file (a device, socket or pipe)"
fi
body "$I/big.png" > $T/q
chk $PORT_a /v1/chat/completions "a 65 MiB file" "68157440 bytes, over the limit"
body "cat.png" > $T/q
chk $PORT_a /v1/chat/completions "a relative path" "an absolute path or file:// URL inside DIR"
body "file://example.com$I/cat.png" > $T/q
chk $PORT_a /v1/chat/completions "a file URL with a host" "names a host"
rbody "$I/link.png" > $T/q
chk $PORT_a /v1/responses "a Responses symbolic link out" "leads outside --image-dir"
printf '{"max_tokens": 5, "messages": [{"role": "user", "content": [%s]}]}' \
  "{\"type\": \"image\", \"source\": {\"type\": \"url\", \"url\": \"file://$I/cat.png\"}}" > $T/q
chk $PORT_a /v1/messages "Anthropic's url source (no path source there)" "does not fetch"
$K3 serve $MV --tok $TK --port 0 --image-dir $I/cat.png > $T/o 2>&1
rc=$?
[ $rc = 2 ] && grep -q "image-dir: .*cat.png' is not a folder" $T/o &&
  ok "--image-dir naming a file: exit 2 at the start" || bad "--image-dir FILE: $rc $(cat $T/o)"
exit $st
