# dormant-heads in a container: the `dormant` command, and the environment of a Prefect worker or a Dask worker
# (docs/CLUSTER.md). CPU by default; the CUDA image is the same file with CUDA torch wheels (they bring their own
# CUDA libraries: the host needs the NVIDIA driver and the container toolkit, `docker run --gpus all`):
#
#   docker build -t dormant-heads .
#   docker build -t dormant-heads:cu128 --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128 \
#       --build-arg EXTRAS=gpu,eval,cluster-tools .
#   docker run --rm -v "$PWD/data:/data" dormant-heads demo
#
# torch is installed first, pinned (the Makefile's pin) from TORCH_INDEX, then the wheel with a constraint that
# keeps that torch: an open range would let pip pull the multi-GB default build from PyPI.
ARG BASE=python:3.11-slim

# ---- the wheel, built from the sources a build reads (pyproject.toml, README.md, the two packages)
FROM ${BASE} AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY dormant_tasks ./dormant_tasks
COPY flows ./flows
RUN pip install --no-cache-dir --disable-pip-version-check "setuptools>=77" \
    && pip wheel --no-deps --no-build-isolation --no-cache-dir -w /wheels .

# ---- the runtime: torch, then the wheel and its extras (default eval,cluster: `dormant evaluate` and a Dask
# worker's environment; e.g. EXTRAS=gpu,eval,cluster-tools on a GPU host)
FROM ${BASE}
ARG TORCH=2.13.0
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG EXTRAS=eval,cluster
ENV PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PREFECT_SERVER_ANALYTICS_ENABLED=false \
    HF_HUB_DISABLE_TELEMETRY=1 \
    HF_HOME=/cache/huggingface \
    DORMANT_STORE=/data/store \
    DORMANT_REPORTS=/data/reports
RUN pip install --no-cache-dir "torch==${TORCH}" --index-url "${TORCH_INDEX}" \
    && echo "torch==${TORCH}" > /etc/torch-constraint.txt
COPY --from=wheel /wheels /wheels
RUN set -e; whl="$(ls /wheels/dormant_heads-*.whl)"; \
    pip install --no-cache-dir --constraint /etc/torch-constraint.txt "${whl}${EXTRAS:+[${EXTRAS}]}" \
    && rm -rf /wheels \
    && dormant --version
# the store and reports (/data) and the Hugging Face cache (/cache) are volumes: a container keeps neither
VOLUME ["/data", "/cache"]
WORKDIR /data
ENTRYPOINT ["dormant"]
CMD ["--help"]
