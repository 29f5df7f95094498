#!/usr/bin/env bash
# Call B (session 17): as call A, after the compiled hooks stopped making an AttributeError for a missing attribute
# (hasattr, getattr with a default); and Lab 01 x3, whose guarantee is measured with each instrument on and off.
# GPU tests of the instruments and Lab 07 (each hook and timeline test on both hot paths). COMMIT: the local commit.
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
step bench01 python3 -m kernellab.cli bench 01 --repeat 3 --out $R/reference
grep -E "MISSED|met" $R/logs/bench01.txt | tail -8
tar czf $OUT/reference.tgz -C $R reference
tar czf $OUT/logs.tgz -C $R logs
