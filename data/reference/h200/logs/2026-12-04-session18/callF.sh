#!/usr/bin/env bash
# Call F (session 18): probe_inner.py: bench 07's recorder costs per op with 25, 100 and 400 calls per sample.
set -u
R=$OUT/R; mkdir -p $R/logs
P=data/reference/h200/logs/2026-12-04-session18
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install --no-deps --no-build-isolation -e . > $R/logs/install.txt 2>&1
timeout 400 python3 $P/probe_inner.py $R/inner.json 2>&1 | tee $R/logs/inner.txt | cut -c1-900
