#!/usr/bin/env bash
# Call E (session 17): the final code (the C file tidied after call D): the GPU tests of the instruments and Labs 01,
# 07 and 08 (graphs: a capture replaces launches, so the compiled launch hook hands them to Python), and grade. COMMIT.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
R=$OUT/R; mkdir -p $R/reference $R/logs
python3 -m pip install --no-deps --no-build-isolation -e . > $R/logs/install.txt 2>&1
python3 -c "from kernellab.gpu import hooks, timeline; print(hooks.hot_path(), timeline.hot_path_words())" | tee $R/logs/hot_path.txt
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; gcc --version | head -1; } > $R/logs/provenance.txt 2>&1
left() { echo $((${BUDGET_S:-560} - SECONDS)); }
step() { local name=$1; shift; local s=$SECONDS; timeout "$(left)" "$@" > $R/logs/$name.txt 2>&1; echo "$name rc=$? $((SECONDS-s)) s (at $SECONDS s)" | tee -a $R/logs/stages.txt; }
step tests python3 -m pytest -q -s -p no:cacheprovider tests -k "lab07 or lab01 or lab08 or timeline or hooks or makespan or streams or launches or traffic or graphs"
grep -o "inside the recorder.*" $R/logs/tests.txt | cut -c1-120; tail -n 3 $R/logs/tests.txt
G=$(mktemp -d); mkdir $G/labs; cp solutions/lab*.py $G/labs/
step grade_solutions python3 -m kernellab.cli grade --root $G --results $R/logs/results_solutions.json
step grade_starter python3 -m kernellab.cli grade --results $R/logs/results_starter.json
grep -h "total" $R/logs/grade_*.txt
tar czf $OUT/logs.tgz -C $R logs
