"""Figures and documents made from the pipeline's tracked outputs, in three sub-packages by job.

report/   the PDF (`stages/report.py`): the section registry, the numbers and sentences it prints, its
          figures (figures*.py), the page layout (pdf.py) and the build.
review/   comparing runs: the pull-request review against a base revision (diff.py) with its offline
          `dvc plots diff` page (plots_diff.py) and base recompute (rebase.py), experiments beside the
          committed run (compare.py), the noise study (noise_study.py) and the run readers they share.
docs/     the numbers in README.md and docs/ (numbers.py, values.py, readme.py) and docs/dag.png (dag.py).

Three modules sit at the top because more than one job (or a stage) uses them:
style.py          how every figure looks (palettes, fonts, DPIs, sizes) and the bare figure it is drawn on.
layout.py         layout checks of a drawn figure (text cut off or overlapping): the report and the DAG.
stage_figures.py  the PNGs the stages draw beside their metrics (evaluate, sft, rl, cross_route).

Imports, lowest first (tests/pipeline/test_import_graph.py checks them): the top modules import no
sub-package; report/ imports the top modules; review/ and docs/ import report/ and the top modules,
never each other. Outside reporting, only common/ (and never a stage).
"""
