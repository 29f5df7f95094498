#!/usr/bin/env bash
# Call I (session 19): the compiled recorder holding its ops in a C array until flushed, with the direct calls and the compiled busy
# flag: the recorder taken apart (probe_parts.py), Lab 07's pipeline x3 (the reference
# records), and the GPU tests of the instruments and Labs 01 and 07. COMMIT: the local commit.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
R=$OUT/R; mkdir -p $R/reference $R/logs
P=data/reference/h200/logs/2026-12-04-session19
python3 -m pip install --no-deps --no-build-isolation -e . > $R/logs/install.txt 2>&1
python3 -c "from kernellab.gpu import hooks, timeline; print(hooks.hot_path(), timeline.hot_path_words())" | tee $R/logs/hot_path.txt
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; } > $R/logs/provenance.txt 2>&1
cp data/reference/h200/lab07.json $R/reference/   # the subset keeps the other records
left() { echo $((${BUDGET_S:-560} - SECONDS)); }
step() { local name=$1; shift; local s=$SECONDS; timeout "$(left)" "$@" > $R/logs/$name.txt 2>&1; echo "$name rc=$? $((SECONDS-s)) s (at $SECONDS s)" | tee -a $R/logs/stages.txt; }
step probe_parts_1 python3 $P/probe_parts.py $R/logs/probe_parts_1.json
cat $R/logs/probe_parts_1.txt
step bench07 python3 -m kernellab.cli bench 07:pipeline --repeat 3 --out $R/reference
grep -E "us_per_op|MISSED|met|recorder" $R/logs/bench07.txt | tail -14
tar czf $OUT/reference.tgz -C $R reference
step gpu_tests python3 -m pytest -q -p no:cacheprovider tests/instruments tests/labs/test_lab01_launch_overhead.py tests/labs/test_lab07_streams.py -k "timeline or hook or makespan or stream or recorder or timing or lab01 or lab07"
tail -5 $R/logs/gpu_tests.txt
tar czf $OUT/logs.tgz -C $R logs
