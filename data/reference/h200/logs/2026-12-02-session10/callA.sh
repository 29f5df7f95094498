#!/usr/bin/env bash
# Call A (session 10): does CUPTI's activity trace work here with numba-cuda, and what does it cost
# per op and to Lab 07's pinned pipeline (diag_cupti.py)? COMMIT: the local commit it ran.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl .whl/cupti/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=$OUT/R; mkdir -p $R/logs
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; python3 -m pip list 2>/dev/null | grep -i "cuda\|cupti\|numba\|numpy"; } > $R/logs/provenance.txt 2>&1
cat $R/logs/provenance.txt
D=data/reference/h200/logs/2026-12-02-session10
timeout ${BUDGET_S:-300} python3 $D/diag_cupti.py 2>&1 | tee $R/logs/diag_cupti.txt | grep -v "^  per rep"
echo "rc=${PIPESTATUS[0]} at $SECONDS s"
