"""Pipeline stages: one module per dvc.yaml stage, logic in subpackages."""
