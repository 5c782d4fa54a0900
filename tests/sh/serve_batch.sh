#!/bin/sh
# k3 serve: the prompt's end is kept with its logits row, so a repeat of a prompt samples
# without any forward (cached_tokens = prompt_tokens, nothing prefilled) and a rendering
# that diverges inside a kept prompt falls back to a shorter kept state; requests in flight
# share decode steps (three concurrent clients, greedy, seeded sampling and streaming, each
# byte-identical to its solo reply; /metrics shows the occupancy); a client that
# disconnects mid-stream leaves the others running; a prompt that arrives mid-decode is fed
# beside the decode steps; a read that fails in a stream's prefill step answers 500. Every
# reply is also compared with a server that keeps no state.
. tests/sh/lib/serve.sh
start main
start cold --state-cache-gb 0
U=http://127.0.0.1:$PORT_main; UC=http://127.0.0.1:$PORT_cold
met() { $C "$1/metrics" | sed -n "s/^k3_$2 //p"; }
body() {   # the reply, without its name and time and what it resumed
  sed 's/"created": [0-9]*//; s/"id": "[^"]*"//g; s/"cached_tokens": [0-9]*//' "$1"
}

# ---- a repeat samples from the kept row: no forward, the same reply ----
U1='{"role": "user", "content": "Hello there"}'
for q in '"temperature": 0' '"temperature": 0.9, "seed": 7'; do
  R="{\"messages\": [$U1], $q, \"max_tokens\": 16}"
  $C "$U/v1/chat/completions" -d "$R" > "$T/a1"
  pre=$(met "$U" prefill_tokens_total)
  $C "$U/v1/chat/completions" -d "$R" > "$T/a2"
  [ "$(met "$U" prefill_tokens_total)" = "$pre" ] || fail "a repeat prefilled tokens ($q)"
  p=$(jnum prompt_tokens < "$T/a2")
  [ "$(jnum cached_tokens < "$T/a2")" = "$p" ] ||
    fail "a repeat cached $(jnum cached_tokens < "$T/a2") of $p tokens ($q)"
  $C "$UC/v1/chat/completions" -d "$R" > "$T/a0"
  [ "$(body "$T/a2")" = "$(body "$T/a0")" ] ||
    fail "the repeat's reply differs from scratch ($q): $(cat "$T/a2") vs $(cat "$T/a0")"
  [ "$(body "$T/a1")" = "$(body "$T/a0")" ] || fail "the first reply differs from scratch ($q)"
done
echo "ok a repeated prompt samples from the kept logits row: cached $p of $p, nothing" \
  "prefilled, the same reply as from scratch (greedy and seeded sampling)"

# ---- a render that diverges inside a kept prompt: the shorter kept state ----
A1="{\"role\": \"assistant\", \"content\": $(jstr content < "$T/a1")}"
OFF='"chat_template_kwargs": {"thinking": false}'
RA="{\"messages\": [$U1], \"temperature\": 0, \"max_tokens\": 8, $OFF}"
RB="{\"messages\": [$U1, $A1, {\"role\": \"user\", \"content\": \"And a second\"}],
  \"temperature\": 0, \"max_tokens\": 8, $OFF}"
RC="{\"messages\": [$U1, $A1, {\"role\": \"user\", \"content\": \"Or else\"}],
  \"temperature\": 0, \"max_tokens\": 8, $OFF}"
for r in RA RB RC; do
  eval "b=\$$r"
  $C "$U/v1/chat/completions" -d "$b" > "$T/$r"; $C "$UC/v1/chat/completions" -d "$b" > "$T/$r.0"
  [ "$(jstr content < "$T/$r")" = "$(jstr content < "$T/$r.0")" ] || fail "$r differs from scratch"
done
pa=$(jnum prompt_tokens < "$T/RA"); cc=$(jnum cached_tokens < "$T/RC")
[ "$cc" -ge "$pa" ] && [ "$cc" -lt "$(jnum prompt_tokens < "$T/RB")" ] ||
  fail "the diverging turn cached $cc tokens, want the first prompt's $pa or more, below B's"
echo "ok a turn that diverges inside a kept prompt resumes a shorter kept state ($cc tokens)" \
  "and replies as from scratch"

# ---- three concurrent clients share steps; each reply equals its solo reply ----
B1="{\"messages\": [{\"role\": \"user\", \"content\": \"first client\"}], \"temperature\": 0,
  \"max_tokens\": 300}"
B2="{\"messages\": [{\"role\": \"user\", \"content\": \"second client here\"}],
  \"temperature\": 0.8, \"seed\": 11, \"max_tokens\": 200}"
B3="{\"messages\": [{\"role\": \"user\", \"content\": \"third\"}], \"temperature\": 1, \"seed\": 5,
  \"max_tokens\": 250, \"stream\": true}"
for i in 1 2 3; do eval "b=\$B$i"; $C "$UC/v1/chat/completions" -d "$b" > "$T/solo$i"; done
s0=$(met "$UC" batch_steps_total); r0=$(met "$UC" batch_rows_total)
W=""                                   # (a bare wait would wait for the servers too)
for i in 1 2 3; do
  eval "b=\$B$i"; $C "$UC/v1/chat/completions" -d "$b" > "$T/conc$i" & W="$W $!"
done
wait $W
for i in 1 2 3; do
  [ -s "$T/conc$i" ] && [ "$(body "$T/conc$i")" = "$(body "$T/solo$i")" ] ||
    fail "concurrent client $i: its reply differs from its solo reply"
done
s1=$(met "$UC" batch_steps_total); r1=$(met "$UC" batch_rows_total)
[ $((r1 - r0)) -gt $((s1 - s0)) ] ||
  fail "the three requests never shared a step ($((r1 - r0)) rows in $((s1 - s0)) steps)"
$C "$UC/metrics" | grep -q '^k3_batch_occupancy [1-9]' || fail "/metrics: batch_occupancy"
echo "ok three concurrent clients (greedy, sampled, streamed; 300/200/250 tokens) shared" \
  "steps ($((r1 - r0)) rows in $((s1 - s0)) steps) and each got its solo reply"

# ---- one client disconnects mid-stream; the others run on ----
d0=$(met "$UC" client_disconnects_total)
LONG="{\"messages\": [{\"role\": \"user\", \"content\": \"gone\"}], \"max_tokens\": 3000,
  \"temperature\": 1, \"seed\": 2, \"stream\": true}"
$C "$UC/v1/chat/completions" -d "$B1" > "$T/k1" & W=$!
(curl -s -N --max-time 60 "$UC/v1/chat/completions" -d "$LONG" 2>/dev/null | head -c 3000 \
  > /dev/null) & W="$W $!"
$C "$UC/v1/chat/completions" -d "$B2" > "$T/k2" & W="$W $!"
wait $W
[ "$(body "$T/k1")" = "$(body "$T/solo1")" ] && [ "$(body "$T/k2")" = "$(body "$T/solo2")" ] ||
  fail "a disconnect mid-stream changed the other replies"
i=0
while [ "$(met "$UC" client_disconnects_total)" = "$d0" ]; do
  i=$((i+1)); [ $i -gt 300 ] && fail "the engine did not notice the disconnect"; sleep 0.1
done
[ "$(met "$UC" batch_active)" = 0 ] || fail "requests still active after all ended"
echo "ok a client that disconnects mid-stream leaves the other two running with their replies"

# ---- a prompt that arrives while another request decodes goes in with its steps ----
curl -s -N --max-time 60 "$UC/v1/chat/completions" -d "$LONG" > "$T/long" 2>/dev/null & W=$!
i=0
while [ "$(grep -c '^data: ' "$T/long")" -lt 3 ]; do
  i=$((i+1)); [ $i -gt 300 ] && fail "the long stream did not start"; sleep 0.05
done
x0=$(met "$UC" batch_mixed_steps_total)
$C "$UC/v1/chat/completions" -d "$B1" > "$T/j1"
x1=$(met "$UC" batch_mixed_steps_total)
kill $W 2>/dev/null; wait $W 2>/dev/null
[ "$(body "$T/j1")" = "$(body "$T/solo1")" ] ||
  fail "a prompt fed beside decode steps: its reply differs"
[ "$x1" -gt "$x0" ] || fail "the new prompt was not fed beside the decoding request ($x0 -> $x1)"
i=0
while [ "$(met "$UC" batch_active)" != 0 ]; do
  i=$((i+1)); [ $i -gt 300 ] && fail "the long request did not end"; sleep 0.1
done
echo "ok a prompt that arrives mid-decode is fed beside the decode steps ($((x1 - x0)) mixed" \
  "steps) and gets its solo reply"

# ---- a read that fails while a streamed request's prompt goes in: a plain 500 (the
# stream's head is not out yet), and the server still answers ----
"$K3" pack $M "$T/trunk" > /dev/null 2>&1 || fail "k3 pack"
K3_FAULT_TRUNK_READ=3 start flt --trunk "$T/trunk" --trunk-gb 0
SR='{"messages": [{"role": "user", "content": "Hello"}], "temperature": 0, "max_tokens": 4,
  "stream": true}'
curl -s -i --max-time 60 "http://127.0.0.1:$PORT_flt/v1/chat/completions" -d "$SR" > "$T/f1"
head -n 1 "$T/f1" | grep -q '^HTTP/1.1 500' && grep -q '"message": "trunk read failed' "$T/f1" ||
  fail "a failed prefill step of a stream: want a 500 with the reason, got $(head -c 300 "$T/f1")"
$C "http://127.0.0.1:$PORT_flt/metrics" | grep -q '^k3_ready 1' ||
  fail "the server stopped answering after a failed step"
echo "ok a trunk read that fails in a stream's prefill step: 500 with the reason (the head" \
  "not yet sent), and the server still answers"
"$K3" serve $M --tok $TK --max-batch 0 2>/dev/null; [ $? = 2 ] || fail "--max-batch 0: exit 2"
