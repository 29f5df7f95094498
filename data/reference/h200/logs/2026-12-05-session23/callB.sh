#!/usr/bin/env bash
# Call B (session 23), on whichever lent GPU comes, with b9cee5a's code (Lab 01's instrument costs
# after 20 settling launches per sample): on an H200, bench 07:pipeline x3 and bench 01 x3 (the
# records become the reference); on an H100, bench 01 x3 and the GPU tests of the timing, the
# timeline and Labs 01 and 07 (their records stay in this folder).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
R=$OUT/R; mkdir -p $R/reference $R/logs
python3 -m pip install --no-deps --no-build-isolation -e . > $R/logs/install.txt 2>&1
{ date -u; echo "commit ${COMMIT:-?} (the working tree sent)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version;
  python3 -c "from kernellab.gpu import timeline; print(timeline.hot_path_words())"; } > $R/logs/provenance.txt 2>&1
cat $R/logs/provenance.txt
left() { echo $((${BUDGET_S:-570} - SECONDS)); }
cp data/reference/h200/lab07.json data/reference/h200/lab01.json $R/reference/   # a partial bench keeps the other records
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  s=$SECONDS; timeout "$(left)" python3 -m kernellab.cli bench 07:pipeline --repeat 3 --out $R/reference > $R/logs/bench07.txt 2>&1
  echo "bench07 rc=$? $((SECONDS-s)) s" | tee $R/logs/stages.txt
  grep -E "repeat .* of|MISSED|targets missed" $R/logs/bench07.txt | tail -6
fi
s=$SECONDS; timeout "$(left)" python3 -m kernellab.cli bench 01 --repeat 3 --out $R/reference > $R/logs/bench01.txt 2>&1
echo "bench01 rc=$? $((SECONDS-s)) s" | tee -a $R/logs/stages.txt
grep -E "repeat .* of|MISSED|targets missed" $R/logs/bench01.txt | tail -6
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  s=$SECONDS; timeout "$(left)" python3 -m pytest -q -p no:cacheprovider --target solutions tests/instruments/test_timeline.py \
    tests/instruments/test_measured_truth.py tests/labs/test_lab01_launch_overhead.py tests/labs/test_lab07_streams.py > $R/logs/gpu_tests.txt 2>&1
  echo "gpu tests rc=$? $((SECONDS-s)) s" | tee -a $R/logs/stages.txt
  tail -3 $R/logs/gpu_tests.txt
fi
rm -f $R/reference/*.png
tar czf $OUT/reference.tgz -C $R reference logs
