#!/usr/bin/env bash
# Call L (session 14): which step of the trace-only handlers costs the host (diag_trace3.py).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=$OUT/R; mkdir -p $R/logs
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; } > $R/logs/provenance.txt 2>&1
timeout 400 python3 data/reference/h200/logs/2026-12-03-session14/diag_trace3.py > $R/logs/diag_trace3.txt 2>&1; echo "rc=$?"
grep -E "repeat" $R/logs/diag_trace3.txt
