#!/usr/bin/env bash
# Fill a wheelhouse (.whl/) with the Python packages benchmarks/gpu_check.sh needs on the lent GPU machine
# (no network; python3 there is Python 3.12 with a CUDA torch, transformers, huggingface_hub, pyarrow, pytest
# and more) that its image lacks: lm-eval and what lm-eval imports on the checks' code paths. Run it HERE,
# where PyPI is reachable; carry `.whl` to the GPU machine, where gpu_check.sh installs it (--no-index) into a
# temp folder and runs the system python3 with it on PYTHONPATH.
#
#   benchmarks/gpu_wheels.sh                              # .whl/ for cp312, manylinux x86-64
#   WHEELS=/tmp/whl PY_VERSION=3.11 benchmarks/gpu_wheels.sh   # another folder / Python (a local simulation)
#
# One pinned version of each, --no-deps: the list below is the whole set. The folder's old wheels are removed
# first. Every downloaded wheel's Requires-Dist must be pinned below, present on the GPU machine (DEVICE_HAS)
# or known to be unused on the checks' paths (UNUSED): a new requirement after a version bump fails here.
# Prints each wheel's size and the total; exit 1 past MAX_MIB (default 55: the working tree and the wheels
# travel together under 64 MiB).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

WHEELS="${WHEELS:-$ROOT/.whl}"
PY_VERSION="${PY_VERSION:-3.12}"
MAX_MIB="${MAX_MIB:-55}"
PIP_PY="${PIP_PY:-python3}" # the interpreter whose pip downloads (any version: --python-version decides)

# What the checks import that the GPU machine's python3 lacks (read off the imports of the oracle tests,
# tests/conftest.py, scoring_overhead.py and sweep_cost.py -> dormant_tasks.{evaluation,eval_tasks,harness}):
PINS=(
    lm-eval==0.4.13     # pyproject's pin: dormant_tasks.evaluation.model/eval_tasks/evaluation
    datasets==5.2.0     # lm-eval's task loading (the bundled parquet files); needs pyarrow>=24, hub>=1.31
    dill==0.4.1         # datasets (fingerprints), lm-eval; datasets wants <0.4.2
    multiprocess==0.70.19 # datasets; datasets wants <0.70.20
    # benchmarks/gpu_cluster_check.py: a dask-cuda LocalCUDACluster (the `cluster` extra) on the GPU. dask and
    # distributed at the release dask-cuda's rapids-dask-dependency pins (installed --no-deps: bokeh unused).
    dask-cuda==26.10.0
    dask==2026.7.1
    distributed==2026.7.1
    partd==1.4.2 locket==1.0.0 tblib==3.2.2 tornado==6.6.1 zict==3.0.0
)
# Requirements of the wheels above that the GPU machine's image already holds (KINDS.md, 2026-11: pyarrow,
# fsspec, huggingface_hub 1.33.0 ... at versions the pins accept).
DEVICE_HAS=(
    numpy pyarrow pandas tqdm xxhash fsspec huggingface-hub packaging pyyaml filelock requests jinja2
    sacrebleu scikit-learn typing-extensions
    click cloudpickle msgpack psutil sortedcontainers toolz urllib3 cuda-core nvidia-ml-py
)
# lm-eval / datasets requirements that these checks never import (lm-eval imports them lazily: HF evaluate
# metrics, result tables, ROUGE, the request cache, some tasks' helpers); carried only if that changes.
UNUSED=(evaluate pytablewriter rouge-score sqlitedict word2number more-itertools importlib-metadata
    rapids-dask-dependency)

PLATFORMS=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64
    manylinux1_x86_64)
args=(--no-deps --only-binary=:all: --python-version "$PY_VERSION" --implementation cp)
for p in "${PLATFORMS[@]}"; do args+=(--platform "$p"); done

mkdir -p "$WHEELS"
rm -f "$WHEELS"/*.whl
echo "gpu_wheels.sh: downloading ${#PINS[@]} wheels for cp${PY_VERSION/./} manylinux x86_64 into $WHEELS"
if ! "$PIP_PY" -m pip download -q --disable-pip-version-check "${args[@]}" -d "$WHEELS" "${PINS[@]}" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); then
    echo "gpu_wheels.sh: pip download failed (needs PyPI: run this where there is network)" >&2
    exit 1
fi

PINS_LIST="${PINS[*]}" KNOWN_LIST="${DEVICE_HAS[*]} ${UNUSED[*]}" \
    "$PIP_PY" - "$WHEELS" "$PY_VERSION" "$MAX_MIB" <<'EOF'
import os, re, sys, zipfile
from pathlib import Path
from pip._vendor.packaging.markers import Marker
from pip._vendor.packaging.utils import canonicalize_name, parse_wheel_filename

folder, py_version, max_mib = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
pins = {canonicalize_name(p.split("==")[0]) for p in os.environ["PINS_LIST"].split()}
known = pins | {canonicalize_name(n) for n in os.environ["KNOWN_LIST"].split()}
env = {"python_version": py_version, "python_full_version": py_version + ".0", "extra": "",
       "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
       "implementation_name": "cpython", "platform_python_implementation": "CPython", "os_name": "posix"}
problems, rows, names = [], [], {}
for whl in sorted(folder.glob("*.whl")):
    name = canonicalize_name(parse_wheel_filename(whl.name)[0])
    names.setdefault(name, []).append(whl.name)
    rows.append((whl.name, whl.stat().st_size))
    with zipfile.ZipFile(whl) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode("utf-8")
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req, _, marker = line.split(":", 1)[1].partition(";")
        if marker.strip() and not Marker(marker.strip()).evaluate(env):
            continue  # an extra, or another Python
        dep = canonicalize_name(re.match(r"\s*([A-Za-z0-9._-]+)", req).group(1))
        if dep not in known:
            problems.append(f"{whl.name} requires {req.strip()}: pin it in PINS, or add it to DEVICE_HAS or UNUSED")
problems += [f"{n}: {len(w)} versions ({', '.join(w)})" for n, w in names.items() if len(w) > 1]
problems += [f"{p}: no wheel downloaded" for p in sorted(pins - set(names))]
total = sum(size for _, size in rows)
for name, size in rows:
    print(f"  {size / 2**20:7.2f} MiB  {name}")
print(f"  {total / 2**20:7.2f} MiB  in all, {len(rows)} wheels ({folder})")
if total > max_mib * 2**20:
    problems.append(f"{total / 2**20:.1f} MiB is over the {max_mib:g} MiB limit (MAX_MIB)")
if problems:
    sys.exit("gpu_wheels.sh: FAILED:\n  " + "\n  ".join(problems))
EOF
if [[ "$WHEELS" == "$ROOT/.whl" ]]; then
    echo "gpu_wheels.sh: ready; carry .whl to the GPU machine, then run benchmarks/gpu_check.sh there"
else
    echo "gpu_wheels.sh: ready; there: WHEELS=$WHEELS benchmarks/gpu_check.sh"
fi
