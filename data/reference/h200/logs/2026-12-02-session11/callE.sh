#!/usr/bin/env bash
# Call E (prepared in session 10; run in session 11 at b880f51): Lab 07's pipeline x3 with the new
# tuning step one_copy_stream (claim pipeline_copy_engines awaits it), then diag_overlap_gap.py
# (what parts the two overlap shares, per rep). COMMIT: the local commit it runs.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=$OUT/R; mkdir -p $R/reference $R/logs
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; } > $R/logs/provenance.txt 2>&1
cp data/reference/h200/lab07.json $R/reference/   # the subset keeps the other records
left() { echo $((${BUDGET_S:-420} - SECONDS)); }
step() { local name=$1; shift; local s=$SECONDS; timeout "$(left)" "$@" > $R/logs/$name.txt 2>&1; echo "$name rc=$? $((SECONDS-s)) s (at $SECONDS s)" | tee -a $R/logs/stages.txt; }
step bench07 python3 -m kernellab.cli bench 07:pipeline --repeat 3 --out $R/reference
grep -E "missed in some|MISSED|met" $R/logs/bench07.txt | tail -8
tar czf $OUT/reference.tgz -C $R reference
CUDA_DEVICE_MAX_CONNECTIONS=32 step gap python3 data/reference/h200/logs/2026-12-02-session11/diag_overlap_gap.py
tail -n 4 $R/logs/gap.txt
