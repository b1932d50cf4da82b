#!/usr/bin/python3
"""Compare the per-epoch loss of our --metrics JSONL with the reference's output.

usage: compare.py OURS.jsonl OTHER.jsonl LABEL [TOL]
Prints one line: the largest relative loss and gradient-norm differences over
the epochs both files hold. Exits 1 when they share no epoch, or when TOL is
given and the loss difference exceeds it.
"""
import json
import sys


def rows(path):
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if "epoch" in r and "loss" in r and not r.get("summary"):
                out[int(r["epoch"])] = r
    return out


def main():
    ours_path, ref_path, label = sys.argv[1], sys.argv[2], sys.argv[3]
    tol = float(sys.argv[4]) if len(sys.argv) > 4 else None
    ours, ref = rows(ours_path), rows(ref_path)
    common = sorted(set(ours) & set(ref))
    if not common:
        print(f"{label}: FAIL: no common epochs ({ours_path}: {len(ours)}, {ref_path}: {len(ref)})")
        sys.exit(1)
    worst, worst_e = -1.0, None
    gworst = 0.0
    acc_diff = 0
    for e in common:
        lo, lr = ours[e]["loss"], ref[e]["loss"]
        d = abs(lo - lr) / max(abs(lo), 1e-30)
        if d > worst:
            worst, worst_e = d, e
        if "grad_norm" in ours[e] and "grad_norm" in ref[e]:
            go, gr = ours[e]["grad_norm"], ref[e]["grad_norm"]
            gworst = max(gworst, abs(go - gr) / max(abs(go), 1e-30))
        acc_diff = max(acc_diff, *(abs(ours[e][k] - ref[e][k]) for k in ("train_acc", "val_acc", "test_acc")))
    ok = tol is None or worst <= tol
    verdict = "" if tol is None else f": {'ok' if ok else 'FAIL'} (tol {tol:g})"
    first, last = common[0], common[-1]
    print(f"{label}: epochs {first}-{last}: max rel loss diff {worst:.2e} (epoch {worst_e}; "
          f"loss {ours[worst_e]['loss']:.6g} vs {ref[worst_e]['loss']:.6g}), "
          f"max rel grad-norm diff {gworst:.2e}, max accuracy diff {acc_diff:.4f}, "
          f"final loss {ours[last]['loss']:.6g} vs {ref[last]['loss']:.6g}{verdict}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
