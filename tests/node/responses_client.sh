#!/bin/sh
# k3 serve's /v1/responses through the official OpenAI Node client (npm `openai`,
# client.responses): not part of `make test` (it needs node and the npm registry); make
# check runs it after anthropic_client.sh. Installs the client into a temporary directory
# (bounded by a timeout), starts k3 serve on tests/models/tiny5 and a second server whose
# reply is a fixed function call (the K3_SERVE_TEST_REPLY hook), a third on
# tests/models/tiny5_vision for an input_image part, and runs
# tests/node/responses_client.mjs. Prints "SKIP: npm unreachable" and exits 0 when node or
# the install is not available.
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
  { echo "SKIP: npm unreachable (no node/npm here): the Responses client test did not run"
    exit 0; }
[ -x "${K3:-./bin/k3}" ] || { echo "FAIL: ${K3:-./bin/k3} not built (make first)"; exit 1; }
NO_CURL=1                    # the client is node, not curl
. tests/sh/lib/serve.sh       # K3 M TK, the temporary folder T, start, cleanup at exit
if ! (cd "$T" && timeout 180 npm install --no-audit --no-fund --silent openai \
        > "$T/npm.log" 2>&1); then
  echo "SKIP: npm unreachable (npm install openai failed or timed out): the Responses" \
    "client test did not run"
  tail -n 3 "$T/npm.log"
  exit 0
fi
echo "openai $(sed -n 's/.*"version": "\([^"]*\)".*/\1/p' \
  "$T/node_modules/openai/package.json" | head -n 1) installed; node $(node --version)"
start main
CALL='<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool="get_weather" index="1"'
CALL="$CALL"'<|sep|><|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument'
CALL="$CALL"'<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>'
K3_SERVE_TEST_REPLY="Calling.<|close|>think<|sep|><|open|>response<|sep|>$CALL" start tool
MS=$M; M=tests/models/tiny5_vision start vis; M=$MS   # an input_image part
cp tests/node/responses_client.mjs "$T/responses_client.mjs"
K3_VIS_URL=http://127.0.0.1:$PORT_vis K3_IMAGE="$(pwd)/tests/images/png_rgba8.png" \
K3_URL=http://127.0.0.1:$PORT_main K3_TOOL_URL=http://127.0.0.1:$PORT_tool \
  timeout 300 node "$T/responses_client.mjs"
