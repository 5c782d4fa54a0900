# Sourced by the tools that time k3 serve (bench_serve.sh, bench_serve_join.sh); not a tool
# itself. Needs TK (the tokenizer folder).
#   serve_start BIN MODEL_DIR ERR [flags]
# A k3 serve on a free port, its stderr in ERR: the pid in $pid, the address in $U; exit 1
# (with its stderr) if it dies before it listens.
serve_start() {
  _bin=$1; _m=$2; _err=$3; shift 3
  "$_bin" serve "$_m" --tok "$TK" --port 0 "$@" 2> "$_err" & pid=$!
  while ! grep -qs 'listening on' "$_err"; do
    kill -0 $pid 2>/dev/null || { cat "$_err" >&2; exit 1; }; sleep 0.1
  done
  U=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$_err")
}
