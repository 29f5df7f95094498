#!/usr/bin/env bash
# Call W (session 16): diag_timed_parts.py again (call V's run stopped: a variant without the host clock read could
# not be collected). COMMIT: the local commit it runs.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=$OUT/R; mkdir -p $R/logs
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version;
  cat /sys/devices/system/clocksource/clocksource0/current_clocksource; } > $R/logs/provenance.txt 2>&1
D=data/reference/h200/logs/2026-12-04-session16
for round in 1 2; do timeout 200 python3 $D/diag_timed_parts.py > $R/logs/diag_timed_parts_$round.txt 2>&1; echo "round $round rc=$?"; cat $R/logs/diag_timed_parts_$round.txt; done
