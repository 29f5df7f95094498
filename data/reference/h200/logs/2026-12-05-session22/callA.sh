#!/usr/bin/env bash
# Call A (session 22), on whichever lent GPU comes: bench 07:pipeline and bench 01, 3 repeats each in
# fresh processes (repeat-major), the code at ff9eb0a (bench 07 with the halves, c554ffa). On an H200
# the records become the reference (data/reference/h200/lab07.json, lab01.json); on an H100 they stay
# in this folder.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
R=$OUT/R; mkdir -p $R/reference $R/logs
python3 -m pip install --no-deps --no-build-isolation -e . > $R/logs/install.txt 2>&1
python3 -c "from kernellab.gpu import hooks, timeline; print(hooks.hot_path(), timeline.hot_path_words())" | tee $R/logs/hot_path.txt
{ date -u; echo "commit ${COMMIT:-?} (the working tree sent)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; } > $R/logs/provenance.txt 2>&1
cat $R/logs/provenance.txt
cp data/reference/h200/lab07.json data/reference/h200/lab01.json $R/reference/   # a partial bench keeps the other records
s=$SECONDS; timeout $((${BUDGET_S:-540} - SECONDS)) python3 -m kernellab.cli bench 07:pipeline 01 --repeat 3 --out $R/reference > $R/logs/bench.txt 2>&1
echo "bench rc=$? $((SECONDS-s)) s" | tee $R/logs/stages.txt
grep -E "repeat .* of|MISSED|targets missed|combined" $R/logs/bench.txt | tail -12
rm -f $R/reference/*.png
tar czf $OUT/reference.tgz -C $R reference logs
