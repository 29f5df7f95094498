#!/usr/bin/env bash
# Call B (session 9): the pipeline's recorder with its streams opened as it opens
# (Timeline(infer_starts=True, streams=...): no start event while the work runs) and the Makespan
# with one start event: Lab 07's pipeline x3 (with the part "first_ops_own_event", the recorder
# with its streams not opened); the GPU tests of the timeline, the hooks and Lab 07.
# COMMIT: the local commit it ran (the device's .git is not it).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=$OUT/R; mkdir -p $R/reference $R/logs
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; } > $R/logs/provenance.txt 2>&1
cp data/reference/h200/lab07.json $R/reference/   # the subset keeps the other records
left() { echo $((${BUDGET_S:-400} - SECONDS)); }
step() { local name=$1; shift; local s=$SECONDS; timeout "$(left)" "$@" > $R/logs/$name.txt 2>&1; echo "$name rc=$? $((SECONDS-s)) s (at $SECONDS s)" | tee -a $R/logs/stages.txt; }
step bench07 python3 -m kernellab.cli bench 07:pipeline --repeat 3 --out $R/reference
grep -E "missed in some|targets\.|repeat|MISSED|met" $R/logs/bench07.txt | tail -20
step gputests python3 -m pytest tests/instruments/test_timeline.py tests/instruments/test_hooks_gpu_path.py tests/labs/test_lab07_streams.py -q --target solutions -p no:cacheprovider
tail -n 5 $R/logs/gputests.txt
tar czf $OUT/callB.tgz -C $OUT R
