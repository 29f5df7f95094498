#!/usr/bin/env bash
# Call C (session 23): the H200 only. On an H200, bench 07:pipeline x3 then bench 01 x3 with the code
# sent (Lab 07's recorder cost and Lab 01's instrument costs after 20 settling calls per sample): the
# records become the reference. On any other GPU it stops at once (call B measured Lab 01 on an H100).
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "$name"
case "$name" in *H200*) ;; *) echo "not an H200: nothing run"; exit 0 ;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
R=$OUT/R; mkdir -p $R/reference $R/logs
python3 -m pip install --no-deps --no-build-isolation -e . > $R/logs/install.txt 2>&1
{ date -u; echo "commit ${COMMIT:-?} (the working tree sent)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version;
  python3 -c "from kernellab.gpu import timeline; print(timeline.hot_path_words())"; } > $R/logs/provenance.txt 2>&1
cat $R/logs/provenance.txt
left() { echo $((${BUDGET_S:-575} - SECONDS)); }
cp data/reference/h200/lab07.json data/reference/h200/lab01.json $R/reference/   # a partial bench keeps the other records
s=$SECONDS; timeout "$(left)" python3 -m kernellab.cli bench 07:pipeline --repeat 3 --out $R/reference > $R/logs/bench07.txt 2>&1
echo "bench07 rc=$? $((SECONDS-s)) s" | tee $R/logs/stages.txt
grep -E "repeat .* of|MISSED|targets missed" $R/logs/bench07.txt | tail -6
s=$SECONDS; timeout "$(left)" python3 -m kernellab.cli bench 01 --repeat 3 --out $R/reference > $R/logs/bench01.txt 2>&1
echo "bench01 rc=$? $((SECONDS-s)) s" | tee -a $R/logs/stages.txt
grep -E "repeat .* of|MISSED|targets missed" $R/logs/bench01.txt | tail -6
rm -f $R/reference/*.png
tar czf $OUT/reference.tgz -C $R reference logs
