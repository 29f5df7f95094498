#!/usr/bin/env bash
# call 6: bench 04 x3, 07:pipeline x3, 01:wrapper_overhead x3, within one device call
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=$OUT/r; mkdir -p $R/reference
cp data/reference/h200/lab07.json data/reference/h200/lab01.json $R/reference/   # the subsets keep the other records
left() { echo $((575 - SECONDS)); }
step() { local name=$1; shift; local s=$SECONDS; timeout "$(left)" "$@" > $R/$name.txt 2>&1; echo "$name rc=$? $((SECONDS-s)) s (at $SECONDS s)"; }
step bench04 python3 -m kernellab.cli bench 04 --repeat 3 --out $R/reference
grep -E "missed in some|PASS|FAIL" $R/bench04.txt | tail -14 | cut -c1-160
step bench07 python3 -m kernellab.cli bench 07:pipeline --repeat 3 --out $R/reference
grep -E "missed in some|targets\." $R/bench07.txt | tail -8
step bench01 python3 -m kernellab.cli bench 01:wrapper_overhead --repeat 3 --out $R/reference
grep -E "missed in some" $R/bench01.txt | tail -3
cd $OUT && tar czf r.tgz r && rm -rf r
