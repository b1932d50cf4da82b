#!/usr/bin/python3
"""One-step check of the reference against ours, at every epoch of one of our runs.

For epoch 0 (the weights drawn from --seed, as ours) and for every checkpoint
given (ours after epoch E, with Adam's moments and step), the reference takes
the same state and runs two epochs, E and E+1. It compares with ours' metrics:
  fwd:  the loss at E, a forward pass of identical parameters;
  step: the loss at E+1, after one backward pass and one Adam step of the
        reference from identical state;
  grad: the gradient norm at E (reported only: a ReLU input within rounding
        of zero flips its mask and changes a column of the gradient).
Over many epochs float32 rounding differences grow (a ReLU mask flips, Adam
turns a near-zero gradient into a full step), so whole runs drift apart even
between two builds of ours; one step from the same state does not.

usage: stepcheck.py OURS.jsonl [CHECKPOINT.h5 ...] -- TRAIN.PY-ARGS
exits 1 when a fwd difference exceeds --fwd-tol or a step difference --step-tol.
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train as T  # noqa: E402


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit(__doc__)
    cut = argv.index("--")
    files, rest = argv[:cut], argv[cut + 1:]
    fwd_tol, step_tol, label = 1e-5, 1e-4, "stepcheck"
    while files and files[0].startswith("--"):
        opt, val = files[0], files[1]
        files = files[2:]
        if opt == "--fwd-tol":
            fwd_tol = float(val)
        elif opt == "--step-tol":
            step_tol = float(val)
        elif opt == "--label":
            label = val
        else:
            sys.exit(f"unknown option {opt}")
    ours_path, ckpts = files[0], files[1:]
    ours = {}
    with open(ours_path) as f:
        for line in f:
            r = json.loads(line)
            if not r.get("summary"):
                ours[int(r["epoch"])] = r
    args = T.parser().parse_args(rest)
    T.setup_threads(args)
    g = T.Graph(args)

    starts = [(0, T.init_params(args.model, g.dims, args.seed, args), 0, None)]
    for path in ckpts:
        pnp, e, step, moments = T.read_checkpoint(path, args, g)
        starts.append((e, pnp, step, moments))
    starts.sort(key=lambda s: s[0])

    worst = {"fwd": (0.0, None), "step": (0.0, None), "grad": (0.0, None)}

    def rel(a, b):
        return abs(a - b) / max(abs(a), 1e-30)

    for e, pnp, step, moments in starts:
        if e not in ours:
            continue
        tr = T.Trainer(args, g, pnp, step, moments)
        r0 = tr.epoch(e)
        d = {"fwd": rel(ours[e]["loss"], r0["loss"]), "grad": rel(ours[e]["grad_norm"], r0["grad_norm"])}
        if e + 1 in ours:
            r1 = tr.epoch(e + 1)
            d["step"] = rel(ours[e + 1]["loss"], r1["loss"])
        for k, v in d.items():
            if v > worst[k][0] or worst[k][1] is None:
                worst[k] = (v, e)
    n = len([s for s in starts if s[0] in ours])
    ok = worst["fwd"][0] <= fwd_tol and worst["step"][0] <= step_tol
    print(f"{label}: {n} start states (epoch 0 from --seed{', ' + str(n - 1) + ' checkpoints' if n > 1 else ''}): "
          f"max rel loss diff fwd {worst['fwd'][0]:.2e} (epoch {worst['fwd'][1]}), "
          f"after one step {worst['step'][0]:.2e} (from epoch {worst['step'][1]}); "
          f"max rel grad-norm diff {worst['grad'][0]:.2e} (epoch {worst['grad'][1]}): "
          f"{'ok' if ok else 'FAIL'} (tol fwd {fwd_tol:g}, step {step_tol:g})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
