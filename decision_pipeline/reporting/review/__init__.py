"""Comparing runs: what a change moved, read against run-to-run noise (`make review`, `make compare`,
`make noise`).

diff.py        the pull-request review: params and metrics against a base revision (`make review`).
plots_diff.py  `dvc plots diff` drawn offline as PNGs and one HTML page (part of the review).
rebase.py      the base revision rerun here, so float drift between machines does not read as a change.
compare.py     DVC experiments' headline numbers beside the committed run's (`make compare`).
noise_study.py DVC experiments that each change one source of chance, and their spread (`make noise`).
git_runs.py    a run's params and metrics read from git (the committed run, DVC experiments);
               spread.py the per-metric spread over runs. scripts/*_ablation.py read runs with them too.

Imports: common/, the top modules of reporting and report/ (the headline numbers come first in a
review); never docs/.
"""
