// Command h5toogb writes a dataset file as an OGB-layout directory (plain
// .csv files), so that convert can be measured on graphs of any size:
//
//	go run ./scripts/h5toogb IN.h5 OUTDIR
//
// A measuring aid, not part of the product: the edges come out by
// destination row (the order convert's CSR reads back), the features with
// the shortest decimals that read back as the same float32.
package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/gnn-spmd/gnn-spmd/data/datafile"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: h5toogb IN.h5 OUTDIR")
		os.Exit(2)
	}
	ds, err := datafile.Read(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out := os.Args[2]
	write := func(name string, fill func(w *bufio.Writer)) {
		p := filepath.Join(out, name+".csv")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			panic(err)
		}
		f, err := os.Create(p)
		if err != nil {
			panic(err)
		}
		w := bufio.NewWriterSize(f, 4<<20)
		fill(w)
		if err := w.Flush(); err != nil {
			panic(err)
		}
		if err := f.Close(); err != nil {
			panic(err)
		}
	}
	g := ds.Graph
	write("raw/num-node-list", func(w *bufio.Writer) { fmt.Fprintln(w, g.N) })
	write("raw/num-edge-list", func(w *bufio.Writer) { fmt.Fprintln(w, g.NumEdges()) })
	write("raw/edge", func(w *bufio.Writer) {
		var b []byte
		for d := 0; d < g.N; d++ {
			for _, s := range g.Indices[g.Indptr[d]:g.Indptr[d+1]] {
				b = strconv.AppendInt(b[:0], int64(s), 10)
				b = append(b, ',')
				b = strconv.AppendInt(b, int64(d), 10)
				b = append(b, '\n')
				w.Write(b)
			}
		}
	})
	write("raw/node-label", func(w *bufio.Writer) {
		for _, y := range ds.Labels {
			fmt.Fprintln(w, y)
		}
	})
	if f := ds.NumFeatures; f > 0 {
		write("raw/node-feat", func(w *bufio.Writer) {
			var b []byte
			for i := 0; i < g.N; i++ {
				b = b[:0]
				for j, v := range ds.Features[i*f : (i+1)*f] {
					if j > 0 {
						b = append(b, ',')
					}
					b = strconv.AppendFloat(b, float64(v), 'g', -1, 32)
				}
				b = append(b, '\n')
				w.Write(b)
			}
		})
	}
	for name, sp := range ds.Splits {
		for part, ids := range map[string][]int32{"train": sp.Train, "valid": sp.Valid, "test": sp.Test} {
			write("split/"+name+"/"+part, func(w *bufio.Writer) {
				for _, id := range ids {
					fmt.Fprintln(w, id)
				}
			})
		}
	}
}
