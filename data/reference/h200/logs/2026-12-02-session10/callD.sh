#!/usr/bin/env bash
# Call D (session 10): Lab 07's pipeline x3 afresh (the record; the overlap_methods_part claim was
# made on session 9's record, so this is its first independent data), then, in the time left, the
# mutants graded on the GPU and in the simulator (scripts/gpu_session.sh's mutants stage).
# COMMIT: the local commit it ran (the device's .git is not it).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=$OUT/R; mkdir -p $R/reference $R/logs
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; } > $R/logs/provenance.txt 2>&1
cp data/reference/h200/lab07.json $R/reference/   # the subset keeps the other records
left() { echo $((${BUDGET_S:-430} - SECONDS)); }
step() { local name=$1; shift; local s=$SECONDS; timeout "$(left)" "$@" > $R/logs/$name.txt 2>&1; echo "$name rc=$? $((SECONDS-s)) s (at $SECONDS s)" | tee -a $R/logs/stages.txt; }
step bench07 python3 -m kernellab.cli bench 07:pipeline --repeat 3 --out $R/reference
grep -E "missed in some|MISSED|met" $R/logs/bench07.txt | tail -12
tar czf $OUT/reference.tgz -C $R reference
SKIP_INSTALL=1 STAGES=mutants step mutants bash scripts/gpu_session.sh $R/S
tail -n 4 $R/logs/mutants.txt; grep -c DIFFERS $R/S/logs/mutants.tsv 2>/dev/null
