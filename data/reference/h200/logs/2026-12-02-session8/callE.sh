#!/usr/bin/env bash
# Call E (session 8): diag_bimodal.py in 3 fresh processes. COMMIT: the local commit it ran.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=$OUT/R; mkdir -p $R/logs
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > $R/logs/provenance.txt 2>&1
for p in 1 2 3; do echo "== process $p"; timeout 50 python3 data/reference/h200/logs/2026-12-02-session8/diag_bimodal.py; done 2>&1 | tee $R/logs/diag_bimodal.txt
