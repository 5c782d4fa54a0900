#!/bin/sh
# JSON Schema beyond JSON mode's automaton (anyOf, $ref, pattern, enum, format, bounds),
# checked by an independent validator: every schema of tests/node/schema_corpus.json x 20
# seeds is a k3 --batch line on tests/models/tiny5 (temperature 1, its seed), and every
# reply must end with the end token and validate under Ajv + ajv-formats (npm). Not part
# of `make test` (it needs node and the npm registry); make check and .ci/run run it.
# One line is also run by the one-shot command: the same ids. Prints "SKIP: npm
# unreachable" and exits 0 when node or the install is not available.
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
  { echo "SKIP: npm unreachable (no node/npm here): the JSON Schema corpus did not run"
    exit 0; }
K3=${K3:-./bin/k3}
[ -x "$K3" ] || { echo "FAIL: $K3 not built (make first)"; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT INT TERM
if ! (cd "$T" && timeout 180 npm install --no-audit --no-fund --silent ajv ajv-formats \
        > "$T/npm.log" 2>&1); then
  echo "SKIP: npm unreachable (npm install ajv ajv-formats failed or timed out): the JSON" \
    "Schema corpus did not run"
  tail -n 3 "$T/npm.log"
  exit 0
fi
C=$(pwd)/tests/node/schema_corpus.json
J=$(pwd)/tests/node/schema_ajv.mjs
M="tests/models/tiny5 --tok tests/tok/tiny"
(cd "$T" && node "$J" lines "$C" 20 600) > "$T/b.jsonl" || { echo "FAIL: lines"; exit 1; }
"$K3" $M --batch "$T/b.jsonl" --quiet > "$T/b.out" 2> "$T/b.err" ||
  { echo "FAIL: k3 --batch exited $?: $(tail -n 3 "$T/b.err")"; exit 1; }
(cd "$T" && node "$J" check "$C" "$T/b.out") || exit 1
# the one-shot command draws the same ids as the batch line (tree, seed 3)
node -e 'const c = require(process.argv[1]).find(x => x.name === "tree");
  console.log(JSON.stringify(c.schema))' "$C" > "$T/tree.json"
"$K3" $M --prompt "Reply with JSON." --json-schema "$T/tree.json" --temperature 1 --seed 3 \
  --gen 600 --out "$T/o.json" --quiet > /dev/null 2> "$T/o.err" ||
  { echo "FAIL: one-shot exited $?: $(tail -n 2 "$T/o.err")"; exit 1; }
want=$(sed -n 's/^{"id": "tree\/3", "generated_ids": \[\([^]]*\)\].*/\1/p' "$T/b.out")
got=$(sed -n 's/.*"generated_ids": \[\([^]]*\)\].*/\1/p' "$T/o.json")
[ -n "$got" ] && [ "$got" = "$want" ] || { echo "FAIL: one-shot $got, batch line $want"; exit 1; }
echo "ok the one-shot command draws the batch line's ids under a recursive \$ref schema"
