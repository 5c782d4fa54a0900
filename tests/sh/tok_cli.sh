#!/bin/sh
# k3 tokenize / detokenize on the tiny fixture tokenizer (tests/tok/tiny).
set -u
K3=${K3:-./bin/k3}
D=$(mktemp -d); trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
TOK=tests/tok/tiny
printf 'hi' > "$D/a.txt"; : > "$D/empty.txt"; printf '[BOS]x<|end_of_msg|>' > "$D/s.txt"
out=$($K3 tokenize --tok $TOK "$D/a.txt" "$D/empty.txt" "$D/a.txt") || fail "tokenize rc"
[ "$(printf '%s\n' "$out" | wc -l)" -eq 3 ] || fail "one line per file: $out"
[ "$(printf '%s\n' "$out" | sed -n 2p)" = "" ] || fail "empty file gives an empty line"
ids=$(printf '%s\n' "$out" | sed -n 1p); ids1=$ids
[ "$($K3 detokenize --tok $TOK --ids "$ids")" = "hi" ] || fail "round trip"
sp=$($K3 tokenize --tok $TOK --special "$D/s.txt") || fail "special rc"
case "$sp" in 768,*,770) ;; *) fail "special mode ids: $sp" ;; esac
pl=$($K3 tokenize --tok $TOK "$D/s.txt")
case "$pl" in 768,*) fail "plain mode must not match [BOS]: $pl" ;; esac
[ "$($K3 detokenize --tok $TOK --ids 770)" = "<|end_of_msg|>" ] || fail "special decode"
# invalid UTF-8 round-trips byte for byte
printf 'a\200\303(\377 x\302' > "$D/bad.txt"
ids=$($K3 tokenize --tok $TOK "$D/bad.txt") || fail "invalid utf-8 rc"
$K3 detokenize --tok $TOK --ids "$ids" > "$D/back.txt" || fail "detok rc"
cmp -s "$D/bad.txt" "$D/back.txt" || fail "invalid UTF-8 round trip"
# FILE - reads stdin, as the help says
[ "$(printf 'hi' | $K3 tokenize --tok $TOK -)" = "$ids1" ] || fail "tokenize - must read stdin"
# K3_TOK_FILES default
[ "$(K3_TOK_FILES=$TOK $K3 detokenize --ids "$(K3_TOK_FILES=$TOK $K3 tokenize "$D/a.txt")")" = \
  "hi" ] || fail "K3_TOK_FILES default"
# exit codes: 2 usage, 1 runtime
$K3 tokenize --tok $TOK >/dev/null 2>&1; [ $? -eq 2 ] || fail "no FILE must exit 2"
env -u K3_TOK_FILES $K3 tokenize "$D/a.txt" >/dev/null 2>&1; [ $? -eq 2 ] \
  || fail "no --tok must exit 2"
$K3 detokenize --tok $TOK --ids 1,x >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad --ids must exit 2"
$K3 detokenize --tok $TOK --ids 5000 >/dev/null 2>&1; [ $? -eq 2 ] \
  || fail "id out of range must exit 2"
$K3 tokenize --tok $TOK --bogus "$D/a.txt" >/dev/null 2>&1; [ $? -eq 2 ] \
  || fail "unknown option must exit 2"
$K3 tokenize --tok "$D/nodir" "$D/a.txt" >/dev/null 2>&1; [ $? -eq 2 ] \
  || fail "missing tokenizer must exit 2 (a config error, as in a run)"
err=$($K3 tokenize --tok "$D/nodir" "$D/a.txt" 2>&1); case "$err" in *nodir/tiktoken.model*) ;; *) \
  fail "error names the file: $err" ;; esac
# a missing path or a folder is a usage error, as --prompt-file in a run (README "Exit codes")
$K3 tokenize --tok $TOK "$D/missing.txt" >/dev/null 2>&1; [ $? -eq 2 ] \
  || fail "missing FILE must exit 2"
$K3 tokenize --tok $TOK "$D" >/dev/null 2>&1; [ $? -eq 2 ] || fail "a directory as FILE must exit 2"
# --text STR tokenizes the string itself (repeatable, in order with FILEs); a FILE that is
# not there and looks like text gets the hint (issue 35)
printf 'hello world' > "$D/hw.txt"
want=$($K3 tokenize --tok $TOK "$D/hw.txt")
[ "$($K3 tokenize --tok $TOK --text 'hello world')" = "$want" ] || fail "--text: not the file's ids"
out=$($K3 tokenize --tok $TOK --text 'hello world' "$D/a.txt" --text hi) || fail "--text mixed rc"
[ "$out" = "$(printf '%s\n%s\n%s' "$want" "$ids1" "$ids1")" ] || fail "--text order: $out"
err=$($K3 tokenize --tok $TOK 'hello world' 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] || fail "a FILE that is not there must exit 2, got $rc"
case "$err" in *"hello world: no such file; to tokenize the text itself, use --text"*) ;;
  *) fail "no --text hint: $err" ;; esac
$K3 tokenize --tok $TOK --text >/dev/null 2>&1; [ $? -eq 2 ] || fail "--text without STR: exit 2"
# --help anywhere prints the usage, even where a value was due
$K3 tokenize --tok --help 2>/dev/null | grep -q '^Usage: k3 tokenize .*--text STR' ||
  fail "--tok --help: no usage (with --text) on stdout"
echo "tok cli: ok"
