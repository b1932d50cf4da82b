#!/usr/bin/python3
"""PyTorch reference of gnn-spmd's model, to time our epochs against.

The same maths as gnn/model.go, gnn/local.go, gnn/gat.go, gnn/train.go,
kernels/attention.go and kernels/adam.go, full batch on one process:

  SAGE layer  y = X Ws + A X Wn + b, A[i,j] = 1/indeg(i) (no self-loops added)
  GCN layer   y = A X W + b, self-loops added where missing,
              A[i,j] = 1/sqrt(deg(i) deg(j)) with deg the in-degree after that
  ReLU between layers, none after the last; no dropout by default
  GAT layer   graph attention over A + I (see the GAT section below): heads
              concatenated and ELU in hidden layers, averaged in the last;
              weight decay on W, a_src and a_dst (ours' Decay), not the bias
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
warnings.filterwarnings("ignore", message="scatter_reduce\\(\\) is in beta")

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
# GAT (gnn/gat.go, kernels/attention.go)
#
# Layer l: P = X W (heads*width wide, head after head); per head h the
# source and destination terms s_j = <a_src_h, P_j,h>, t_i = <a_dst_h, P_i,h>;
# for every edge j -> i of A + I (self-loops added where missing, duplicate
# edges kept as separate edges, as ours) the score e = LeakyReLU_0.2(t_i + s_j),
# alpha = softmax of e over i's incoming edges, c = dropout(alpha), and
# out_i,h = sum_j c_ij,h P_j,h. Hidden layers concatenate the heads, add the
# bias and apply ELU; the last layer averages its heads and adds the bias.
#
# The layer is PyG's GATConv in plain torch ops: the scores are gathered per
# edge by source and destination index, the softmax per destination is the
# numerically stable one (shifted by the row maximum), and the output is the
# coefficient-weighted sum of the sources' rows. Three implementations, the
# same maths (--gat-agg):
#   gather   the textbook version, autograd throughout (gat_attention_autograd):
#            P[src] gathered per edge, scaled, summed by destination
#            (scatter_reduce amax, scatter_add, index_add). Autograd keeps
#            E x heads x width floats for the product and as much again for
#            each gradient: 5.4 GB apiece on the 1M-node benchmark graph
#            (21M edges with self-loops, 8 heads of 8). For comparison only.
#   segment  (default) GATAttention, one torch.autograd.Function for softmax
#            and aggregation whose backward is written with torch ops. Edges
#            are in destination order (CSR) and, for the backward, also in
#            source order; everything runs over chunks of about --gat-chunk
#            edges made of whole rows: gather the chunk's source rows of P,
#            scale them in place by the coefficients, and sum each row's run
#            with torch.segment_reduce. The backward gathers g_i by source,
#            takes d(c) = <g_i, P_j> and d(P_j) = sum c g_i from the same
#            rows, then runs the softmax's backward by destination. Only the
#            coefficients, the scores' signs (and dropout factors) are kept,
#            E x heads each, in buffers reused from epoch to epoch.
#   csr      as segment, but the aggregation is a torch sparse CSR matrix per
#            head whose values are the coefficients, times P_h (the backward:
#            its transpose times g_h).
# The README's GAT section gives the times that chose segment.

GAT_SLOPE = 0.2


def gat_heads(args, classes, l):
    """gnn.ModelConfig.gatHeads: (heads, width) of layer l."""
    if l == args.layers - 1:
        return max(1, args.out_heads), classes
    return max(1, args.heads), args.hidden


def sort_rows(n, indptr, indices):
    """Each row's sources in increasing order, duplicates kept (a permutation
    within rows: the softmax and the sums do not depend on it, up to rounding)."""
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    key = rows * n + indices
    if len(key) < 2 or bool(np.all(key[1:] >= key[:-1])):
        return indices
    return np.ascontiguousarray((np.sort(key) % n).astype(np.int32))


def chunk_bounds(ptr, chunk):
    """Node ranges [a, b) of about `chunk` edges each (at least one node)."""
    n, e = len(ptr) - 1, int(ptr[-1])
    cuts = np.searchsorted(ptr, np.arange(chunk, e, chunk), side="right") - 1
    cuts = np.unique(np.concatenate(([0], cuts, [n])))
    return [(int(a), int(b), int(ptr[a]), int(ptr[b])) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]


class GATGraph:
    """A + I as edge lists, by destination (CSR order) and by source."""

    def __init__(self, n, indptr, indices, agg, chunk):
        indices = sort_rows(n, indptr, indices)
        deg = np.diff(indptr)
        self.n, self.nnz, self.agg = n, int(indptr[-1]), agg
        self.lens = torch.from_numpy(deg.astype(np.int64))  # in-degree, >= 1 (self-loops)
        self.dst = torch.from_numpy(np.repeat(np.arange(n, dtype=np.int64), deg))
        self.src = torch.from_numpy(indices.astype(np.int64))
        self.chunks = chunk_bounds(indptr, chunk)
        if agg == "gather":
            return
        # By source: edge k_T = by_src[x], sources ascending, destinations
        # ascending within a source (a stable sort of the CSR order).
        order = np.argsort(indices, kind="stable")
        out_deg = np.bincount(indices, minlength=n).astype(np.int64)  # >= 1 (self-loops)
        ptr_t = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(out_deg, out=ptr_t[1:])
        self.by_src = torch.from_numpy(order.astype(np.int64))
        self.src_lens = torch.from_numpy(out_deg)
        self.dst_by_src = self.dst.index_select(0, self.by_src)
        self.chunks_t = chunk_bounds(ptr_t, chunk)
        if agg != "csr":
            return
        # The CSR needs distinct columns per row: duplicate edges (adjacent
        # now) become one entry whose value is the sum of their coefficients.
        rows = np.repeat(np.arange(n, dtype=np.int64), deg)
        first = np.ones(len(indices), dtype=bool)
        first[1:] = (indices[1:] != indices[:-1]) | (rows[1:] != rows[:-1])
        starts = np.flatnonzero(first)
        del first
        self.run_lens = None
        if len(starts) < len(indices):
            self.run_lens = torch.from_numpy(np.diff(np.append(starts, len(indices))).astype(np.int64))
        mrows = rows[starts]
        del rows
        mcol = indices[starts]
        mptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(mrows, minlength=n), out=mptr[1:])
        itype = np.int32 if len(mcol) < 2**31 else np.int64
        self.crow = torch.from_numpy(mptr.astype(itype))
        self.col = torch.from_numpy(mcol.astype(itype))
        torder = np.argsort(mcol, kind="stable")
        tptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(mcol, minlength=n), out=tptr[1:])
        self.crow_t = torch.from_numpy(tptr.astype(itype))
        self.col_t = torch.from_numpy(mrows[torder].astype(itype))
        self.perm_t = torch.from_numpy(torder.astype(np.int64))

    def merge(self, c):
        """Per-edge values (E x heads) -> per CSR entry (duplicates summed)."""
        return c if self.run_lens is None else torch.segment_reduce(c, "sum", lengths=self.run_lens, axis=0)


def csr_heads(crow, col, vals, x, heads, width, n):
    """out[:, h] = CSR(crow, col, vals[h]) @ x[:, h] for each head h."""
    out = torch.empty(n, heads * width)
    for h in range(heads):
        a = torch.sparse_csr_tensor(crow, col, vals[h], size=(n, n))
        out[:, h * width:(h + 1) * width] = a.matmul(x[:, h * width:(h + 1) * width].contiguous())
    return out


class GATWorkspace:
    """One layer's per-edge buffers, kept from epoch to epoch (E x heads):
    the coefficients, the scores' signs, the dropout factors and the
    coefficients' gradients. Fresh tensors of that size cost page faults on
    every epoch (the forward's values must live until the backward anyway)."""

    def __init__(self):
        self.bufs = {}

    def get(self, name, shape, dtype=torch.float32):
        b = self.bufs.get(name)
        if b is None or b.shape != shape or b.dtype != dtype:
            b = self.bufs[name] = torch.empty(shape, dtype=dtype)
        return b


class GATAttention(torch.autograd.Function):
    """Softmax over each destination's edges and the coefficient-weighted sum.

    p: N x heads*width (the projected features); st: N x 2*heads, the source
    terms then the destination terms. Returns N x heads*width (heads
    concatenated) or N x width (mean: averaged). Runs over chunks of about
    --gat-chunk edges (whole destinations, or whole sources), so that every
    temporary is chunk-sized; keeps the coefficients (E x heads), the scores'
    signs and the dropout factors in ws for the backward."""

    @staticmethod
    def forward(ctx, p, st, gg, ws, heads, width, mean, attn_dropout, training):
        n, e = gg.n, gg.nnz
        s, t = st[:, :heads].contiguous(), st[:, heads:].contiguous()
        alpha = ws.get("alpha", (e, heads))
        pos = ws.get("pos", (e, heads), torch.bool)
        drop = training and attn_dropout > 0
        keep = ws.get("keep", (e, heads)) if drop else None
        seg = gg.agg == "segment"
        out = torch.empty(n, heads * width)
        for a, b, k0, k1 in gg.chunks:
            ln = gg.lens[a:b]
            z = s.index_select(0, gg.src[k0:k1])
            z += t[a:b].repeat_interleave(ln, dim=0)
            torch.gt(z, 0, out=pos[k0:k1])
            F.leaky_relu_(z, GAT_SLOPE)
            z -= torch.segment_reduce(z, "max", lengths=ln, axis=0).repeat_interleave(ln, dim=0)
            z.exp_()
            z /= torch.segment_reduce(z, "sum", lengths=ln, axis=0).repeat_interleave(ln, dim=0)
            alpha[k0:k1] = z
            if drop:
                kp = keep[k0:k1]
                kp.bernoulli_(1 - attn_dropout).mul_(1 / (1 - attn_dropout))
                z *= kp
            if seg:
                rows = p.index_select(0, gg.src[k0:k1])
                rows.view(-1, heads, width).mul_(z.unsqueeze(2))
                out[a:b] = torch.segment_reduce(rows, "sum", lengths=ln, axis=0)
        if not seg:  # csr: per head, the coefficients as a sparse matrix's values
            c = alpha * keep if drop else alpha
            out = csr_heads(gg.crow, gg.col, gg.merge(c).t().contiguous(), p, heads, width, n)
            del c
        if mean and heads > 1:
            out = out.view(n, heads, width).mean(1)
        ctx.save_for_backward(p)
        ctx.gg, ctx.ws, ctx.drop = gg, ws, drop
        ctx.dims = (heads, width, mean)
        return out

    @staticmethod
    def backward(ctx, dout):
        (p,) = ctx.saved_tensors
        gg, ws, drop = ctx.gg, ctx.ws, ctx.drop
        heads, width, mean = ctx.dims
        n, e = gg.n, gg.nnz
        alpha, pos = ws.get("alpha", (e, heads)), ws.get("pos", (e, heads), torch.bool)
        keep = ws.get("keep", (e, heads)) if drop else None
        dout = dout.contiguous()
        if mean and heads > 1:  # every head gets d(out) / heads
            g = (dout / heads).unsqueeze(1).expand(n, heads, width).reshape(n, heads * width)
        else:
            g = dout
        # d(c_k) = <g_i, P_j> per head for edge k = (j -> i), into dc, and
        # d(P_j) = sum over j's edges of c_k g_i.
        dc = ws.get("dc", (e, heads))
        if gg.agg == "segment":  # by source: j's edges are a run
            dp = torch.empty(n, heads * width)
            for a, b, k0, k1 in gg.chunks_t:
                ln = gg.src_lens[a:b]
                edges = gg.by_src[k0:k1]
                gi = g.index_select(0, gg.dst_by_src[k0:k1])
                pj = p[a:b].repeat_interleave(ln, dim=0)
                pj.mul_(gi)
                dc.index_copy_(0, edges, pj.view(-1, heads, width).sum(2))
                c = alpha.index_select(0, edges)
                if drop:
                    c *= keep.index_select(0, edges)
                gi.view(-1, heads, width).mul_(c.unsqueeze(2))
                dp[a:b] = torch.segment_reduce(gi, "sum", lengths=ln, axis=0)
        else:  # csr: d(c) by destination chunks, d(P) = A_c^T g per head
            for a, b, k0, k1 in gg.chunks:
                gi = g[a:b].repeat_interleave(gg.lens[a:b], dim=0)
                gi.mul_(p.index_select(0, gg.src[k0:k1]))
                torch.sum(gi.view(-1, heads, width), 2, out=dc[k0:k1])
            c = alpha * keep if drop else alpha
            dp = csr_heads(gg.crow_t, gg.col_t, gg.merge(c).index_select(0, gg.perm_t).t().contiguous(), g, heads, width, n)
            del c
        # By destination: dropout, the softmax's
        # d(e_k) = alpha_k (d(alpha_k) - sum_l alpha_l d(alpha_l)), LeakyReLU';
        # dz (in dc) and d(t) = sum of the row's dz.
        dst_ = torch.empty(n, 2 * heads)
        for a, b, k0, k1 in gg.chunks:
            ln = gg.lens[a:b]
            da = dc[k0:k1]
            if drop:
                da *= keep[k0:k1]
            al = alpha[k0:k1]
            dot = torch.segment_reduce(al * da, "sum", lengths=ln, axis=0)
            da -= dot.repeat_interleave(ln, dim=0)
            da *= al
            da *= pos[k0:k1].to(torch.float32).mul_(1 - GAT_SLOPE).add_(GAT_SLOPE)  # LeakyReLU': 1 or the slope
            dst_[a:b, heads:] = torch.segment_reduce(da, "sum", lengths=ln, axis=0)
        # d(s_j) = sum of dz over j's edges, by source.
        for a, b, k0, k1 in gg.chunks_t:
            dst_[a:b, :heads] = torch.segment_reduce(dc.index_select(0, gg.by_src[k0:k1]), "sum",
                                                    lengths=gg.src_lens[a:b], axis=0)
        return dp, dst_, None, None, None, None, None, None, None


def gat_attention_autograd(p, s, t, gg, heads, width, mean, attn_dropout, training):
    """The textbook version (PyG's GATConv with torch ops), autograd throughout."""
    n = gg.n
    e = F.leaky_relu(s.index_select(0, gg.src) + t.index_select(0, gg.dst), GAT_SLOPE)
    idx = gg.dst.view(-1, 1).expand(-1, heads)
    m = torch.full((n, heads), -math.inf).scatter_reduce(0, idx, e.detach(), "amax", include_self=True)
    ex = (e - m.index_select(0, gg.dst)).exp()
    den = torch.zeros(n, heads).scatter_add(0, idx, ex)
    alpha = ex / den.index_select(0, gg.dst)
    alpha = F.dropout(alpha, attn_dropout, training)
    msg = p.view(n, heads, width).index_select(0, gg.src) * alpha.unsqueeze(-1)
    out = torch.zeros(n, heads, width).index_add(0, gg.dst, msg)
    return out.mean(1) if mean else out.view(n, heads * width)


def attention_terms(a_src, a_dst):
    """The heads*width x 2*heads matrix M with P M = [s | t]: block-diagonal
    columns, a_src_h in column h and a_dst_h in column heads+h."""
    return torch.cat([torch.block_diag(*a_src.unsqueeze(2)), torch.block_diag(*a_dst.unsqueeze(2))], 1)


def gat_forward(layers, gg, x, args, dropout, training, ws):
    h = x
    for l, (w, a_src, a_dst, b) in enumerate(layers):
        heads, width = a_src.shape
        last = l == len(layers) - 1
        if dropout > 0:
            h = F.dropout(h, dropout, training)
        p = h @ w
        st = p @ attention_terms(a_src, a_dst)
        if gg.agg == "gather":
            y = gat_attention_autograd(p, st[:, :heads], st[:, heads:], gg, heads, width, last, args.attn_dropout, training)
        else:
            y = GATAttention.apply(p, st, gg, ws[l], heads, width, last, args.attn_dropout, training)
        y = y + b
        if not last:
            y = F.elu(y)
        h = y
    return h


# ---------------------------------------------------------------------------
# Model

def param_names(model, l):
    """gnn.paramNames: (self, neigh, bias); GAT (gatParamShapes): weight, attn_src, attn_dst, bias."""
    b = f"layer{l}.bias"
    if model == "sage":
        return f"layer{l}.self_weight", f"layer{l}.neigh_weight", b
    if model == "gat":
        return f"layer{l}.weight", f"layer{l}.attn_src", f"layer{l}.attn_dst", b
    return None, f"layer{l}.weight", b


def dims(in_dim, hidden, classes, layers, model="sage", heads=1):
    """gnn.ModelConfig.Dims: GAT's hidden layers are heads*hidden wide."""
    h = hidden * max(1, heads) if model == "gat" else hidden
    return [in_dim] + [h] * (layers - 1) + [classes]


def init_params(model, d, seed, args=None):
    """gnn.NewModel's parameters, in order: per layer self (SAGE), neigh, bias;
    GAT (newGAT): the weight Glorot over (in, heads*width), then attn_src and
    attn_dst, each uniform in +-sqrt(6/(width+1)) drawn row-major as
    (2*Float64()-1)*bound, then the zero bias."""
    rng = GoPCG(seed, 0x9e3779b97f4a7c15)
    params = {}
    if model == "gat":
        for l in range(len(d) - 1):
            heads, width = gat_heads(args, d[-1], l)
            w, a_src, a_dst, b = param_names(model, l)
            params[w] = glorot_like_go(rng, d[l], heads * width)
            bound = math.sqrt(6.0 / (width + 1))
            for name in (a_src, a_dst):
                u = np.fromiter((rng.float64() for _ in range(heads * width)), dtype=np.float64, count=heads * width)
                params[name] = ((2.0 * u - 1.0) * bound).astype(np.float32).reshape(heads, width)
            params[b] = np.zeros((1, d[l + 1]), dtype=np.float32)
        return params
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
    ap.add_argument("--model", default="sage", choices=["sage", "gcn", "gat"])
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=300,
                    help="total epochs, as ours: with --init from epoch E, runs epochs E..epochs-1")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--weight-decay", type=float, default=0.0, help="L2 on weights, not biases")
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--heads", type=int, default=1, help="GAT: heads of every hidden layer, concatenated (each --hidden wide)")
    ap.add_argument("--out-heads", type=int, default=1, help="GAT: heads of the output layer, averaged")
    ap.add_argument("--attn-dropout", type=float, default=0.0, help="GAT: dropout on the attention coefficients")
    ap.add_argument("--gat-agg", default="segment", choices=["segment", "csr", "gather"],
                    help="GAT: how the attention layer aggregates (see the GAT section); all give the same maths")
    ap.add_argument("--gat-chunk", type=int, default=1 << 16, help="GAT segment/csr: edges per chunk")
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
        if args.model != "gat" and (args.heads > 1 or args.out_heads > 1 or args.attn_dropout != 0):
            sys.exit(f"--heads, --out-heads and --attn-dropout apply to model gat, not {args.model}")
        if args.model in ("gcn", "gat"):
            indptr, indices = with_self_loops(n, indptr, indices)
        self.a = self.at = self.gat = None
        if args.model == "gat":
            self.gat = GATGraph(n, indptr, indices, args.gat_agg, args.gat_chunk)
        else:
            val = edge_weights(args.model, n, indptr, indices)
            indptr, indices, val = coalesce(n, indptr, indices, val)
            self.a = csr_tensor(indptr, indices, val, n)
            self.at = csr_tensor(*transpose(n, indptr, indices, val), n)
        self.n, self.nnz, self.classes, self.split = n, int(indptr[-1]), classes, split
        self.x = torch.from_numpy(xnp)
        self.y = torch.from_numpy(ynp)
        self.train, self.valid, self.test = (torch.from_numpy(parts[p]) for p in ("train", "valid", "test"))
        self.y_train = self.y[self.train]
        self.dims = dims(self.x.shape[1], args.hidden, classes, args.layers, args.model, args.heads)


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
        if args.model == "gat":
            for key, want in (("heads", max(1, args.heads)), ("out_heads", max(1, args.out_heads))):
                got = max(1, int(f.attrs.get(key, 1)))
                if got != want:
                    sys.exit(f"{path}: {key}: checkpoint has {got}, this run {want}")
        for key, mine in (("lr", args.lr), ("weight_decay", args.weight_decay), ("dropout", args.dropout),
                          ("attn_dropout", args.attn_dropout)):
            if key not in f.attrs:
                continue
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
        self.ws = [GATWorkspace() for _ in range(args.layers)] if args.model == "gat" else None
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

    def forward(self, dropout, training):
        args, g = self.args, self.g
        if args.model == "gat":
            return gat_forward(self.layers, g.gat, g.x, args, dropout, training, self.ws)
        return forward(args.model, self.layers, g.a, g.at, g.x, dropout, training)

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
        separate = args.dropout > 0 or args.attn_dropout > 0
        if separate:  # ours: a separate evaluation pass when dropout is on
            with torch.no_grad():
                correct = self.count(self.forward(0.0, False))
        logits = self.forward(args.dropout, True)
        if not separate:
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
        pnp = init_params(args.model, g.dims, args.seed, args)
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
                      **({"heads": args.heads, "out_heads": args.out_heads, "attn_dropout": args.attn_dropout,
                          "gat_agg": args.gat_agg} if args.model == "gat" else {}),
                      "nodes": g.n, "nnz": g.nnz, "split": g.split}), flush=True)


if __name__ == "__main__":
    main()
