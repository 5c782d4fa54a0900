#!/bin/sh
# Streaming the trunk from the shards when they go wrong (issue 38): a shard truncated
# mid-run, removed or replaced mid-run, a header that lies about offsets. Each ends in a
# clear error naming the shard (and the tensor where a read failed) with the README's exit
# code, or in the reference ids: never a crash, never other ids.
. tests/sh/lib/mem.sh
M=tests/models/tiny5
P=$(cat $M/ref/prompt.txt); REF=$(cat $M/ref/greedy.txt)
S=model-00006-of-000016.safetensors              # layer 5: its trunk and experts
fresh() { rm -rf $T/m; mkdir $T/m; cp $M/*.json $M/*.safetensors $T/m/; }
prefix() { case "$REF" in "$1"*) return 0;; esac; return 1; }   # ids the run printed
run() { "$@" $T/m --ids "$P" --gen 16 --trunk-gb 0 --cache-gb 0 --quiet >$T/o 2>$T/e; }

# truncated to its header at the 20th expert prefetch (the second forward): the next read
# of layer 5's trunk is short
fresh
run env K3_FAULT_SHRINK_AT=20 K3_FAULT_SHRINK_SHARD=6 $K3; rc=$?
msg="trunk read failed: 'language_model.model.layers.5\..*' (layer 5): .*$S:.*truncated"
[ $rc = 1 ] && grep -q "$msg" $T/e && prefix "$(tr -d '\n' < $T/o)" &&
  ok "shard truncated mid-run: exit 1 naming the tensor and $S, ids a prefix of the reference" ||
  bad "truncated mid-run: rc $rc ids '$(cat $T/o)' $(tail -c 400 $T/e)"

# removed mid-run: the stream reads the files it opened at start, so the run goes on
fresh
run env K3_FAULT_SHRINK_AT=20 K3_FAULT_SHRINK_SHARD=6 K3_FAULT_SHRINK_UNLINK=1 $K3; rc=$?
[ $rc = 0 ] && [ "$(cat $T/o)" = "$REF" ] &&
  ok "shard removed mid-run: the files opened at start are read, ids == reference" ||
  bad "removed mid-run: rc $rc ids '$(cat $T/o)' $(tail -c 400 $T/e)"

# replaced mid-run by a copy with other bytes (renamed over it, as a re-download would):
# still the files opened at start, the reference ids (the run takes ~2 s at this budget)
fresh
cp $T/m/$S $T/new; sz=$(wc -c < $T/new)
dd if=/dev/urandom of=$T/new bs=4096 seek=8 count=$(( (sz - 40000) / 4096 )) conv=notrunc \
  2>/dev/null
rm -f $T/o; : > $T/o
"$K3" $T/m --ids "$P" --gen 16 --trunk-gb 0 --cache-gb 0 --incremental --quiet >>$T/o 2>$T/e &
pid=$!
i=0; while [ ! -s $T/o ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
mv $T/new $T/m/$S
wait $pid; rc=$?
[ $rc = 0 ] && [ "$(tr -d '\n' < $T/o)" = "$REF" ] &&
  ok "shard replaced mid-run (after $i polls): ids == reference" ||
  bad "replaced mid-run: rc $rc ids '$(cat $T/o)' $(tail -c 400 $T/e)"

# a header that lies about offsets: written in place, the same length
hdr() {  # hdr SED: rewrite shard S's header with sed
  f=$T/m/$S; hl=$(od -An -t u8 -N8 $f | tr -d ' ')
  dd if=$f bs=1 skip=8 count=$hl 2>/dev/null | sed "$1" > $T/h
  [ "$(wc -c < $T/h)" = "$hl" ] || { bad "header edit changed its length"; return 1; }
  dd if=$T/h of=$f bs=1 seek=8 conv=notrunc 2>/dev/null
}
q='"language_model.model.layers.5.self_attn.q_proj.weight":{"dtype":"BF16","shape":\[128,256\]'
# past the end of the data
fresh; hdr "s/\($q\),\"data_offsets\":\[569408,634944\]/\1,\"data_offsets\":[869408,934944]/"
run $K3; rc=$?
[ $rc = 1 ] || [ $rc = 2 ] && grep -q "$S.*q_proj\|q_proj.*$S" $T/e && [ ! -s $T/o ] &&
  ok "header offsets past the data: exit $rc naming $S and the tensor" ||
  bad "offsets past the data: rc $rc $(tail -c 400 $T/e)"
# overlapping another tensor (k_proj's bytes)
fresh; hdr "s/\($q\),\"data_offsets\":\[569408,634944\]/\1,\"data_offsets\":[438400,503936]/"
run $K3; rc=$?
[ $rc = 1 ] || [ $rc = 2 ] && grep -q "overlap" $T/e && grep -q "$S" $T/e && [ ! -s $T/o ] &&
  ok "header offsets overlapping another tensor: exit $rc naming $S" ||
  bad "overlapping offsets: rc $rc $(tail -c 400 $T/e)"
# q_proj and k_proj swapped: a consistent header (another checkpoint): every path follows
# it, so the shards streamed, in place and packed give the same bits
fresh
k='"language_model.model.layers.5.self_attn.k_proj.weight":{"dtype":"BF16","shape":\[128,256\]'
hdr "s/\($q\),\"data_offsets\":\[569408,634944\]/\1,\"data_offsets\":[438336,503872]/;
     s/\($k\),\"data_offsets\":\[438336,503872\]/\1,\"data_offsets\":[569408,634944]/"
$K3 $T/m --ids "$P" --gen 0 --quiet --dump-logits $T/a.f32 >/dev/null 2>$T/e || bad "swapped: $?"
$K3 pack $T/m $T/tr --quiet || bad "swapped: pack"
$K3 $T/m --ids "$P" --gen 0 --quiet --trunk-gb 0 --cache-gb 0 --dump-logits $T/b.f32 \
  >/dev/null 2>&1 || bad "swapped, from the shards: $?"
$K3 $T/m --ids "$P" --gen 0 --quiet --trunk $T/tr --trunk-gb 0 --dump-logits $T/c.f32 \
  >/dev/null 2>&1 || bad "swapped, packed: $?"
cmp -s $T/a.f32 $T/b.f32 && cmp -s $T/a.f32 $T/c.f32 && ! cmp -s $T/a.f32 $M/ref/logits.f32 &&
  ok "q_proj/k_proj offsets swapped: in place, from the shards and packed the same bits" ||
  bad "swapped offsets: the paths disagree"
exit $fail
