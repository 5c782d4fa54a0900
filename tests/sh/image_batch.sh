#!/bin/sh
# Images in --batch lines (issue 37): {"prompt": ..., "images": [...]} is rendered as
# k3 --prompt --image renders it. Each line's ids equal its one-shot run's, beside a text line
# and alone (--batch-size 1), at 1 and 2 threads; bad "images" fields are refused naming the
# line.
. tests/sh/lib/check.sh
M=tests/models/tiny5_vision; TK=tests/tok/tiny; D=tests/images
cat > $T/in.jsonl <<EOF
{"id": 1, "prompt": "What is this?", "images": ["$D/png_rgba8.png"], "gen": 5}
{"id": 2, "prompt": "Plain text", "gen": 5}
{"id": 3, "prompt": "Compare", "images": ["$D/jpg_prog_420.jpg", "$D/big/big_rgb_wide.png"], "gen": 5}
EOF
$K3 $M --batch $T/in.jsonl --tok $TK --quiet --threads 1 > $T/b1 2> $T/se &&
  $K3 $M --batch $T/in.jsonl --tok $TK --quiet --threads 2 --batch-size 1 > $T/b2 2>> $T/se &&
  [ "$(sed 's/, "seconds_.*//' $T/b1)" = "$(sed 's/, "seconds_.*//' $T/b2)" ] &&
  ok "the same lines together at 1 thread and one by one at 2" ||
  bad "batch: $(cat $T/se) $(diff $T/b1 $T/b2)"
gen() { sed -n "s/^{\"id\": $1, \"generated_ids\": \[\([^]]*\)\].*/\1/p" $T/b1 | tr -d ' '; }
one() {
  $K3 $M --tok $TK --quiet --gen 5 --greedy --out $T/o.json "$@" > /dev/null 2>&1
  sed -n 's/.*"generated_ids": \[\([^]]*\)\].*/\1/p' $T/o.json | tr -d ' '
}
g1=$(one --prompt 'What is this?' --image $D/png_rgba8.png)
g3=$(one --prompt Compare --image $D/jpg_prog_420.jpg --image $D/big/big_rgb_wide.png)
[ -n "$g1" ] && [ "$(gen 1)" = "$g1" ] && [ "$(gen 3)" = "$g3" ] &&
  ok "each image line's ids are its one-shot run's ($g1; $g3)" ||
  bad "batch vs one-shot: $(gen 1) / $g1, $(gen 3) / $g3"

chk() {   # LINE TEXT: the file of that one line is refused, exit 2, naming TEXT
  printf '%s\n' "$1" > $T/bad.jsonl
  $K3 $M --batch $T/bad.jsonl --tok $TK --quiet > $T/so 2> $T/se; rc=$?
  [ $rc = 2 ] && grep -qF -- "$2" $T/se && ok "refused: $2" || bad "$1: exit $rc, $(cat $T/se)"
}
chk '{"id": 1, "ids": [1, 2], "images": ["x.png"]}' '"images" goes with "prompt"'
chk '{"id": 1, "prompt": "a", "images": "x.png"}' '"images" must be an array'
chk '{"id": 1, "prompt": "a", "images": [""]}' '"images" item 0 must be a file path'
chk "{\"id\": 1, \"prompt\": \"a\", \"images\": [\"$T/none.png\"]}" "none.png"
chk "{\"id\": 1, \"prompt\": \"a\", \"images\": [\"$D/refuse.webp\"]}" "looks like WebP"
exit $fail
