#!/usr/bin/env python3
"""PyG mini-batch training on one GPU, to a target test accuracy: the
time-to-accuracy baseline for our full-graph training (scripts/gpu-pyg.sh
race runs both on the same file and GPU).

The model is pyg_gpu.py's: torch_geometric's SAGEConv with the mean
aggregator, ReLU between layers, Adam, no dropout, the same depth and
width as ours. Training is GraphSAGE's mini-batch scheme: batches of
--batch training nodes, each layer's neighbours sampled with the fanouts
of --fanouts (PyG's order: the first is the batch's own neighbours), the
loss on the batch's nodes. Every --eval-every batches the model is
evaluated on the whole graph (full neighbourhoods, as our test accuracy
is), and training stops once the test accuracy reaches --target, or after
--time-limit seconds of training.

The sampler: torch_geometric.loader.NeighborLoader, which needs pyg-lib or
torch-sparse; without either (or with --sampler torch) this script's own
uniform sampler on the GPU (each node's neighbours drawn with replacement,
repeats dropped, so a node keeps at most fanout distinct neighbours). The
output names the one used.

Time to target counts the training batches (sampling, loading and steps,
between torch.cuda.synchronize() calls), not the evaluations; the wall
time with evaluations is printed beside it. Output: a JSON line per
evaluation, then a summary line.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import h5py  # noqa: F401  pyg_gpu's reader needs it; said here in one line
except ImportError:
    sys.exit("pyg_minibatch.py: needs h5py to read the gnn-spmd dataset file (pip install h5py)")
from pyg_gpu import SAGE, load  # noqa: E402  the same model and reader as the full-batch timing


class TorchSampler:
    """Uniform neighbour sampling on the GPU from the CSR (rows the
    destinations, as in our file): per layer, fanout draws with replacement
    per frontier node, repeats dropped. Gives the sampled nodes (the batch
    first) and the edges among them, relabelled, source row first."""

    def __init__(self, n, indptr, indices, fanouts, dev):
        self.rowptr = torch.from_numpy(indptr).to(dev)
        self.col = torch.from_numpy(indices).to(dev)
        self.fanouts = fanouts
        self.local = torch.full((n,), -1, dtype=torch.int64, device=dev)
        self.dev = dev

    def __call__(self, seeds):
        local, nodes, frontier = self.local, seeds, seeds
        local[seeds] = torch.arange(len(seeds), device=self.dev)
        src_all, dst_all = [], []
        for k in self.fanouts:
            start = self.rowptr[frontier]
            deg = self.rowptr[frontier + 1] - start
            has = deg > 0
            start, deg, dst = start[has], deg[has], frontier[has]
            pick = start[:, None] + (torch.rand(len(dst), k, device=self.dev) * deg[:, None]).long()
            src = self.col[pick].reshape(-1)
            dst = dst[:, None].expand(-1, k).reshape(-1)
            new = torch.unique(src[local[src] < 0])
            local[new] = torch.arange(len(nodes), len(nodes) + len(new), device=self.dev)
            nodes = torch.cat([nodes, new])
            frontier = new
            src_all.append(local[src])
            dst_all.append(local[dst])
        local[nodes] = -1
        src, dst = torch.cat(src_all), torch.cat(dst_all)
        key = torch.unique(dst * len(nodes) + src)
        return nodes, torch.stack([key % len(nodes), key // len(nodes)])


def batches_pyg(n, indptr, indices, train, fanouts, batch, workers):
    """NeighborLoader over the graph's structure only: the features stay on
    the GPU and are gathered there by the batch's n_id."""
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader
    import torch_geometric.typing as tgt
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    data = Data(edge_index=torch.from_numpy(np.stack([indices, dst])), num_nodes=n)
    del dst
    loader = NeighborLoader(data, num_neighbors=fanouts, batch_size=batch, input_nodes=torch.from_numpy(train),
                            shuffle=True, num_workers=workers, persistent_workers=workers > 0)
    name = "pyg-lib" if getattr(tgt, "WITH_PYG_LIB", False) else "torch-sparse"
    return loader, name


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--split")
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--fanouts", default="15,10,5", help="neighbours per layer, the batch's own first")
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--target", type=float, required=True, help="test accuracy to reach (a fraction)")
    p.add_argument("--time-limit", type=float, default=180, help="seconds of training at most")
    p.add_argument("--eval-every", type=int, default=100, help="batches between evaluations")
    p.add_argument("--sampler", choices=["auto", "pyg", "torch"], default="auto")
    p.add_argument("--workers", type=int, default=4, help="NeighborLoader's sampling processes")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    fanouts = [int(v) for v in a.fanouts.split(",")]
    if len(fanouts) != a.layers:
        sys.exit(f"--fanouts has {len(fanouts)} values for {a.layers} layers")

    dev = torch.device("cuda")
    torch.manual_seed(a.seed)
    t0 = time.perf_counter()
    n, classes, indptr, indices, x, y, parts = load(a.data, a.split)
    xg = torch.from_numpy(x).to(dev)
    yg = torch.from_numpy(y).to(dev)
    test = torch.from_numpy(parts["test"]).to(dev)
    valid = torch.from_numpy(parts["valid"]).to(dev)
    train = parts["train"]
    # Evaluation: the whole graph at once, PyG's sparse-matrix path (rows
    # the destinations), as pyg_gpu.py --adj csr trains.
    adj = torch.sparse_csr_tensor(torch.from_numpy(indptr), torch.from_numpy(indices),
                                  torch.ones(len(indices)), size=(n, n)).to(dev)
    del x

    loader, sampler = None, None
    if a.sampler in ("auto", "pyg"):
        try:
            loader, sampler = batches_pyg(n, indptr, indices, train, fanouts, a.batch, a.workers)
            next(iter(loader))  # without pyg-lib and torch-sparse the first batch raises
        except Exception as e:  # noqa: BLE001  any failure of the optional backends: fall back
            if a.sampler == "pyg":
                sys.exit(f"NeighborLoader failed: {e}")
            print(json.dumps({"note": f"NeighborLoader unusable ({e}); this script's GPU sampler instead"}), flush=True)
            loader = None
    if loader is None:
        sampler = "torch (GPU, uniform with replacement, repeats dropped)"
        sample = TorchSampler(n, indptr, indices, fanouts, dev)
        traing = torch.from_numpy(train).to(dev)

        def torch_batches():
            perm = traing[torch.randperm(len(traing), device=dev)]
            for i in range(0, len(perm), a.batch):
                seeds = perm[i:i + a.batch]
                nodes, ei = sample(seeds)
                yield nodes, ei, len(seeds)
        epoch_batches = torch_batches
    else:
        def pyg_batches():
            for b in loader:
                yield b.n_id.to(dev, non_blocking=True), b.edge_index.to(dev, non_blocking=True), b.batch_size
        epoch_batches = pyg_batches
    setup_s = time.perf_counter() - t0
    print(json.dumps({"sampler": sampler, "setup_seconds": setup_s, "nodes": n, "edges": len(indices),
                      "train_nodes": len(train), "fanouts": fanouts, "batch": a.batch}), flush=True)

    model = SAGE(xg.shape[1], a.hidden, classes, a.layers).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)

    def evaluate():
        model.eval()
        with torch.no_grad():
            pred = model(xg, adj).argmax(1)
        model.train()
        acc = lambda idx: (pred[idx] == yg[idx]).float().mean().item()  # noqa: E731
        return acc(valid), acc(test)

    train_s, wall0, steps, epoch, best = 0.0, time.perf_counter(), 0, 0, 0.0
    reached, loss = None, float("nan")
    while reached is None and train_s < a.time_limit:
        it = epoch_batches()
        while True:
            torch.cuda.synchronize()
            t = time.perf_counter()
            b = next(it, None)
            if b is None:
                break
            nodes, ei, size = b
            opt.zero_grad(set_to_none=True)
            out = model(xg[nodes], ei)[:size]
            lossv = F.cross_entropy(out, yg[nodes[:size]])
            lossv.backward()
            opt.step()
            torch.cuda.synchronize()
            train_s += time.perf_counter() - t
            steps += 1
            if steps % a.eval_every == 0:
                loss = lossv.item()
                val, tst = evaluate()
                best = max(best, tst)
                print(json.dumps({"epoch": epoch, "batches": steps, "loss": loss, "val_acc": val, "test_acc": tst,
                                  "train_seconds": train_s, "wall_seconds": time.perf_counter() - wall0}), flush=True)
                if tst >= a.target:
                    reached = (train_s, time.perf_counter() - wall0, epoch, steps)
                    break
                if train_s >= a.time_limit:
                    break
        epoch += 1
    print(json.dumps({
        "summary": True, "sampler": sampler, "target": a.target, "reached": reached is not None,
        "seconds_to_target": reached[0] if reached else None,
        "wall_seconds_to_target": reached[1] if reached else None,
        "epochs": (reached[2] + 1) if reached else epoch, "batches": reached[3] if reached else steps,
        "best_test_acc": best, "train_seconds": train_s, "setup_seconds": setup_s,
        "peak_allocated_mib": torch.cuda.max_memory_allocated() / 2**20,
        "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}), flush=True)


if __name__ == "__main__":
    main()
