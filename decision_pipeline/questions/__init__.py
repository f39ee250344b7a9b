"""The decision-question schema and the procedural families that make questions.

Below every package that reads questions (lm, curation, bench, decision): it imports
only `common`, so no floor above has to reach up for it.
"""
