# Two commands do all the set-up: `make run` (the pipeline) and `make test`.
# Both create .venv inside the repo and install the locked dependencies first.
PY      := .venv/bin/python
PIP     := .venv/bin/pip
DVC     := .venv/bin/dvc
PROFILE ?= default
STAMP   := .venv/.installed
# dvc.yaml commands call `python`: the venv's must come first on PATH
export PATH := $(CURDIR)/.venv/bin:$(PATH)

.PHONY: install run test bench gpu-params clean-venv s3-local report review review-ui review-export cohort

$(STAMP): requirements.lock pyproject.toml
	python3.11 -m venv .venv || python3 -m venv .venv
	$(PIP) install --quiet --upgrade pip
	# torch is pinned in the lock to the CPU build pip finds locally; the lock
	# makes two installs resolve identically
	$(PIP) install --quiet -r requirements.lock
	$(PIP) install --quiet --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
ifeq ($(PROFILE),gpu)
	cp profiles/gpu.yaml params.yaml
	$(PIP) install --quiet -e '.[gpu]'
endif
	$(DVC) repro

# The report alone (seconds; reads only metrics/ and plots/)
report: $(STAMP)
	$(DVC) repro report

# PR review: params and metrics diff against BASE, each metric change marked inside/outside its
# recorded noise -> review/review.md; `dvc plots diff BASE --json` redrawn offline (matplotlib PNGs,
# no CDN) -> review/plots/index.html (decision_pipeline/reporting/plots_offline.py)
BASE ?= main
review: $(STAMP)
	$(PY) -m decision_pipeline.reporting.review --base $(BASE) --out review

# Borda cohort: copy this run's base/SFT/RL S1MB model folders into configs/s1mb_cohort (then point
# s1mb.cohort_dir at it); the reference scorers (uniform, label prior, majority) rank in every run anyway
cohort: $(STAMP)
	$(PY) -m decision_pipeline.bench.cohort --from data/s1mb --out configs/s1mb_cohort

test: $(STAMP)
	PIPELINE_QUIET=1 $(PY) -m pytest -q $(PYTEST_ARGS)

# Each script prints its ratios against a baseline timed in the same run (README "Performance");
# bench_sampling uses models/base when `dvc repro` has built it, else a tiny model it builds itself
bench: $(STAMP)
	$(PY) benchmarks/bench_curation.py
	$(PY) benchmarks/bench_s1mb.py
	$(PY) benchmarks/bench_sampling.py $(if $(wildcard models/base/config.json),--model models/base)

# A local S3-compatible server (moto, in memory) at the default remote's endpoint,
# for trying `dvc push` / `dvc pull`; see README "Remote storage"
s3-local: $(STAMP)
	$(PY) -m decision_pipeline.common.local_s3 --port 9000

# The human review web app over the live review store (reviews/store.sqlite), on
# http://127.0.0.1:8765/ (port: REVIEW_UI_PORT); see README "Human review". Then
# `make review-export` writes reviews/export.jsonl, the tracked file the pipeline imports.
review-ui: $(STAMP)
	$(PY) -m decision_pipeline.review_ui serve

review-export: $(STAMP)
	$(PY) -m decision_pipeline.review_ui export
