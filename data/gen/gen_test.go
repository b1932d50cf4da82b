package gen

import (
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/internal/datatest"
	"github.com/gnn-spmd/gnn-spmd/data/partition"
)

func mustGenerate(t testing.TB, opt Options) *data.Dataset {
	t.Helper()
	ds, err := Generate(opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.Validate("generated"); err != nil {
		t.Fatal(err)
	}
	return ds
}

// The output depends on the seed only, not on the number of workers: several
// blocks of genBlock nodes, generated with 1 and with 4 workers.
func TestGenDeterministicAcrossWorkers(t *testing.T) {
	opt := Options{Nodes: 3*genBlock + 1234, Classes: 7, AvgDegree: 5, Homophily: 0.6, Features: 6, SNR: 1.5, Seed: 42}
	one := generateOnWorkers(t, opt)
	opt.Seed++
	other := mustGenerate(t, opt)
	if slices.Equal(one.Labels, other.Labels) || slices.Equal(one.Graph.Indices, other.Graph.Indices) {
		t.Error("a different seed gave the same labels or edges")
	}
}

// edgeStats returns E/N and the fraction of edges whose endpoints share a class.
func edgeStats(ds *data.Dataset) (avgDeg, homophily float64) {
	g := ds.Graph
	same := 0
	for i := 0; i < g.N; i++ {
		for _, s := range g.Indices[g.Indptr[i]:g.Indptr[i+1]] {
			if ds.Labels[s] == ds.Labels[i] {
				same++
			}
		}
	}
	e := float64(g.NumEdges())
	return e / float64(g.N), float64(same) / e
}

func TestGenEdgesAndHomophily(t *testing.T) {
	for _, tc := range []struct {
		deg, h  float64
		classes int
	}{
		{10, 0.0, 5}, {10, 0.3, 5}, {16, 0.8, 5}, {7, 1.0, 3}, {20, 0.5, 40}, {3, 0.9, 2},
	} {
		ds := mustGenerate(t, Options{Nodes: 20000, Classes: tc.classes, AvgDegree: tc.deg, Homophily: tc.h, Seed: 7})
		deg, h := edgeStats(ds)
		t.Logf("deg %g h %g C %d: E/N %.3f homophily %.4f", tc.deg, tc.h, tc.classes, deg, h)
		if math.Abs(deg-tc.deg) > 0.05*tc.deg {
			t.Errorf("degree %g homophily %g: E/N = %.3f, expected within 5%%", tc.deg, tc.h, deg)
		}
		if math.Abs(h-tc.h) > 0.03 {
			t.Errorf("degree %g homophily %g: measured homophily %.4f, expected within 0.03", tc.deg, tc.h, h)
		}
	}
}

// Communities: the fraction of edges inside a block is Locality plus the
// global draws that land there by chance, homophily is unchanged, the output
// does not depend on the worker count, and METIS finds the blocks.
func TestGenCommunities(t *testing.T) {
	opt := Options{Nodes: 2*genBlock + 999, Classes: 5, AvgDegree: 12, Homophily: 0.7,
		Communities: 16, Locality: 0.9, Seed: 11}
	ds := generateOnWorkers(t, opt)
	g, n, k := ds.Graph, int64(opt.Nodes), int64(opt.Communities)
	inside := 0
	for i := 0; i < g.N; i++ {
		for _, s := range g.Indices[g.Indptr[i]:g.Indptr[i+1]] {
			if int64(s)*k/n == int64(i)*k/n {
				inside++
			}
		}
	}
	frac := float64(inside) / float64(g.NumEdges())
	want := opt.Locality + (1-opt.Locality)/float64(opt.Communities)
	_, h := edgeStats(ds)
	t.Logf("inside a community %.4f (expected %.4f), homophily %.4f", frac, want, h)
	if math.Abs(frac-want) > 0.01 {
		t.Errorf("fraction of edges inside a community %.4f, expected %.4f within 0.01", frac, want)
	}
	if math.Abs(h-opt.Homophily) > 0.01 {
		t.Errorf("homophily %.4f, expected %g within 0.01", h, opt.Homophily)
	}
	cut := metisCut(t, g)
	if bound := (1 - opt.Locality) * 0.75 * 1.2; cut > bound {
		t.Errorf("METIS cut %.4f of the edges, expected at most %.4f (the global edges' share)", cut, bound)
	}
	plain := opt
	plain.Communities, plain.Locality = 0, 0
	if pc := metisCut(t, mustGenerate(t, plain).Graph); pc < 2*cut {
		t.Errorf("METIS cut %.4f without communities, %.4f with them: expected communities to halve it at least", pc, cut)
	}
}

// Graphs without communities are the ones every earlier result was measured
// on: their edges must not change.
func TestGenWithoutCommunitiesUnchanged(t *testing.T) {
	ds := mustGenerate(t, Options{Nodes: 3000, Classes: 5, AvgDegree: 8, Homophily: 0.8, Features: 4, SNR: 0.4, Seed: 7})
	if got, want := data.Digest(ds.Graph.Indptr, ds.Graph.Indices, ds.Labels), uint64(0x4f14a817919cb3b0); got != want {
		t.Errorf("edge digest %#x, expected %#x", got, want)
	}
}

// metisCut is the fraction of g's edges that a 4-way METIS partition cuts.
func metisCut(t *testing.T, g *data.Graph) float64 {
	t.Helper()
	parts, err := partition.PartitionMETIS(g, 4, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	return float64(partition.EdgeCut(g, parts)) / float64(g.NumEdges())
}

// generateOnWorkers generates opt with 1 and with 4 workers, checks that
// both give the same dataset and returns it.
func generateOnWorkers(t *testing.T, opt Options) *data.Dataset {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(1)
	one := mustGenerate(t, opt)
	runtime.GOMAXPROCS(4)
	four := mustGenerate(t, opt)
	if err := datatest.SameDataset(one, four); err != nil {
		t.Fatalf("GOMAXPROCS 1 vs 4: %v", err)
	}
	return four
}

func TestGenSymmetricNoSelfLoops(t *testing.T) {
	ds := mustGenerate(t, Options{Nodes: 5000, Classes: 4, AvgDegree: 9, Homophily: 0.7, Seed: 3})
	g := ds.Graph
	// The multiset of (dst, src) pairs must equal that of (src, dst).
	fwd := make([]uint64, 0, g.NumEdges())
	rev := make([]uint64, 0, g.NumEdges())
	for i := 0; i < g.N; i++ {
		for _, s := range g.Indices[g.Indptr[i]:g.Indptr[i+1]] {
			if int(s) == i {
				t.Fatalf("self-loop at node %d", i)
			}
			fwd = append(fwd, uint64(i)<<32|uint64(s))
			rev = append(rev, uint64(s)<<32|uint64(i))
		}
	}
	slices.Sort(fwd)
	slices.Sort(rev)
	if !slices.Equal(fwd, rev) {
		t.Fatal("CSR is not symmetric")
	}
}

// nearestMeanAccuracy fits class centroids on the train nodes and returns
// the accuracy of nearest-centroid classification on the test nodes.
func nearestMeanAccuracy(ds *data.Dataset) float64 {
	f, c := ds.NumFeatures, ds.NumClasses
	sum := make([]float64, c*f)
	cnt := make([]float64, c)
	s := ds.Splits["random"]
	for _, i := range s.Train {
		y := int(ds.Labels[i])
		cnt[y]++
		for j := 0; j < f; j++ {
			sum[y*f+j] += float64(ds.Features[int(i)*f+j])
		}
	}
	for y := 0; y < c; y++ {
		for j := 0; j < f; j++ {
			sum[y*f+j] /= max(cnt[y], 1)
		}
	}
	correct := 0
	for _, i := range s.Test {
		best, bestD := -1, math.Inf(1)
		for y := 0; y < c; y++ {
			d := 0.0
			for j := 0; j < f; j++ {
				x := float64(ds.Features[int(i)*f+j]) - sum[y*f+j]
				d += x * x
			}
			if d < bestD {
				best, bestD = y, d
			}
		}
		if int32(best) == ds.Labels[i] {
			correct++
		}
	}
	return float64(correct) / float64(len(s.Test))
}

func TestGenFeaturesSeparateWithSNR(t *testing.T) {
	prev := 0.0
	for _, snr := range []float64{0, 1, 2, 4} {
		ds := mustGenerate(t, Options{Nodes: 8000, Classes: 4, AvgDegree: 2, Homophily: 0.5, Features: 16, SNR: snr, Seed: 11})
		acc := nearestMeanAccuracy(ds)
		t.Logf("SNR %g: nearest-class-mean accuracy %.3f", snr, acc)
		if acc <= prev {
			t.Errorf("SNR %g: accuracy %.3f did not rise above %.3f", snr, acc, prev)
		}
		switch {
		case snr == 0 && acc > 0.35:
			t.Errorf("SNR 0: accuracy %.3f, expected chance (0.25)", acc)
		case snr == 4 && acc < 0.9:
			t.Errorf("SNR 4: accuracy %.3f, expected > 0.9 (means 4 noise std apart)", acc)
		}
		prev = acc
	}
}

// The noise is unit Gaussian and, for C <= F, class means are exactly SNR
// apart.
func TestGenFeatureStatistics(t *testing.T) {
	const n, c, f, snr = 40000, 3, 8, 2.5
	ds := mustGenerate(t, Options{Nodes: n, Classes: c, AvgDegree: 1, Features: f, SNR: snr, Seed: 5})
	mean := make([]float64, c*f)
	cnt := make([]float64, c)
	for i := 0; i < n; i++ {
		y := int(ds.Labels[i])
		cnt[y]++
		for j := 0; j < f; j++ {
			mean[y*f+j] += float64(ds.Features[i*f+j])
		}
	}
	for k := range mean {
		mean[k] /= cnt[k/f]
	}
	var ss float64
	for i := 0; i < n; i++ {
		y := int(ds.Labels[i])
		for j := 0; j < f; j++ {
			d := float64(ds.Features[i*f+j]) - mean[y*f+j]
			ss += d * d
		}
	}
	if v := ss / float64(n*f); math.Abs(v-1) > 0.03 {
		t.Errorf("within-class variance %.4f, expected 1", v)
	}
	for a := 0; a < c; a++ {
		for b := a + 1; b < c; b++ {
			var d float64
			for j := 0; j < f; j++ {
				x := mean[a*f+j] - mean[b*f+j]
				d += x * x
			}
			if d = math.Sqrt(d); math.Abs(d-snr) > 0.1 {
				t.Errorf("classes %d, %d: means %.3f apart, expected SNR = %g", a, b, d, snr)
			}
		}
	}
}

func TestGenSplitsAndName(t *testing.T) {
	ds := mustGenerate(t, Options{Nodes: 1001, Classes: 3, AvgDegree: 4, Homophily: 0.5, Features: 2, SNR: 1, Seed: 2})
	s := ds.Splits["random"]
	if len(ds.Splits) != 1 || s == nil {
		t.Fatalf("splits %v, expected one named random", ds.SplitNames())
	}
	if len(s.Train) != 601 || len(s.Valid) != 200 || len(s.Test) != 200 {
		t.Errorf("split sizes %d/%d/%d, expected 601/200/200", len(s.Train), len(s.Valid), len(s.Test))
	}
	for _, p := range [][]int32{s.Train, s.Valid, s.Test} {
		if !slices.IsSorted(p) {
			t.Error("split part not sorted")
		}
	}
	if want := "csbm-n1001-c3-d4-h0.5-f2-snr1-s2"; ds.Name != want {
		t.Errorf("name %q, expected %q", ds.Name, want)
	}
	ds = mustGenerate(t, Options{Nodes: 100, Classes: 2, AvgDegree: 2, TrainFrac: 0.1, ValidFrac: 0.5, Seed: 2})
	if s := ds.Splits["random"]; len(s.Train) != 10 || len(s.Valid) != 50 || len(s.Test) != 40 {
		t.Errorf("split sizes %d/%d/%d, expected 10/50/40", len(s.Train), len(s.Valid), len(s.Test))
	}
	if ds.Features != nil || ds.NumFeatures != 0 {
		t.Error("F = 0 produced features")
	}
}

func TestGenOptionErrors(t *testing.T) {
	good := Options{Nodes: 100, Classes: 4, AvgDegree: 6, Homophily: 0.5, Features: 8, SNR: 1}
	for _, tc := range []struct {
		edit func(o *Options)
		want string
	}{
		{func(o *Options) { o.Nodes = 0 }, "nodes: got 0"},
		{func(o *Options) { o.Nodes = 1 << 40 }, "nodes: got 1099511627776"},
		{func(o *Options) { o.Classes = 0 }, "classes: got 0"},
		{func(o *Options) { o.Classes = 101 }, "classes: got 101"},
		{func(o *Options) { o.AvgDegree = -1 }, "avg degree: got -1"},
		{func(o *Options) { o.AvgDegree = math.NaN() }, "avg degree: got NaN"},
		{func(o *Options) { o.AvgDegree = 100 }, "avg degree: got 100, expected a value in [0, nodes-1 = 99]"},
		{func(o *Options) { o.Homophily = 1.5 }, "homophily: got 1.5, expected a value in [0, 1]"},
		{func(o *Options) { o.Homophily = -0.1 }, "homophily: got -0.1"},
		{func(o *Options) { o.Features = -2 }, "features: got -2"},
		{func(o *Options) { o.SNR = -1 }, "snr: got -1"},
		{func(o *Options) { o.SNR = math.Inf(1) }, "snr: got +Inf"},
		{func(o *Options) { o.TrainFrac, o.ValidFrac = 1.2, 0.1 }, "train fraction: got 1.2"},
		{func(o *Options) { o.TrainFrac, o.ValidFrac = 0.5, 0 }, "valid fraction: got 0"},
		{func(o *Options) { o.TrainFrac, o.ValidFrac = 0.6, 0.4 }, "train fraction + valid fraction: got 1"},
		{func(o *Options) { o.Communities = 101 }, "communities: got 101"},
		{func(o *Options) { o.Communities, o.Locality = 4, 1.5 }, "locality: got 1.5, expected a fraction in [0, 1]"},
		{func(o *Options) { o.Locality = 0.5 }, "locality: got 0.5 with no communities"},
		{func(o *Options) { o.Nodes, o.Classes, o.AvgDegree, o.TrainFrac, o.ValidFrac = 5, 2, 2, 0.8, 0.05 }, "too few for non-empty"},
	} {
		o := good
		tc.edit(&o)
		_, err := Generate(o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, expected an error containing %q", o, err, tc.want)
		}
	}
	// Edge cases that are valid: one class, no edges, no features.
	mustGenerate(t, Options{Nodes: 5, Classes: 1, AvgDegree: 4, Homophily: 0})
	mustGenerate(t, Options{Nodes: 10, Classes: 10, AvgDegree: 0, Homophily: 1})
	mustGenerate(t, Options{Nodes: 50, Classes: 25, AvgDegree: 3, Homophily: 1})
}

// BenchmarkGenerate: 1M nodes, average degree 20, 128 features.
func BenchmarkGenerate(b *testing.B) {
	opt := Options{Nodes: 1 << 20, Classes: 16, AvgDegree: 20, Homophily: 0.6, Features: 128, SNR: 1, Seed: 1}
	start, runs := time.Now(), 0
	for b.Loop() {
		if _, err := Generate(opt); err != nil {
			b.Fatal(err)
		}
		runs++
	}
	b.ReportMetric(float64(opt.Nodes)*float64(runs)/time.Since(start).Seconds(), "nodes/s")
}
