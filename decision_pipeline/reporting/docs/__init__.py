"""The generated parts of README.md and docs/ (`make docs`, `make dag`).

numbers.py  every marked number in README.md and docs/*.md rewritten from metrics/ and params.yaml,
            and the check that none is typed by hand; values.py resolves what a marker cites.
readme.py   the README's results table from metrics/summary.json and the report's registry.
dag.py      docs/dag.png: the pipeline by stage family, drawn from dvc.yaml.

Imports: common/, the top modules of reporting and report/ (the registry's labels); never review/.
"""
