#!/usr/bin/env bash
# GPU: Nsight Compute over one call each of the indexer (token and spread selects), the dense decode and the sparse
# decode with cut tokens (prof_icache.py): per kernel its time, warp cycles per issued instruction and the share of
# stall samples spent waiting for an instruction fetch (no_instructions), plus the per-SASS source counters.
#   bash benchmarks/experiments/gpu_prof_icache.sh   (writes under $OUT)
# (ncu reports gpu__time_duration in µs here; the committed 2026-12-02-h200-ncu-icache.log printed it divided by
# 1000, as 0.0-0.1 µs: the times are in -ncu-icache-raw.csv.gz.)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 300 ncu --clock-control none --profile-from-start off --section SpeedOfLight --section WarpStateStats \
  --section SourceCounters -f -o /tmp/prof_icache python3 benchmarks/experiments/prof_icache.py \
  > "$OUT/ncu_icache.log" 2>&1
tail -3 "$OUT/ncu_icache.log"
ncu -i /tmp/prof_icache.ncu-rep --page raw --csv > /tmp/icache_raw.csv 2>&1
gzip -c /tmp/icache_raw.csv > "$OUT/ncu_icache_raw.csv.gz"
ncu -i /tmp/prof_icache.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > "$OUT/ncu_icache_sass.csv.gz"
python3 - /tmp/icache_raw.csv <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = rows[0]
def col(name):
    return head.index(name) if name in head else None
ki, ti = col("Kernel Name"), col("gpu__time_duration.sum")
ni = col("smsp__pcsamp_warps_issue_stalled_no_instructions")
si = col("smsp__pcsamp_sample_count")
ci = col("smsp__average_warp_latency_per_inst_issued.ratio")
def f(r, i):
    try:
        return float(r[i].replace(",", ""))
    except (TypeError, ValueError, IndexError):
        return float("nan")
for r in rows[2:]:
    if ki is None or len(r) <= ki:
        continue
    n, s = f(r, ni), f(r, si)
    print(f"{r[ki][:48]:48s} {f(r, ti):9.1f} us  no_inst {n:7.0f} of {s:8.0f} samples ({n / s:6.1%})")
PY
