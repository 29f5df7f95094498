#!/usr/bin/env bash
# One GPU run: everything a GPU user runs, logged with provenance, in stages that can be split
# across device calls (each <= 10 min; all of it takes ~45 min of device time, more than one lease's 30):
#   STAGES="tests grade notebooks tour bench profile" bash scripts/gpu_run.sh OUTDIR
# Stages (default: all but mutants and sanitize, in this order; install and provenance always run
# first):
#   tests      the pytest suite on the GPU (--target solutions; -n auto as make test: one process there);
#              TESTS names the paths to run (default: tests, all of it)
#   grade      `kernellab grade` of the solutions (copied into a temp --root) and of the starter
#   notebooks  every notebook (or NOTEBOOKS) executed live, one at a time (NB_JOBS), the executed copies in
#              OUTDIR/notebooks (python3 -m kernellab.course.notebooks --execute)
#   tour       `kernellab tour`, live figures
#   bench      `kernellab bench --repeat $REPEAT` (default 3): each lab in REPEAT fresh processes
#   profile    `kernellab profile LAB` for every lab (Nsight Compute, clock control off)
#   mutants    every mutant and alternative graded on the GPU and in the simulator on one seed
#              (SEED, default 1): logs/mutants.tsv has both verdicts per mutant (killed by which
#              test, or full marks); they must agree (a valid file that loses says why in
#              logs/mutants.txt). Lab 06's 23 took 59 s on an H100 (2026-12-07) beside the mutation
#              stage, after the compile child's fix (CUDA's JIT cache, shared by the mutants' HOME,
#              had hidden ptxas's figures from it and cost valid files test_tuned_linear_relu)
#   mutation   the automatic mutants (cosmic-ray, kernellab.grading.mutation) graded on the GPU on
#              seed 1 as kernellab grade grades there (the tests marked simulator in a simulator child),
#              each lab's verdicts compared with its committed simulator report in docs/mutation
#              (exit 1 where a mutant's verdict differs); reports in OUTDIR/mutation. On an H100
#              (2026-12-07), with the simulator child: LABS="05 01" (293 mutants) 295 s at JOBS=10
#              SHARDS=5; "06 00 02 07 08" (339) 291 s at JOBS=12 SHARDS=3; "03 09 04" (288) 306 s at
#              JOBS=15 SHARDS=5. So about 1 mutant a second: a call per ~300 mutants
#   sanitize   the solutions' GPU tests under compute-sanitizer memcheck (out-of-bounds accesses)
#              and racecheck (shared-memory hazards): each must report no error. API errors are not
#              reported: cuda-python probes driver entry points with cuGetProcAddress, and each probe
#              for one the driver lacks is an INVALID_VALUE the sanitizer would count (34 on
#              2026-12-02, none of them a memory error)
# MUTANT_JOBS (default 6) sets the mutants graded at once in each mode.
# MUTANT_MODES=gpu grades the hand-written mutants on the GPU only (logs/mutants-gpu.tsv), for a
# simulator half run elsewhere (the same function with sim): device time goes to the GPU's half.
# LABS="02 05" limits grade/tour/bench/profile to those labs. Carry the wheels of
# ../shared/gpu/wheels.sh as .whl/ (numpy 2.4.x and the Jupyter stack the notebooks need).
# It leaves OUTDIR/run-<stages>.tgz (reference/ with every repeat, figures/, logs/); each stage
# logs to logs/<stage>.txt, and logs/stages.tsv has each stage's exit code and seconds.
# Estimated device time on an H200 (from the recorded data's sizes and reps and the 2026-11-29/12-01
# runs): tests ~11 min (2026-12-04: 745 of its 803 tests in 580 s, the rest in 83 s; split it
# as TESTS=tests/instruments and TESTS=tests/labs), grade ~1 min (50 s on 2026-12-04), notebooks
# ~6 min (25-159 s each, 333 s in all on 2026-12-04), tour ~6 min (368 s on 2026-12-04, lab 04 103 s),
# mutants ~4 min (241 s on 2026-12-04), sanitize ~15 s a lab (lab 07: 13 s for both tools),
# bench ~7 min per repeat of all labs (lab 04 alone took 473 s for 3 repeats on 2026-12-02: 13
# GEMM variants at 4 sizes, each compiled again in every fresh process; lab 06's 365k-configuration
# driver check; lab 07 runs two processes), so ~20 min for 3 repeats: split bench across calls,
# profile ~3 min (each variant once, ~9 ncu passes per kernel). Split as, e.g.:
#   call 1: STAGES=tests TESTS=tests/instruments   call 2: STAGES="tests grade" TESTS=tests/labs
#   call 3: STAGES=notebooks   call 4: STAGES=tour   call 5: STAGES=mutants, then STAGES=sanitize
#   call 6: STAGES="bench profile" LABS="00 01 02 03"   call 7: the same with LABS=04 (~9 min)
#   call 8: the same with LABS="05 06 07 08 09" (a call stopped at its limit keeps the repeats
#   whose rounds finished: bench writes its combined files after every round)
# (profile merges its rows into the labNN.json that bench wrote under OUTDIR/reference in the same
# call: keep bench and profile of a lab in one call, or profile after copying bench's files in.)
set -uo pipefail
out=${1:?usage: [STAGES=...] [LABS=...] [REPEAT=3] gpu_run.sh OUTDIR}
stages=${STAGES:-tests grade notebooks tour bench profile}
labs=${LABS:-}
mkdir -p "$out/reference" "$out/figures" "$out/logs"
export PYTHONUNBUFFERED=1 KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions   # grade picks its own targets
if ls .whl/*.whl > /dev/null 2>&1; then   # numpy 2.4.x, numba-cuda 0.30.4, Jupyter: an image that has others
  [ -n "${SKIP_INSTALL:-}" ] ||   # runs side by side install once, before the others start
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
[ -n "${SKIP_INSTALL:-}" ] || python3 -m pip install -q --no-deps --no-build-isolation -e . > "$out/logs/install.txt" 2>&1

{   # provenance: what ran, where, with which settings (clocks as read, never set)
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown) $(git status --porcelain 2>/dev/null | wc -l) changed files"
  echo "stages: ${stages:-none}; labs: ${labs:-all}; tests: ${TESTS:-tests}; repeat: ${REPEAT:-3}"
  echo "CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-unset} (lab 07 sets its own per process)"
  python3 -m kernellab.cli info
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.draw,temperature.gpu,persistence_mode,compute_mode --format=csv
  ncu --version 2>&1 | tail -n 1
} > "$out/logs/provenance.txt" 2>&1
cat "$out/logs/provenance.txt"

stage() {   # stage NAME COMMAND...: run, log, time; a failing stage does not stop the others
  local name=$1; shift
  local started=$SECONDS
  echo "== $name: $* ($(date -u +%H:%M:%S))" >> "$out/logs/$name.txt"
  "$@" >> "$out/logs/$name.txt" 2>&1
  local code=$?
  printf '%s\t%s\t%s\n' "$name" "$code" "$((SECONDS - started))" >> "$out/logs/stages.tsv"
  tail -n 12 "$out/logs/$name.txt"
  echo "== $name: exit $code in $((SECONDS - started)) s"
}

grade_both() {   # the solutions as a submission (must score full), then the starter (must score 0)
  local root
  root=$(mktemp -d)
  mkdir "$root/labs" && cp solutions/lab*.py "$root/labs/"
  python3 -m kernellab.cli grade $labs --root "$root" --results "$out/logs/grade-solutions.json" &&
    python3 -m kernellab.cli grade $labs --results "$out/logs/grade-starter.json"
}

profile_all() {
  local code=0 lab
  for lab in ${labs:-$(python3 -c 'from kernellab.course import target; print(*target.labs())')}; do
    python3 -m kernellab.cli profile "$lab" --out "$out/reference" || code=1
  done
  return $code
}

mutant_scores() {   # MODE: one line per mutant (lab, what, bug or valid, the first test it lost or
                    # "full"; grading stops at the first lost point, so a kill is the score), written
                    # lab by lab so that a call stopped at its limit keeps the labs it finished
  KERNELLAB_DEVICE=$1 python3 - "${SEED:-1}" "${MUTANT_JOBS:-6}" $labs <<'PY'
import sys
from kernellab.course import target
from kernellab.grading import mutants
for number in sys.argv[3:] or sorted(target.labs()):
    verdicts = mutants.run([number], jobs=int(sys.argv[2]), seeds=1, first_seed=int(sys.argv[1]),
                           out=lambda line: print(line, file=sys.stderr))
    for lab, found in verdicts.items():
        for v in found:
            lost = next(iter(v.lost.values()), "") or "full"
            print(f"{lab}\t{v.mutant.what}\t{'valid' if v.mutant.valid else 'bug'}\t{lost}", flush=True)
PY
}

mutant_table() {   # the GPU's score of each mutant beside the simulator's; exit 1 where they differ
  # both halves at once, 6 jobs each (16 cores): about 4 min on the H200 (2026-12-02), where one
  # after the other at 4 jobs outran a 10-minute device call
  local mode failed=0 pids=()
  for mode in ${MUTANT_MODES:-gpu sim}; do
    mutant_scores "$mode" > "$out/logs/mutants-$mode.tsv" & pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  [ $failed = 0 ] && [ -s "$out/logs/mutants-sim.tsv" ] || return $failed
  paste "$out/logs/mutants-gpu.tsv" <(cut -f4 "$out/logs/mutants-sim.tsv") |
    awk -F'\t' 'BEGIN { OFS = "\t"; print "lab", "mutant", "kind", "gpu", "simulator", "" }
                { same = (($4 == "full") == ($5 == "full")); bad += !same   # killed on both, or on neither
                  print $1, $2, $3, $4, $5, same ? "" : "DIFFERS" }
                END { exit bad > 0 }' | tee "$out/logs/mutants.tsv"
}

sanitize() {   # memcheck and racecheck over the solutions' GPU tests (children too)
  local tool code=0 files=()
  for lab in $labs; do files+=(tests/labs/test_lab"$lab"_*.py); done
  for tool in memcheck racecheck; do
    "${SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}" --tool "$tool" --target-processes all \
      --report-api-errors no --error-exitcode 99 --print-limit 20 \
      python3 -m pytest "${files[@]:-tests/labs}" --target solutions -q -p no:cacheprovider || code=1
  done
  return $code
}

for name in $stages; do
  case $name in
    tests) stage tests python3 -m pytest ${TESTS:-tests} --target solutions -q -n auto -p no:cacheprovider \
             --results "$out/logs/results-gpu.json" ;;
    grade) stage grade grade_both ;;
    notebooks) stage notebooks python3 -m kernellab.course.notebooks ${NOTEBOOKS:-} --execute -j "${NB_JOBS:-1}" \
                 --output-dir "$out/notebooks" ;;   # one at a time: two notebooks would time each other's kernels
    tour) stage tour python3 -m kernellab.cli tour $labs --figures "$out/figures" ;;
    bench) stage bench python3 -m kernellab.cli bench $labs --repeat "${REPEAT:-3}" --out "$out/reference" ;;
    profile) stage profile profile_all ;;
    mutants) stage mutants mutant_table ;;
    sanitize) stage sanitize sanitize ;;
    mutation) stage mutation python3 -m kernellab.grading.mutation $labs --device gpu --shards "${SHARDS:-4}" \
                --jobs "${JOBS:-12}" --seed "${SEED:-1}" --out "$out/mutation" --compare docs/mutation ;;
    *) echo "unknown stage $name (stages: tests grade notebooks tour bench profile mutants" \
            "mutation sanitize)"; exit 2 ;;
  esac
done
tar czf "$out/run-${stages// /-}.tgz" -C "$out" reference figures logs $(cd "$out" && ls -d mutation notebooks 2>/dev/null)
