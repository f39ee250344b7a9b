# Two commands do all the set-up: `make run` (the pipeline) and `make test`.
# Both create .venv inside the repo and install the locked dependencies first.
PY      := .venv/bin/python
PIP     := .venv/bin/pip
DVC     := .venv/bin/dvc
PROFILE ?= default
STAMP   := .venv/.installed
# dvc.yaml commands call `python`: the venv's must come first on PATH
export PATH := $(CURDIR)/.venv/bin:$(PATH)
# A variable's value as one shell word: single-quoted, each ' written '\'' and taken unexpanded ($(value)),
# so BASE='x; touch y' reaches the command as a (bad) revision name, never as shell syntax. Every variable
# a person sets reaches the shell through q (qs: one word per blank-separated item), except PYTEST_ARGS,
# which is pytest's own command line and is meant to be read by the shell.
q = '$(subst ','\'',$(value $(1)))'
qs = $(foreach w,$(value $(1)),'$(subst ','\'',$(w))')

.PHONY: install run docs determinism profile check test bench ray-pool bench-ray gpu-params clean-venv s3-local report review noise noise-collect review-ui review-export preflight memory-plan gpu-install cohort gpu-check dag pull compare

$(STAMP): requirements.lock requirements-nodeps.lock pyproject.toml
	python3.11 -m venv .venv || python3 -m venv .venv
	$(PIP) install --quiet --upgrade pip
	# torch is pinned in the lock to the CPU build pip finds locally; the lock
	# makes two installs resolve identically
	$(PIP) install --quiet -r requirements.lock
	$(PIP) install --quiet --no-deps -r requirements-nodeps.lock
	$(PIP) install --quiet --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

# `make run` first prints the active profile (params.yaml's base.profile) and refuses a params.yaml that
# is another profile than PROFILE (default: default), e.g. after `make profile PROFILE=micro`;
# FORCE_PROFILE=1 runs params.yaml as it is. PROFILE=gpu|micro merges profiles/<name>.yaml over the
# committed params.yaml when params.yaml is exactly a profile (checked like params first; edits of yours
# are never overwritten); `make profile PROFILE=default` goes back. Every run starts with `make check`.
FORCE_PROFILE ?=
RUN_PROFILE = $(PY) -m decision_pipeline config run-profile $(call q,PROFILE) $(if $(filter 1 yes true,$(FORCE_PROFILE)),--force)
run: $(STAMP)
	$(RUN_PROFILE) --dry-run
ifeq ($(PROFILE),gpu)
	$(PY) -m decision_pipeline preflight check --profile $(call q,PROFILE) $(if $(GPU_GIB),--gpu-gib $(call q,GPU_GIB))
endif
	$(RUN_PROFILE)
	$(PY) -m decision_pipeline config check
	$(DVC) repro

# profiles/<name>.yaml merged into params.yaml after its keys and types are checked against the params
# dataclasses (every error at once, naming profiles/<name>.yaml and the key; nothing written on error)
profile: $(STAMP)
	$(PY) -m decision_pipeline config profile $(call q,PROFILE)

# Every params section (and SET="a.b=1 c.d=[x, y]" overrides, as dvc exp run -S takes them; blanks inside
# [...] or quotes stay in one override) through its typed loader, regex params compiled, prompt files
# read, all errors at once, in seconds: before any stage works. SET travels as one argument.
check: $(STAMP)
	$(PY) -m decision_pipeline config check --sets $(call q,SET)

# The pipeline as a picture a person can read: one box per stage family -> docs/dag.png, with the
# stage/edge list and digest it was drawn from in docs/dag.json (a test says when dvc.yaml moved on)
dag: $(STAMP)
	$(PY) -m decision_pipeline dag --out docs/dag.png --record docs/dag.json

# After a run: the README's results table and every marked number in README.md and docs/ from metrics/
# (a test fails while one is stale), then every verdict they and the report state checked against metrics/claims.json
docs: $(STAMP)
	$(PY) -m decision_pipeline readme README.md
	$(PY) -m decision_pipeline docs-numbers README.md docs/*.md
	$(PY) -m decision_pipeline verdicts README.md docs/*.md report/report.pdf

# The report alone (seconds; reads only metrics/ and plots/)
report: $(STAMP)
	$(DVC) repro --single-item report

# PR review: params and metrics diff against BASE, each metric change marked inside/outside its
# run-to-run noise (metrics/noise/, `make noise`; SOURCE=reseed|sft_seed|... overrides the automatic choice) -> review/review.md; `dvc plots diff BASE --json` redrawn offline (matplotlib PNGs,
# no CDN) -> review/plots/index.html (decision_pipeline/reporting/review/plots_diff.py). RECOMPUTE=1 reruns BASE on this
# machine first (a temporary worktree sharing the DVC cache that starts from this workspace's dvc.lock and outputs:
# only the stages whose code, params or inputs differ rerun) so
# another CPU's float drift in BASE's committed metrics does not read as a change (reporting/review/rebase.py)
BASE ?= main
RECOMPUTE ?=
review: $(STAMP)
	$(PY) -m decision_pipeline review --base $(call q,BASE) --out review $(if $(SOURCE),--source $(call q,SOURCE)) $(if $(filter 1 yes true,$(RECOMPUTE)),--recompute-base)

# The experiments' headline numbers beside the committed run's, each change marked against its run-to-run
# noise (reporting/review/compare.py; `dvc exp show --md --only-changed` shows the same numbers unmarked)
compare: $(STAMP)
	$(PY) -m decision_pipeline compare

# Every stage of a micro run forced from scratch must leave git clean (two micro runs); `make test`
# forces only the summarising and report stages (tests/pipeline/test_end_to_end.py: SUMMARISING)
determinism: $(STAMP)
	FULL_RERUN=1 PIPELINE_QUIET=1 $(PY) -m pytest -q tests/pipeline/test_end_to_end.py -k forced_rerun

# The noise study (reporting/review/noise_study.py): DVC experiments from the committed run, each changing one
# source of chance (whole-chain reseeds, data, pretrain init, pretrain order, SFT seed, RL seed; RUNS="sft_seed=4 ..."
# overrides the counts), then per-metric spread per source -> metrics/noise/*.json and the verdicts -> metrics/claims.json.
# What it costs: docs/reliability.md ("The noise study").
RUNS ?=
REPLACE ?=
noise: $(STAMP)
	$(PY) -m decision_pipeline noise-study --plan $(if $(RUNS),--runs $(call qs,RUNS)) $(if $(filter 1 yes true,$(REPLACE)),--replace)
	$(PY) -m decision_pipeline noise-study --run
	$(PY) -m decision_pipeline noise-study --collect
	$(DVC) repro --force --single-item report   # the report reads metrics/noise/ (study outputs, not its DVC deps)
	$(MAKE) docs

# A study stopped part-way (out of time, a run that keeps failing): collect the runs that finished; each
# noise file and metrics/claims.json name the planned runs they lack (not_run)
noise-collect: $(STAMP)
	$(PY) -m decision_pipeline noise-study --collect --finished-only
	$(DVC) repro --force --single-item report
	$(MAKE) docs

# Borda cohort: copy this run's base/SFT/RL S1MB model folders into configs/s1mb_cohort (then point
# s1mb.cohort_dir at it); the reference scorers (uniform, label prior, majority) rank in every run anyway
cohort: $(STAMP)
	$(PY) -m decision_pipeline cohort --from data/s1mb --out configs/s1mb_cohort

# Two workers (pytest-xdist), one test file per worker at a time so module fixtures (the micro
# end-to-end run, local servers) are built once; TEST_WORKERS=0 runs in one process
TEST_WORKERS ?= 2
test: $(STAMP)
	PIPELINE_QUIET=1 $(PY) -m pytest -q $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile) $(PYTEST_ARGS)

# Each script prints its ratios against a baseline timed in the same run (docs/performance.md);
# bench_sampling uses models/base when `dvc repro` has built it, else a tiny model it builds itself
bench: $(STAMP)
	$(PY) perf/bench_curation.py
	$(PY) perf/bench_autocast.py
	$(PY) perf/bench_s1mb.py
	$(PY) perf/bench_sampling.py $(if $(wildcard models/base/config.json),--model models/base)

# Curation on Ray past one process's memory (#38, docs/scaling.md): a synthetic pool of RAY_POOL_DOCS documents
# in Parquet shards (not tracked: ~0.6 GB at 1M), then the driver's peak RSS at 100k vs 1M documents and
# docs/s at 1 and 2 workers against local, on a 2-node loopback cluster it starts and stops by process id
RAY_POOL ?= data/perf/ray_pool
RAY_POOL_DOCS ?= 1000000
ray-pool: $(STAMP)
	$(PY) perf/bench_ray_curate.py --make-pool $(call q,RAY_POOL) --docs $(call q,RAY_POOL_DOCS)
bench-ray: ray-pool
	$(PY) perf/bench_ray_curate.py --pool $(call q,RAY_POOL) --json metrics/perf/ray_curate.json

# `dvc pull` after checking that the default remote answers: no public remote holds this project's
# models and data, so in a fresh clone this says so in one line (and what to do) instead of 23 DVC errors
pull: $(STAMP)
	$(PY) -m decision_pipeline pull

# A local S3-compatible server (moto, in memory) at the default remote's endpoint,
# for trying `dvc push` / `dvc pull`; see docs/reliability.md "Remote storage"
s3-local: $(STAMP)
	$(PY) -m decision_pipeline s3-local --port 9000

# The human review web app over the live review store (reviews/store.sqlite), on
# http://127.0.0.1:8765/ (port: REVIEW_UI_PORT); see docs/review.md "Human review". Then
# `make review-export` writes reviews/export.jsonl, the tracked file the pipeline imports.
review-ui: $(STAMP)
	$(PY) -m decision_pipeline review-ui serve

review-export: $(STAMP)
	$(PY) -m decision_pipeline review-ui export

# GPU readiness (docs/gpu.md). preflight: every outside input the profile needs, all failures at once,
# in seconds, writing nothing; memory-plan: predicted peak GiB per GPU stage from config.json + params
# (GPU_GIB: the card; MODEL_CONFIG: a config.json when base_model.path is not there yet), then the
# expected first-run hours; gpu-install: the CUDA torch + vllm pins, verified afterwards.
GPU_GIB ?=
MODEL_CONFIG ?=
preflight: $(STAMP)
	$(PY) -m decision_pipeline preflight check --profile $(call q,PROFILE) $(if $(GPU_GIB),--gpu-gib $(call q,GPU_GIB))

memory-plan: $(STAMP)
	$(PY) -m decision_pipeline preflight plan --profile $(call q,PROFILE) $(if $(GPU_GIB),--gpu-gib $(call q,GPU_GIB)) $(if $(MODEL_CONFIG),--model-config $(call q,MODEL_CONFIG))
	$(PY) -m decision_pipeline preflight hours --profile $(call q,PROFILE)

gpu-install: $(STAMP)
	$(PIP) install -r requirements-gpu.txt
	$(PY) -m decision_pipeline gpu-env

# gpu-check: on a CUDA machine, the real stages on a random-weight SmolLM2-135M-shaped model, then the device
# smoke (Qwen3-4B shapes, the real trainers' steps beside the memory plan): one table, about a minute or two.
# TINY=1 is the CPU variant at tiny shapes (what CI runs); OUT= keeps the table and JSON there (default /tmp)
gpu-check: $(STAMP)
	$(PY) -m decision_pipeline gpu-check $(if $(TINY),--tiny) $(if $(OUT),--out $(call q,OUT))
