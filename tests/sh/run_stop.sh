#!/bin/sh
# The one-shot command's --stop STR (the text ends before it, generation stops there),
# --ignore-eos (generation runs past eos_token_id, the ids of a model whose eos is never
# hit) and --system-file PATH (the XTML chat template around the prompt, as the chat's
# first turn renders it; a missing file is exit 2 naming the flag).
K3=${K3:-./bin/k3}
M=tests/models/tiny5; TK=tests/tok/tiny
[ -d $M ] && [ -d $TK ] || { echo "FAIL: committed fixture $M or $TK missing"; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; echo "--- stderr"; cat -v "$T/err" 2>/dev/null | tail -8; exit 1; }
run() { timeout 60 "$K3" $M --quiet --gen 24 "$@" 2> "$T/err"; }

run --tok $TK --prompt "Hello world" > "$T/full" || fail "plain run exited $?"
# a stop string from the middle of the text: the text is what came before it
stop=$(head -c 12 "$T/full" | tail -c 4)
[ ${#stop} -ge 2 ] || fail "could not pick a stop string"
want=$(awk -v s="$stop" '{ i = index($0, s); if (i) { print substr($0, 1, i - 1); exit } }' \
  "$T/full")
run --tok $TK --prompt "Hello world" --stop "never-there" --stop "$stop" --out "$T/r.json" \
  > "$T/got" || fail "--stop run exited $?"
printf '%s\n' "$want" | cmp -s - "$T/got" || { echo "want: $want"; echo "got:"; cat -v "$T/got";
  fail "--stop '$stop': the text is not what came before it"; }
grep -q "\"stop_string\": \"$stop\"" "$T/r.json" && grep -q '"stop": "stop_string"' "$T/r.json" ||
  fail "--out does not name the stop string"
n=$(sed -n 's/.*"n_generated": \([0-9]*\).*/\1/p' "$T/r.json")
[ "$n" -lt 24 ] || fail "--stop did not end the generation ($n tokens)"
run --tok $TK --prompt "Hello world" --stop "never-there" > "$T/got" || fail "rc $?"
cmp -s "$T/full" "$T/got" || fail "a stop string that never matches changed the text"
echo "ok --stop '$stop': generation ended after $n tokens, the text stops before it"

run --ids 1,2,3,4 --gen 16 > "$T/ids" || fail "ids run exited $?"
e=$(cut -d, -f3 "$T/ids")        # the third generated id becomes eos in a config copy
sed "s/\"eos_token_id\": [0-9]*/\"eos_token_id\": $e/" $M/config.json > "$T/config.json"
run --config "$T/config.json" --ids 1,2,3,4 --gen 16 > "$T/got" || fail "eos run exited $?"
[ "$(cat "$T/got")" = "$(cut -d, -f1-3 "$T/ids")" ] || fail "eos $e did not stop: $(cat "$T/got")"
run --config "$T/config.json" --ids 1,2,3,4 --gen 16 --ignore-eos > "$T/got" \
  || fail "--ignore-eos run exited $?"
cmp -s "$T/ids" "$T/got" || fail "--ignore-eos: $(cat "$T/got"), want $(cat "$T/ids")"
echo "ok eos $e stops after 3 ids; --ignore-eos runs all 16 (the ids without that eos)"

printf 'Be brief.' > "$T/sys.txt"
run --tok $TK --prompt "What is 2+2?" --system-file "$T/sys.txt" --out "$T/r.json" \
  > /dev/null || fail "--system-file run exited $?"
np=$(sed -n 's/.*"n_prompt": \([0-9]*\).*/\1/p' "$T/r.json")
printf 'What is 2+2?\n' | timeout 60 "$K3" $M --chat --tok $TK --no-think --greedy --gen 1 \
  --system "Be brief." > /dev/null 2> "$T/err" || fail "chat exited $?"
nc=$(grep 'prefilled' "$T/err" | sed 's/.*prefilled \([0-9]*\) token.*/\1/')
[ "$np" = "$nc" ] || fail "--system-file prompt is $np ids, the chat's first turn $nc"
plain=$(run --tok $TK --prompt "What is 2+2?" --out "$T/p.json" >/dev/null;
  sed -n 's/.*"n_prompt": \([0-9]*\).*/\1/p' "$T/p.json")
[ "$np" -gt "$plain" ] || fail "--system-file did not wrap the prompt"
echo "ok --system-file: the prompt is the chat template ($np ids, as chat's first turn)"

run --tok $TK --prompt "x" --system-file "$T/missing.txt" > /dev/null; rc=$?
[ $rc = 2 ] && grep -q -- '--system-file .*missing.txt' "$T/err" || fail "missing file: rc $rc"
run --ids 1,2 --system-file "$T/sys.txt" > /dev/null; rc=$?
[ $rc = 2 ] && grep -q -- '--system-file' "$T/err" || fail "--system-file with --ids: rc $rc"
run --ids 1,2 --stop x > /dev/null; rc=$?
[ $rc = 2 ] && grep -q -- '--stop matches the generated text' "$T/err" || fail "--stop: rc $rc"
echo "ok a missing --system-file, --system-file with --ids, --stop without --tok: exit 2"
