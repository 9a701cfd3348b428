#!/usr/bin/env bash
# What the observers cost: bench/src/bin/observe_cost.rs built without them, with
# `lockdep` and with `lock_stat`, each into its own target folder, then run ROUNDS times
# interleaved (none, lockdep, lock_stat, none, ...). Prints every round, then the medians
# and the ratios to the build without observers.
# Usage: scripts/observe-cost.sh [ROUNDS [SECS]]   (default 3 rounds of 1 s measurements)
# BUILDS="none stats lock_stat" picks the builds (the first is the one the ratios are to;
# `stats`: the event counters alone, which `lock_stat` builds on). ARGS="--uncontended"
# runs the two uncontended measurements alone (one thread: a quick look while other work
# shares the machine).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
secs=${2:-1}
read -r -a builds <<<"${BUILDS:-none lockdep lock_stat}"
for build in "${builds[@]}"; do
  features=()
  [ "$build" != none ] && features=(--features "$build")
  CARGO_TARGET_DIR="target/observe-$build" cargo build -q --release -p bench --bin observe_cost "${features[@]}"
done
out=$(mktemp)
for round in $(seq "$rounds"); do
  for build in "${builds[@]}"; do
    # shellcheck disable=SC2086 # ARGS: words
    "target/observe-$build/release/observe_cost" --secs "$secs" ${ARGS:-} |
      sed "s/^/$build $round /" | tee -a "$out"
  done
done
python3 - "$out" "${builds[@]}" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
builds = sys.argv[2:]
values = {}
for build, _, name, value in rows:
    values.setdefault((build, name), []).append(float(value))
names = [n for n in ["read", "write", "one-lock", "private-1w", "private-2w"]
         if (builds[0], n) in values]
print("\nmedians (ns per lock+unlock; acquires/s), and x the build without observers")
print(f"{'':<10}" + "".join(f"{n:>22}" for n in names + ["2w/1w"][:len(names) > 2]))
for build in builds:
    med = {n: statistics.median(values[(build, n)]) for n in names}
    base = {n: statistics.median(values[(builds[0], n)]) for n in names}
    cells = [f"{med[n]:>12.4g} ({med[n] / base[n]:.2f})" for n in names]
    if "private-1w" in med:
        cells.append(f"{med['private-2w'] / med['private-1w']:>22.2f}")
    print(f"{build:<10}" + "".join(f"{c:>22}" for c in cells))
PY
