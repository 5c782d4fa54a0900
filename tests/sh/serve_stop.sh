#!/bin/sh
# Why a reply ended, on tiny5 (greedy, so each case is the same every run): every choice has
# finish_reason (OpenAI's) and k3's "k3_stop": eos (the end token: eos_token_id in
# completions, <|end_of_msg|> in chat), stop_string, length (max_tokens, or --max-tokens),
# context (the --ctx limit; finish_reason "length" as OpenAI has it), in replies and in a
# stream's finish chunk ("interrupted", the server stopping: tests/sh/serve_shutdown.sh).
. tests/sh/lib/serve.sh
start main
start ctx --ctx 12
start cap --max-tokens 5
post() { $C -H 'Content-Type: application/json' "$1" -d "$2"; }
# why URL PATH BODY WANT_FINISH WANT_K3STOP MSG: plain, then streamed (its finish chunk)
why() {
  post "$1$2" "$3}" > "$T/r"
  grep -q "\"finish_reason\": \"$4\", \"k3_stop\": \"$5\"}" "$T/r" ||
    fail "$6: want $4/$5: $(cat "$T/r")"
  post "$1$2" "$3, \"stream\": true}" > "$T/s"
  tail -n 2 "$T/s" | grep -q '^data: \[DONE\]' || fail "$6, streamed: no [DONE]"
  grep -q "\"finish_reason\": \"$4\", \"k3_stop\": \"$5\"}\]}" "$T/s" ||
    fail "$6, streamed: want $4/$5: $(tail -n 3 "$T/s")"
}
U=http://127.0.0.1:$PORT_main
G='"temperature": 0'
why "$U" /v1/completions "{\"prompt\": \"Hello\", \"max_tokens\": 3, $G" length length \
  "max_tokens 3"
# "Hi" ends by itself: the end token after 95 tokens
why "$U" /v1/completions "{\"prompt\": \"Hi\", \"max_tokens\": 300, $G" stop eos "eos"
post "$U/v1/completions" "{\"prompt\": \"Hello\", \"max_tokens\": 3, $G}" > "$T/t"
txt=$(jstr text < "$T/t" | sed 's/^"//; s/"$//')
stop=$(printf '%s' "$txt" | cut -c 3-5)
[ ${#stop} = 3 ] || fail "the reply '$txt' is too short for a stop string"
why "$U" /v1/completions "{\"prompt\": \"Hello\", \"max_tokens\": 8, \"stop\": \"$stop\", $G" \
  stop stop_string "stop '$stop'"
M='"messages": [{"role": "user", "content": "Hello"}]'
why "$U" /v1/chat/completions "{$M, \"max_tokens\": 300, $G" stop eos "chat, end of message"
why "$U" /v1/chat/completions "{$M, \"max_tokens\": 2, $G" length length "chat, max_tokens 2"
echo "ok k3_stop length, eos (completions and chat), stop_string, plain and streamed"
# the context: --ctx 12 ends "Hello" (3 tokens) at 12 positions, the reply 9 tokens
why "http://127.0.0.1:$PORT_ctx" /v1/completions \
  "{\"prompt\": \"Hello\", \"max_tokens\": 100, $G" length context "--ctx 12"
post "http://127.0.0.1:$PORT_ctx/v1/completions" \
  "{\"prompt\": \"Hello\", \"max_tokens\": 100, $G}" | grep -q '"completion_tokens": 9,' ||
  fail "--ctx 12: not 9 tokens"
why "http://127.0.0.1:$PORT_cap" /v1/completions \
  "{\"prompt\": \"Hello\", \"max_tokens\": 100, $G" length length "--max-tokens 5"
echo "ok k3_stop context at the --ctx limit (finish_reason length), length at --max-tokens"
