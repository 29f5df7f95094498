#!/usr/bin/env bash
# Call O (session 14): the recorder's 5% test through timing.time_host_in_turn, in 3 fresh processes and
# in the GPU subset.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=$OUT/R; mkdir -p $R/logs
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; } > $R/logs/provenance.txt 2>&1
for i in 1 2 3; do
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/instruments/test_timeline.py -k four_stream_pipeline > $R/logs/recorder5pc-$i.txt 2>&1; echo "recorder 5% test, fresh process $i: rc=$?"
done
timeout 200 python3 -m pytest -q -p no:cacheprovider tests -k "lab07 or timeline or hooks or makespan or streams" > $R/logs/tests.txt 2>&1; echo "tests rc=$?"
tail -n 3 $R/logs/tests.txt
