#!/usr/bin/env bash
# Call C (session 21), on whichever lent GPU comes, with the little device time left: the refactored
# recorder cost (recorder_ways, 22256cf) end to end on a GPU, bench 07:pipeline once (its records stay
# in this folder), then the GPU tests of the recorder and Lab 07 in what time remains.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
R=$OUT/R; mkdir -p $R/reference $R/logs
python3 -m pip install --no-deps --no-build-isolation -e . > $R/logs/install.txt 2>&1
{ date -u; echo "commit ${COMMIT:-?} (the working tree sent)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; } > $R/logs/provenance.txt 2>&1
cat $R/logs/provenance.txt
left() { echo $((${BUDGET_S:-200} - SECONDS)); }
s=$SECONDS; timeout "$(left)" python3 -m kernellab.cli bench 07:pipeline --repeat 1 --out $R/reference > $R/logs/bench07.txt 2>&1
echo "bench07 rc=$? $((SECONDS-s)) s" | tee $R/logs/stages.txt
grep -E "recorder|MISSED|met" $R/logs/bench07.txt | tail -8
tar czf $OUT/results.tgz -C $R reference logs
s=$SECONDS; timeout "$(left)" python3 -m pytest -q -p no:cacheprovider --target solutions tests/instruments/test_timeline.py tests/labs/test_lab07_streams.py -k "recorder or makespan or pipeline" > $R/logs/tests.txt 2>&1
echo "tests rc=$? $((SECONDS-s)) s" | tee -a $R/logs/stages.txt
tail -3 $R/logs/tests.txt
tar czf $OUT/results.tgz -C $R reference logs
