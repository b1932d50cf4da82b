#!/usr/bin/env python3
"""PyG on one GPU: the epoch time of 3-layer GraphSAGE full batch, to time
our GPU build against (scripts/gpu-pyg.sh runs both on the same file).

The model is torch_geometric's SAGEConv with the mean aggregator, i.e.
y = lin_l(mean_j x_j) + lin_r(x_i), lin_l with the bias: the same maths as
ours (gnn/model.go: y = X Ws + A X Wn + b, A[i,j] = 1/indeg(i)), ReLU
between layers, mean softmax cross-entropy over the split's training nodes,
torch.optim.Adam(lr 0.01), no dropout. Weights are PyG's own initialisation:
this times epochs, it does not compare losses (bench/reference/train.py
does that, on the CPU).

--adj csr gives the convolutions a torch sparse CSR adjacency (rows the
destinations: our file's CSR as it is), PyG's sparse-matrix path;
--adj edge_index gives them the edge list, PyG's gather/scatter path.

Epoch time covers forward, loss, backward and the optimizer step, between
two torch.cuda.synchronize() calls. Output: one JSON line per epoch, then a
summary line: the mean epoch time without the first epoch, and the peak
device memory torch allocated and reserved.
"""

import argparse
import json
import sys
import time

import h5py
import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.nn import SAGEConv


def load(path, split):
    """The graph (CSR), features, labels and the split's node lists of a
    gnn-spmd dataset file (the first split unless one is named)."""
    with h5py.File(path, "r") as f:
        if f.attrs["format"] != "gnn-spmd-dataset":
            sys.exit(f"{path}: not a gnn-spmd-dataset file")
        n = int(f.attrs["num_nodes"])
        classes = int(f.attrs["num_classes"])
        indptr = f["graph/indptr"][...].astype(np.int64)
        indices = f["graph/indices"][...].astype(np.int64)
        x = np.ascontiguousarray(f["node/features"][...], dtype=np.float32)
        y = f["node/labels"][...].astype(np.int64)
        split = split or sorted(f["splits"].keys())[0]
        s = f["splits"][split]
        parts = {k: s[k][...].astype(np.int64) for k in ("train", "valid", "test")}
    return n, classes, indptr, indices, x, y, parts


class SAGE(torch.nn.Module):
    def __init__(self, fin, hidden, classes, layers):
        super().__init__()
        widths = [fin] + [hidden] * (layers - 1) + [classes]
        self.convs = torch.nn.ModuleList(
            SAGEConv(a, b, aggr="mean") for a, b in zip(widths[:-1], widths[1:]))

    def forward(self, x, adj):
        for i, conv in enumerate(self.convs):
            x = conv(x, adj)
            if i < len(self.convs) - 1:
                x = F.relu(x)
        return x


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--split")
    p.add_argument("--adj", choices=["csr", "edge_index"], default="csr")
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.01)
    a = p.parse_args()

    dev = torch.device("cuda")
    t0 = time.perf_counter()
    n, classes, indptr, indices, x, y, parts = load(a.data, a.split)
    train = np.sort(parts["train"])
    if a.adj == "csr":
        adj = torch.sparse_csr_tensor(torch.from_numpy(indptr), torch.from_numpy(indices),
                                      torch.ones(len(indices)), size=(n, n)).to(dev)
    else:
        dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
        adj = torch.from_numpy(np.stack([indices, dst])).to(dev)
        del dst
    x = torch.from_numpy(x).to(dev)
    y = torch.from_numpy(y).to(dev)
    train = torch.from_numpy(train).to(dev)
    load_s = time.perf_counter() - t0

    torch.manual_seed(0)
    model = SAGE(x.shape[1], a.hidden, classes, a.layers).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for epoch in range(a.epochs):
        torch.cuda.synchronize()
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        out = model(x, adj)
        loss = F.cross_entropy(out[train], y[train])
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        dt = time.perf_counter() - t
        times.append(dt)
        print(json.dumps({"epoch": epoch, "loss": loss.item(), "seconds": dt}), flush=True)
    timed = times[1:] or times
    print(json.dumps({
        "summary": True, "adj": a.adj, "nodes": n, "edges": len(indices),
        "mean_epoch_seconds": sum(timed) / len(timed), "first_epoch_seconds": times[0],
        "load_seconds": load_s,
        "peak_allocated_mib": torch.cuda.max_memory_allocated() / 2**20,
        "peak_reserved_mib": torch.cuda.max_memory_reserved() / 2**20,
        "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}), flush=True)


if __name__ == "__main__":
    main()
