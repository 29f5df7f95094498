#!/usr/bin/env bash
# Call A (session 6): Lab 02 x3 (the vectorised chain, the like-for-like torch.compile target),
# then Nsight Compute over Lab 04's kernels (the GEMM steps have no DRAM rows yet).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
R=$OUT/R; mkdir -p $R/reference $R/logs
{ date -u; git rev-parse HEAD; git status --porcelain | wc -l; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > $R/logs/provenance.txt 2>&1
cp data/reference/h200/lab04.json $R/reference/
s=$SECONDS; timeout ${BENCH_S:-330} python3 -m kernellab.cli bench 02 --repeat 3 --out $R/reference > $R/logs/bench02-x3.txt 2>&1; echo "bench02 rc=$? $((SECONDS-s)) s" | tee -a $R/logs/stages.txt
s=$SECONDS; timeout ${PROFILE_S:-200} python3 -m kernellab.cli profile 04 --out $R/reference > $R/logs/profile04.txt 2>&1; echo "profile04 rc=$? $((SECONDS-s)) s" | tee -a $R/logs/stages.txt
tail -n 25 $R/logs/bench02-x3.txt; tail -n 8 $R/logs/profile04.txt
tar czf $OUT/callA.tgz -C $OUT R
