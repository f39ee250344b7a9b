"""The decision-model pipeline library: everything the `stages/` entry points call."""
