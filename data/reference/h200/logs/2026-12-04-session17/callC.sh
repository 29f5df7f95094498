#!/usr/bin/env bash
# Call C (session 17): the final code of the session: Lab 07 x3 (the reference record), the GPU tests of the instruments
# and Labs 01 and 07, kernellab grade of the solutions and the starter, and the live tour of Lab 07. COMMIT: the local commit.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
R=$OUT/R; mkdir -p $R/reference $R/logs
python3 -m pip install --no-deps --no-build-isolation -e . > $R/logs/install.txt 2>&1
python3 -c "from kernellab.gpu import hooks, timeline; print(hooks.hot_path(), timeline.hot_path_words())" | tee $R/logs/hot_path.txt
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; gcc --version | head -1; } > $R/logs/provenance.txt 2>&1
cp data/reference/h200/lab07.json $R/reference/   # the subset keeps the other records
left() { echo $((${BUDGET_S:-560} - SECONDS)); }
step() { local name=$1; shift; local s=$SECONDS; timeout "$(left)" "$@" > $R/logs/$name.txt 2>&1; echo "$name rc=$? $((SECONDS-s)) s (at $SECONDS s)" | tee -a $R/logs/stages.txt; }
step bench07 python3 -m kernellab.cli bench 07:pipeline --repeat 3 --out $R/reference
grep -E "us_per_op|MISSED|met" $R/logs/bench07.txt | tail -12
tar czf $OUT/reference.tgz -C $R reference
step tests python3 -m pytest -q -s -p no:cacheprovider tests -k "lab07 or lab01 or timeline or hooks or makespan or streams or launches or traffic"
grep -o "inside the recorder.*" $R/logs/tests.txt; tail -n 3 $R/logs/tests.txt
tar czf $OUT/logs.tgz -C $R logs
G=$(mktemp -d); mkdir $G/labs; cp solutions/lab*.py $G/labs/
step grade_solutions python3 -m kernellab.cli grade --root $G --results $R/logs/results_solutions.json
step grade_starter python3 -m kernellab.cli grade --results $R/logs/results_starter.json
grep -h "total" $R/logs/grade_*.txt
step tour07 python3 -m kernellab.cli tour 07 --figures $R/figures
tail -n 4 $R/logs/tour07.txt
tar czf $OUT/logs.tgz -C $R logs
