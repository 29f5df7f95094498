#!/usr/bin/env bash
# Call A (session 21), on whichever lent GPU comes: the two pairings of bench 07's recorder cost, round
# after round in one process (pairings.py); then bench 01 x3 with this code. On an H200 bench 01's
# records are the reference (data/reference/h200/lab01.json); on an H100 they stay in this folder.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
R=$OUT/R; mkdir -p $R/reference $R/logs
P=data/reference/h200/logs/2026-12-05-session21
python3 -m pip install --no-deps --no-build-isolation -e . > $R/logs/install.txt 2>&1
python3 -c "from kernellab.gpu import hooks, timeline; print(hooks.hot_path(), timeline.hot_path_words())" | tee $R/logs/hot_path.txt
{ date -u; echo "commit ${COMMIT:-?} (the working tree sent)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; } > $R/logs/provenance.txt 2>&1
cat $R/logs/provenance.txt
cp data/reference/h200/lab01.json $R/reference/   # the subset keeps the other records
left() { echo $((${BUDGET_S:-570} - SECONDS)); }
step() { local name=$1; shift; local s=$SECONDS; timeout "$(left)" "$@" > $R/logs/$name.txt 2>&1; echo "$name rc=$? $((SECONDS-s)) s (at $SECONDS s)" | tee -a $R/logs/stages.txt; }
step pairings python3 $P/pairings.py $R/pairings.json
tail -3 $R/logs/pairings.txt
gzip -f $R/pairings.json
tar czf $OUT/results.tgz -C $R pairings.json.gz logs
step bench01 python3 -m kernellab.cli bench 01 --repeat 3 --out $R/reference
grep -E "MISSED|met" $R/logs/bench01.txt | tail -8
tar czf $OUT/results.tgz -C $R pairings.json.gz reference logs
