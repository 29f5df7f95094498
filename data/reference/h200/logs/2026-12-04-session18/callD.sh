#!/usr/bin/env bash
# Call D (session 18): Lab 07's pipeline x3 and Lab 01 x3 with the compiled hot path's key cache (a623ca7),
# the reference records: in_turn's shuffled order and the compiled floor. COMMIT: the local commit.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
R=$OUT/R; mkdir -p $R/reference $R/logs
P=data/reference/h200/logs/2026-12-04-session18
python3 -m pip install --no-deps --no-build-isolation -e . > $R/logs/install.txt 2>&1
python3 -c "from kernellab.gpu import hooks, timeline; print(hooks.hot_path(), timeline.hot_path_words())" | tee $R/logs/hot_path.txt
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; } > $R/logs/provenance.txt 2>&1
cp data/reference/h200/lab07.json data/reference/h200/lab01.json $R/reference/   # the subset keeps the other records
left() { echo $((${BUDGET_S:-560} - SECONDS)); }
step() { local name=$1; shift; local s=$SECONDS; timeout "$(left)" "$@" > $R/logs/$name.txt 2>&1; echo "$name rc=$? $((SECONDS-s)) s (at $SECONDS s)" | tee -a $R/logs/stages.txt; }
step bench07 python3 -m kernellab.cli bench 07:pipeline --repeat 3 --out $R/reference
grep -E "us_per_op|MISSED|met" $R/logs/bench07.txt | tail -12
tar czf $OUT/reference.tgz -C $R reference
step bench01 python3 -m kernellab.cli bench 01 --repeat 3 --out $R/reference
grep -E "MISSED|met" $R/logs/bench01.txt | tail -8
tar czf $OUT/reference.tgz -C $R reference
tar czf $OUT/logs.tgz -C $R logs
