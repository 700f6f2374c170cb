#!/usr/bin/env bash
# Runs README.md's commands as written, in order, in a scratch copy of the
# repository, and fails on the first one that fails (make readme-check).
#
# Which commands run:
#   - Every fenced block whose info string is exactly `sh` is runnable; its
#     lines run one by one, in README order, in one bash shell started at
#     the copy's root (so `export PATH=…` carries over, as in a terminal).
#     A line ending in `\` continues on the next; blank lines and lines
#     that start with `#` are skipped; a trailing `# comment` is fine.
#   - Blocks fenced as plain ``` , `text`, `go`, … are examples and never
#     run. To show a command that must not be checked, use one of those.
#   - An HTML comment on the line right before the fence changes how a
#     block runs:
#       <!-- readme-check: background -->  each line is started in the
#           background (a server a reader starts in a second terminal);
#           it runs until the end of the check.
#       <!-- readme-check: docker -->  the block needs Docker and Compose.
#           It runs only when Docker works, and only once no strand-node
#           containers run (it waits up to README_CHECK_DOCKER_WAIT, 300 s,
#           for someone else's compose cluster to go); otherwise it is
#           skipped with a message. Where the Compose plugin is missing,
#           `docker compose …` runs as `docker-compose …` (v1), which the
#           README says takes the same arguments.
#   - SKIPS below excludes long commands by pattern, each with its reason;
#     a pattern that matches no README command fails the check (stale).
#
# Besides running the commands, it compares the README's Metrics section
# with the strand_* metrics the nodes of `make run`'s cluster serve: every
# served metric must be listed there and every listed one served.
#
# The copy holds the repository's files as a fresh clone would (tracked and
# untracked-but-not-ignored files of the working tree, so uncommitted
# edits are checked too), with no bin/, data/ or deploy/build/. At the end,
# whatever happened, it stops what the README started: background
# commands, `make stop` for make run's cluster, `down -v` for a compose
# cluster it brought up. The copy is removed when the check passes and
# kept (its path is printed) when it fails.
#
# The ports the README's commands use must be free: 9092-9097, 9102-9107,
# 9112-9117 (make run: Kafka at the base, Raft, gossip, metrics,
# inter-broker, gRPC at +1..+5), 9192 and 9197-9201 (the one-node server
# of "By hand": Kafka, gRPC, and Raft, gossip, metrics, inter-broker at the
# gRPC port +1..+4), and 19092, 29092, 39092 (Kafka), 19097, 29097, 39097
# (gRPC), 19095, 29095, 39095 (metrics) for the Docker blocks.
#
# Environment:
#   README_CHECK_DOCKER=auto|no|yes  run the Docker blocks when Docker works
#                                    (auto, the default), never (no: make
#                                    test, whose drill has just run the same
#                                    image and compose file), or fail
#                                    without Docker (yes)
#   README_CHECK_DOCKER_WAIT=300     seconds to wait for strand-node
#                                    containers of another run to go
#   README_CHECK_SKIP=REGEX          also skip the commands this extended
#                                    regular expression matches (make test:
#                                    '^go test ', whose examples its own
#                                    go test run has just run)
#   README_CHECK_IF_BUSY=fail|skip   when those ports are in use: fail (the
#                                    default), or skip the whole check with
#                                    a message and exit 0 (make test: a
#                                    reader may well run it next to the
#                                    cluster make run started)
#   README_CHECK_TIMEOUT=900         seconds for all the commands together
#   README_CHECK_VERBOSE=1           stream every command's output
#   README_CHECK_KEEP=1              keep the scratch copy even on success
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
README=$ROOT/README.md
DOCKER_MODE=${README_CHECK_DOCKER:-auto}
DOCKER_WAIT=${README_CHECK_DOCKER_WAIT:-300}
TIMEOUT=${README_CHECK_TIMEOUT:-900}

# SKIPS: "extended regular expression on a command<TAB>why it does not run here".
SKIPS=(
  $'^make test( |$)\tthe whole CI suite (about 11 minutes, and it runs this check); .ci/run runs it'
  $'^make drill( |$)\ttwo minutes of fault drills on a fresh compose cluster; make test runs the short drill (make drill-ci)'
  $'^make soak( |$)\tthe drills in a loop for 30 minutes'
  $'^make bench-compare( |$)\tabout 13 minutes, and it installs nats-server from the Go module proxy'
  $'^make bench-scale( |$)\tabout 12 minutes of partition- and client-scale probes on fresh clusters'
  $'^make bench-failover( |$)\tabout 20 minutes of killed, paused and restarted nodes, 5 times each through both front doors'
  $'^make franz-suite( |$)\tfranz-go\'s integration suite on a fresh cluster, about three minutes; make test runs it'
  $'^strand verify \ttwo minutes of fault drills against the compose cluster; make drill-ci runs strand verify in CI'
)

say() { printf 'readme-check: %s\n' "$*"; }
die() { printf 'readme-check: FAILED: %s\n' "$*" >&2; exit 1; }

case $DOCKER_MODE in auto | no | yes) ;; *) die "README_CHECK_DOCKER must be auto, no or yes" ;; esac

# --- parse README.md into commands -----------------------------------------
LINES=() MODES=() TEXTS=()
parse() {
  local n=0 in=0 want=0 pending="" mode="" cmd="" start=0 line info
  local fence='^```(.*)$' marker='^<!-- *readme-check: *([a-z]+) *-->$'
  while IFS= read -r line || [[ -n $line ]]; do
    n=$((n + 1))
    if ((in)); then
      if [[ $line =~ $fence ]]; then
        in=0
        [[ -z $cmd ]] || die "README.md:$start: a command ends its block with a backslash"
        continue
      fi
      ((want)) || continue
      if [[ -z $cmd ]]; then
        [[ $line =~ ^[[:space:]]*(#|$) ]] && continue
        start=$n
      fi
      if [[ $line == *\\ ]]; then
        cmd+=$line$'\n'
        continue
      fi
      cmd+=$line
      LINES+=("$start") MODES+=("$mode") TEXTS+=("$cmd")
      cmd=""
    elif [[ $line =~ $fence ]]; then
      info=${BASH_REMATCH[1]}
      in=1 want=0 mode=run
      [[ $info == sh ]] && want=1
      if [[ -n $pending ]]; then
        ((want)) || die "README.md:$n: a readme-check marker stands before a block that is not \`\`\`sh"
        mode=$pending
      fi
      pending=""
    elif [[ $line =~ $marker ]]; then
      pending=${BASH_REMATCH[1]}
      [[ $pending == background || $pending == docker ]] || die "README.md:$n: unknown readme-check marker '$pending'"
    elif [[ -n ${line//[[:space:]]/} ]]; then
      pending="" # a marker applies only to the block right after it
    fi
  done <"$README"
  ((${#TEXTS[@]})) || die "README.md has no \`\`\`sh blocks"
}
parse

# skipped TEXT: true when a SKIPS pattern matches TEXT; REASON says why.
declare -A SKIP_USED=()
REASON=""
skipped() {
  local s
  for s in "${SKIPS[@]}"; do
    if [[ $1 =~ ${s%%$'\t'*} ]]; then
      SKIP_USED[${s%%$'\t'*}]=1
      REASON=${s#*$'\t'}
      return 0
    fi
  done
  if [[ -n ${README_CHECK_SKIP:-} && $1 =~ $README_CHECK_SKIP ]]; then
    REASON="README_CHECK_SKIP='$README_CHECK_SKIP'"
    return 0
  fi
  return 1
}

# --- Docker ---------------------------------------------------------------
HAS_DOCKER_BLOCK=0
for m in "${MODES[@]}"; do [[ $m == docker ]] && HAS_DOCKER_BLOCK=1; done
DOCKER_OK=0 DOCKER_WHY="" COMPOSE_V1=0
if ((HAS_DOCKER_BLOCK)); then
  if [[ $DOCKER_MODE == no ]]; then
    DOCKER_WHY="README_CHECK_DOCKER=no"
  elif ! docker info >/dev/null 2>&1; then
    DOCKER_WHY="Docker does not work here (docker info failed)"
  elif docker compose version >/dev/null 2>&1; then
    DOCKER_OK=1
  elif command -v docker-compose >/dev/null; then
    DOCKER_OK=1 COMPOSE_V1=1
  else
    DOCKER_WHY="neither docker compose nor docker-compose is installed"
  fi
  if ((!DOCKER_OK)) && [[ $DOCKER_MODE == yes ]]; then die "README_CHECK_DOCKER=yes, but $DOCKER_WHY"; fi
fi

# wait_no_compose: true once no strand-node container runs (another
# worktree's drill or CI may hold the fixed container names and ports).
wait_no_compose() {
  local waited=0
  while [[ -n $(docker ps -q --filter name=strand-node) ]]; do
    if ((waited >= DOCKER_WAIT)); then return 1; fi
    ((waited == 0)) && say "strand-node containers run (another compose cluster); waiting up to ${DOCKER_WAIT}s"
    sleep 10
    waited=$((waited + 10))
  done
}

if ((DOCKER_OK)) && ! wait_no_compose; then
  DOCKER_OK=0 DOCKER_WHY="strand-node containers of another compose cluster still run after ${DOCKER_WAIT}s"
  [[ $DOCKER_MODE == yes ]] && die "README_CHECK_DOCKER=yes, but $DOCKER_WHY"
fi

# --- ports ------------------------------------------------------------------
busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORTS=(9092 9093 9094 9095 9096 9097 9102 9103 9104 9105 9106 9107 9112 9113 9114 9115 9116 9117
  9192 9197 9198 9199 9200 9201)
((DOCKER_OK)) && PORTS+=(19092 29092 39092 19097 29097 39097 19095 29095 39095)
taken=()
for p in "${PORTS[@]}"; do busy "$p" && taken+=("$p"); done
if ((${#taken[@]})); then
  why="ports in use: ${taken[*]} (a cluster of make run, or another check, is running)"
  if [[ ${README_CHECK_IF_BUSY:-fail} == skip ]]; then
    say "SKIPPED, README.md's commands did not run: $why; stop it (make stop) and run make readme-check"
    exit 0
  fi
  die "$why; stop it first (make stop)"
fi

# --- the scratch copy -------------------------------------------------------
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/strand-readme-check.XXXXXX")
CHECK=$SCRATCH/.readme-check
mkdir -p "$CHECK"
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git -C "$ROOT" ls-files -z -co --exclude-standard |
    while IFS= read -r -d '' f; do [[ -e $f || -L $f ]] && printf '%s\0' "$f"; done |
    tar -C "$ROOT" --null -T - -cf - | tar -C "$SCRATCH" -xf -
else
  tar -C "$ROOT" --exclude=./bin --exclude=./data --exclude=./deploy/build --exclude=./.bench -cf - . |
    tar -C "$SCRATCH" -xf -
fi
say "scratch copy: $SCRATCH"

COMPOSE_STARTED=0
cleanup() {
  local st=$? pid pids=() left all ours
  trap - EXIT INT TERM
  say "cleaning up"
  if [[ -f $CHECK/bg.pids ]]; then
    mapfile -t pids <"$CHECK/bg.pids"
    for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
    for _ in $(seq 1 100); do
      left=0
      for pid in "${pids[@]}"; do kill -0 -- "-$pid" 2>/dev/null && left=1; done
      ((left)) || break
      sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
  fi
  (cd "$SCRATCH" && make -s stop) >>"$CHECK/cleanup.log" 2>&1 || say "make stop failed; see $CHECK/cleanup.log"
  # The README's own `down -v` has normally run; this is for a failure in
  # between. The compose project is named after the directory (deploy), as
  # every checkout's is, so leave alone strand-node containers that another
  # checkout started since (their working_dir label is not the copy's).
  if [[ -f $CHECK/compose-started ]]; then
    all=$(docker ps -aq --filter name=strand-node | sort)
    ours=$(docker ps -aq --filter name=strand-node --filter "label=com.docker.compose.project.working_dir=$SCRATCH/deploy" | sort)
    if [[ $all != "$ours" ]]; then
      say "strand-node containers of another checkout run: left them alone"
    elif ((COMPOSE_V1)); then
      docker-compose -f "$SCRATCH/deploy/docker-compose.yml" down -v --remove-orphans >>"$CHECK/cleanup.log" 2>&1 || true
    else
      docker compose -f "$SCRATCH/deploy/docker-compose.yml" down -v --remove-orphans >>"$CHECK/cleanup.log" 2>&1 || true
    fi
  fi
  # Anything still running from the copy (its path is unique) is ours.
  mapfile -t pids < <(pgrep -f "$SCRATCH/" || true)
  if ((${#pids[@]})); then
    say "still running from the copy, killed: ${pids[*]}"
    kill -KILL "${pids[@]}" 2>/dev/null || true
  fi
  if ((st == 0)) && [[ -z ${README_CHECK_KEEP:-} ]]; then
    rm -rf "$SCRATCH"
  else
    say "kept the scratch copy: $SCRATCH (command outputs in $CHECK/)"
  fi
  exit "$st"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- the steps ----------------------------------------------------------------
# steps.sh runs in one bash shell at the copy's root; each command's output
# goes to $CHECK/NNN.log, and on failure its tail is printed.
{
  cat <<'EOF'
set -o pipefail
__n=0
__run() {
  local line=$1 mode=$2 text=$3 log st t0 shown
  __n=$((__n + 1))
  log=$__check/$(printf %03d "$__n").log
  shown=${text//$'\n'/ }
  printf 'README.md:%s: %s\n' "$line" "$text" >"$__check/current"
  if [[ $mode == background ]]; then
    setsid bash -c "$text" >"$log" 2>&1 </dev/null &
    echo "$!" >>"$__check/bg.pids"
    printf 'bg    %6s  README.md:%-4s %s  (pid %s, output in %s)\n' "" "$line" "$shown" "$!" "$log"
    return 0
  fi
  t0=$EPOCHREALTIME
  if [[ -n ${README_CHECK_VERBOSE:-} ]]; then
    printf -- '---- README.md:%s: %s\n' "$line" "$shown"
    eval "$text" </dev/null > >(tee "$log") 2>&1
  else
    eval "$text" </dev/null >"$log" 2>&1
  fi
  st=$?
  if ((st != 0)); then
    printf 'FAIL  %5.1fs  README.md:%-4s %s\n' "$(bc_ms "$t0")" "$line" "$shown"
    printf -- '---- exit status %s; the last lines of its output (all of it: %s):\n' "$st" "$log"
    tail -n 60 "$log"
    printf -- '----\n'
    exit 1
  fi
  printf 'ok    %5.1fs  README.md:%-4s %s\n' "$(bc_ms "$t0")" "$line" "$shown"
}
bc_ms() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
__note() { printf '%s\n' "$*"; }
__compose_up() { touch "$__check/compose-started"; }
EOF
  printf '__check=%q\n' "$CHECK"
  prev_docker_block=""
  for i in "${!TEXTS[@]}"; do
    line=${LINES[i]} mode=${MODES[i]} text=${TEXTS[i]}
    if skipped "$text"; then
      printf '__note %q\n' "$(printf 'skip  %6s  README.md:%-4s %s  (%s)' "" "$line" "${text//$'\n'/ }" "$REASON")"
      continue
    fi
    if [[ $mode == docker ]]; then
      if ((!DOCKER_OK)); then
        printf '__note %q\n' "$(printf 'skip  %6s  README.md:%-4s %s  (needs Docker: %s)' "" "$line" "${text//$'\n'/ }" "$DOCKER_WHY")"
        continue
      fi
      if ((COMPOSE_V1)) && [[ $text == *"docker compose "* ]]; then
        text=${text//docker compose /docker-compose }
        printf '__note %q\n' "(no Compose plugin here: README.md:$line runs as docker-compose)"
      fi
      [[ $text == *"docker compose"*" up"* || $text == *"docker-compose"*" up"* ]] && printf '__compose_up\n'
    fi
    printf '__run %q %q %q\n' "$line" "$mode" "$text"
  done
} >"$CHECK/steps.sh"

for s in "${SKIPS[@]}"; do
  [[ -n ${SKIP_USED[${s%%$'\t'*}]:-} ]] || die "the skip pattern '${s%%$'\t'*}' matches no README command: remove it from SKIPS"
done

# -trimpath keeps the Go build cache's entries independent of the copy's
# path, so `go test` in the copy reuses what `make build` (built with
# -trimpath) compiled instead of compiling every dependency again.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"
say "running ${#TEXTS[@]} commands of README.md (docker blocks: $( ((DOCKER_OK)) && echo run || echo "skipped, $DOCKER_WHY"))"
start=$SECONDS
set +e
(cd "$SCRATCH" && timeout -k 30 "$TIMEOUT" bash "$CHECK/steps.sh")
st=$?
set -e
if ((st == 124 || st == 137)); then
  die "the commands ran past README_CHECK_TIMEOUT (${TIMEOUT}s); the one running: $(cat "$CHECK/current" 2>/dev/null)"
fi
((st == 0)) || die "$(cat "$CHECK/current" 2>/dev/null)"

# --- the Metrics section against what the nodes serve -------------------------
for p in 9095 9105 9115; do
  curl -sf "http://127.0.0.1:$p/metrics" >"$CHECK/metrics-$p.txt" || die "no /metrics on 127.0.0.1:$p (make run's cluster)"
done
served=$(awk '$1 == "#" && $2 == "TYPE" && $3 ~ /^strand_/ { print $3 }' "$CHECK"/metrics-*.txt | sort -u)
listed=$(awk '/^### Metrics/ { on = 1; next } on && /^#/ { on = 0 } on' "$README" | grep -oE 'strand_[a-z][a-z0-9_]*' | sort -u)
[[ -n $listed ]] || die "README.md has no '### Metrics' section listing strand_ metrics"
unlisted=$(comm -23 <(echo "$served") <(echo "$listed"))
unserved=$(comm -13 <(echo "$served") <(echo "$listed"))
[[ -z $unlisted ]] || die "metrics the nodes serve that README.md's Metrics section does not list: $(echo $unlisted)"
[[ -z $unserved ]] || die "metrics README.md's Metrics section lists that no node serves: $(echo $unserved)"
say "Metrics section: all $(wc -l <<<"$served") strand_ metrics the nodes serve are listed, and only those"

say "passed in $((SECONDS - start))s"
