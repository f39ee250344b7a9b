"""Seed sampling and annotation-model selection: charter, prompts, reflections, rubric judge,
review store, judge-human agreement, throughput and ranking of candidate generators."""
