#!/bin/sh
# The chat page of k3 serve and the figure of k3 bench --plot in a real browser: Chromium
# driven by npm puppeteer-core (tests/browser/webui.mjs): first paint and page weight, a
# streamed reply equal to the API's greedy one, Stop (of a reply held by
# K3_SERVE_TEST_HOLD, so it cannot end before the click), settings kept over a reload, a
# reload that keeps the conversation and resumes its cached prefix, a crafted reply
# (K3_SERVE_TEST_REPLY) whose script, onerror image and javascript: links stay text,
# --api-key, the bench SVG and -o html; images (tiny5_vision): attached by the file input,
# paste and drop, a thumbnail, an image_url part, a reply equal to the API's, a refusal.
# SKIPs without chromium, node or puppeteer-core in tests/browser/node_modules (.ci/run
# installs them: apt-get install chromium; in tests/browser, npm install --no-save
# --no-package-lock puppeteer-core). K3_WEBUI_SHOTS=DIR keeps the screenshots (docs/ has
# the committed ones).
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser)}
[ -n "$CHROMIUM" ] || { echo "SKIP: webui.sh needs chromium (.ci/run installs it)"; exit 0; }
command -v node >/dev/null 2>&1 || { echo "SKIP: webui.sh needs node"; exit 0; }
[ -d tests/browser/node_modules/puppeteer-core ] || {
  echo "SKIP: webui.sh needs npm puppeteer-core in tests/browser/node_modules (.ci/run:" \
    "cd tests/browser && npm install --no-save --no-package-lock puppeteer-core)"; exit 0; }
NO_CURL=1
. tests/sh/lib/serve.sh
start main
X='## A crafted reply
<script>window.__pwned=1</script>
<img src=x onerror="window.__pwned=2">
- item *one*
- item **two**
[bad](javascript:window.__pwned=3) [bad2](JaVaScRiPt:alert(1)) [d](data:text/html,x)
[k3](https://example.com)
```
alert(1)
```'
X="Looking at <b>it</b>.<|close|>think<|sep|><|open|>response<|sep|>$X<|close|>response<|sep|>"
K3_SERVE_TEST_REPLY="$X<|close|>message<|sep|><|end_of_msg|>" start xss
start key --api-key test-key
K3_SERVE_TEST_HOLD=8 start hold
MS=$M; M=tests/models/tiny5_vision start vis; M=$MS
"$K3" bench $M --budget 0:0,1:1 --threads 1,2 --reps 1 -p 8 -n 4 -q --disk-gb 0.05 \
  --plot "$T/b.svg" -o html > "$T/b.html" 2> "$T/bench.err" ||
  fail "k3 bench --plot: $(cat "$T/bench.err")"
K3_URL=http://127.0.0.1:$PORT_main K3_XSS_URL=http://127.0.0.1:$PORT_xss \
  K3_KEY_URL=http://127.0.0.1:$PORT_key K3_HOLD_URL=http://127.0.0.1:$PORT_hold \
  K3_VIS_URL=http://127.0.0.1:$PORT_vis K3_IMAGE="$(pwd)/tests/images/png_rgb8.png" \
  K3_SVG="$T/b.svg" K3_HTML="$T/b.html" \
  K3_SHOTS=${K3_WEBUI_SHOTS:-$T} CHROMIUM="$CHROMIUM" HOME="$T" \
  timeout 240 node tests/browser/webui.mjs
