#!/bin/sh
# The chat page of k3 serve over curl (the browser test is tests/sh/webui.sh): GET / and
# its files with the Content-Security-Policy (scripts from the server itself only, nothing
# inline), byte-equal to src/serve/webui/, 100 KB at most together; served without the
# API key; --no-webui answers 404; the API beside it unchanged.
. tests/sh/lib/serve.sh
start web --api-key k
start off --no-webui
U=http://127.0.0.1:$PORT_web
total=0
for f in index.html app.js style.css; do
  p=/$f; [ $f = index.html ] && p=/
  $C -D "$T/h" -o "$T/b" "$U$p" || fail "GET $p"
  grep -q '^HTTP/1.1 200' "$T/h" || fail "GET $p: $(head -n 1 "$T/h")"
  cmp -s "$T/b" src/serve/webui/$f || fail "GET $p differs from src/serve/webui/$f"
  csp=$(grep -i '^Content-Security-Policy:' "$T/h")
  echo "$csp" | grep -q "script-src 'self';" && ! echo "$csp" | grep -q "unsafe" ||
    fail "GET $p: Content-Security-Policy is '$csp'"
  grep -qi '^X-Content-Type-Options: nosniff' "$T/h" || fail "GET $p: no nosniff"
  total=$((total + $(wc -c < "$T/b")))
done
[ $total -le 102400 ] || fail "the page is $total bytes, over 100 KB"
echo "ok   GET / /app.js /style.css: the files of src/serve/webui/ ($total bytes), CSP" \
  "script-src 'self', no key needed"
grep -q "k3: chat page: open http://127.0.0.1:$PORT_web/ in a browser" "$T/web.err" ||
  fail "no chat page line on stderr"
grep -q '<script src="/app.js"' src/serve/webui/index.html &&
  ! grep -q '<script>' src/serve/webui/index.html &&
  ! grep -q '\.innerHTML\|outerHTML\|insertAdjacentHTML\|document.write' src/serve/webui/app.js ||
  fail "the page has inline script or innerHTML"
echo "ok   the page's only script is /app.js (no inline script, no innerHTML)"
[ "$($C -o /dev/null -w '%{http_code}' "$U/v1/models")" = 401 ] || fail "/v1/models without key"
[ "$($C -o /dev/null -w '%{http_code}' "$U/nope")" = 404 ] || fail "/nope not 404"
O=http://127.0.0.1:$PORT_off
[ "$($C -o /dev/null -w '%{http_code}' "$O/")" = 404 ] &&
  [ "$($C -o /dev/null -w '%{http_code}' "$O/app.js")" = 404 ] &&
  [ "$($C -o /dev/null -w '%{http_code}' "$O/health")" = 200 ] || fail "--no-webui"
! grep -q 'chat page' "$T/off.err" || fail "--no-webui still prints the chat page line"
echo "ok   --no-webui: / and /app.js 404, the API served; the API key still guards /v1/*"
"$K3" serve --help | grep -q -- '--no-webui' || fail "serve --help lacks --no-webui"
echo "ok   k3 serve --help lists --no-webui"
