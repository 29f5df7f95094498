#!/usr/bin/env bash
# Call E (session 18): the host clock's cost (probe_clock.py); the GPU tests of the recorder, hooks,
# timing and labs 01 and 07 with the compiled hot path's key cache; the grade of solutions and starter.
set -u
R=$OUT/R; mkdir -p $R/logs
P=data/reference/h200/logs/2026-12-04-session18
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install --no-deps --no-build-isolation -e . > $R/logs/install.txt 2>&1
python3 $P/probe_clock.py 2>&1 | tee $R/logs/clock.txt
s=$SECONDS
timeout 330 python3 -m pytest -q -p no:cacheprovider tests/labs/test_lab01_launch_overhead.py tests/labs/test_lab07_streams.py \
  tests/instruments -k "timeline or hook or makespan or stream or recorder or timing or lab01 or lab07" > $R/logs/tests.txt 2>&1
echo "tests rc=$? $((SECONDS-s)) s"; tail -5 $R/logs/tests.txt
SKIP_INSTALL=1 STAGES=grade timeout 150 bash scripts/gpu_session.sh $R > /dev/null 2>&1; echo "grade rc=$?"
cat $R/logs/stages.tsv 2>/dev/null; tail -4 $R/logs/grade.txt 2>/dev/null
tar czf $OUT/E.tgz -C $R .
