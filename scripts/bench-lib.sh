# bench-lib.sh: helpers the benchmark scripts share (bench-compare.sh,
# bench-scale.sh, bench-cleaner.sh; franz-suite.sh uses say, warn,
# node_ports and run_child's CHILD and stop_child). Sourced, never run; it
# defines functions and WARNINGS and starts nothing.
#
# The table helpers (stat, med, rate_cell) read "$RES", a file of lines
# "key<TAB>value[<TAB>round]" that the sourcing script appends to.

say() { printf '%s\n' "$*" >&2; }
WARNINGS=()
warn() { say "WARNING: $*"; WARNINGS+=("$*"); }

# ports_free PORT...: fails, naming the first, if any of them is listened on.
ports_free() {
  local p
  for p in "$@"; do
    if ss -Hltn "sport = :$p" 2>/dev/null | grep -q .; then say "port $p is already in use"; return 1; fi
  done
}

# node_ports BASE: the 18 ports scripts/run.sh's three nodes listen on
# (six from BASE, BASE+10 and BASE+20).
node_ports() {
  local n o
  for n in 0 10 20; do for o in 0 1 2 3 4 5; do echo $(($1 + n + o)); done; done
}

# Load clients run in the background and are waited for, so that a signal
# to the script is acted on at once (bash defers traps while a foreground
# child runs); the script's INT/TERM trap calls stop_child first.
CHILD=""
run_child() {
  local rc=0
  "$@" &
  CHILD=$!
  wait "$CHILD" || rc=$?
  CHILD=""
  return "$rc"
}
stop_child() {
  [[ -n $CHILD ]] || return 0
  kill -TERM "$CHILD" 2>/dev/null || true
  wait "$CHILD" 2>/dev/null || true
}

# cpu_ticks PID...: their utime+stime, in clock ticks (getconf CLK_TCK);
# a process that is gone counts 0.
cpu_ticks() {
  local t=0 p v
  for p in "$@"; do
    v=$(awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$p/stat" 2>/dev/null || echo 0)
    t=$((t + v))
  done
  echo "$t"
}

# stat KEY: "median n min max" of KEY's values in $RES ("" if none).
stat() {
  awk -F'\t' -v k="$1" '$1 == k && $2 != "" { v[n++] = $2 + 0 }
    END { if (n == 0) exit
      for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
      m = (n % 2) ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2
      print m, n, v[0], v[n - 1] }' "$RES"
}
med() { local s; s=$(stat "$1"); echo "${s%% *}"; }
# num X: thousands separators from 1000, else two significant decimals.
num() {
  awk -v x="$1" 'BEGIN { if (x == "") { print "n/a"; exit }
    if (x >= 1000) { s = sprintf("%.0f", x); o = ""; while (length(s) > 3) { o = "," substr(s, length(s) - 2) o; s = substr(s, 1, length(s) - 3) } print s o }
    else if (x >= 100) printf "%.0f\n", x; else if (x >= 10) printf "%.1f\n", x; else printf "%.2f\n", x }'
}
# rate_cell KEY: KEY.rate's median and half its spread, "23,403 ±4%".
rate_cell() {
  local s m n lo hi
  s=$(stat "$1.rate")
  [[ -n $s ]] || { echo "n/a"; return; }
  read -r m n lo hi <<<"$s"
  echo "$(num "$m") ±$(awk -v m="$m" -v lo="$lo" -v hi="$hi" 'BEGIN { printf "%.0f", (hi - lo) / 2 / m * 100 }')%"
}
# ratio A B: A/B with two decimals, n/a when either is missing.
ratio() { [[ -n $1 && -n $2 ]] || { echo n/a; return; }; awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
latp() { local a b; a=$(med "$1.p50"); b=$(med "$1.p99"); [[ -n $a && -n $b ]] && echo "$(num "$a") / $(num "$b")" || echo n/a; }
cpu() { local m; m=$(med "$1.cpu"); [[ -n $m ]] && awk -v m="$m" 'BEGIN { printf "%.3f", m }' || echo n/a; }

# build_strand: builds bin/strand and sets REV to the commit it was built
# from (noting uncommitted Go changes), for the table's heading.
build_strand() {
  say "== building bin/strand"
  make -s build GO="$GO" >&2
  REV=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  [[ -z $(git status --porcelain -- '*.go' go.mod go.sum 2>/dev/null) ]] || REV="$REV (+ uncommitted Go changes)"
}
