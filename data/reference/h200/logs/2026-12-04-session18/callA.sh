#!/usr/bin/env bash
# Call A (session 18): the probe of the pipeline recorder's per-op cost (probe_cost.py), x3 in fresh processes.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
R=$OUT/R; mkdir -p $R/logs
P=data/reference/h200/logs/2026-12-04-session18
python3 -m pip install --no-deps --no-build-isolation -e . > $R/logs/install.txt 2>&1
python3 -c "from kernellab.gpu import hooks, timeline; print(hooks.hot_path(), timeline.hot_path_words())" | tee $R/logs/hot_path.txt
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; gcc --version | head -1; which perf; lscpu | grep -E "Model name|MHz|L2|L3"; } > $R/logs/provenance.txt 2>&1
D=$(mktemp -d)
gcc -O2 -shared -fPIC -I$(python3 -c "import sysconfig;print(sysconfig.get_paths()['include'])") $P/probe.c \
    -o $D/probe$(python3 -c "import sysconfig;print(sysconfig.get_config_var('EXT_SUFFIX'))") 2>&1 | tee $R/logs/probe_build.txt
for i in 1 2 3; do
  s=$SECONDS
  PYTHONPATH=$D:$PYTHONPATH timeout 150 python3 $P/probe_cost.py $R/probe$i.json 60 > $R/logs/probe$i.txt 2>&1
  echo "probe$i rc=$? $((SECONDS-s)) s" | tee -a $R/logs/stages.txt
  cat $R/logs/probe$i.txt | cut -c1-1500
done
