#!/bin/sh
# A bad tokenizer directory (--tok) is a config error everywhere: exit 2 with a message
# that names the file and the field, from k3 tokenize / detokenize, a batch run and a
# chat alike; never a crash, and binary garbage is echoed escaped, not raw. Runs bin/k3
# and, in make check, the ASan/UBSan binary bin/k3-asan.
set -u
K3=${K3:-./bin/k3}
M=tests/models/tiny5
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail=0
# The ASan/UBSan binary too: K3_ASAN, else bin/k3-asan in the slow tier (make check builds
# it first); make test leaves it to make check (its -O1 build costs more than these runs).
BINS=$K3; [ "${K3_TEST_FULL:-}" = 1 ] && : "${K3_ASAN:=bin/k3-asan}"
if [ -n "${K3_ASAN:-}" ]; then
  [ -x "$K3_ASAN" ] || { echo "FAIL: $K3_ASAN not built (make asan)"; exit 1; }
  BINS="$BINS $K3_ASAN"
else echo "SKIP: the same cases under bin/k3-asan: make check runs them"; fi
printf 'hi' > $T/a.txt

# mktok NAME CONFIG: tests/tok/tiny's ranks with CONFIG as tokenizer_config.json
mktok() {
  rm -rf $T/$1; mkdir $T/$1; cp tests/tok/tiny/tiktoken.model $T/$1/
  printf '%s' "$2" > $T/$1/tokenizer_config.json
}
no() { echo "FAIL $1"; fail=1; }

check() {  # check WHAT PATTERN (on $T/e, after a run whose exit code is $rc)
  if [ $rc -ne 2 ]; then no "$1: exit $rc, expected 2: $(head -c 300 $T/e)"; return; fi
  if ! grep -q -- "$2" $T/e; then no "$1: message lacks '$2': $(head -c 300 $T/e)"; return; fi
  if grep -q -E "AddressSanitizer|runtime error" $T/e; then no "$1: sanitizer report"; return; fi
  if [ "$(head -c 4 $T/e)" != "k3: " ]; then no "$1: message does not start with 'k3: '"; return; fi
  if LC_ALL=C tr -d '\n' < $T/e | LC_ALL=C grep -q '[[:cntrl:]]'; then
    no "$1: raw control bytes in the message"; return; fi
  echo "ok   $1: $(head -n 1 $T/e | cut -c1-140)"
}

# every entry point, with both binaries
expect() {  # expect DIR PATTERN WHAT
  for b in $BINS; do
    n=$(basename $b); export ASAN_OPTIONS=detect_leaks=0
    $b tokenize --tok $T/$1 $T/a.txt >/dev/null 2>$T/e; rc=$?
    check "$n tokenize, $3" "$2"
    $b detokenize --tok $T/$1 --ids 1 >/dev/null 2>$T/e; rc=$?
    check "$n detokenize, $3" "$2"
    $b $M --tok $T/$1 --prompt hi --gen 1 --quiet >/dev/null 2>$T/e; rc=$?
    check "$n run --tok, $3" "$2"
    printf '/exit\n' | $b $M --chat --tok $T/$1 --gen 1 >/dev/null 2>$T/e; rc=$?
    check "$n chat --tok, $3" "$2"
  done
}

C=tokenizer_config.json
mktok arr '{"added_tokens_decoder": [1]}'
expect arr "arr/$C: added_tokens_decoder must be an object" "added_tokens_decoder an array"
mktok str '{"added_tokens_decoder": "x"}'
expect str "str/$C: added_tokens_decoder must be an object" "added_tokens_decoder a string"
mktok num '{"added_tokens_decoder": 5}'
expect num "num/$C: added_tokens_decoder must be an object" "added_tokens_decoder a number"
mktok ent '{"added_tokens_decoder": {"768": [1]}}'
expect ent "ent/$C: added_tokens_decoder \"768\" must be an object" "entry an array"
mktok cnt '{"added_tokens_decoder": {"768": {"content": 7}}}'
expect cnt "cnt/$C: added_tokens_decoder \"768\".content is number" "content a number"
mktok top '[{"added_tokens_decoder": {}}]'
expect top "top/$C: the top level is array" "top level an array"
mktok key '{"added_tokens_decoder": {"\u001b[2J": {"content": "x"}}}'
expect key "key \"\\\\u001b\[2J\" is not an id" "key with an escape sequence"
mktok json '{"added_tokens_decoder": {'
expect json "json/$C: line 1" "malformed JSON"
mkdir $T/dir; cp tests/tok/tiny/tiktoken.model $T/dir/; mkdir $T/dir/$C
expect dir "dir/$C: is a directory" "tokenizer_config.json a directory"
# binary garbage in tiktoken.model
mkdir $T/bin; printf '\033[2J\033]0;pwned\007\001\002\377 0\n' > $T/bin/tiktoken.model
expect bin "bin/tiktoken.model:1: bad base64 token \"\\\\u001b\[2J" "garbage in tiktoken.model"
mkdir $T/none
expect none "none/tiktoken.model: cannot open" "no tiktoken.model"

[ $fail -eq 0 ] && echo "tok refusals: ok"
exit $fail
