#!/usr/bin/env bash
# One call on a lent GPU machine (issue 18): install the carried wheels, run the gpu-marked tests,
# the ONNX conformance suite on CUDA (and on the CPU, for the list of cases only CUDA fails), the
# edge/trainer benchmarks against PyTorch CUDA and the serving GPU-vs-CPU load test. Each step runs
# under its own timeout, cut further so the whole run ends within GPU_CHECK_BUDGET_S seconds; logs
# and JSON go to $OUT (8 files) and a summary table is printed last.
#
#   python scripts/gpu_wheels.py                   # here, once: the serve extra's wheels into .whl/
#   bash scripts/gpu_check.sh                      # on the device (carry .whl); OUT defaults to ./gpu-check-out
#   GPU_CHECK_STEPS="pytest bench" bash scripts/gpu_check.sh
#
# Without a CUDA device (CI) the same steps run in their CPU forms: the gpu tests skip, the
# conformance steps select nothing, and the benchmarks run tiny shapes on NumPy and PyTorch CPU.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-check-out}
mkdir -p "$OUT"
BUDGET=${GPU_CHECK_BUDGET_S:-285}
STEPS=${GPU_CHECK_STEPS:-"wheels pytest conformance_cuda bench serving conformance_cpu"}
PY=${PYTHON:-python3}
START=$(date +%s)
DEADLINE=$((START + BUDGET))
: > "$OUT/steps.tsv"

# A step: name, its own time limit, then the command; its output goes to the log named by $LOG.
run_step() {
    local name=$1 limit=$2
    shift 2
    case " $STEPS " in *" $name "*) ;; *) return 0 ;; esac
    local left=$((DEADLINE - $(date +%s) - 5))
    if [ "$left" -lt "$limit" ]; then limit=$left; fi
    if [ "$limit" -lt 5 ]; then
        printf '%s\tskipped\t0\tno time left\n' "$name" >> "$OUT/steps.tsv"
        return 0
    fi
    local t0=$(date +%s)
    echo "== $name (limit ${limit}s) $(date -u +%H:%M:%S)" | tee -a "$LOG"
    timeout --kill-after=10 "$limit" "$@" >> "$LOG" 2>&1
    local rc=$?
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(($(date +%s) - t0))" "$LOG" >> "$OUT/steps.tsv"
    echo "   rc $rc in $(($(date +%s) - t0))s" | tee -a "$LOG"
}

find_wheels() {
    local dir
    for dir in "${GPU_CHECK_WHEELS:-}" "$ROOT/.whl" "$ROOT/../.whl" "$ROOT/../../.whl" "$ROOT/../../../.whl"; do
        if [ -n "$dir" ] && ls "$dir"/*.whl > /dev/null 2>&1; then echo "$dir"; return 0; fi
    done
    return 1
}

if [ -d /tmp/gpu-check-site ] || case " $STEPS " in *" wheels "*) true ;; *) false ;; esac; then
    export PYTHONPATH=/tmp/gpu-check-site:$ROOT${PYTHONPATH:+:$PYTHONPATH}
else
    export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
fi
export COLUMNS=400  # pytest's short summary keeps whole error messages

LOG=$OUT/benchmarks.log; : > "$LOG"
if WHEELS=$(find_wheels); then
    echo "wheels from $WHEELS: $(ls "$WHEELS" | tr '\n' ' ')" | tee -a "$LOG"
    run_step wheels 40 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/gpu-check-site "$WHEELS"/*.whl
else
    echo "no .whl folder found; using what is installed" | tee -a "$LOG"
fi

HAS_GPU=$("$PY" -c "import cupy; print(int(cupy.cuda.runtime.getDeviceCount() > 0))" 2>/dev/null || echo 0)
if [ "$HAS_GPU" = 1 ]; then DEVICE=gpu; SMALL=""; else DEVICE=cpu; SMALL="--small"; fi
echo "device: $DEVICE ($("$PY" -c "import cupy; print(cupy.cuda.runtime.getDeviceProperties(0)['name'].decode())" 2>/dev/null || echo none))" | tee -a "$LOG"

# gpu-marked tests: only the files that hold some (other modules may import what this image lacks)
GPU_TEST_FILES=$(grep -rl --include='test_*.py' "pytest.mark.gpu" tests | sort)
LOG=$OUT/pytest_gpu.log; : > "$LOG"
# shellcheck disable=SC2086
run_step pytest 70 "$PY" -m pytest -m gpu -p no:benchmark -p no:cacheprovider -q -rfEs --tb=short $GPU_TEST_FILES

CONFORMANCE=(-m pytest tests/conformance/test_onnx_backend.py -n 14 -p no:benchmark -p no:cacheprovider
             -W ignore::DeprecationWarning -q --tb=line -rfEX)
LOG=$OUT/conformance_cuda.log; : > "$LOG"
run_step conformance_cuda 60 "$PY" "${CONFORMANCE[@]}" -k cuda

LOG=$OUT/benchmarks.log
if [ "$DEVICE" = gpu ]; then
    run_step bench 110 "$PY" benchmarks/gpu.py --device gpu --profile --json "$OUT/bench_gpu.json"
    run_step serving 75 "$PY" benchmarks/serving_load.py --device gpu --concurrency 64 --duration 10 --warmup 3 \
        --json "$OUT/serving_gpu.json"
else
    # shellcheck disable=SC2086
    run_step bench 120 "$PY" benchmarks/gpu.py --device cpu $SMALL --json "$OUT/bench_gpu.json"
    run_step serving 90 "$PY" benchmarks/serving_load.py --device cpu --image 32 --concurrency 4 --max-batch-size 4 \
        --duration 1 --warmup 0.5 --json "$OUT/serving_gpu.json"
fi

LOG=$OUT/conformance_cpu.log; : > "$LOG"
run_step conformance_cpu 45 "$PY" "${CONFORMANCE[@]}" -k cpu

"$PY" scripts/gpu_summary.py "$OUT" --elapsed $(($(date +%s) - START))
