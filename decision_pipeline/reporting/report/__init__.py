"""The report PDF (`stages/report.py`): report/report.pdf, plots/report/ and metrics/summary.json.

sections*.py list what the report contains (one registry entry per stage group; registry.py holds the
types), sources.py reads every number and image with file and key, claims.py and noise.py decide how a
comparison is worded and which noise it is shown with, narrative.py writes the sentences, figures*.py
draw the PNGs, pdf.py lays out the pages and build.py runs it all, checking every input first.

Imports: common/ and the top modules of reporting (style.py, layout.py); never review/ or docs/,
which read this package's registry.
"""
