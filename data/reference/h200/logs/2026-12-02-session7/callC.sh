#!/usr/bin/env bash
# Call C (session 7): the whole GPU pytest suite (--target solutions) after the hooks' Brackets, the
# Makespan and Lab 07's and Lab 01's new measurements.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
mkdir -p $OUT/logs
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; python3 --version; } > $OUT/logs/provenance.txt 2>&1
s=$SECONDS
timeout 530 python3 -m pytest --target solutions -q -p no:cacheprovider -rfE --durations=15 > $OUT/logs/tests.txt 2>&1
echo "tests rc=$? $((SECONDS-s)) s" | tee $OUT/logs/stages.txt
grep -E "passed|failed|FAILED|ERROR" $OUT/logs/tests.txt | tail -20
