"""``python -m decision_pipeline.bench.s1mb`` -- see ``cli.py``."""
import sys

from .cli import main

sys.exit(main())
