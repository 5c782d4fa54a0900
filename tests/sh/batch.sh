#!/bin/sh
# k3 MODEL --batch FILE on every committed model: 6 prompts of different lengths and gen
# (one gen 1, one gen 0, one that stops at eos, two sampled, one given as text) give each
# prompt the ids of its solo run and, with --dump-logits, its solo logits bytes; the same
# with --batch-size 2 (continuous batching), with the trunk streamed at the smallest
# budget, and with the states in a state file (KDA states; and the MLA caches too); the
# --out report; malformed lines refused with exit 2 naming the line and field. The state
# file: chosen by the plan where resident states do not fit, --batch-size by default what
# the plan fits, and its write/read errors (a full disk, a missing directory) exit 1.
# The three streamed ways run one a model in make test (the Nth on the Nth model); all on
# every model in the slow tier (make check, K3_TEST_FULL=1).
K3=${K3:-./bin/k3}
slow() { [ "${K3_TEST_FULL:-}" = 1 ]; }
TK=tests/tok/tiny
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; echo "--- stderr"; cat "$T/err" 2>/dev/null; exit 1; }

# id -> generated ids (commas, no spaces) from the batch's stdout
ids_of() { sed -n "s/^{\"id\": \"$1\", \"generated_ids\": \[\([^]]*\)\].*/\1/p" "$2" | tr -d ' '; }

mi=0
for m in tiny5 tiny4 tiny5f; do
  M=tests/models/$m
  P=$(cat $M/ref/prompt.txt)
  case $m in   # a greedy prompt whose continuation reaches eos (770) within 40 tokens
    tiny5) EOSP=754,475,608,87,876,126 ;;
    tiny4) EOSP=241,839 ;;
    tiny5f) EOSP=151,620,968,268,470,539 ;;
  esac
  L4=9,8,7,6,5,4,3,2,1,10,11,12,13,14,15,16,17,18,19,20
  # line: id | ids | gen | extra solo flags | extra JSON fields
  cat > "$T/spec" <<SPEC
l1|$P|8||
l2|5|1||
l3|$EOSP|40||
l4|$L4|5|--temperature 0.9 --seed 4|, "temperature": 0.9, "seed": 4
l5|100,200|7|--temperature 1.3 --top-k 5 --seed 11|, "top_k": 5, "temperature": 1.3, "seed": 11
l6|3,3,3|0||
l8|7,8,9,7,8,9,7,8,9,7,8|30||
SPEC
  : > "$T/in.jsonl"
  while IFS='|' read -r id ids gen flags json; do
    echo "{\"id\": \"$id\", \"ids\": [$ids], \"gen\": $gen$json}" >> "$T/in.jsonl"
  done < "$T/spec"
  echo '{"id": "l7", "prompt": "Hello there, batch", "gen": 4}' >> "$T/in.jsonl"
  mkdir -p "$T/solo" "$T/d1" "$T/d2" "$T/d3" "$T/d4" "$T/d5" "$T/d6" "$T/d7" "$T/sd"
  while IFS='|' read -r id ids gen flags json; do
    # shellcheck disable=SC2086
    "$K3" $M --ids "$ids" --gen $gen $flags --quiet --dump-logits "$T/solo/$id.f32" \
      > "$T/solo/$id.ids" 2> "$T/err" || fail "$m solo $id exited $?"
  done < "$T/spec"
  "$K3" $M --prompt "Hello there, batch" --tok $TK --gen 4 --quiet --dump-logits "$T/solo/l7.f32" \
    --out "$T/solo/l7.json" > /dev/null 2> "$T/err" || fail "$m solo l7 exited $?"
  want7=$(tr -d '\n ' < "$T/solo/l7.json" | sed 's/.*"generated_ids":\[\([^]]*\)\].*/\1/')
  tr=$T/$m.trunk
  "$K3" pack $M "$tr" --quiet 2> "$T/err" || fail "$m pack"
  run=0; nways=0; mi=$((mi + 1)); si=0
  for how in "" "--batch-size 2" "--batch-size 3 --trunk $tr --trunk-gb 0 --cache-gb 0" \
             "--spec --batch-size 4" "--spec --spec-k 3 --batch-size 2 --trunk $tr --trunk-gb 0" \
             "--state-file all --batch-size 3 --state-file-dir $T/sd" \
             "--state-file kda --trunk $tr --trunk-gb 0 --cache-gb 0"; do
    run=$((run + 1))
    case $how in *--trunk*) si=$((si + 1)); slow || [ $si = $mi ] || continue;; esac
    nways=$((nways + 1))
    # shellcheck disable=SC2086
    "$K3" $M --batch "$T/in.jsonl" --tok $TK $how --threads 2 --quiet --out "$T/r$run.json" \
      --dump-logits "$T/d$run" > "$T/out$run" 2> "$T/err" || fail "$m batch ($how) exited $?"
    [ "$(wc -l < "$T/out$run")" -eq 8 ] || fail "$m batch ($how): $(wc -l < "$T/out$run") lines"
    line=0
    while IFS='|' read -r id ids gen flags json; do
      line=$((line + 1))
      want=$(tr -d '\n' < "$T/solo/$id.ids"); got=$(ids_of $id "$T/out$run")
      [ "$got" = "$want" ] || fail "$m batch ($how) $id: ids '$got', solo '$want'"
      cmp -s "$T/d$run/$line.f32" "$T/solo/$id.f32" || fail "$m batch ($how) $id: logits differ"
    done < "$T/spec"
    cmp -s "$T/d$run/8.f32" "$T/solo/l7.f32" || fail "$m batch ($how) l7 (text): logits differ"
    [ "$(ids_of l7 "$T/out$run")" = "$want7" ] || fail "$m batch ($how) l7 (text): ids differ"
    grep -q '^{"id": "l7", "generated_ids": \[[0-9, ]*\], "text": "' "$T/out$run" ||
      fail "$m: no text field with a tokenizer"
    grep -q '"id": "l3".*"stop": "eos"' "$T/out$run" || fail "$m: l3 did not stop at eos"
    grep -q '"id": "l1".*"stop": "length", "n_prompt": 12, "n_generated": 8' "$T/out$run" ||
      fail "$m: l1 stop/n_prompt/n_generated"
    grep -q '"id": "l6", "generated_ids": \[\]' "$T/out$run" || fail "$m: gen 0 line"
    for k in tokens_per_second peak_rss_bytes n_generated seconds; do
      grep -q "\"$k\": [0-9]" "$T/r$run.json" || fail "$m --out has no $k"
    done
    case $how in *--spec*)
      grep -q '"spec_passes": [1-9]' "$T/r$run.json" || fail "$m ($how): no verify pass";;
    esac
  done
  [ -z "$(ls "$T/sd")" ] || fail "$m: the state file was left in $T/sd"
  echo "ok $m: 8 prompts (gen 0..40, eos, sampled, text) = their solo ids and logits bytes," \
    "in one batch, --batch-size 2, streamed at the smallest budget, with --spec, and with" \
    "the states in a state file ($nways ways of 7)"
done

# The state file on tiny5 at --ctx 4096 (the MLA caches dominate): 12 prompts. At a budget
# (K3_MEM_AVAILABLE) where resident states do not fit but the file does, the plan puts the
# KDA states and MLA caches in it and still admits all 12 (the default --batch-size); with
# --state-file off it admits fewer. Ids equal the resident run's.
M=tests/models/tiny5
: > "$T/many.jsonl"
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
  echo "{\"id\": \"p$i\", \"ids\": [$i, 5, $((i * 7)), 7], \"gen\": $((i + 3))}" >> "$T/many.jsonl"
done
"$K3" $M --batch "$T/many.jsonl" --ctx 4096 --quiet > "$T/res" 2> "$T/err" ||
  fail "resident exited $?"
sort "$T/res" | sed 's/, "seconds.*//' > "$T/res.s"
K3_MEM_AVAILABLE=88000000 "$K3" $M --batch "$T/many.jsonl" --ctx 4096 > "$T/auto" 2> "$T/err" ||
  fail "auto state file exited $?"
grep -q '^  state file .* the KDA states and MLA caches of 12 sequences' "$T/err" ||
  fail "the plan did not put 12 sequences' states in the state file"
grep -q '^  state buffers ' "$T/err" || fail "the plan does not count the state buffers"
grep -q 'batch: 12 prompts, 12 in flight (what the plan fits).*states in a state file' "$T/err" ||
  fail "12 in flight with the state file"
sort "$T/auto" | sed 's/, "seconds.*//' | cmp -s - "$T/res.s" || fail "state file: ids differ"
K3_MEM_AVAILABLE=88000000 "$K3" $M --batch "$T/many.jsonl" --ctx 4096 --state-file off \
  > "$T/off" 2> "$T/err" || fail "--state-file off exited $?"
n=$(sed -n 's/.*batch: 12 prompts, \([0-9]*\) in flight (what the plan fits).*/\1/p' "$T/err")
[ -n "$n" ] && [ "$n" -ge 2 ] && [ "$n" -lt 12 ] ||
  fail "resident states: '$n' in flight, want 2..11"
grep -q 'state file' "$T/err" && fail "--state-file off used a state file"
sort "$T/off" | sed 's/, "seconds.*//' | cmp -s - "$T/res.s" || fail "--batch-size $n: ids differ"
echo "ok state file chosen by the plan: 12 in flight (resident: $n), the same ids"

# its errors: exit 1 with the directory or the record named, never a wrong line
sfail() {   # NEEDLE ENV... -- FLAGS...: exit 1, the message, every printed line right
  needle=$1; shift
  env "$@" --batch "$T/many.jsonl" --ctx 4096 --quiet > "$T/out" 2> "$T/err"; rc=$?
  [ $rc -eq 1 ] || fail "state file error ($*): exit $rc, want 1"
  grep -q -- "$needle" "$T/err" || fail "state file error ($*): no '$needle' in the message"
  sed 's/, "seconds.*//' "$T/out" | while read -r l; do
    grep -qxF "$l" "$T/res.s" || { echo "FAIL: a wrong line after a state file error: $l"; exit 1; }
  done || exit 1
}
sfail "state-file-dir $T/none: cannot create" "$K3" $M --state-file all --state-file-dir "$T/none"
touch "$T/afile"
sfail "cannot create the state file" "$K3" $M --state-file kda --state-file-dir "$T/afile"
sfail "writing layer .* No space left on device" K3_FAULT_STATE_WRITE=40 "$K3" $M --state-file all
sfail "reading layer .*Input/output error" K3_FAULT_STATE_READ=30 "$K3" $M --state-file kda
"$K3" $M --batch "$T/many.jsonl" --spec --state-file all > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q -- "--spec needs the states resident" "$T/err" ||
  fail "--spec with a state file: exit $rc"
echo "ok state file errors: a missing or unusable directory, a full disk, a failed read:" \
  "exit 1, no wrong line"

# malformed lines: exit 2, naming the line number and the field
M=tests/models/tiny5
bad() {   # LINE3 NEEDLE: a file whose third line is LINE3
  printf '{"id": 1, "ids": [1]}\n\n%s\n{"id": 4, "ids": [2]}\n' "$1" > "$T/bad.jsonl"
  K3_TOK_FILES= "$K3" $M --batch "$T/bad.jsonl" --quiet > "$T/out" 2> "$T/err"; rc=$?
  [ $rc -eq 2 ] || fail "'$1': exit $rc, want 2"
  grep -q "line 3" "$T/err" || fail "'$1': no line number"
  grep -q -- "$2" "$T/err" || fail "'$1': no '$2' in the message"
  [ -s "$T/out" ] && fail "'$1': output before the refusal"
  :
}
bad '{"id": 3, "ids": [1, "x"]}' '"ids" item 1'
bad '{"id": 3, "ids": []}' '"ids" must be a non-empty'
bad '{"id": 3, "ids": [1], "gen": -1}' '"gen" must be an integer'
bad '{"id": 3, "ids": [1], "temperature": "hot"}' '"temperature" must be a number'
bad '{"id": 3, "ids": [1], "top_p": 2}' 'top_p'
bad '{"id": 3, "ids": [1], "min_p": 1}' 'min_p'
bad '{"id": 3, "ids": [1], "top_k": 1.5}' '"top_k" must be an integer'
bad '{"id": 3, "ids": [1], "seed": -3}' '"seed" must be an integer'
bad '{"id": 3, "ids": [1], "tempreature": 1}' 'unknown field "tempreature"'
bad '{"id": 3}' 'exactly one of "ids" and "prompt"'
bad '{"id": 3, "ids": [1], "prompt": "x"}' 'exactly one of "ids" and "prompt"'
bad '{"id": [3], "ids": [1]}' '"id" must be a string or an integer'
bad '{"id": 3, "ids": [1]' 'not JSON'
bad '[1, 2]' 'expected a JSON object'
bad '{"id": 3, "ids": [5000]}' 'outside the vocabulary'
bad '{"id": 3, "prompt": "needs a tokenizer"}' 'needs a tokenizer'
echo "ok malformed lines refused (exit 2) naming line 3 and the field, before any output"

