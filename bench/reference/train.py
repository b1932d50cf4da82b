#!/usr/bin/python3
"""PyTorch reference of gnn-spmd's model, to time our epochs against.

The same maths as gnn/model.go, gnn/local.go, gnn/train.go and
kernels/adam.go, full batch on one process:

  SAGE layer  y = X Ws + A X Wn + b, A[i,j] = 1/indeg(i) (no self-loops added)
  GCN layer   y = A X W + b, self-loops added where missing,
              A[i,j] = 1/sqrt(deg(i) deg(j)) with deg the in-degree after that
  ReLU between layers, none after the last; no dropout by default
  loss        mean softmax cross-entropy over the split's training nodes,
              computed in float64 from the float32 logits (as ours)
  optimizer   torch.optim.Adam, lr 0.01, betas (0.9, 0.999), eps 1e-8, all
              rounded to float32 first (ours keeps them as float32), weight
              decay (default 0) on the weights only, not the biases
  init        Glorot-uniform weights, zero biases, drawn exactly as ours from
              --seed (Go's math/rand/v2 PCG, reimplemented below), or loaded
              from one of our checkpoints with --init

A is a torch sparse CSR matrix (float32, int32 indices). torch requires
sorted, distinct columns per row, so duplicate edges (ours keeps them as
separate entries) are merged by adding their weights: the same matrix.
The backward product uses A^T, precomputed once as a second CSR matrix
(ours keeps A^T too). Like ours, each layer multiplies A with the narrower
side: A (X Wn) when the output is narrower than the input, else (A X) Wn.

Epoch time: forward, loss, backward, gradient norm and optimizer step. It
also counts train/val/test accuracy from the training forward pass's
logits, as our Trainer.Epoch does when there is no dropout. Evaluation is
therefore inside the timed region, as in ours, and costs one argmax. With
--dropout > 0, ours runs a separate no-dropout evaluation forward inside
the epoch, and so does this.

Output: one JSON line per epoch and a summary line (mean epoch time without
the first epoch of this run, peak RSS, and the RSS right after importing
torch, h5py and numpy).
"""

import argparse
import json
import math
import os
import resource
import sys
import time
import warnings

import h5py
import numpy as np
import torch
import torch.nn.functional as F

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")

MASK64 = (1 << 64) - 1


# ---------------------------------------------------------------------------
# Go's math/rand/v2 PCG (128-bit LCG, DXSM output) and Rand.Float64, so that
# --seed S gives exactly the weights `gnn-spmd train --seed S` starts from.

class GoPCG:
    MUL = (2549297995355413924 << 64) | 4865540595714422341
    INC = (6364136223846793005 << 64) | 1442695040888963407
    MASK128 = (1 << 128) - 1

    def __init__(self, seed1, seed2):
        self.state = ((seed1 & MASK64) << 64) | (seed2 & MASK64)

    def uint64(self):
        s = (self.state * self.MUL + self.INC) & self.MASK128
        self.state = s
        hi, lo = s >> 64, s & MASK64
        hi ^= hi >> 32
        hi = (hi * 0xda942042e4dd58b5) & MASK64
        hi ^= hi >> 48
        hi = (hi * (lo | 1)) & MASK64
        return hi

    def float64(self):
        # Rand.Float64: float64(Uint64()<<11>>11) / (1<<53)
        return float(self.uint64() & ((1 << 53) - 1)) / float(1 << 53)


def glorot_like_go(rng, rows, cols):
    """gnn.glorot: W[i] = float32((2*Float64()-1) * sqrt(6/(rows+cols))), row-major."""
    a = math.sqrt(6.0 / (rows + cols))
    u = np.fromiter((rng.float64() for _ in range(rows * cols)), dtype=np.float64, count=rows * cols)
    return ((2.0 * u - 1.0) * a).astype(np.float32).reshape(rows, cols)


# ---------------------------------------------------------------------------
# Data

def load_dataset(path, split, normalize):
    with h5py.File(path, "r") as f:
        if f.attrs["format"] != "gnn-spmd-dataset" or int(f.attrs["version"]) != 1:
            sys.exit(f"{path}: not a gnn-spmd-dataset version 1 file")
        n = int(f.attrs["num_nodes"])
        classes = int(f.attrs["num_classes"])
        indptr = f["graph/indptr"][...].astype(np.int64)
        indices = f["graph/indices"][...].astype(np.int32)
        if "features" not in f["node"]:
            sys.exit(f"{path}: the dataset has no node features: training needs them")
        x = f["node/features"][...]
        y = f["node/labels"][...].astype(np.int64)
        names = sorted(f["splits"].keys())  # ours: the named split, else the first in sorted order
        if not names:
            sys.exit(f"{path}: the dataset has no splits")
        if split is None:
            split = names[0]
        if split not in names:
            sys.exit(f"{path}: --split {split!r}: the dataset has splits {names}")
        g = f["splits"][split]
        parts = {p: np.sort(g[p][...]).astype(np.int64) for p in ("train", "valid", "test")}
    x = np.ascontiguousarray(x, dtype=np.float32)
    if normalize:  # data.NormalizeFeatureRows: unit L1 rows, float64 sum, float32 scale
        s = np.abs(x.astype(np.float64)).sum(axis=1)
        inv = np.where(s > 0, 1.0 / np.where(s > 0, s, 1.0), 1.0).astype(np.float32)
        x *= inv[:, None]
    return n, classes, indptr, indices, x, y, split, parts


def with_self_loops(n, indptr, indices):
    """data.WithSelfLoops: a self-loop first in every row that lacks one."""
    deg = np.diff(indptr)
    dst = np.repeat(np.arange(n, dtype=np.int64), deg)
    has = np.zeros(n, dtype=bool)
    has[dst[indices == dst]] = True
    missing = (~has).astype(np.int64)
    newptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(deg + missing, out=newptr[1:])
    newidx = np.empty(newptr[-1], dtype=np.int32)
    rows_missing = np.flatnonzero(missing)
    newidx[newptr[rows_missing]] = rows_missing
    shift = np.repeat(newptr[:-1] + missing - indptr[:-1], deg)
    newidx[np.arange(len(indices), dtype=np.int64) + shift] = indices
    return newptr, newidx


def edge_weights(model, n, indptr, indices):
    """gnn.EdgeWeights (in float64, stored as float32) after AggregationFor."""
    deg = np.diff(indptr).astype(np.float64)
    rowdeg = np.repeat(deg, np.diff(indptr))
    if model == "sage":  # Mean
        return (1.0 / rowdeg).astype(np.float32)
    return (1.0 / np.sqrt(rowdeg * deg[indices])).astype(np.float32)  # GCNNorm


def coalesce(n, indptr, indices, val):
    """The same matrix as a valid torch CSR: each row's columns sorted, and
    duplicate edges (which our generator makes, and ours keeps as separate
    entries of the same weight) merged by adding their weights. A X is the
    same up to float32 rounding; torch.sparse_csr_tensor refuses a CSR with
    unsorted or repeated columns."""
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    key = rows * n + indices
    del rows
    if len(key) < 2 or bool(np.all(key[1:] > key[:-1])):
        return indptr, indices, val
    order = np.argsort(key, kind="stable")
    key = key[order]
    val = val[order]
    del order
    first = np.ones(len(key), dtype=bool)
    first[1:] = key[1:] != key[:-1]
    starts = np.flatnonzero(first)
    del first
    if len(starts) < len(key):
        val = np.add.reduceat(val.astype(np.float64), starts).astype(np.float32)
        key = key[starts]
    del starts
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(key // n, minlength=n), out=ptr[1:])
    return ptr, (key % n).astype(np.int32), val


def transpose(n, indptr, indices, val):
    """A^T as CSR, each row's entries in increasing source order."""
    order = np.argsort(indices, kind="stable")
    rows = np.repeat(np.arange(n, dtype=np.int32), np.diff(indptr))
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(indices, minlength=n), out=ptr[1:])
    return ptr, rows[order], val[order]


def csr_tensor(indptr, indices, val, n):
    """torch sparse CSR, float32 values; int32 indices (as ours) while nnz < 2^31."""
    itype = np.int32 if indptr[-1] < 2**31 else np.int64
    return torch.sparse_csr_tensor(torch.from_numpy(np.ascontiguousarray(indptr, dtype=itype)),
                                   torch.from_numpy(np.ascontiguousarray(indices, dtype=itype)),
                                   torch.from_numpy(np.ascontiguousarray(val, dtype=np.float32)),
                                   size=(n, n))


class Aggregate(torch.autograd.Function):
    """A @ X with backward A^T @ dY, both torch sparse CSR x dense products."""

    @staticmethod
    def forward(ctx, a, at, x):
        ctx.at = at
        return a.matmul(x)

    @staticmethod
    def backward(ctx, dy):
        if not ctx.needs_input_grad[2]:
            return None, None, None
        return None, None, ctx.at.matmul(dy)


def set_openblas_threads(n):
    """Debian's torch does its dense products in the system BLAS (OpenBLAS,
    pthread build, the library ours links), whose threads
    torch.set_num_threads does not set."""
    import ctypes
    for lib in ("libopenblas.so.0", "libblas.so.3"):
        try:
            ctypes.CDLL(lib).openblas_set_num_threads(n)
            return
        except (OSError, AttributeError):
            continue


# ---------------------------------------------------------------------------
# Model

def param_names(model, l):
    """gnn.paramNames: (self, neigh, bias)."""
    b = f"layer{l}.bias"
    if model == "sage":
        return f"layer{l}.self_weight", f"layer{l}.neigh_weight", b
    return None, f"layer{l}.weight", b


def dims(in_dim, hidden, classes, layers):
    return [in_dim] + [hidden] * (layers - 1) + [classes]


def init_params(model, d, seed):
    """gnn.NewModel's parameters, in order: per layer self (SAGE), neigh, bias."""
    rng = GoPCG(seed, 0x9e3779b97f4a7c15)
    params = {}
    for l in range(len(d) - 1):
        s, w, b = param_names(model, l)
        for name in (s, w):
            if name is not None:
                params[name] = glorot_like_go(rng, d[l], d[l + 1])
        params[b] = np.zeros((1, d[l + 1]), dtype=np.float32)
    return params


def forward(model, layers, a, at, x, dropout, training):
    h = x
    for l, (ws, wn, b) in enumerate(layers):
        if dropout > 0:
            h = F.dropout(h, dropout, training)
        if wn.shape[1] < wn.shape[0]:  # project first: A (h Wn)
            y = Aggregate.apply(a, at, h @ wn) + b
        else:  # aggregate first: (A h) Wn
            y = torch.addmm(b, Aggregate.apply(a, at, h), wn)
        if ws is not None:
            y = torch.addmm(y, h, ws)
        if l < len(layers) - 1:
            y = torch.relu_(y)
        h = y
    return h


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="a gnn-spmd .h5 dataset")
    ap.add_argument("--split", default=None, help="split name (default: the first in sorted order, as ours)")
    ap.add_argument("--model", default="sage", choices=["sage", "gcn"])
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=300,
                    help="total epochs, as ours: with --init from epoch E, runs epochs E..epochs-1")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--weight-decay", type=float, default=0.0, help="L2 on weights, not biases")
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0, help="Glorot init drawn exactly as gnn-spmd --seed")
    ap.add_argument("--normalize-features", action="store_true")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads and OpenBLAS threads (0: all usable CPUs, as ours)")
    ap.add_argument("--init", default=None, help="start from a gnn-spmd checkpoint (.h5): params, Adam state and step")
    ap.add_argument("--quiet", action="store_true", help="print only the summary line")
    return ap


class Graph:
    """The dataset as tensors: A and A^T (sparse CSR), X, labels, the split."""

    def __init__(self, args):
        n, classes, indptr, indices, xnp, ynp, split, parts = load_dataset(args.data, args.split, args.normalize_features)
        if args.model == "gcn":
            indptr, indices = with_self_loops(n, indptr, indices)
        val = edge_weights(args.model, n, indptr, indices)
        indptr, indices, val = coalesce(n, indptr, indices, val)
        self.a = csr_tensor(indptr, indices, val, n)
        self.at = csr_tensor(*transpose(n, indptr, indices, val), n)
        self.n, self.nnz, self.classes, self.split = n, int(indptr[-1]), classes, split
        self.x = torch.from_numpy(xnp)
        self.y = torch.from_numpy(ynp)
        self.train, self.valid, self.test = (torch.from_numpy(parts[p]) for p in ("train", "valid", "test"))
        self.y_train = self.y[self.train]
        self.dims = dims(self.x.shape[1], args.hidden, classes, args.layers)


def read_checkpoint(path, args, g):
    """Parameters, first epoch, Adam step and moments of one of our checkpoints."""
    with h5py.File(path, "r") as f:
        if f.attrs["format"] != "gnn-spmd-checkpoint":
            sys.exit(f"{path}: not a gnn-spmd-checkpoint file")
        for key, want in (("model", args.model), ("layers", args.layers), ("hidden", args.hidden),
                          ("in_dim", g.dims[0]), ("classes", g.classes)):
            got = f.attrs[key]
            got = got.decode() if isinstance(got, bytes) else got
            if (str(got) if key == "model" else int(got)) != want:
                sys.exit(f"{path}: {key}: checkpoint has {got}, this run {want}")
        for key, mine in (("lr", args.lr), ("weight_decay", args.weight_decay), ("dropout", args.dropout)):
            if float(f.attrs[key]) != mine:
                print(f"warning: {path}: {key} was {float(f.attrs[key])}, this run uses {mine}", file=sys.stderr)
        pnp = {name: ds[...] for name, ds in f["params"].items()}
        start, step, moments = int(f.attrs["epoch"]), 0, None
        if "adam" in f and "adam_step" in f.attrs:
            step = int(f.attrs["adam_step"])
            moments = {name: (f["adam/m"][name][...], f["adam/v"][name][...]) for name in pnp}
    return pnp, start, step, moments


class Trainer:
    def __init__(self, args, g, pnp, step=0, moments=None):
        self.args, self.g = args, g
        self.layers, weights, biases = [], [], []
        for l in range(args.layers):
            ts = []
            for name in param_names(args.model, l):
                if name is None:
                    ts.append(None)
                    continue
                if name not in pnp:
                    sys.exit(f"no parameter {name}")
                arr = np.ascontiguousarray(pnp[name], dtype=np.float32)
                if name.endswith("bias"):
                    arr = arr.reshape(-1)
                t = torch.tensor(arr, requires_grad=True)
                (biases if name.endswith("bias") else weights).append((name, t))
                ts.append(t)
            self.layers.append(tuple(ts))
        self.params = weights + biases
        # Ours keeps lr, betas, eps and weight decay as float32 (gnn.TrainConfig)
        # and computes Adam's bias corrections in float64 from those float32
        # values. torch's Adam takes Python floats: hand it the same float32
        # values. With betas=(0.9, 0.999) as doubles, 1-beta2 and the bias
        # correction 1-beta2^t differ from ours by 1.3e-5 relative (float32(0.999)
        # = 0.99900001287), a small but systematic change of every step.
        f32 = lambda v: float(np.float32(v))
        self.opt = torch.optim.Adam([{"params": [t for _, t in weights], "weight_decay": f32(args.weight_decay)},
                                     {"params": [t for _, t in biases], "weight_decay": 0.0}],
                                    lr=f32(args.lr), betas=(f32(0.9), f32(0.999)), eps=f32(1e-8))
        if moments is not None:
            for name, t in self.params:
                m, v = moments[name]
                self.opt.state[t] = {"step": torch.tensor(float(step)),
                                     "exp_avg": torch.tensor(np.asarray(m, np.float32).reshape(t.shape)),
                                     "exp_avg_sq": torch.tensor(np.asarray(v, np.float32).reshape(t.shape))}

    def count(self, logits):
        g = self.g
        pred = logits.argmax(dim=1)
        return [int((pred[i] == g.y[i]).sum()) for i in (g.train, g.valid, g.test)]

    def loss(self, logits):
        # Ours computes the softmax cross-entropy and its gradient in float64
        # from the float32 logits (kernels.SoftmaxCrossEntropy); so does this.
        # In float32 the loss of a well-fitted model (1e-5) carries a relative
        # error near 1e-3. Cost: train rows x classes, nothing at scale.
        return F.cross_entropy(logits[self.g.train].double(), self.g.y_train)

    def epoch(self, epoch):
        """One training epoch, as gnn.Trainer.Epoch; returns its metrics."""
        args, g = self.args, self.g
        t0 = time.perf_counter()
        if args.dropout > 0:  # ours: a separate evaluation pass when dropout is on
            with torch.no_grad():
                correct = self.count(forward(args.model, self.layers, g.a, g.at, g.x, 0.0, False))
        logits = forward(args.model, self.layers, g.a, g.at, g.x, args.dropout, True)
        if args.dropout == 0:
            with torch.no_grad():
                correct = self.count(logits)
        loss = self.loss(logits)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        with torch.no_grad():
            gnorm = math.sqrt(sum(float(t.grad.double().square().sum()) for _, t in self.params))
        self.opt.step()
        loss_v = float(loss)
        dt = time.perf_counter() - t0
        return {"epoch": epoch, "loss": loss_v, "train_acc": correct[0] / len(g.train),
                "val_acc": correct[1] / len(g.valid), "test_acc": correct[2] / len(g.test),
                "seconds": dt, "grad_norm": gnorm}


def setup_threads(args):
    """--threads T: T OpenMP threads for torch's own kernels and T OpenBLAS
    threads for its dense products; 0 means every CPU this process may use
    (as ours: --threads 0 is GOMAXPROCS, the usable CPUs)."""
    t = args.threads if args.threads > 0 else len(os.sched_getaffinity(0))
    torch.set_num_threads(t)
    set_openblas_threads(t)


def main():
    args = parser().parse_args()
    import_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    setup_threads(args)
    t_load = time.perf_counter()
    g = Graph(args)
    start, step, moments = 0, 0, None
    if args.init:
        pnp, start, step, moments = read_checkpoint(args.init, args, g)
    else:
        pnp = init_params(args.model, g.dims, args.seed)
    if args.epochs <= start:
        sys.exit(f"--epochs {args.epochs}: the run starts at epoch {start}; nothing to do")
    tr = Trainer(args, g, pnp, step, moments)
    del pnp, moments
    load_seconds = time.perf_counter() - t_load

    times = []
    for epoch in range(start, args.epochs):
        st = tr.epoch(epoch)
        times.append(st["seconds"])
        if not args.quiet:
            print(json.dumps(st), flush=True)
        if not math.isfinite(st["loss"]):
            sys.exit(f"epoch {epoch}: loss is {st['loss']}")
    timed = times[1:] if len(times) > 1 else times
    print(json.dumps({"summary": True, "epochs": len(times), "first_epoch": start,
                      "mean_epoch_seconds": sum(timed) / len(timed), "first_epoch_seconds": times[0],
                      "load_seconds": load_seconds,
                      "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                      "import_rss_mb": import_rss,
                      "threads": torch.get_num_threads(), "torch": torch.__version__,
                      "model": args.model, "layers": args.layers, "hidden": args.hidden,
                      "nodes": g.n, "nnz": g.nnz, "split": g.split}), flush=True)


if __name__ == "__main__":
    main()
