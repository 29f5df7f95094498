#!/usr/bin/env bash
# Call B (session 20), on whichever lent GPU came (no machine came in the tries of 11:53-12:30 UTC; call A,
# session 19's call J with bench 01 x3 too, never ran): session 19's code (the compiled recorder's C log,
# the direct calls, the compiled busy flag) first run on a GPU: Lab 07's pipeline x3 (bench 07:pipeline,
# the target's recorders taken in turn with the bare call alone, 300 reps) and the GPU tests of the
# instruments and Labs 01 and 07. Records from an H100 stay in this log folder, never in data/reference/h200/.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
R=$OUT/R; mkdir -p $R/reference $R/logs
python3 -m pip install --no-deps --no-build-isolation -e . > $R/logs/install.txt 2>&1
python3 -c "from kernellab.gpu import hooks, timeline; print(hooks.hot_path(), timeline.hot_path_words())" | tee $R/logs/hot_path.txt
{ date -u; echo "commit ${COMMIT:-?} (the working tree sent)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; } > $R/logs/provenance.txt 2>&1
cat $R/logs/provenance.txt
cp data/reference/h200/lab07.json $R/reference/   # the subset keeps the other records
left() { echo $((${BUDGET_S:-560} - SECONDS)); }
step() { local name=$1; shift; local s=$SECONDS; timeout "$(left)" "$@" > $R/logs/$name.txt 2>&1; echo "$name rc=$? $((SECONDS-s)) s (at $SECONDS s)" | tee -a $R/logs/stages.txt; }
step bench07 python3 -m kernellab.cli bench 07:pipeline --repeat 3 --out $R/reference
grep -E "MISSED|targets missed" $R/logs/bench07.txt | tail -4
tar czf $OUT/reference.tgz -C $R reference
step gpu_tests python3 -m pytest -q -p no:cacheprovider tests/instruments tests/labs/test_lab01_launch_overhead.py tests/labs/test_lab07_streams.py -k "timeline or hook or makespan or stream or recorder or timing or lab01 or lab07"
tail -2 $R/logs/gpu_tests.txt
tar czf $OUT/logs.tgz -C $R logs
