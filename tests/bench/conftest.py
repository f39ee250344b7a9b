"""Make ``s1mb_helpers`` importable from the tests next to it.

The project runs pytest with ``--import-mode=importlib``, which does not put
test folders on ``sys.path``; the S1MB tests share plain builder functions
(not fixtures), so this folder is appended once here.
"""
import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.append(_HERE)
