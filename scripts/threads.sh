#!/usr/bin/env bash
# Plain threads through blocking_read/blocking_write against tokio's and parking_lot's
# locks (bench/src/bin/threads.rs): the three shapes of issue 31, each in RUNS interleaved
# rounds of SECS seconds per lock, medians and ratios within each round.
# Usage: scripts/threads.sh            (RUNS=3 SECS=1 by default)
#        RUNS=5 SECS=2 scripts/threads.sh
#        PASS_BOUND=none scripts/threads.sh   (async-rwsem with another Policy::pass_bound)
#        POLICY=fifo scripts/threads.sh        (async-rwsem under another policy: compare --policy)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-3}
secs=${SECS:-1}
cargo build -q --release -p bench --bin threads
bin="${CARGO_TARGET_DIR:-target}/release/threads"
for shape in "1 4" "4 4" "0 8"; do
  set -- $shape
  "$bin" --writers "$1" --readers "$2" --seconds "$secs" --runs "$runs" \
    ${PASS_BOUND:+--pass-bound "$PASS_BOUND"} ${POLICY:+--policy "$POLICY"}
  echo
done
