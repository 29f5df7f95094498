#!/usr/bin/env bash
# Call X (session 16): which part of the pipeline recorder's Python costs its +3-5 us per op (diag_timed_pool.py), twice.
# COMMIT: the local commit it runs.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=$OUT/R; mkdir -p $R/logs
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version;
  cat /sys/devices/system/clocksource/clocksource0/current_clocksource; lscpu | grep -E "Model name|L2|L3|NUMA node\(s\)"; } > $R/logs/provenance.txt 2>&1
cat $R/logs/provenance.txt
D=data/reference/h200/logs/2026-12-04-session16
for round in 1 2; do timeout 200 python3 $D/diag_timed_pool.py > $R/logs/diag_timed_pool_$round.txt 2>&1; echo "round $round rc=$?"; cat $R/logs/diag_timed_pool_$round.txt; done
