# Two commands for a newcomer: `make demo` (offline demo end to end) and `make test` (the test suite).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export HF_HUB_DISABLE_TELEMETRY := 1

.PHONY: setup demo test test-fast lint clean-demo olah lmeval045 lowest

# torch first, pinned: this machine's CPU build lies on disk; an open range would pull a multi-GB CUDA build.
# The gpu extra (Triton) lets the tests run the GPU score kernel in Triton's interpreter on CPU; the int8 extra
# (bitsandbytes, with a CPU backend) lets them run the 8-bit tests instead of skipping them; eval (lm-eval) and
# cluster (Dask) are what `dormant evaluate` and `--runner dask` need (cluster-tools, whose dask-cuda pins Dask to
# its RAPIDS release, stays out).
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,gpu,int8,eval,cluster]'
	touch $@

setup: $(VENV)/.installed

# The loopback Hub mirror of the integration tests lives in a venv of its own (its pins clash with ours).
.venv-olah/bin/olah-cli:
	$(PYTHON) -m venv .venv-olah
	.venv-olah/bin/pip install -q olah==0.5.4

olah: .venv-olah/bin/olah-cli

# lm-eval 0.4.5 (the paper authors' version) in a venv of its own, for the BOS-rule test
# (tests/integration/test_bos_rule.py): its pins (transformers 4.x) clash with ours. torch first, as above.
.venv-lmeval045/.installed:
	$(PYTHON) -m venv .venv-lmeval045
	.venv-lmeval045/bin/pip install -q torch==2.13.0
	.venv-lmeval045/bin/pip install -q 'transformers>=4.40,<4.50' lm-eval==0.4.5
	touch $@

lmeval045: .venv-lmeval045/.installed

# The lower bounds pyproject.toml claims for the libraries whose internals the project touches, tested: a venv
# over the dev venv's packages (a path file) with lm-eval, transformers and triton at the lowest versions its
# ranges allow, running the tests that exercise their internals (LOWEST_TESTS below). transformers 5.4 takes huggingface-hub
# >=1.5,<2 and tokenizers >=0.22,<=0.23.0, so those come at the lowest it allows, with a datasets that takes a
# 1.x hub (the dev venv's needs 2.x). torch is not among them: only the CPU build of the Makefile's pin is at
# hand (PyPI's Linux torch is the CUDA build); its one internal is checked before use, with the public sdpa
# behind it (dormant_tasks/engine/cpu_attention_adapter.py), and docs/DEVELOPING.md says what is tested.
LOWEST := $(shell $(PYTHON) -c "import re, tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
	reqs = p['dependencies'] + p['optional-dependencies']['eval'] + p['optional-dependencies']['gpu']; \
	print(' '.join(re.sub(r'>=([^,]+).*', r'==\1', r) for r in reqs if r.split('>')[0] in ('lm-eval', 'triton', 'transformers')))")
LOWEST_WITH := huggingface-hub==1.5.0 tokenizers==0.22.0 datasets==5.0.0

.venv-lowest/.installed: $(VENV)/.installed pyproject.toml
	rm -rf .venv-lowest
	$(PYTHON) -m venv --without-pip .venv-lowest
	$(PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" > \
		"$$(.venv-lowest/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/dev-venv.pth"
	$(PY) -m pip --python .venv-lowest/bin/python install -q --no-deps $(LOWEST) $(LOWEST_WITH)
	touch $@

lowest: .venv-lowest/.installed
	.venv-lowest/bin/python -c "import lm_eval, transformers, triton, torch; print('lowest bounds:', lm_eval.__version__, \
		transformers.__version__, triton.__version__, '(torch', torch.__version__ + ')')"
	.venv-lowest/bin/python -m pytest -q -p no:cacheprovider -m "not slow" $(LOWEST_TESTS)

# What the lowest bounds are run for, and no more (the rest of these files runs in `make test` at the dev venv's
# versions): the adapters and their drift tests (lm-eval's, transformers', torch's internals); the Triton kernel
# against brute force in the interpreter (Triton's bound); the engine against its oracle through transformers'
# AttentionInterface, once per attention layout (MHA, GQA, one KV head), float32, whole queries, and GPT-2's, whose
# attention scaling reaches it from transformers 5.4 on (transformers' bound).
ENGINE := tests/library/engine/test_scoring.py::test_every_function_matches_the_oracle
LOWEST_TESTS := tests/library/evaluation/test_lmeval_adapter_drift.py tests/library/test_adapters.py \
	tests/library/engine/test_engine_adapters.py tests/library/evaluation/test_generation_adapter.py \
	tests/library/evaluation/test_chat_date.py \
	tests/library/engine/test_triton_attention.py::test_kernel_matches_brute_force \
	tests/library/engine/test_triton_attention.py::test_windowed_kernel_matches_brute_force \
	'$(ENGINE)[None-olmo2-float32]' '$(ENGINE)[None-llama-float32]' '$(ENGINE)[None-qwen2-float32]' \
	'tests/library/engine/test_families.py::test_every_function_matches_the_oracle[None-gpt2]'

# DEMO_ARGS: options of `dormant demo`, e.g. `make demo DEMO_ARGS='--threads 1'` on a machine whose cores are busy
DEMO_ARGS ?=

demo: setup
	$(VENV)/bin/dormant demo $(DEMO_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# Both run the tests on WORKERS processes (pytest-xdist; one Prefect test server for all, folders of their own). On 2 cores
# the whole suite took 1,121 s on two workers against 1,707 s in one process. `--dist loadgroup`: the tests of a module
# marked `xdist_group` run on one worker, so its costly module fixture is built once.
WORKERS ?= 2

# lint and `make lowest` run beside the suite, not before it (their output is printed after the suite's, from
# .test-side.log), and make test fails when any of the three does.
test: setup olah lmeval045 .venv-lowest/.installed
	@($(MAKE) --no-print-directory lint && $(MAKE) --no-print-directory lowest) > .test-side.log 2>&1 & side=$$!; \
	$(PY) -m pytest -q -rs -n $(WORKERS) --dist loadgroup --durations=25; suite=$$?; \
	wait $$side; other=$$?; echo "--- make lint, make lowest:"; cat .test-side.log; \
	[ $$other -eq 0 ] || echo "make test: lint or lowest failed (above)"; \
	[ $$suite -eq 0 ] && [ $$other -eq 0 ]

# The contributor's loop (docs/DEVELOPING.md): the tests not marked slow. No lint and no side venvs: the tests that
# need .venv-olah are slow, the one that needs .venv-lmeval045 skips without it.
test-fast: setup
	$(PY) -m pytest -q -rs -m "not slow" -n $(WORKERS) --dist loadgroup

clean-demo:
	rm -rf data/series/tiny-olmo2 data/store reports/tiny-olmo2
