"""The review store's split: unsalted SHA-256 of the document id, 75/25, hand-checked."""
from __future__ import annotations

from decision_pipeline.charter.seed import seed_counts, seed_split


def test_split_is_unsalted_sha256_of_the_id_hand_computed():
    # first 8 bytes of sha256(id) (`printf %s ID | sha256sum`) against 0.75 * 2^64 = 0xc000000000000000
    expected = {"a": "validation",      # ca978112ca1bbdca >= c000...
                "doc-3": "validation",  # f0d4c476cf15853d
                "b": "train",           # 3e23e8160039594a
                "doc-1": "train",       # bb0e4f49443794d9
                "doc-4": "train"}       # b08f1d661bff6369
    assert {i: seed_split(i, 0.25) for i in expected} == expected
    assert seed_split("doc-4", 0.35) == "validation"   # b08f... / 2^64 = 0.689 >= 0.65


def test_realised_share_is_in_the_counts():
    rows = [{"id": i, "safety_score": 0, "split": seed_split(i, 0.25)} for i in ("a", "doc-3", "b", "doc-1")]
    c = seed_counts(rows)
    assert (c["train"], c["validation"], c["validation_share"]) == (2, 2, 0.5)
