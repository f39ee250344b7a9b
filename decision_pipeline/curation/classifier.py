"""Register classifier: hashed n-gram features + softmax regression in plain numpy.

Selection needs, for every pool document, "how much does this look like each target
register". We train a multinomial logistic regression whose classes are the dev
registers plus ``background`` (a random pool sample), so P(register | doc) is high only
for docs that look like that register AND unlike the average pool document.

Features: lower-cased tokens (words, punctuation runs) -> unigrams + bigrams hashed
(stable 64-bit, see ``_hashing``) into ``n_buckets`` -> sqrt term frequency -> L2
normalised, stored CSR-style (indptr/indices/data; no scipy). Training: seeded
mini-batch gradient descent, fixed epochs, L2 weight decay (applied lazily through a
scale factor so a step costs O(batch features), not O(n_buckets)). The kept checkpoint is
the research's: the epoch with the best accuracy on the classifier's own held-out split
(ties: the earlier epoch; ``checkpoint: last`` keeps the last epoch). All reductions use
``np.bincount`` (no BLAS), so scores are bit-reproducible. The classifier only WRITES
probabilities; selection quantises and ranks them (``selection.quantize_scores``).
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import rule
from decision_pipeline.curation._hashing import mix64, token_hashes

BACKGROUND = "background"
_BIGRAM = np.uint64(0x9FB21C651E98DF25)
_CHUNK_DOCS = 2000
CHECKPOINTS = ("best_heldout", "last")


@dataclass
class ClassifierParams:
    """The hashed-n-gram register classifier trained on the dev target."""
    n_buckets: int = rule(min=16, doc="feature hash buckets")
    epochs: int = rule(min=1, doc="SGD epochs")
    lr: float = rule(gt=0.0, doc="SGD learning rate")
    l2: float = rule(min=0.0, doc="L2 weight decay per step")
    n_background: int = rule(min=1, doc="pool documents sampled as the background class")
    checkpoint: str = rule(choices=CHECKPOINTS, doc="which epoch's weights are kept: best_heldout = the research's "
                                                    "rule, the best accuracy on the classifier's own held-out split "
                                                    "after each epoch (ties: the earlier epoch); last = the last epoch")


@dataclass(frozen=True)
class Features:
    """CSR rows: doc i's buckets are ``indices[indptr[i]:indptr[i+1]]`` with weights ``data``."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    n_buckets: int

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def gather(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row position in ``rows``, bucket, weight) for every feature of the given rows."""
        starts, ends = self.indptr[rows], self.indptr[np.asarray(rows) + 1]
        lens = ends - starts
        pos = np.repeat(np.arange(len(rows)), lens)
        idx = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens) + np.arange(lens.sum())
        return pos, self.indices[idx], self.data[idx]


def featurize(texts: Sequence[str], n_buckets: int) -> Features:
    """Hashed unigram+bigram features, sqrt(tf), L2-normalised per doc (empty doc = no features)."""
    if isinstance(n_buckets, bool) or not isinstance(n_buckets, int) or not 2 <= n_buckets <= 1 << 30:
        raise PipelineError(f"classifier.n_buckets: got {n_buckets!r}; use an int in [2, 2**30]")
    indptr, indices, data = [np.zeros(1, np.int64)], [], []
    for c0 in range(0, len(texts), _CHUNK_DOCS):
        chunk = texts[c0:c0 + _CHUNK_DOCS]
        h, off = token_hashes(chunk, split_punct=True)
        doc = np.repeat(np.arange(len(chunk), dtype=np.int64), np.diff(off))
        same = doc[:-1] == doc[1:]  # bigrams never straddle two docs
        bi = mix64((h[:-1][same] * _BIGRAM) ^ h[1:][same])
        feats = np.concatenate([h, bi]) % np.uint64(n_buckets)
        key = np.concatenate([doc, doc[:-1][same]]) * n_buckets + feats.astype(np.int64)
        key, counts = np.unique(key, return_counts=True)
        kdoc = key // n_buckets
        w = np.sqrt(counts.astype(np.float64))
        norm = np.sqrt(np.bincount(kdoc, weights=w * w, minlength=len(chunk)))
        w /= norm[kdoc]
        indices.append((key % n_buckets).astype(np.int32))
        data.append(w.astype(np.float32))
        indptr.append(indptr[-1][-1] + np.cumsum(np.bincount(kdoc, minlength=len(chunk))))
    cat = (lambda parts, dt: np.concatenate(parts) if parts else np.empty(0, dt))
    return Features(np.concatenate(indptr), cat(indices, np.int32), cat(data, np.float32), n_buckets)


@dataclass
class RegisterModel:
    """Softmax weights over ``classes`` (= ``registers`` + ``background``) and a training report."""

    registers: list[str]
    classes: list[str]
    weights: np.ndarray  # float32 [n_buckets, n_classes]
    bias: np.ndarray  # float64 [n_classes]
    n_buckets: int
    report: dict = field(default_factory=dict)


def _logits(w: np.ndarray, bias: np.ndarray, feats: Features, rows: np.ndarray, scale: float = 1.0) -> np.ndarray:
    pos, cols, vals = feats.gather(rows)
    contrib = w[cols].astype(np.float64) * vals[:, None]
    out = np.empty((len(rows), w.shape[1]))
    for c in range(w.shape[1]):
        out[:, c] = np.bincount(pos, weights=contrib[:, c], minlength=len(rows))
    return out * scale + bias


def _softmax(z: np.ndarray) -> np.ndarray:
    z = np.exp(z - z.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def _split(labels: np.ndarray, n_classes: int, frac: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Stratified held-out split: about ``frac`` of each class (>=1 when it has >=2 docs)."""
    train, held = [], []
    for c in range(n_classes):
        idx = rng.permutation(np.flatnonzero(labels == c))
        k = int(round(frac * len(idx))) if len(idx) >= 2 else 0
        k = max(k, 1) if len(idx) >= 2 and frac > 0 else k
        held.append(idx[:k])
        train.append(idx[k:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(held))


def choose_checkpoint(heldout_correct: Sequence[int], rule: str) -> int:
    """The kept epoch (1-based) from each epoch's held-out correct count.

    ``best_heldout`` takes the most correct (the first such epoch on a tie: the earlier, less
    trained weights win when they are as good); ``last`` takes the final epoch.
    """
    if rule not in CHECKPOINTS:
        raise PipelineError(f"curate.classifier.checkpoint: {rule!r} is not one of {', '.join(CHECKPOINTS)}")
    if not heldout_correct:
        raise PipelineError("classifier: no epoch was trained; set curate.classifier.epochs >= 1")
    if rule == "last":
        return len(heldout_correct)
    return int(np.argmax(np.asarray(heldout_correct, dtype=np.int64))) + 1  # argmax: first maximum


def train_classifier(dev_docs: Sequence[Mapping], pool_docs: Sequence[Mapping], registers: Sequence[str],
                     p: ClassifierParams, *, seed: int, batch_size: int = 64,
                     heldout_frac: float = 0.2) -> RegisterModel:
    """Train on dev docs (classes = ``registers``) + ``background`` sampled from the pool.

    ``p.n_background`` pool documents (at most the pool) form the background class. The report gives
    held-out accuracy over all classes vs chance (1/n_classes) and ``register_accuracy``
    (held-out register docs, argmax over register columns only: what selection uses), each epoch's
    held-out accuracy (``epoch_heldout_accuracy``) and the kept epoch (``chosen_epoch``, by
    ``p.checkpoint``). Evaluating an epoch draws no random numbers, so the kept weights equal those
    of a run trained for exactly ``chosen_epoch`` epochs. With best_heldout the reported held-out
    accuracy is the selection criterion's maximum, so it is optimistic by construction.
    """
    n_buckets, epochs, lr, l2 = p.n_buckets, p.epochs, p.lr, p.l2
    registers = list(registers)
    if not registers or len(set(registers)) != len(registers) or BACKGROUND in registers:
        raise PipelineError(f"classifier: registers {registers} must be non-empty, unique and not '{BACKGROUND}'")
    if epochs < 1 or lr <= 0 or l2 < 0 or batch_size < 1 or not 0 <= heldout_frac < 1:
        raise PipelineError(f"classifier: need epochs >= 1, lr > 0, l2 >= 0, batch_size >= 1, 0 <= heldout_frac < 1; "
                            f"got {epochs}, {lr}, {l2}, {batch_size}, {heldout_frac}")
    by_reg: dict[str, list[str]] = {r: [] for r in registers}
    for d in dev_docs:
        if not isinstance(d.get("text"), str):
            raise PipelineError(f"dev doc '{d.get('id')}' has {type(d.get('text')).__name__} text; it must be a string")
        if d.get("register") not in by_reg:
            raise PipelineError(f"dev doc '{d.get('id')}': register {d.get('register')!r} is not one of "
                                f"{registers}; fix its label or add the register")
        by_reg[d["register"]].append(d["text"])
    for r, texts in by_reg.items():
        if not texts:
            raise PipelineError(f"dev register '{r}' has no documents; add dev docs for it or drop it from registers")
    if not pool_docs:
        raise PipelineError("classifier: the pool is empty, so there is no background class; check the pool stage")
    rng = np.random.default_rng(seed)
    n_bg = min(p.n_background, len(pool_docs))
    bg_idx = np.sort(rng.choice(len(pool_docs), size=n_bg, replace=False))
    texts = [t for r in registers for t in by_reg[r]] + [pool_docs[int(i)]["text"] for i in bg_idx]
    labels = np.repeat(np.arange(len(registers) + 1), [len(by_reg[r]) for r in registers] + [n_bg])
    classes = registers + [BACKGROUND]
    feats = featurize(texts, n_buckets)
    train, held = _split(labels, len(classes), heldout_frac, rng)
    if p.checkpoint == "best_heldout" and len(held) == 0:
        raise PipelineError("curate.classifier.checkpoint: best_heldout needs a held-out split, and no class has the "
                            "2 documents it takes; add dev documents (ingest.dev_per_register) or set checkpoint: last")
    w = np.zeros((n_buckets, len(classes)))
    bias = np.zeros(len(classes))
    scale = 1.0  # true weights = scale * w (lazy L2 decay)
    kept: tuple[int, np.ndarray, np.ndarray] | None = None  # (epoch, float32 weights, bias)
    correct: list[int] = []
    for _ in range(epochs):
        order = rng.permutation(train)
        for s in range(0, len(order), batch_size):
            rows = order[s:s + batch_size]
            g = _softmax(_logits(w, bias, feats, rows, scale))
            g[np.arange(len(rows)), labels[rows]] -= 1.0
            g /= len(rows)
            pos, cols, vals = feats.gather(rows)
            uniq, inv = np.unique(cols, return_inverse=True)
            gw = np.empty((len(uniq), len(classes)))
            for c in range(len(classes)):
                gw[:, c] = np.bincount(inv, weights=vals * g[pos, c], minlength=len(uniq))
            scale *= 1.0 - lr * l2
            w[uniq] -= (lr / scale) * gw
            bias -= lr * g.sum(axis=0)
        # float32 weights: what save_model stores, so the epoch is judged on what a reload scores
        w32 = (w * scale).astype(np.float32)
        correct.append(_heldout_correct(w32, bias, feats, labels, held))
        if p.checkpoint == "last" or correct[-1] > max(correct[:-1], default=-1):  # strictly better: ties keep earlier
            kept = (len(correct), w32, bias.copy())
    chosen = choose_checkpoint(correct, p.checkpoint)
    if kept is None or kept[0] != chosen:  # the snapshot kept while training must be the rule's epoch
        raise RuntimeError(f"classifier: kept epoch {kept and kept[0]} differs from the rule's {chosen}")
    model = RegisterModel(registers, classes, kept[1], kept[2], n_buckets)
    model.report = _report(model, feats, labels, held, len(registers))
    n_held = max(len(held), 1)
    model.report.update(n_train=int(len(train)), n_background=int(n_bg), epochs=epochs, seed=seed,
                        checkpoint=p.checkpoint, chosen_epoch=chosen,
                        epoch_heldout_accuracy=[c / n_held if len(held) else None for c in correct])
    return model


def _heldout_correct(w: np.ndarray, bias: np.ndarray, feats: Features, labels: np.ndarray, held: np.ndarray) -> int:
    """Held-out documents whose argmax class is their label (the accuracy the checkpoint is chosen on)."""
    if len(held) == 0:
        return 0
    return int((_softmax(_logits(w, bias, feats, held)).argmax(axis=1) == labels[held]).sum())  # as _report


def _report(model: RegisterModel, feats: Features, labels: np.ndarray, held: np.ndarray, n_reg: int) -> dict:
    if len(held) == 0:
        return {"heldout_accuracy": None, "chance": 1 / len(model.classes), "n_heldout": 0}
    p = _softmax(_logits(model.weights, model.bias, feats, held))
    y = labels[held]
    pred = p.argmax(axis=1)
    is_reg = y < n_reg
    per = {c: float((pred[y == i] == i).mean()) for i, c in enumerate(model.classes) if (y == i).any()}
    return {
        "heldout_accuracy": float((pred == y).mean()),
        "chance": 1 / len(model.classes),
        "register_accuracy": float((p[is_reg, :n_reg].argmax(axis=1) == y[is_reg]).mean()) if is_reg.any() else None,
        "per_class_accuracy": per,
        "n_heldout": int(len(held)),
    }


def score_docs(model: RegisterModel, docs: Sequence[Mapping] | Sequence[str], chunk: int = 4096) -> np.ndarray:
    """P(register | doc) as float64 ``[n_docs, n_registers]`` (columns = ``model.registers``).

    The background column is dropped, so rows sum to <= 1. Quantise before ranking.
    """
    texts = [d if isinstance(d, str) else d["text"] for d in docs]
    out = np.empty((len(texts), len(model.registers)))
    for c0 in range(0, len(texts), chunk):
        feats = featurize(texts[c0:c0 + chunk], model.n_buckets)
        rows = np.arange(len(feats))
        out[c0:c0 + len(rows)] = _softmax(_logits(model.weights, model.bias, feats, rows))[:, :len(model.registers)]
    return out


def save_model(model: RegisterModel, path: str | Path) -> None:
    """Write weights (float32) + metadata to one ``.npz`` file."""
    meta = {"registers": model.registers, "classes": model.classes, "n_buckets": model.n_buckets,
            "report": model.report}
    with open(path, "wb") as fh:
        np.savez_compressed(fh, weights=model.weights, bias=model.bias,
                            meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))


def load_model(path: str | Path) -> RegisterModel:
    """Read a model written by ``save_model``."""
    p = Path(path)
    if not p.is_file():
        raise PipelineError(f"{p}: classifier model not found; run the classifier stage first")
    try:
        with np.load(p, allow_pickle=False) as z:
            meta = json.loads(z["meta"].tobytes().decode())
            return RegisterModel(meta["registers"], meta["classes"], z["weights"],
                                 z["bias"], int(meta["n_buckets"]), meta.get("report", {}))
    except (KeyError, ValueError, OSError) as e:
        raise PipelineError(f"{p}: not a classifier model file ({type(e).__name__}); "
                            "re-run the classifier stage") from None
