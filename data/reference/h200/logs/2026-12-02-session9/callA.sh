#!/usr/bin/env bash
# Call A (session 9): diag_first_events.py in three processes at the driver's default 8 hardware
# queues and two at CUDA_DEVICE_MAX_CONNECTIONS=32 (the bench's pipeline runs at 32).
# COMMIT: the local commit it ran (the device's .git is not it).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=$OUT/R; mkdir -p $R/logs
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; } > $R/logs/provenance.txt 2>&1
left() { echo $((${BUDGET_S:-300} - SECONDS)); }
step() { local name=$1; shift; local s=$SECONDS; timeout "$(left)" "$@" > $R/logs/$name.txt 2>&1; echo "$name rc=$? $((SECONDS-s)) s (at $SECONDS s)" | tee -a $R/logs/stages.txt; }
D=data/reference/h200/logs/2026-12-02-session9/diag_first_events.py
for p in 1 2 3; do step diag_c8_p$p python3 $D; done
for p in 1 2; do step diag_c32_p$p env CUDA_DEVICE_MAX_CONNECTIONS=32 python3 $D; done
for f in $R/logs/diag_*.txt; do echo "### $f"; cat $f; done
cp $R/logs/* $OUT/ 2>/dev/null
