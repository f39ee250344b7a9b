"""Data-curation library: pure functions the curation stages call (data in, data out).

Pipeline order: pool -> filters -> minhash dedup -> classifier scores -> selection
(``pipeline.curate`` runs them all for the `curate` stage).

pool
    generate_pool(n_docs, noise_fraction, rng, extra_registers=None, register_weights=None) -> list[dict]
    generate_dev(n_per_register, registers, rng, extra_registers=None, avoid_texts=()) -> list[dict]
    load_external_pool(path) -> list[dict]         # JSONL/Parquet file or directory of shards
    validate_pool(docs, source="pool") -> docs     # empty pool, non-str text, duplicate ids
    REGISTERS, NOISE_KINDS
filters
    build_filters(config) -> list[NamedFilter]     # registry FILTERS: name -> factory
    apply_filters(docs, filters) -> Filtered(kept, dropped_by, .counts)   # first failing filter wins
    drop_unsafe(docs, max_score) -> (kept, n_dropped)
minhash
    dedup(docs, p: MinhashParams, seed, n_threads=None, priority=None, exact=False) -> DedupResult (best twin kept)
    minhash_signatures(texts, ...) -> uint64[n, num_perm]; shingle_hashes; lsh_groups; cluster
    check_lsh_params(num_perm, bands, rows)
classifier
    featurize(texts, n_buckets) -> Features
    train_classifier(dev_docs, pool_docs, registers, p: ClassifierParams, seed=...) -> RegisterModel (with .report)
    score_docs(model, docs) -> float64[n_docs, n_registers]
    save_model(model, path) / load_model(path)
selection
    select(docs, scores, token_counts, budget, registers, mode, overfill, reserve, weights, valid, exact_tokens) -> Selection
    random_selection(docs, token_counts, budget, rng, reserve, scores=None, registers=None) -> Selection
    quantize_scores(scores) -> int32|int64; calibrate_chars_per_token(texts, count_tokens_fn) -> float
    estimate_token_counts(texts, chars_per_token) -> int64[n] (estimate_from_lengths: the same from lengths); register_mix(...)

User-fixable problems raise ``decision_pipeline.common.errors.PipelineError`` with a one-line message.
Private helpers: ``_lexicon`` (word lists), ``_grammar`` (text templates), ``_hashing``
(stable vectorised token hashes shared by minhash and classifier).
"""
