#!/usr/bin/env bash
# Call C (session 8): which event in a copy stream slows the pipeline (diag_event_positions.py);
# Lab 07's pipeline x3 again (the pageable case recorded with two events per op); the GPU tests of
# the timeline, the hooks and Lab 07. COMMIT: the local commit it ran.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=$OUT/R; mkdir -p $R/reference $R/logs
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; } > $R/logs/provenance.txt 2>&1
cp data/reference/h200/lab07.json data/reference/h200/lab01.json $R/reference/   # the subsets keep the other records
left() { echo $((${BUDGET_S:-560} - SECONDS)); }
step() { local name=$1; shift; local s=$SECONDS; timeout "$(left)" "$@" > $R/logs/$name.txt 2>&1; echo "$name rc=$? $((SECONDS-s)) s (at $SECONDS s)" | tee -a $R/logs/stages.txt; }
step diag python3 data/reference/h200/logs/2026-12-02-session8/diag_event_positions.py
cat $R/logs/diag.txt
step bench07 python3 -m kernellab.cli bench 07:pipeline --repeat 3 --out $R/reference
grep -E "missed in some|targets\.|repeat" $R/logs/bench07.txt | tail -12
step gputests python3 -m pytest tests/instruments/test_timeline.py tests/instruments/test_hooks_gpu_path.py tests/labs/test_lab07_streams.py -q --target solutions -p no:cacheprovider
tail -n 3 $R/logs/gputests.txt
tar czf $OUT/callC.tgz -C $OUT R
