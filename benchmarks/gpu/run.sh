#!/usr/bin/env bash
# Run THERE, on the GPU machine, from the repository root, with benchmarks/gpu/wheels carried (prepare.sh made it
# here). Installs the carried wheels, then: the environment, the kernel micro-benchmark with its launch settings
# tuned, the calibration benchmark in bf16 (end to end, forward alone, preprocessing alone, peak memory) with the
# tuned settings, and last the CUDA tests (the compiled Triton kernel's where its test file is present), each step
# within its own time limit (20 + 15 + 120 + 270 s, then 120 + 150 s). The measurements come first, and a summary
# follows them, so a call cut at 10 minutes loses the end of the tests (their dots stay in log.txt), not a table. The
# seventh H200 run took 17 + 8 + 98 + 240 s, then 103 + 78 s for the tests: 544 s, its model table cut at 240 s during
# its last case, MiniLM's shape (about 25 s); since then the tuning skips head size 128 (about a third of the kernels
# step) and times head size 64 at 512 tokens too. Four steps are for a second call: batches (130 s, about 90 estimated): two cases
# again with 6 batches per call, the host's launch of each batch and the calibrated class with calibration off
# (--host); profile (90 s): device time by kernel of one forward pass, plain against calibrated (kernel_time.py); host
# (60 s): the host's side of encode's loop, plain against calibrated with its truncation count, on the GPU
# machine's cores (bench_preprocess.py --loop); fp32 (90 s). Every figure lands as JSON in the output folder, with summary.md (Markdown tables) and log.txt. Rerun after
# a fix with --steps naming what to redo.
#
#   benchmarks/gpu/run.sh                                   # on the GPU machine: output to $OUT
#   benchmarks/gpu/run.sh --device cpu --quick --out DIR    # the dry run here: short sizes, no install
#   benchmarks/gpu/run.sh --steps tests,bf16                # some steps only
#   benchmarks/gpu/run.sh --steps fp32                      # the fp32 table, in a call of its own
#   benchmarks/gpu/run.sh --steps install,batches,profile,host   # where the host's and the kernels' time goes: a second call
set -uo pipefail
cd "$(dirname "$0")/../.."
device=cuda quick=0 out=${OUT:-} steps=install,environment,tests,kernels,bf16
usage="usage: run.sh [--device cuda|cpu] [--quick] [--out DIR] [--steps install,environment,tests,kernels,bf16[,batches][,fp32][,profile][,host]]"
while [ $# -gt 0 ]; do
    case $1 in
        --device) device=$2; shift 2 ;;
        --quick) quick=1; shift ;;
        --out) out=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        *) echo "run.sh: unknown argument '$1'; $usage" >&2; exit 2 ;;
    esac
done
[ -n "$out" ] || { echo "run.sh: no output folder: pass --out DIR or set OUT; $usage" >&2; exit 2; }
for name in ${steps//,/ }; do
    case $name in
        install|environment|tests|kernels|bf16|batches|fp32|profile|host) ;;
        *) echo "run.sh: unknown step '$name' in --steps; $usage" >&2; exit 2 ;;
    esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
python=${PYTHON:-python3}
wheels=benchmarks/gpu/wheels
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
[ -d "$wheels/tokenizer" ] && export FAIRPOS_TOKENIZER_DIR=$PWD/$wheels/tokenizer
exec > >(tee "$out/log.txt") 2>&1
failed=""

scale=1
[ "$device" = cpu ] && scale=4  # the limits are sized for the GPU machine; a CPU dry run gets four times as long

wanted() { [[ ",$steps," == *",$1,"* ]]; }
step() {  # step NAME SECONDS COMMAND...: run it under a time limit, note its outcome, go on either way
    local name=$1 limit=$(($2 * scale)) start=$SECONDS rc
    shift 2
    echo "=== $name (at most ${limit} s): $*"
    timeout "$limit" "$@"
    rc=$?
    echo "=== $name: exit $rc after $((SECONDS - start)) s$([ $rc -eq 124 ] && echo ' (time limit)')"
    [ $rc -eq 0 ] || failed="$failed $name"
}

if [ "$quick" = 1 ]; then
    tests_filter="$device and (kernel or masked or first_use or half or (gte and mean and right))"
    calibration=(--quick --gte-layers 1 --cases gte-cls-512,gte-mean-512 --all-references)
    batches=(--quick --gte-layers 1 --cases gte-cls-512 --batches 2 --host)
    kernels=(--quick --tune)
    profile=(--layers 1 --cases gte-cls-512)
    host=(--documents 8 --rounds 2 --loop 2)
else
    tests_filter=$device
    # 16 times the CPU cases' documents and batch sizes: at scale 1 the first H200 run timed launch overhead
    # 5 timed rounds: in the fifth run's 3, a case's end-to-end ratio spanned up to 0.17 between rounds (qwen3-last-2048)
    calibration=(--gte-layers 12 --reps 5 --scale 16
                 --cases gte-cls-512,gte-mean-512,qwen3-last-2048,gte-cls-2048,gte-mean-2048,gte-cls-8192,gte-mean-8192,bert-mean-512)
    # the same two cases with 6 batches per call, not 2: in the sixth run qwen3-last-2048's calibrated call took about 17 ms
    # longer than plain (0.92-0.94 end to end) where its forward pass took 2 ms longer; a cost per call leaves a 6-batch
    # call nearer plain, a cost per batch does not (gte-cls-2048, at 0.99 there, is the control). --host times the
    # host's share of each batch's forward pass too (where preprocessing plus launch reaches the device's forward pass,
    # end to end waits on the host, and the calibrated pass's host work counts in full), and the calibrated model's class
    # with calibration off, whose truncation count plain lacks: fast/wrapped is calibration's own cost (gte-cls-2048's
    # median of round ratios was 0.948 in the sixth run: it may share qwen3's cause)
    batches=(--gte-layers 12 --reps 5 --scale 16 --batches 6 --host --cases qwen3-last-2048,gte-cls-2048)
    # bf16 only, tuned: fp32 and the one-basket table were measured on the H200 (docs/gpu.md)
    kernels=(--tables fused --dtypes bf16 --tune)
    # gte-cls-512 (forward 0.970 and 0.961 in the sixth and seventh runs, target 0.97: 2.1 ms more per batch of 128
    # whose pooling-row kernel is estimated at 0.07 ms a layer), gte-mean-8192 (0.93, the lowest forward ratio), qwen3
    profile=(--scale 16 --cases gte-cls-512,qwen3-last-2048,gte-mean-8192)
    # on a 2-core CPU the calibrated host loop reads as plain's (the truncation count: 0.2-0.4 ms per batch of 32
    # truncated documents at 2,048 tokens); this machine's host has 16 cores
    host=(--documents 32 --rounds 15 --loop 6)
fi
calibration+=(--same-process)  # one process per case; on a CPU the profiler gives the tensor peaks
batches+=(--same-process)

if wanted install; then
    if [ "$device" = cpu ]; then
        echo "=== install: skipped on the CPU dry run (this machine's packages are used)"
    else  # no index there: the carried wheels, without dependencies (machine.txt lists what is there)
        step install 20 "$python" -m pip install --quiet --no-index --no-deps --no-cache-dir "$wheels"/*.whl
    fi
fi
wanted environment && step environment 15 "$python" benchmarks/gpu/environment.py --device "$device" --json "$out/environment.json"
wanted kernels && step kernels 120 "$python" benchmarks/gpu/bench_kernels.py --device "$device" "${kernels[@]}" --json "$out/kernels.json"
# the model tables run with the launch settings the kernels step picked, where it picked any
[ -f "$out/kernels.json" ] && calibration+=(--kernel-configs "$out/kernels.json")
for dtype in bf16 fp32; do
    wanted $dtype && step "calibration $dtype" $([ $dtype = bf16 ] && echo 270 || echo 90) \
        "$python" benchmarks/bench_calibration.py --device "$device" --dtype $dtype "${calibration[@]}" --json "$out/calibration-$dtype.json"
done
wanted batches && step batches 130 \
    "$python" benchmarks/bench_calibration.py --device "$device" --dtype bf16 "${batches[@]}" --json "$out/calibration-bf16-batches.json"
# device time by kernel of one forward pass, plain against calibrated (its lines are in log.txt)
wanted profile && step profile 90 "$python" benchmarks/gpu/kernel_time.py --device "$device" "${profile[@]}"
# the host's side of encode's loop, plain against calibrated with its truncation count (lines in log.txt)
wanted host && step host 60 "$python" benchmarks/bench_preprocess.py "${host[@]}"
"$python" benchmarks/gpu/summarize.py "$out"  # a summary of the tables, should the call be cut during the tests
wanted tests && step tests 120 "$python" -m pytest -q -p no:cacheprovider -k "$tests_filter" --junitxml="$out/tests.xml" \
    tests/core/test_equivalence.py tests/core/test_fused_mean.py tests/core/test_row_math.py
# the fused kernel's tests, whole (compiled on CUDA, interpreted on a CPU), and the operations and host reads of a pass
triton_tests=(tests/core/test_triton_attention.py tests/core/test_forward_cost.py)  # test_kernel_build.py needs no GPU: CI runs it
if wanted tests && [ -f "${triton_tests[0]}" ]; then
    step "triton tests" 150 "$python" -m pytest -q -p no:cacheprovider --junitxml="$out/tests-triton.xml" "${triton_tests[@]}"
fi
"$python" benchmarks/gpu/summarize.py "$out" && cat "$out/summary.md"
echo "=== done in $SECONDS s; failed steps:${failed:- none}"
[ -z "$failed" ]
