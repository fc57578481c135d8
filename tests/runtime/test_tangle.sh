#!/usr/bin/env bash
# test_tangle.sh — no tangle in libaugur, checked on its object files.
#
#   test_tangle.sh --list FILE        FILE names object files, one a line (CMake writes
#                                     build/tangle-runtime.txt and build/tangle-all.txt)
#   test_tangle.sh OBJECT...          the same, on the command line
#   test_tangle.sh --self-test CC     builds small objects with CC that break each rule and
#                                     one that keeps them, and checks that only it passes
#
# Reads what each object defines and what it uses (nm), draws an arrow from a file to every
# file that defines a symbol it uses, and fails on
#   - a cycle of more than two files (a pair that calls both ways, such as
#     runtime/actor.c <-> runtime/sched.c, is one unit: docs/architecture.md names them), or
#   - any arrow from runtime/ into actors/.
# A file is named by its source folder and name: .../runtime/CMakeFiles/augur_runtime.dir/
# actor.c.o is runtime/actor.c. Prints the pairs, and on failure every offending arrow with
# the symbols it stands for.
set -uo pipefail

name_of() { # object path -> folder/file.c
  sed -E 's|.*/([^/]+)/CMakeFiles/[^/]+\.dir/(.+)\.o$|\1/\2|' <<<"$1"
}

check() { # OBJECT... ; exit status 0 when the rules hold
  local o n
  [ $# -gt 0 ] || { echo "test_tangle: no object files given" >&2; return 2; }
  for o in "$@"; do
    [ -f "$o" ] || { echo "test_tangle: $o: no such object file" >&2; return 2; }
    n=$(name_of "$o")
    nm -g --defined-only "$o" | awk -v f="$n" 'NF >= 3 { print "D", f, $NF }'
    nm -u "$o" | awk -v f="$n" 'NF >= 1 { print "U", f, $NF }'
  done | awk '
    $1 == "D" { def[$3] = $2; node($2); next }
    $1 == "U" { use[++nu] = $2 SUBSEP $3; node($2); next }
    function node(f) { if (!(f in idx)) { idx[f] = ++n; file[n] = f } }
    END {
      for (k = 1; k <= nu; k++) {
        split(use[k], p, SUBSEP)
        if (!(p[2] in def) || def[p[2]] == p[1]) continue
        a = idx[p[1]]; b = idx[def[p[2]]]
        if (!((a, b) in edge)) edge[a, b] = p[2]
        else if (length(edge[a, b]) < 160) edge[a, b] = edge[a, b] ", " p[2]
        reach[a, b] = 1
      }
      for (k = 1; k <= n; k++)
        for (i = 1; i <= n; i++)
          if ((i, k) in reach)
            for (j = 1; j <= n; j++)
              if ((k, j) in reach) reach[i, j] = 1
      bad = 0
      for (i = 1; i <= n; i++) {
        if (i in seen) continue
        size = 1; members = file[i]; list[1] = i; seen[i] = 1
        for (j = 1; j <= n; j++)
          if (j != i && ((i, j) in reach) && ((j, i) in reach)) {
            list[++size] = j; seen[j] = 1; members = members " " file[j]
          }
        if (size == 2) print "pair (one unit): " file[list[1]] " <-> " file[list[2]]
        if (size > 2) {
          bad = 1
          print "FAIL a cycle of " size " files: " members
          for (x = 1; x <= size; x++)
            for (y = 1; y <= size; y++)
              if ((list[x], list[y]) in edge)
                print "  " file[list[x]] " -> " file[list[y]] " (" edge[list[x], list[y]] ")"
        }
      }
      for (a = 1; a <= n; a++)
        for (b = 1; b <= n; b++)
          if (((a, b) in edge) && file[a] ~ /^runtime\// && file[b] ~ /^actors\//) {
            bad = 1
            print "FAIL runtime/ calls into actors/: " file[a] " -> " file[b] " (" edge[a, b] ")"
          }
      print n " files checked" (bad ? "" : ": no cycle of more than two files, no arrow from runtime/ into actors/")
      exit bad
    }'
}

self_test() { # CC
  local cc=$1 tmp fails=0 rc
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  obj() { # folder file 'C source'
    mkdir -p "$tmp/$1/CMakeFiles/t.dir"
    printf '%s\n' "$3" >"$tmp/$1/$2"
    "$cc" -c -o "$tmp/$1/CMakeFiles/t.dir/$2.o" "$tmp/$1/$2" || return 1
  }
  o() { echo "$tmp/$1/CMakeFiles/t.dir/$2.o"; }
  obj runtime a.c 'int b(void); int a(void) { return b(); }' || return 1
  obj runtime b.c 'int c(void); int b(void) { return c(); }' || return 1
  obj runtime c.c 'int a(void); int c(void) { return a(); }' || return 1
  obj runtime p.c 'int q(void); int p(void) { return q(); } int r(void);'
  obj runtime q.c 'int p(void); int q(void) { return p(); }'
  obj runtime r.c 'int s(void); int r(void) { return s(); }'
  obj actors s.c 'int s(void) { return 1; }'
  obj actors t.c 'int p(void); int t(void) { return p(); }'
  check "$(o runtime a.c)" "$(o runtime b.c)" "$(o runtime c.c)" >"$tmp/out1"
  rc=$?
  grep -q 'FAIL a cycle of 3 files' "$tmp/out1" && [ $rc -ne 0 ] && echo "ok   a cycle of three files fails" ||
    { echo "FAIL a cycle of three files was not caught"; cat "$tmp/out1"; fails=$((fails + 1)); }
  check "$(o runtime r.c)" "$(o actors s.c)" >"$tmp/out2"
  rc=$?
  grep -q 'FAIL runtime/ calls into actors/: runtime/r.c -> actors/s.c' "$tmp/out2" && [ $rc -ne 0 ] &&
    echo "ok   runtime/ calling into actors/ fails" ||
    { echo "FAIL runtime/ -> actors/ was not caught"; cat "$tmp/out2"; fails=$((fails + 1)); }
  check "$(o runtime p.c)" "$(o runtime q.c)" "$(o actors t.c)" >"$tmp/out3"
  rc=$?
  grep -q 'pair (one unit): runtime/p.c <-> runtime/q.c' "$tmp/out3" && [ $rc -eq 0 ] &&
    echo "ok   a pair, and actors/ calling into runtime/, pass" ||
    { echo "FAIL a pair or actors/ -> runtime/ was refused"; cat "$tmp/out3"; fails=$((fails + 1)); }
  [ $fails -eq 0 ]
}

case "${1:-}" in
--self-test)
  [ $# -eq 2 ] || { echo "usage: test_tangle.sh --self-test CC" >&2; exit 2; }
  self_test "$2"
  ;;
--list)
  [ $# -eq 2 ] || { echo "usage: test_tangle.sh --list FILE" >&2; exit 2; }
  mapfile -t objs < <(grep -v '^$' "$2")
  check "${objs[@]}"
  ;;
*)
  check "$@"
  ;;
esac
