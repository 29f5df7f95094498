#!/usr/bin/env bash
# Call U (session 16): Lab 07's pipeline x3 with the timed hot path's reads bound once (Timeline._timing_brackets) and
# one event after the call measured alone; the GPU tests of the instruments and Lab 07; one cuEventRecord four ways;
# then grade and tour (not run on the H200 since session 14). COMMIT: the local commit it runs.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=$OUT/R; mkdir -p $R/reference $R/logs $R/figures
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; } > $R/logs/provenance.txt 2>&1
cp data/reference/h200/lab07.json $R/reference/   # the subset keeps the other records
left() { echo $((${BUDGET_S:-560} - SECONDS)); }
step() { local name=$1; shift; local s=$SECONDS; timeout "$(left)" "$@" > $R/logs/$name.txt 2>&1; echo "$name rc=$? $((SECONDS-s)) s (at $SECONDS s)" | tee -a $R/logs/stages.txt; }
D=data/reference/h200/logs/2026-12-04-session16
step bench07 python3 -m kernellab.cli bench 07:pipeline --repeat 3 --out $R/reference
grep -E "us_per_op|MISSED|met" $R/logs/bench07.txt | tail -12
tar czf $OUT/reference.tgz -C $R reference
step tests python3 -m pytest -q -s -p no:cacheprovider tests -k "lab07 or timeline or hooks or makespan or streams"
grep -o "inside the recorder.*" $R/logs/tests.txt; tail -n 3 $R/logs/tests.txt
step diag_event_record python3 $D/diag_event_record.py
cat $R/logs/diag_event_record.txt
root=$(mktemp -d); mkdir "$root/labs" && cp solutions/lab*.py "$root/labs/"
step grade_solutions python3 -m kernellab.cli grade --root "$root" --results $R/logs/grade-solutions.json
step grade_starter python3 -m kernellab.cli grade --results $R/logs/grade-starter.json
tail -n 4 $R/logs/grade_solutions.txt $R/logs/grade_starter.txt
step tour python3 -m kernellab.cli tour --figures $R/figures
tail -n 15 $R/logs/tour.txt
tar czf $OUT/logs.tgz -C $R logs figures
