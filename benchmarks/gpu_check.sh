#!/usr/bin/env bash
# The GPU checks in one go, on one CUDA GPU in under 9 minutes, ending in one summary table:
#   1. oracle tests  the engine-vs-oracle tests of tests/library/engine/test_scoring.py, test_triton_attention.py
#                    and test_new_families.py (sliding windows included)
#                    (the Triton kernel and the query-block rows, float32 and bfloat16, padding, dynamic zeroing,
#                    logits) with DORMANT_TEST_DEVICE=cuda, so the very tests of the CPU suite run on the CUDA path;
#   2. engine table  benchmarks/scoring_overhead.py --table on CUDA: OLMo-2 1B and 7B, Llama-3.2-3B (GQA) shapes,
#                    random init, bfloat16 and float32, calibration-sized and 4 x 2,048-token inputs, plain sdpa vs
#                    all 16 functions vs the sweep's 3 (cases past its budget are listed as not run);
#                    ratio = all 16 / plain at OLMo-2 7B bfloat16, 4 x 2,048 tokens;
#   3. sweep         one intervention sweep (benchmarks/sweep_cost.py: winogrande, --limit 50) on CUDA through
#                    lm-eval, checked (1 + 21 settings, accuracies and zeroed fractions in [0, 1], some heads zeroed);
#                    ratio = sweep / engine passes.
#   4. 8-bit path    `evaluate --precision paper`'s loading (OLMo-2 in float16 with bitsandbytes LLM.int8 weights)
#                    and a sweep setting through the engine on the device (tests/library/evaluation/
#                    test_paper_protocol.py); SKIPPED, not failed, where the interpreter has no bitsandbytes.
#   5. GPU workers   benchmarks/gpu_cluster_check.py: the track flow's local Dask cluster for a CUDA device (a
#                    dask-cuda LocalCUDACluster, one worker per GPU) scores a tiny checkpoint on each worker, equal
#                    to the same scoring in-process, every worker process gone after (no Prefect needed).
#   6. head roles    benchmarks/role_cost.py: the seven head-role functions (docs/SCORES.md "Head roles") on the
#                    induction probe against a plain pass and track's default set, on the device's own path;
#                    ratio = (default set + roles) / default set: what asking for the roles adds to a track pass.
# Exit 0: every check passed; 1: a check failed or ran out of time; 2: no usable environment (nothing run).
#
#   benchmarks/gpu_check.sh                  # on the GPU machine (DEVICE=cuda:1 for another GPU)
#   benchmarks/gpu_check.sh --cpu-dry-run    # the same steps on CPU with tiny sizes (also: DEVICE=cpu)
#
# Offline throughout (HF_DATASETS_OFFLINE=1: the lm-eval tasks read the bundled datasets; HF_HUB_OFFLINE=1),
# no downloads. Python: the repository's .venv (PYTHON=/path/to/python to use another interpreter); with no
# .venv, the system python3 plus a wheelhouse: benchmarks/gpu_wheels.sh fills .whl/ where PyPI is reachable,
# and here its wheels are installed (--no-index) into a temp folder put on PYTHONPATH (WHEELS=dir for another
# folder, WHEELS=none for none; also used with PYTHON=, never with the repository's .venv).
# Each step's output goes to the terminal and to $GPU_CHECK_LOGS (default: $OUT when set, else a temp folder).
set -u -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 2

DEVICE="${DEVICE:-cuda}"
for arg in "$@"; do
    case "$arg" in
        --cpu-dry-run) DEVICE=cpu ;;
        -h | --help)
            sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "gpu_check.sh: unknown argument $arg (use --cpu-dry-run or --help)" >&2
            exit 2
            ;;
    esac
done
case "$DEVICE" in
    cpu | cuda | cuda:[0-9]*) ;;
    *)
        echo "gpu_check.sh: DEVICE=$DEVICE is not cpu, cuda or cuda:N" >&2
        exit 2
        ;;
esac

export HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export PREFECT_SERVER_ANALYTICS_ENABLED=false TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" # this tree's dormant_tasks even where it is not installed

# Sizes and per-step time limits (seconds). Every step (its 10 s kill grace included) is cut to end by one
# overall deadline, counted from the start: 480 s on CUDA, so the whole script ends within 9 minutes.
if [[ "$DEVICE" == cpu ]]; then
    MODE="CPU dry run"
    DEADLINE_S=1100 T_ENV=120 T_TESTS=240 T_TABLE=300 T_SWEEP=300 T_INT8=120 T_CLUSTER=120 T_ROLES=120
    ROLE_ARGS=(--n 8 --repeats 1)
    TABLE_ARGS=(--models olmo2-1b,llama3.2-3b --repeats 1 --budget-s 240) # reduced shapes on CPU
    SWEEP_TASKS=winogrande SWEEP_LIMIT=5 SWEEP_BATCH=16
else
    MODE="CUDA"
    # not yet timed on a GPU: the table's --budget-s leaves its last (model, dtype) cases out rather than overrun
    DEADLINE_S=480 T_ENV=60 T_TESTS=110 T_TABLE=160 T_SWEEP=110 T_INT8=40 T_CLUSTER=90 T_ROLES=60
    ROLE_ARGS=(--n 256 --repeats 3 --dtype bfloat16)
    TABLE_ARGS=(--repeats 3 --budget-s 120)
    SWEEP_TASKS=winogrande SWEEP_LIMIT=50 SWEEP_BATCH=32
fi
# the tests that take the `torch_device` fixture (tests/conftest.py): 26 cases of test_scoring.py, 31 of
# test_triton_attention.py (which skip, failing this check, where the interpreter has no Triton), 36 of
# test_new_families.py (OLMo-3, OLMoE, Qwen3, Gemma-3, SmolLM3 and short windows, every path)
TEST_FILES=(tests/library/engine/test_scoring.py tests/library/engine/test_triton_attention.py
    tests/library/engine/test_new_families.py)
TEST_SELECTION="oracle or padding or bf16 or plain_sdpa or brute_force"
MIN_TESTS=90

START=$SECONDS
LOG_DIR="${GPU_CHECK_LOGS:-${OUT:-}}"
[[ -n "$LOG_DIR" ]] || LOG_DIR="$(mktemp -d -t gpu-check-XXXXXX)"
mkdir -p "$LOG_DIR" || exit 2

# ------------------------------------------------------------------------------------------- environment
TMP_PATHS=() # removed on exit: the wheels' install folder, the sweep script
trap 'rm -rf "${TMP_PATHS[@]}"' EXIT
VENV_PY="$ROOT/.venv/bin/python"
WHEELS="${WHEELS:-$ROOT/.whl}"
if [[ -n "${PYTHON:-}" ]]; then
    PY="$PYTHON"
elif [[ -x "$VENV_PY" ]]; then
    PY="$VENV_PY"
elif [[ "$WHEELS" != none ]] && compgen -G "$WHEELS/*.whl" >/dev/null; then
    PY="$(command -v python3 || echo python3)" # the GPU machine: its system python3 (CUDA torch) + the wheels
else
    PY="$VENV_PY"
fi
need_env() {
    echo "gpu_check.sh: $1" >&2
    cat >&2 <<EOF

What to do: the checks need this repository's .venv, or a python3 with a CUDA torch, transformers, pyarrow
and pytest (PYTHON=/path/to/python; with no .venv the system python3) plus lm-eval==0.4.13 and datasets.
For the CUDA run, torch must be a CUDA build that sees the GPU (the Makefile's setup pins the CPU build:
\`make setup\` is not enough on a GPU machine).
The GPU machine has no network and no .venv of this repository: where PyPI is reachable, run
    benchmarks/gpu_wheels.sh        # fills .whl/ with the wheels its python3 lacks (~10 MiB)
then carry .whl to the GPU machine (an ignored folder: name it in the copy, e.g. the run tool's carry) and
run benchmarks/gpu_check.sh there: it installs .whl/ into a temp folder for its python3 (WHEELS=dir for
another wheelhouse). Without a GPU: benchmarks/gpu_check.sh --cpu-dry-run.
EOF
    exit 2
}
if [[ ! -x "$PY" ]] && ! command -v "$PY" >/dev/null; then
    [[ -n "${PYTHON:-}" ]] && need_env "PYTHON=$PY is not an executable"
    [[ "$PY" == "$VENV_PY" ]] || need_env "no .venv in $ROOT, and no python3 on the PATH for the wheels of $WHEELS"
    need_env "no .venv in $ROOT (no $VENV_PY), and no wheelhouse ($WHEELS/*.whl) for a system python3"
fi
USING_WHEELS=""
case "$PY" in
    "$ROOT"/.venv/bin/* | .venv/bin/* | ./.venv/bin/*) ;; # the repository's .venv: its own packages only
    *)
        [[ "$WHEELS" != none ]] && compgen -G "$WHEELS/*.whl" >/dev/null && USING_WHEELS=yes
        ;;
esac
if [[ -n "$USING_WHEELS" ]]; then
    SITE="$(mktemp -d -t gpu-check-site-XXXXXX)" || exit 2
    TMP_PATHS+=("$SITE")
    if ! PIP_LOG="$(timeout "$T_ENV" "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --disable-pip-version-check --upgrade --target "$SITE" "$WHEELS"/*.whl 2>&1)"; then
        echo "$PIP_LOG" >&2
        need_env "installing the wheels of $WHEELS for $PY failed (pip output above)"
    fi
    export PYTHONPATH="$ROOT:$SITE${PYTHONPATH#"$ROOT"}" # the wheels before the interpreter's own packages
    USING_WHEELS="; wheels of $WHEELS ($(compgen -G "$WHEELS/*.whl" | wc -l) installed in $SITE)"
fi
if ! ENV_LINE="$(timeout "$T_ENV" "$PY" - "$DEVICE" 2>&1 <<'EOF'
import sys

device = sys.argv[1]
try:
    import datasets, lm_eval, pyarrow, pytest, torch, transformers  # noqa: F401
    from lm_eval.api.model import TemplateLM  # noqa: F401 (what dormant_tasks.evaluation.model builds on)

    import dormant_tasks  # noqa: F401
except Exception as e:
    sys.exit(f"the environment lacks a package: {type(e).__name__}: {e}")
from importlib.metadata import version

line = (
    f"python {sys.version.split()[0]} ({sys.executable}), torch {torch.__version__}, "
    f"transformers {transformers.__version__}, lm-eval {version('lm_eval')}, datasets {datasets.__version__}, "
    f"pyarrow {pyarrow.__version__}"
)
try:
    import triton

    line += f", triton {triton.__version__}"
except ImportError:
    line += ", no triton (the engine's CUDA path falls back to torch's kernels)"
if device.startswith("cuda"):
    if torch.version.cuda is None:
        sys.exit(f"torch {torch.__version__} is a CPU-only build (no CUDA)")
    if not torch.cuda.is_available():
        sys.exit(f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA GPU")
    index = torch.device(device).index or 0
    if index >= torch.cuda.device_count():
        sys.exit(f"{device} asked for, but only {torch.cuda.device_count()} CUDA device(s) are visible")
    torch.zeros(1, device=device)  # the driver really answers
    name = torch.cuda.get_device_name(index)
    free, total = torch.cuda.mem_get_info(index)
    line += (
        f", CUDA {torch.version.cuda}, {name} ({free / 2**30:.0f} of {total / 2**30:.0f} GiB free), "
        f"TF32 matmul {torch.backends.cuda.matmul.allow_tf32}, cuDNN TF32 {torch.backends.cudnn.allow_tf32}"
    )
else:
    line += f", CPU, {torch.get_num_threads()} threads"
print(line)
EOF
)"; then
    need_env "${ENV_LINE##*$'\n'}"
fi
echo "gpu_check.sh: $MODE on $DEVICE; $ENV_LINE$USING_WHEELS"
echo "gpu_check.sh: logs in $LOG_DIR"

# ------------------------------------------------------------------------------------------- steps
NAMES=() RESULTS=() TIMES=() RATIOS=() DETAILS=() FAILED=0
record() { # name result seconds ratio detail
    NAMES+=("$1") RESULTS+=("$2") TIMES+=("$3") RATIOS+=("$4") DETAILS+=("$5")
    [[ "$2" == PASS || "$2" == SKIPPED ]] || FAILED=1
}

STEP_RC=0 STEP_S=0 STEP_LOG="" STEP_RAN=1
run_step() { # name limit_s command...: runs it under `timeout`, output to the terminal and to a log
    local name="$1" limit="$2" left
    shift 2
    left=$((DEADLINE_S - (SECONDS - START) - 10))
    STEP_LOG="$LOG_DIR/$name.log"
    echo
    if ((left < 15)); then
        echo "=== $name: not run, the overall ${DEADLINE_S} s budget is spent" | tee "$STEP_LOG"
        STEP_RC=124 STEP_S=0 STEP_RAN=0
        return
    fi
    ((limit > left)) && limit=$left
    STEP_RAN=1
    echo "=== $name (limit ${limit} s): $*"
    local t0=$SECONDS
    timeout -k 10 "$limit" "$@" 2>&1 | tee "$STEP_LOG"
    STEP_RC=${PIPESTATUS[0]}
    STEP_S=$((SECONDS - t0))
}

verdict() { # the result word of the last step
    ((STEP_RAN)) || {
        echo "NOT RUN"
        return
    }
    case "$STEP_RC" in
        0) echo PASS ;;
        124 | 137) echo TIMEOUT ;;
        *) echo "FAIL(rc=$STEP_RC)" ;;
    esac
}

# 1. the oracle tests on the device
run_step oracle-tests "$T_TESTS" env DORMANT_TEST_DEVICE="$DEVICE" "$PY" -m pytest -q -rs -p no:cacheprovider \
    "${TEST_FILES[@]}" -k "$TEST_SELECTION"
result="$(verdict)"
counts="$(grep -E '^[0-9]+ (passed|failed|skipped|error)|^=+ .*(passed|failed|error)' "$STEP_LOG" | tail -1 | tr -d '=')"
counts="$(echo "$counts" | sed 's/^ *//; s/ in [0-9.]*s.*$//')"
n_passed="$(sed -nE 's/(^|.* )([0-9]+) passed.*/\2/p' <<<"$counts")"
if [[ "$result" == PASS ]] && ((${n_passed:-0} < MIN_TESTS)); then
    result=FAIL # a renamed test falls out of TEST_SELECTION: update it
    counts="${n_passed:-0} passed, expected at least $MIN_TESTS (TEST_SELECTION misses tests?)"
elif [[ "$result" == PASS ]] && grep -qE '[0-9]+ skipped' <<<"$counts"; then
    result=FAIL # a skipped device test means the device path was not exercised
    counts="$counts (skips: the $DEVICE path did not run)"
fi
record "oracle tests ($DEVICE)" "$result" "$STEP_S" "-" "${counts:-see $STEP_LOG}"

# 2. the real-shape table: the engine (all 16 functions, the sweep's 3) against plain sdpa
run_step engine-table "$T_TABLE" "$PY" benchmarks/scoring_overhead.py --table --device "$DEVICE" "${TABLE_ARGS[@]}"
result="$(verdict)"
case_name="olmo2-7b bfloat16 long all16"
[[ "$DEVICE" == cpu ]] && case_name="llama3.2-3b bfloat16 long all16" # the reduced CPU table has no 7B
ratio="$(sed -nE "s/^ratio $case_name: ([0-9.a-z]+x)$/\1/p" "$STEP_LOG" | tail -1)"
[[ "$result" == PASS && -z "$ratio" ]] && result=FAIL
record "engine table ($DEVICE)" "$result" "$STEP_S" "${ratio:--}" "all16/plain, $case_name (table in the log)"

# 3. one intervention sweep through lm-eval on the device: benchmarks/sweep_cost.py's main, with its timed
# batches moved to the model's device (it times the CPU tensors DormantLM.row_batches builds, which a CUDA
# model refuses; a no-op on CPU), its timings synchronised on CUDA, and the sweep's result checked.
SWEEP_PY="$(mktemp -t gpu-check-sweep-XXXXXX)"
TMP_PATHS+=("$SWEEP_PY")
cat >"$SWEEP_PY" <<'EOF'
import math
import sys
import time

import torch

sys.path.insert(0, "benchmarks")
import sweep_cost as sc  # noqa: E402

device = sys.argv[1]
seen = {}
_forward_batches, _run_sweep = sc.forward_batches, sc.run_sweep


@torch.no_grad()
def time_passes(model, batches, n_passes, engine):
    """sweep_cost.time_passes, with the CUDA queue drained before the clock stops."""
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    sync()
    start = time.perf_counter()
    for _ in range(n_passes):
        for ids, input_ids, mask in batches:
            if engine:
                sc.scoring_pass(model, input_ids, mask, sc.FUNCTIONS, input_indices=ids)
            else:
                model(input_ids=input_ids, attention_mask=mask, use_cache=False)
    sync()
    return time.perf_counter() - start


def forward_batches(prepared):
    on = prepared.lm.device
    seen["device"] = str(on)
    return [(ids, input_ids.to(on), mask.to(on)) for ids, input_ids, mask in _forward_batches(prepared)]


def run_sweep(prepared, score_fns, **kwargs):
    seen["n_specs"] = len(prepared.specs)
    seen["result"] = _run_sweep(prepared, score_fns, **kwargs)
    return seen["result"]


sc.forward_batches, sc.run_sweep, sc.time_passes = forward_batches, run_sweep, time_passes
sys.argv = ["sweep_cost.py", "--device", device, *sys.argv[2:]]
sc.main()

problems = []
if seen.get("device", "").split(":")[0] != device.split(":")[0]:
    problems.append(f"the model ran on {seen.get('device')}, not {device}")
rows = seen["result"].rows
want = seen["n_specs"] * len(sc.FUNCTIONS) * len(sc.DEFAULT_QUANTILES)
if len(rows) != want:
    problems.append(f"{len(rows)} intervened settings, expected {want}")
for r in rows:
    for key in ("accuracy", "frac_zeroed", "base_accuracy"):
        value = float(r[key]) if isinstance(r[key], (int, float)) else math.nan
        if not (math.isfinite(value) and 0.0 <= value <= 1.0):
            problems.append(f"{r['task']} {r['score_fn']} q={r['quantile']}: {key} = {r[key]!r}")
if rows and max(r["frac_zeroed"] for r in rows) <= 0:
    problems.append("no setting zeroed any head")
base = ", ".join(f"{task} {acc:.1f}%" for task, acc in seen["result"].base_accuracy.items())
print(
    f"sweep check on {seen.get('device')}: {len(rows)} intervened settings, base accuracy {base}, "
    f"zeroed up to {100 * max((r['frac_zeroed'] for r in rows), default=0):.1f}% of heads"
)
if problems:
    sys.exit("sweep check FAILED: " + "; ".join(problems[:5]))
print("sweep check OK")
EOF
run_step sweep "$T_SWEEP" "$PY" "$SWEEP_PY" "$DEVICE" --tasks "$SWEEP_TASKS" --limit "$SWEEP_LIMIT" \
    --batch-size "$SWEEP_BATCH"
result="$(verdict)"
ratio="$(sed -nE 's/^sweep \/ engine = ([0-9.a-z]+)x.*/\1x/p' "$STEP_LOG" | tail -1)"
plain="$(sed -nE 's/^sweep \/ plain += ([0-9.a-z]+)x.*/\1x/p' "$STEP_LOG" | tail -1)"
if [[ "$result" == PASS ]] && ! grep -q '^sweep check OK' "$STEP_LOG"; then
    result=FAIL
fi
record "sweep $SWEEP_TASKS, limit $SWEEP_LIMIT ($DEVICE)" "$result" "$STEP_S" "${ratio:--}" \
    "sweep/engine${plain:+; sweep/plain $plain}"

# 4. the 8-bit path (--precision paper) on the device, where bitsandbytes is installed
run_step int8 "$T_INT8" env DORMANT_TEST_DEVICE="$DEVICE" "$PY" -m pytest -q -rs -p no:cacheprovider \
    tests/library/evaluation/test_paper_protocol.py -k "8_bits"
result="$(verdict)"
detail="Linear8bitLt OLMo-2, float16, base + zeroed setting"
if [[ "$result" == PASS ]] && grep -q "bitsandbytes is not installed" "$STEP_LOG"; then
    result=SKIPPED
    detail="no bitsandbytes for $PY (pip install 'dormant-heads[int8]')"
fi
record "8-bit weights, --precision paper ($DEVICE)" "$result" "$STEP_S" "-" "$detail"

# 5. one worker per GPU: the local cluster of a CUDA run scores on its GPU(s), equal to in-process scoring
cluster_args=()
[[ "$DEVICE" == cpu ]] && cluster_args=(--cpu-dry-run)
run_step gpu-workers "$T_CLUSTER" "$PY" benchmarks/gpu_cluster_check.py "${cluster_args[@]}"
result="$(verdict)"
line="$(grep -E '^gpu_cluster_check: ' "$STEP_LOG" | tail -1)"
[[ "$result" == PASS ]] && ! grep -q '^gpu_cluster_check: PASS' <<<"$line" && result=FAIL
record "GPU workers, local cluster ($DEVICE)" "$result" "$STEP_S" "-" "${line#gpu_cluster_check: }"

# 6. the head-role functions' cost: the default set with and without the roles, in one pass, on the device
run_step head-roles "$T_ROLES" "$PY" benchmarks/role_cost.py --device "$DEVICE" "${ROLE_ARGS[@]}"
result="$(verdict)"
ratio="$(sed -nE 's/^ratio both\/tracked: ([0-9.]+x)$/\1/p' "$STEP_LOG" | tail -1)"
[[ "$result" == PASS && -z "$ratio" ]] && result=FAIL
record "head roles, cost over the default set ($DEVICE)" "$result" "$STEP_S" "${ratio:--}" \
    "(default set + roles) / default set on the probe (table in the log)"

# ------------------------------------------------------------------------------------------- summary
echo
echo "=== gpu_check.sh summary: $MODE on $DEVICE, $((SECONDS - START)) s in all (logs: $LOG_DIR)"
printf '%-44s %-12s %8s %8s  %s\n' check result seconds ratio detail
for i in "${!NAMES[@]}"; do
    printf '%-44s %-12s %8s %8s  %s\n' "${NAMES[$i]}" "${RESULTS[$i]}" "${TIMES[$i]}" "${RATIOS[$i]}" "${DETAILS[$i]}"
done
if ((FAILED)); then
    echo "gpu_check.sh: FAILED (see the logs above)"
    exit 1
fi
echo "gpu_check.sh: all checks passed"
exit 0
