#!/bin/sh
# The tree's rules (README "Layout"): src/cli holds only what every command shares (main,
# flag parsing, usage, error text); each application's private headers sit in its folder
# under src/ and no other folder of src/ or include/ includes them; the engine's folders
# include no application header at all; every file within ~800 lines.
set -u
. tests/sh/lib/check.sh

extra=$(ls src/cli | grep -v -x -e main.c -e flags.c -e usage.c -e sigbus.c)
[ -z "$extra" ] && ok "src/cli: main.c flags.c usage.c sigbus.c only" ||
  bad "src/cli holds $(echo $extra): move it to its application's folder"

APPS="batch bench chat doctor pack run serve tokenize"
n=0
# one grep a header over every file outside its folder (a process a pair took seconds)
for h in src/*/*.h; do
  d=${h#src/}; d=${d%%/*}; f=${h##*/}
  others=""
  for src in src/*/*.c src/*/*.h include/*.h; do
    case $src in src/$d/*) ;; *) others="$others $src";; esac
  done
  # shellcheck disable=SC2086
  for src in $(grep -l -e "#include \"$f\"" -e "#include \"$d/$f\"" -e "#include \".*/$d/$f\"" \
                 $others); do
    bad "$src includes $h, private to src/$d"
  done
  n=$((n+1))
done
[ $n -ge 5 ] && ok "$n private headers under src/*/, each included only from its folder" ||
  bad "only $n private headers found under src/*/"

for d in $APPS; do
  [ -d src/$d ] || bad "src/$d: the application folder is missing"
done
# the engine below the applications: no private header of an application in include/
for h in batch.h chat.h lineedit.h serve.h doctor.h bench_grid.h; do
  [ -e include/$h ] && bad "include/$h is an application's private header: it belongs in src/"
done

long=$(wc -l src/*/*.c src/*/*.h include/*.h | awk '$2 != "total" && $2 !~ /unicode_tab/ &&
  $1 > 850 { print $2 " (" $1 " lines)" }')
[ -z "$long" ] && ok "no source file over 850 lines" || bad "too long: $long"
exit $fail
