#!/usr/bin/env bash
# Call V (session 16): where the pipeline's recorder spends its host time per op (diag_timed_parts.py); then every
# mutant graded on the GPU and in the simulator (gpu_session.sh's mutants stage), and Lab 07's GPU tests under
# compute-sanitizer memcheck and racecheck (its sanitize stage), neither run on the H200 since session 14.
# COMMIT: the local commit it runs.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=$OUT/R; mkdir -p $R/logs
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version;
  cat /sys/devices/system/clocksource/clocksource0/current_clocksource; } > $R/logs/provenance.txt 2>&1
left() { echo $((${BUDGET_S:-520} - SECONDS)); }
step() { local name=$1; shift; local s=$SECONDS; timeout "$(left)" "$@" > $R/logs/$name.txt 2>&1; echo "$name rc=$? $((SECONDS-s)) s (at $SECONDS s)" | tee -a $R/logs/stages.txt; }
D=data/reference/h200/logs/2026-12-04-session16
step diag_timed_parts python3 $D/diag_timed_parts.py
cat $R/logs/diag_timed_parts.txt
SKIP_INSTALL=1 STAGES=mutants step mutants bash scripts/gpu_session.sh $R/mutants
tail -n 5 $R/mutants/logs/mutants.tsv; grep -c DIFFERS $R/mutants/logs/mutants.tsv; cat $R/mutants/logs/stages.tsv
SKIP_INSTALL=1 STAGES=sanitize LABS=07 step sanitize bash scripts/gpu_session.sh $R/sanitize
grep -E "ERROR SUMMARY|passed|failed" $R/sanitize/logs/sanitize.txt | tail -6; cat $R/sanitize/logs/stages.tsv
tar czf $OUT/logs.tgz -C $R logs mutants/logs sanitize/logs
