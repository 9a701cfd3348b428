#!/usr/bin/env bash
# The side-by-side table of `Policy::pass_bound` values: interleaved rounds of `compare`, each
# round running every bound (and tokio beside each, for the ratios within a run), then per
# workload and bound the medians over the rounds of the throughput against tokio and of
# each class's p99 wait against tokio's.
#
#   scripts/pass-bounds.sh                       # bounds 0 1 2 4 none, 3 rounds, 2 workers
#   BOUNDS="1 none" ROUNDS=5 THREADS=8 scripts/pass-bounds.sh
#   BUSY=1 PIN=1 scripts/pass-bounds.sh          # with a `nice -n 19` busy loop per core
#
# Knobs: BOUNDS, ROUNDS (3), THREADS (one per core), DURATION (1), WORKLOADS (the contended
# ones), FIFO=1 (also a row under Policy::fifo()), PIN=1 (`compare --pin`: each worker on a
# core of its own; busy sets need it, docs/performance.md round twelve), OUT (a folder for
# the JSONs).
set -euo pipefail
cd "$(dirname "$0")/.."
BOUNDS=${BOUNDS:-"0 1 2 4 none"}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-$(nproc)}
DURATION=${DURATION:-1}
WORKLOADS=${WORKLOADS:-read-mostly,mixed,writers-240,mixed-40-40,writers-240-tiny,mixed-40-40-tiny,randomrw-8-8,sysfs,long-reader}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/pass-bounds.XXXXXX")}
mkdir -p "$OUT"
cargo build --release -q -p bench --bin compare
BIN=${CARGO_TARGET_DIR:-target}/release/compare
busy=()
if [ "${BUSY:-0}" = 1 ]; then
  for _ in $(seq "$(nproc)"); do
    nice -n 19 bash -c 'while :; do :; done' &
    busy+=($!)
  done
  trap 'kill "${busy[@]}" 2>/dev/null || true' EXIT
fi
variants=()
for b in $BOUNDS; do variants+=("$b"); done
[ "${FIFO:-0}" = 1 ] && variants+=(fifo)
for round in $(seq "$ROUNDS"); do
  for v in "${variants[@]}"; do
    if [ "$v" = fifo ]; then flag=(--fifo); else flag=(--pass-bound "$v"); fi
    [ "${PIN:-0}" = 1 ] && flag+=(--pin)
    echo "round $round, bound $v" >&2
    "$BIN" --duration "$DURATION" --threads "$THREADS" --workload "$WORKLOADS" \
      --lock async-rwsem,tokio "${flag[@]}" --json "$OUT/r$round-$v.json" --out "$OUT/report" \
      >/dev/null 2>"$OUT/r$round-$v.log"
  done
done
python3 - "$OUT" "$ROUNDS" "${variants[@]}" <<'PY'
import json, statistics, sys
out, rounds, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
cells = {}
order = []
for r in range(1, rounds + 1):
    for v in variants:
        res = json.load(open(f"{out}/r{r}-{v}.json"))["results"]
        by = {(x["workload"], x["lock"]): x for x in res}
        for (w, lock), x in by.items():
            if lock != "async-rwsem":
                continue
            if w not in order:
                order.append(w)
            t = by[(w, "tokio")]
            def p99(x, cls):
                c = x.get(cls)
                return c["wait_ns"]["p99"] if c and c.get("wait_ns") else None
            c = cells.setdefault((w, v), {"x": [], "rp": [], "wp": [], "rabs": [], "wabs": []})
            c["x"].append(x["ratio_to_tokio"])
            for cls, key in (("reader", "rp"), ("writer", "wp")):
                a, b = p99(x, cls), p99(t, cls)
                if a is not None and b:
                    c[key].append(a / b)
                    c[key[0] + "abs"].append((a, b))
med = lambda xs: statistics.median(xs) if xs else None
print(f"{rounds} rounds; cells: throughput x tokio, read p99 / tokio's, write p99 / tokio's (medians)")
print("| workload | " + " | ".join(f"bound {v}" for v in variants) + " |")
print("|---|" + "---|" * len(variants))
for w in order:
    row = []
    for v in variants:
        c = cells.get((w, v))
        if not c:
            row.append("-")
            continue
        parts = [f"{med(c['x']):.2f}x"]
        for key in ("rp", "wp"):
            m = med(c[key])
            parts.append("-" if m is None else f"{m:.1f}")
        row.append(" ".join(parts))
    print(f"| {w} | " + " | ".join(row) + " |")
print(f"(JSONs in {out})")
PY
