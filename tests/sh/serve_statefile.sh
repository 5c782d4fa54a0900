#!/bin/sh
# k3 serve with the states of the requests in flight in a state file (--state-file kda and
# all): three concurrent clients (greedy, seeded sampling, a stream) share steps with their
# states paged through the file, and each reply is byte-identical to a server that keeps
# its states in memory; a next turn resumes its kept state into a paged slot
# (cached_tokens > 0, after another conversation used the slot) and equals the in-memory
# server's; the startup line and the plan name
# the state file, and nothing is left in --state-file-dir.
. tests/sh/lib/serve.sh
met() { $C "$1/metrics" | sed -n "s/^k3_$2 //p"; }
body() { sed 's/"created": [0-9]*//; s/"id": "[^"]*"//g' "$1"; }
start mem --max-batch 3 --state-file off
mkdir -p "$T/sd"
UM=http://127.0.0.1:$PORT_mem
B1='{"messages": [{"role": "user", "content": "first client"}], "temperature": 0,
  "max_tokens": 120}'
B2='{"messages": [{"role": "user", "content": "second client here"}], "temperature": 0.9,
  "seed": 5, "max_tokens": 90}'
B3='{"messages": [{"role": "user", "content": "third"}], "temperature": 0, "stream": true,
  "max_tokens": 60}'
for i in 1 2 3; do eval "b=\$B$i"; $C "$UM/v1/chat/completions" -d "$b" > "$T/m$i"; done
for mode in kda all; do
  start $mode --max-batch 3 --state-file $mode --state-file-dir "$T/sd" --verbose
  eval "U=http://127.0.0.1:\$PORT_$mode"
  grep -q "state file" "$T/$mode.err" || fail "$mode: the plan does not name the state file"
  cp=""
  for i in 1 2 3; do
    eval "b=\$B$i"; $C "$U/v1/chat/completions" -d "$b" > "$T/$mode$i" & cp="$cp $!"
  done
  for p in $cp; do wait $p; done          # the clients (not the servers)
  for i in 1 2 3; do
    [ "$(body "$T/$mode$i")" = "$(body "$T/m$i")" ] ||
      fail "$mode: reply $i differs from the in-memory server's: $(head -c 300 "$T/$mode$i")"
  done
  [ "$(met "$U" batch_steps_total)" -lt "$(( $(met "$UM" batch_steps_total) ))" ] ||
    fail "$mode: the three clients did not share steps"
  # the next turn resumes the first conversation's kept state into a paged slot, after
  # another conversation has left its own records in the slots
  $C "$U/v1/chat/completions" -d '{"messages": [{"role": "user", "content": "unrelated"}],
    "temperature": 0, "max_tokens": 30}' > /dev/null
  A1="{\"role\": \"assistant\", \"content\": $(jstr content < "$T/m1")}"
  N="{\"messages\": [{\"role\": \"user\", \"content\": \"first client\"}, $A1,
    {\"role\": \"user\", \"content\": \"go on\"}], \"temperature\": 0, \"max_tokens\": 20}"
  $C "$U/v1/chat/completions" -d "$N" > "$T/$mode.n"
  $C "$UM/v1/chat/completions" -d "$N" > "$T/mem.n"
  c=$(jnum cached_tokens < "$T/$mode.n")
  [ "${c:-0}" -gt 0 ] || fail "$mode: the next turn resumed nothing (cached ${c:-none})"
  [ "$(body "$T/$mode.n" | sed 's/"cached_tokens": [0-9]*//')" = \
    "$(body "$T/mem.n" | sed 's/"cached_tokens": [0-9]*//')" ] ||
    fail "$mode: the resumed turn differs from the in-memory server's: $(head -c 300 "$T/$mode.n")"
  echo "ok --state-file $mode: 3 concurrent replies equal the in-memory server's; the next" \
    "turn resumed $c cached tokens into a paged slot, the same reply"
done
[ -z "$(ls "$T/sd")" ] || fail "the state file was left in $T/sd: $(ls "$T/sd")"
echo "ok nothing left in --state-file-dir"
