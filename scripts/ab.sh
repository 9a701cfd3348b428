#!/usr/bin/env bash
# A/B of two builds of `compare` (one side of a change each), interleaved rounds, each run
# with tokio beside async-rwsem so that ratios are taken within a run; prints per workload
# and variant the median ratio to tokio with the rounds' spread, and the medians of each
# class's p99 wait against tokio's; then each variant against the first, paired by round.
#
#   git worktree add /tmp/base <commit> && (cd /tmp/base && cargo build --release -p bench --bin compare)
#   cargo build --release -p bench --bin compare
#   VARIANTS="base=/tmp/base/target/release/compare new=target/release/compare" scripts/ab.sh
#   VARIANTS="base=... new=... newfifo=target/release/compare:--fifo" THREADS=8 ROUNDS=5 scripts/ab.sh
#
# A variant is NAME=BINARY[:FLAGS]. Knobs: ROUNDS (3), THREADS (2), DURATION (1),
# WORKLOADS, BUSY=1 (a `nice -n 19` busy loop per core), PIN=1 (`compare --pin`: each worker
# on a core of its own; busy sets need it, or they measure where the kernel puts the
# workers: docs/performance.md, round twelve), OUT (a folder for the JSONs).
set -euo pipefail
ROUNDS=${ROUNDS:-3}; THREADS=${THREADS:-2}; DURATION=${DURATION:-1}
WORKLOADS=${WORKLOADS:-mixed-40-40-tiny,mixed-40-40,writers-240-tiny,mixed,sysfs,read-mostly}
OUT=${OUT:-$(mktemp -d /tmp/ab.XXXXXX)}; mkdir -p "$OUT"
busy=()
if [ "${BUSY:-0}" = 1 ]; then
  for _ in $(seq "$(nproc)"); do nice -n 19 bash -c 'while :; do :; done' & busy+=($!); done
  trap 'kill "${busy[@]}" 2>/dev/null || true' EXIT
fi
names=()
for r in $(seq "$ROUNDS"); do
  for v in $VARIANTS; do
    name=${v%%=*}; rest=${v#*=}; bin=${rest%%:*}; flags=""; [[ "$rest" == *:* ]] && flags=${rest#*:}
    [ "${PIN:-0}" = 1 ] && flags="$flags --pin"
    [ "$r" = 1 ] && names+=("$name")
    echo "round $r $name" >&2
    # shellcheck disable=SC2086
    "$bin" --duration "$DURATION" --threads "$THREADS" --workload "$WORKLOADS" --lock async-rwsem,tokio $flags \
      --json "$OUT/r$r-$name.json" --out "$OUT/report" >/dev/null 2>"$OUT/r$r-$name.log"
  done
done
python3 - "$OUT" "$ROUNDS" "${names[@]}" <<'PY'
import json, statistics, sys
out, rounds, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
cells = {}; order = []
for r in range(1, rounds + 1):
    for v in variants:
        res = json.load(open(f"{out}/r{r}-{v}.json"))["results"]
        by = {(x["workload"], x["lock"]): x for x in res}
        for (w, lock), x in by.items():
            if lock != "async-rwsem": continue
            if w not in order: order.append(w)
            t = by[(w, "tokio")]
            def p99(x, cls):
                c = x.get(cls)
                return c["wait_ns"]["p99"] if c and c.get("wait_ns") else None
            c = cells.setdefault((w, v), {"x": [], "rp": [], "wp": []})
            c["x"].append(x["ratio_to_tokio"])
            for cls, key in (("reader", "rp"), ("writer", "wp")):
                a, b = p99(x, cls), p99(t, cls)
                if a is not None and b: c[key].append(a / b)
med = lambda xs: statistics.median(xs) if xs else None
print(f"{rounds} rounds; cells: x tokio [min-max], read p99/tokio, write p99/tokio (medians)")
print("| workload | " + " | ".join(variants) + " |")
print("|---|" + "---|" * len(variants))
for w in order:
    row = []
    for v in variants:
        c = cells.get((w, v))
        if not c: row.append("-"); continue
        parts = [f"{med(c['x']):.2f}x [{min(c['x']):.2f}-{max(c['x']):.2f}]"]
        for key in ("rp", "wp"):
            m = med(c[key]); parts.append("-" if m is None else f"{m:.1f}")
        row.append(" ".join(parts))
    print(f"| {w} | " + " | ".join(row) + " |")
if len(variants) > 1:
    # Paired: each variant's ratio over the first variant's in the same round (the rounds
    # interleave, so a round's load is shared), median over the rounds and how many rounds
    # it was ahead. On a noisy machine this separates a few percent sooner than the medians.
    base = variants[0]
    print(f"paired with {base} (same round): median ratio, rounds ahead")
    print("| workload | " + " | ".join(variants[1:]) + " |")
    print("|---|" + "---|" * (len(variants) - 1))
    for w in order:
        row = []
        for v in variants[1:]:
            a, b = cells.get((w, v)), cells.get((w, base))
            if not a or not b or len(a["x"]) != len(b["x"]): row.append("-"); continue
            pairs = [x / y for x, y in zip(a["x"], b["x"])]
            row.append(f"{med(pairs):.3f} ({sum(p > 1 for p in pairs)}/{len(pairs)})")
        print(f"| {w} | " + " | ".join(row) + " |")
print(f"(JSONs in {out})")
PY
