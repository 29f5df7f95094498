#!/usr/bin/env bash
# Call D (session 17): notebooks 07 and 08 executed live on the compiled hot path (they open timelines and
# graphs), and the live tour of Lab 01 (its instruments on and off). COMMIT: the local commit.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
R=$OUT/R; mkdir -p $R/reference $R/logs
python3 -m pip install --no-deps --no-build-isolation -e . > $R/logs/install.txt 2>&1
python3 -c "from kernellab.gpu import hooks, timeline; print(hooks.hot_path(), timeline.hot_path_words())" | tee $R/logs/hot_path.txt
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; gcc --version | head -1; } > $R/logs/provenance.txt 2>&1
left() { echo $((${BUDGET_S:-560} - SECONDS)); }
step() { local name=$1; shift; local s=$SECONDS; timeout "$(left)" "$@" > $R/logs/$name.txt 2>&1; echo "$name rc=$? $((SECONDS-s)) s (at $SECONDS s)" | tee -a $R/logs/stages.txt; }
step notebooks python3 -m kernellab.course.notebooks --execute notebooks/07_streams.ipynb notebooks/08_graphs.ipynb
tail -n 6 $R/logs/notebooks.txt
step tour01 python3 -m kernellab.cli tour 01 --figures $R/figures
tail -n 4 $R/logs/tour01.txt
tar czf $OUT/logs.tgz -C $R logs
