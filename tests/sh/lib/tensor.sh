# Sourced by tests/sh/*.sh (not a test itself): find a tensor in a safetensors shard from
# its header and overwrite its bytes, with od/dd/awk only (make test needs no python).
#   tensor_offset FILE NAME  -> "OFFSET NBYTES DTYPE" (absolute offset of the data)
#   patch_bytes FILE OFFSET OCTAL   e.g. patch_bytes f 1234 '\300\177' (BF16 NaN)
tensor_offset() {
  _hl=$(od -An -tu8 -N8 "$1" | tr -d ' ')
  tail -c +9 "$1" | head -c "$_hl" | awk -v n="\"$2\":" -v hl="$_hl" '{
    i = index($0, n); if (!i) exit 1
    s = substr($0, i + length(n)); s = substr(s, 1, index(s, "}"))
    d = s; sub(/.*"dtype": *"/, "", d); sub(/".*/, "", d)
    o = s; sub(/.*"data_offsets": *\[ */, "", o); sub(/\].*/, "", o)
    split(o, ab, / *, */)
    printf "%d %d %s\n", 8 + hl + ab[1], ab[2] - ab[1], d; found = 1; exit 0
  } END { if (!found) exit 1 }'
}
patch_bytes() {
  printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
# shard_of MODEL_DIR NAME -> the shard file holding NAME (from the index)
shard_of() {
  f=$(grep -o "\"$2\": *\"[^\"]*\"" "$1/model.safetensors.index.json" | sed 's/.*: *"//; s/"$//')
  [ -n "$f" ] && echo "$1/$f"
}
