"""The decision-question schema, the procedural families that make questions, and the question
pool's stable splits (`splits.py`, stage `items`).

Below every package that reads questions (lm, curation, bench, decision): it imports
only `common`, so no floor above has to reach up for it.
"""
