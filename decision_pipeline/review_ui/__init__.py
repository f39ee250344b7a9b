"""Human review web app: reviewers score reflections on the shared rubric, discuss each
other's reviews, and feed the pipeline's review store (``python -m decision_pipeline review-ui``)."""
