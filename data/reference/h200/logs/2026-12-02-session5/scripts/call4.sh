#!/usr/bin/env bash
# call 4: recorder diag, GPU timeline tests, bench 07 x1 (8 chunks), profile 09, GEMM sweep
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=$OUT/r; mkdir -p $R
step() { local name=$1; shift; local s=$SECONDS; timeout "$@" > $R/$name.txt 2>&1; echo "$name rc=$? $((SECONDS-s)) s"; }
step diag-recorder-6 60 python3 scratch/diag_recorder4.py
grep -E "^launch|^copy" $R/diag-recorder-6.txt | cut -c1-100
step gpu-tests-timeline 120 python3 -m pytest -q -p no:cacheprovider tests/instruments/test_timeline.py --target solutions -rxXs
tail -4 $R/gpu-tests-timeline.txt
[ -f scripts/gemm_sweep.py ] && { step gemm-sweep 200 python3 scripts/gemm_sweep.py; tail -40 $R/gemm-sweep.txt; }
step bench07 200 python3 -m kernellab.cli bench 07 --out $R/reference
grep -E "targets\.|hidden|recorder" $R/bench07.txt | head -12
step profile09 120 python3 -m kernellab.cli profile 09 --out $R/reference
tail -9 $R/profile09.txt | cut -c1-170
cd $OUT && tar czf r.tgz r && rm -rf r
