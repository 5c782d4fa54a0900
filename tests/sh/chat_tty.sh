#!/bin/sh
# Chat through a pseudo-terminal (tmux): two turns, /stats showing reused positions,
# Ctrl-C during a long prefill stops it and stores nothing, Ctrl-C mid-reply returns to
# the prompt and keeps the partial reply, line editing
# (arrows, Home/End, Backspace, Ctrl-U, Up through the history), /reset, and a second
# Ctrl-C at the prompt exits with the terminal restored.
K3=${K3:-./bin/k3}
M=tests/models/tiny5; TK=tests/tok/tiny
[ -d $M ] && [ -d $TK ] || { echo "FAIL: committed fixture $M or $TK missing"; exit 1; }
command -v tmux >/dev/null 2>&1 || { echo "SKIP: tmux is not installed"; exit 0; }
T=$(mktemp -d)
S=k3chat$$
trap 'tmux -L $S kill-server 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; echo "--- screen"; tmux -L $S capture-pane -p -t $S -S -200 2>/dev/null;
  echo "--- stderr"; cat -v "$T/err"; exit 1; }
# waits until FILE has at least N lines matching RE (30 s)
wait_for() { i=0; while n=$(grep -a -c -- "$2" "$1" 2>/dev/null); [ "${n:-0}" -lt "$3" ];
  do i=$((i+1)); [ $i -gt 300 ] && return 1; sleep 0.1; done; }
K3ABS=$(cd "$(dirname "$K3")" && pwd)/$(basename "$K3")
CMD="cd '$PWD' && '$K3ABS' $M --chat --tok $TK --no-think --gen 12 --seed 9 --threads 1"
CMD="$CMD --prefill-chunk 64 --dump-cache-trace '$T' 2>'$T/err'; rc=\$?; stty -a > '$T/stty'"
CMD="$CMD 2>&1; echo EXITED \$rc > '$T/done'; sleep 30"
tmux -L $S new-session -d -s $S -x 160 -y 50 "$CMD"
wait_for "$T/err" 'type /help' 1 || fail "no banner"
tmux -L $S send-keys -t $S 'Hello there' Enter
wait_for "$T/err" '^k3: \[reused' 1 || fail "turn 1 did not finish"
tmux -L $S send-keys -t $S 'Tell me more' Enter
wait_for "$T/err" '^k3: \[reused' 2 || fail "turn 2 did not finish"
tmux -L $S send-keys -t $S '/stats' Enter
sleep 0.5
tmux -L $S capture-pane -p -t $S -S -200 > "$T/screen"
grep -q '^last turn: reused [1-9][0-9]* positions' "$T/screen" \
  || fail "/stats does not show reused positions"
grep -q 're-prefills 0' "$T/screen" || fail "a re-prefill happened"
echo "ok two turns in a terminal; /stats shows" \
  "$(grep -o 'reused [0-9]* positions' "$T/screen" | head -1)"

# Ctrl-C is sent once the expert-cache trace has grown by GROW lines since the send
lines() { wc -l < "$T/cache_trace.txt" 2>/dev/null || echo 0; }
ctrl_c_after() { i=0; while [ "$(lines)" -lt $(($1 + $2)) ]; do i=$((i+1)); [ $i -gt 600 ] \
  && fail "$3 did not start"; sleep 0.05; done; tmux -L $S send-keys -t $S C-c; }
# a long message (~1200 tokens, chunks of 64): Ctrl-C inside its prefill drops the turn
long=$(i=0; while [ $i -lt 120 ]; do printf 'words %d and more ' $i; i=$((i+1)); done)
tmux -L $S send-keys -t $S '/gen 5000' Enter
n0=$(lines)
tmux -L $S send-keys -t $S -l "$long"
tmux -L $S send-keys -t $S Enter
ctrl_c_after $n0 600 "the long prefill"
wait_for "$T/err" 'interrupted (Ctrl-C) during the prefill' 1 \
  || fail "Ctrl-C did not stop the prefill"
[ "$(grep -c '^k3: \[reused' "$T/err")" = 2 ] || fail "the interrupted prefill produced a reply"
tmux -L $S send-keys -t $S '/stats' Enter
sleep 0.5
tmux -L $S capture-pane -p -t $S -S -200 > "$T/screen"
grep -q '^messages: 4' "$T/screen" || fail "the interrupted prefill stored a message"
echo "ok Ctrl-C during a long prefill stops it; nothing is stored"

# a reply of 811 tokens with this seed: Ctrl-C lands inside it and keeps the partial reply
n0=$(lines)
tmux -L $S send-keys -t $S 'Go on' Enter
ctrl_c_after $n0 2000 "the reply"
wait_for "$T/err" '^k3: \[reused' 3 || fail "the reply did not stop after Ctrl-C"
grep -q 'interrupted (Ctrl-C); the partial reply is kept' "$T/err" \
  || fail "the reply was not marked interrupted"
grep -q 'generated 811 tokens' "$T/err" && fail "the reply ran to its end"
tmux -L $S send-keys -t $S '/stats' Enter
sleep 0.5
tmux -L $S capture-pane -p -t $S -S -200 > "$T/screen"
grep -q '^messages: 6' "$T/screen" || fail "the interrupted reply was not kept"
echo "ok Ctrl-C stops the reply and returns to the prompt; the partial reply is kept"

# line editing: Left and an inserted character, Home/End, Backspace, Ctrl-U, Up recalls
tmux -L $S send-keys -t $S '/gen 12' Enter
tmux -L $S send-keys -t $S -l 'Helo world'
tmux -L $S send-keys -t $S Left Left Left Left Left Left Left
tmux -L $S send-keys -t $S -l 'l'
tmux -L $S send-keys -t $S Enter
wait_for "$T/err" '^k3: \[reused' 4 || fail "the edited message got no reply"
tmux -L $S send-keys -t $S -l 'iddle'
tmux -L $S send-keys -t $S Home
tmux -L $S send-keys -t $S -l 'M'
tmux -L $S send-keys -t $S End
tmux -L $S send-keys -t $S -l 'xx'
tmux -L $S send-keys -t $S BSpace
tmux -L $S send-keys -t $S Enter
wait_for "$T/err" '^k3: \[reused' 5 || fail "the second edited message got no reply"
tmux -L $S send-keys -t $S -l 'garbage'
tmux -L $S send-keys -t $S C-u
tmux -L $S send-keys -t $S Up Up Enter
wait_for "$T/err" '^k3: \[reused' 6 || fail "the recalled line got no reply"
tmux -L $S send-keys -t $S '/history' Enter
sleep 0.5
tmux -L $S capture-pane -p -t $S -S -300 > "$T/screen"
grep -q '^ *[0-9]*  Hello world$' "$T/screen" \
  || fail "Left + insert: the message sent is not 'Hello world'"
grep -q '^ *[0-9]*  Middlex$' "$T/screen" \
  || fail "Home/End/Backspace: the message sent is not 'Middlex'"
[ "$(grep -c '^ *[0-9]*  Hello world$' "$T/screen")" = 2 ] \
  || fail "Up Up did not recall 'Hello world'"
echo "ok line editing: Left + insert, Home/End/Backspace, Ctrl-U, Up recalls an earlier line"

tmux -L $S send-keys -t $S '/reset' Enter
sleep 0.5
tmux -L $S capture-pane -p -t $S -S -200 > "$T/screen"
grep -q 'conversation reset' "$T/screen" || fail "/reset"
tmux -L $S send-keys -t $S C-c
sleep 0.3
[ -e "$T/done" ] && fail "one Ctrl-C at the prompt exited"
tmux -L $S send-keys -t $S C-c
i=0; while [ ! -e "$T/done" ]; do i=$((i+1)); [ $i -gt 100 ] \
  && fail "second Ctrl-C did not exit"; sleep 0.1; done
grep -q 'EXITED 0' "$T/done" || fail "exit status $(cat "$T/done")"
grep -q icanon "$T/stty" && ! grep -q -E '(^| )-(icanon|echo|isig)( |$)' "$T/stty" \
  || fail "the terminal was left raw: $(cat "$T/stty")"
echo "ok /reset; a second Ctrl-C at the prompt exits 0 and the terminal is" \
  "restored (icanon echo isig)"
