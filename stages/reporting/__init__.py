"""reporting package."""
