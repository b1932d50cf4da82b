package main

import (
	"fmt"
	"io"

	"github.com/gnn-spmd/gnn-spmd/gnn/ckpt"
)

func runExport(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("export", "export --checkpoint FILE.h5 [--format npz] --out FILE.npz", stderr)
	in := fs.String("checkpoint", "", "checkpoint written by train --checkpoint")
	format := fs.String("format", "npz", "output format: npz (NumPy: one float32 [rows, cols] array per parameter, named after it)")
	out := fs.String("out", "", "output file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *in == "" || *out == "":
		return usagef("export: --checkpoint and --out are required")
	case *format != "npz":
		return usagef("export: --format: got %q, expected npz", *format)
	}
	c, err := ckpt.Read(*in)
	if err != nil {
		return err
	}
	if err := c.Verify(*in); err != nil {
		return err
	}
	if err := ckpt.WriteNPZ(*out, c.Params); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %d parameters of %s (after epoch %d) to %s\n", len(c.Params), *in, c.Epoch, *out)
	return nil
}
