#!/usr/bin/env bash
# Call D (session 6): Lab 07 with its ways taken in turn (alternating_windows, paired recorder costs), x3, and Lab 01 x3.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=$OUT/R; mkdir -p $R/reference $R/logs
{ date -u; git rev-parse HEAD; git status --porcelain | wc -l; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; } > $R/logs/provenance.txt 2>&1
cp data/reference/h200/lab07.json data/reference/h200/lab01.json $R/reference/   # the subsets keep the other records
left() { echo $((${BUDGET_S:-560} - SECONDS)); }
step() { local name=$1; shift; local s=$SECONDS; timeout "$(left)" "$@" > $R/logs/$name.txt 2>&1; echo "$name rc=$? $((SECONDS-s)) s (at $SECONDS s)" | tee -a $R/logs/stages.txt; }

step bench07 python3 -m kernellab.cli bench 07:pipeline --repeat 3 --out $R/reference
grep -E "missed in some|targets\.|repeat" $R/logs/bench07.txt | tail -12
step bench01 python3 -m kernellab.cli bench 01:wrapper_overhead --repeat 3 --out $R/reference
grep -E "missed in some|targets\." $R/logs/bench01.txt | tail -4
tar czf $OUT/callD.tgz -C $OUT R
