#!/usr/bin/env bash
# Soak the CI: clone main, run `bash .ci/run` (CI=true) N times in a row with one core kept busy
# by a CPU burner beside it, and print each run's outcome and time, then the failures per test.
#
#   bench/ci_soak.sh N [REPOSITORY]     (default: the repository this script is in)
#
# Each run starts from a clean checkout (`git clean -fdx`: the virtualenv is made again, as on
# a fresh CI machine; the backends' virtualenvs stay cached per machine, see the Makefile).
# Logs are kept in the printed folder. Exit status: 0 when every run passed, 1 otherwise.
set -uo pipefail

runs=${1:?usage: bench/ci_soak.sh N [REPOSITORY]}
repo=${2:-$(cd "$(dirname "$0")/.." && pwd)}
work=$(mktemp -d "${TMPDIR:-/tmp}/tracescore-soak-XXXXXX")
git clone -q --branch main "$repo" "$work/clone" || exit 2
echo "soak: $runs runs of .ci/run on main ($(git -C "$work/clone" log -1 --format='%h %s')); logs in $work"

python3 -c 'while True: pass' &  # the CPU burner: one core busy for the whole soak
burner=$!
trap 'kill "$burner" 2>/dev/null' EXIT

failed_runs=0
for i in $(seq 1 "$runs"); do
  git -C "$work/clone" clean -fdxq
  log="$work/run-$i.log"
  started=$(date +%s)
  (cd "$work/clone" && CI=true timeout 1800 bash .ci/run) >"$log" 2>&1
  status=$?
  elapsed=$(( $(date +%s) - started ))
  summary=$(grep -E '^[0-9]+ (passed|failed)|^=+ .*(passed|failed|error).* in ' "$log" | tail -1)
  [ "$status" -eq 0 ] || failed_runs=$((failed_runs + 1))
  printf 'run %d: exit %d in %d s  %s\n' "$i" "$status" "$elapsed" "${summary:-(no pytest summary)}"
done

echo "green: $((runs - failed_runs)) of $runs"
echo "failures per test (runs it failed in):"
grep -hE '^(FAILED|ERROR) ' "$work"/run-*.log | sed -E 's/ - .*//' | sort | uniq -c | sort -rn || true
[ "$failed_runs" -eq 0 ]
