package gen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/kernels/rng"
)

// Options describes a contextual stochastic block model (CSBM) graph.
type Options struct {
	Nodes     int     // number of nodes N
	Classes   int     // number of classes C; labels are drawn uniformly
	AvgDegree float64 // average in-degree of the final symmetric CSR: E/N, counting both directions
	Homophily float64 // expected fraction of edges joining same-class nodes, in [0, 1]
	Features  int     // feature dimension F; 0 for a featureless graph
	SNR       float64 // distance between class means in units of the unit noise std (see Generate)
	TrainFrac float64 // fraction of nodes in train; with ValidFrac both 0 the defaults 0.6/0.2 apply
	ValidFrac float64 // fraction of nodes in valid; the rest is test
	// Communities > 0 cuts the ids into that many contiguous blocks of
	// near-equal size; Locality is the fraction of a node's partners drawn
	// inside its own block. Real graphs (ogbn-products) have such
	// communities, and they are what lets METIS find a small cut; without
	// them every part of any partition borders every other on most nodes.
	Communities int
	Locality    float64
	Seed        uint64
}

// genBlock is the number of nodes sharing one random stream. It is fixed,
// not derived from the worker count, so the output depends only on the seed.
const genBlock = 1 << 16

// Stream purposes: each phase draws from its own streams so that, e.g.,
// changing F does not change the graph.
const (
	streamLabels = iota + 1
	streamMeans
	streamFeatures
	streamDegree
	streamPartners
	streamSplit
)

// Generate builds a CSBM dataset:
//
//   - Labels: y_i uniform in [0, C).
//   - Features: x_i = mu[y_i] + z_i with z_i ~ N(0, I_F), as float32. The
//     class means are mu_c = (SNR/sqrt 2) * u_c where u_c are unit vectors:
//     Gaussian directions, Gram-Schmidt orthonormalised when C <= F (for
//     C > F the first F are orthonormal and the rest random unit vectors).
//     So for C <= F every pair of class means is exactly SNR apart, i.e. SNR
//     noise standard deviations along the line joining them (two-class Bayes
//     error Phi(-SNR/2)).
//   - Edges: undirected, stored in both directions. Node i proposes
//     floor(AvgDegree/2) partners, plus one more with probability
//     frac(AvgDegree/2), so E/N is AvgDegree in expectation. With probability
//     Homophily a partner is uniform over the other nodes of i's class, else
//     uniform over the nodes of other classes, so the fraction of
//     same-class edges is Homophily in expectation. (Drawing the non-homophilous
//     partner from all nodes would add (1-Homophily)/C same-class edges.) A
//     node never pairs with itself; duplicate pairs are kept, as in OGB data.
//   - Communities: with Communities = K > 0, node i belongs to block
//     floor(i*K/N). Each partner is first drawn local with probability
//     Locality; a local partner follows the same-class rule above inside
//     i's block, falling back to the global draw when the block holds no
//     candidate (no other node of i's class, or none of another class).
//     The same-class fraction stays Homophily; a local edge never leaves
//     the block, so a partition along the blocks cuts about
//     (1-Locality)*(1-1/parts) of the edges.
//   - Splits: one split "random": the nodes shuffled, the first
//     round(TrainFrac*N) train, the next round(ValidFrac*N) valid, the rest
//     test, each sorted.
//
// Work is spread over runtime.GOMAXPROCS workers, but every block of
// genBlock nodes draws from its own stream derived from (Seed, phase, block),
// so the result is identical for any number of workers.
func Generate(opt Options) (*data.Dataset, error) {
	if opt.TrainFrac == 0 && opt.ValidFrac == 0 {
		opt.TrainFrac, opt.ValidFrac = 0.6, 0.2
	}
	if err := opt.validate(); err != nil {
		return nil, err
	}
	n, c, f := opt.Nodes, opt.Classes, opt.Features

	labels := make([]int32, n)
	forBlocks(n, func(b, lo, hi int) {
		r := genRNG(opt.Seed, streamLabels, b)
		for i := lo; i < hi; i++ {
			labels[i] = int32(r.IntN(c))
		}
	})

	// Nodes grouped by class (ascending ids within a class): class k is
	// byClass[start[k]:start[k+1]].
	start := make([]int, c+1)
	for _, y := range labels {
		start[y+1]++
	}
	for k := 0; k < c; k++ {
		start[k+1] += start[k]
	}
	byClass := make([]int32, n)
	next := append([]int(nil), start[:c]...)
	for i, y := range labels {
		byClass[next[y]] = int32(i)
		next[y]++
	}

	var features []float32
	if f > 0 {
		mu := classMeans(opt.Seed, c, f, opt.SNR/math.Sqrt2)
		features = make([]float32, n*f)
		forBlocks(n, func(b, lo, hi int) {
			r := genRNG(opt.Seed, streamFeatures, b)
			for i := lo; i < hi; i++ {
				m := mu[int(labels[i])*f : int(labels[i]+1)*f]
				row := features[i*f : (i+1)*f]
				for j := range row {
					row[j] = float32(m[j] + r.NormFloat64())
				}
			}
		})
	}

	g, err := genEdges(opt, labels, byClass, start, newCommunityIndex(opt, labels))
	if err != nil {
		return nil, err
	}

	return &data.Dataset{
		Name:        genName(opt),
		Graph:       g,
		NumFeatures: f,
		Features:    features,
		Labels:      labels,
		NumClasses:  c,
		Splits:      map[string]*data.Split{"random": genSplit(opt)},
	}, nil
}

// Footprint estimates, before anything is allocated, the memory Generate
// needs at its peak and the size of the dataset file it makes, in bytes:
// per node the labels, the class index, the CSR's row pointers and
// counts and the split (28 bytes), per directed edge the drawn pairs and
// the CSR's column (8 bytes), and the features (4 bytes a value). It
// returns the options' error where they are invalid.
func (o Options) Footprint() (memory, file float64, err error) {
	if o.TrainFrac == 0 && o.ValidFrac == 0 {
		o.TrainFrac, o.ValidFrac = 0.6, 0.2
	}
	if err := o.validate(); err != nil {
		return 0, 0, err
	}
	n, f, c := float64(o.Nodes), float64(o.Features), float64(o.Classes)
	edges := n * 2 * math.Ceil(o.AvgDegree/2)
	values := n * f * 4
	memory = 28*n + 8*edges + values + 8*c*f
	file = 16*n + 4*edges + values + 64<<10
	return memory, file, nil
}

func (o *Options) validate() error {
	switch {
	case o.Nodes < 3 || o.Nodes > math.MaxInt32:
		return fmt.Errorf("nodes: got %d, expected a count in [3, %d]", o.Nodes, math.MaxInt32)
	case o.Classes < 1 || o.Classes > o.Nodes:
		return fmt.Errorf("classes: got %d, expected a count in [1, nodes = %d]", o.Classes, o.Nodes)
	case !(o.AvgDegree >= 0 && o.AvgDegree <= float64(o.Nodes-1)):
		return fmt.Errorf("avg degree: got %g, expected a value in [0, nodes-1 = %d]", o.AvgDegree, o.Nodes-1)
	case !(o.Homophily >= 0 && o.Homophily <= 1):
		return fmt.Errorf("homophily: got %g, expected a value in [0, 1]", o.Homophily)
	case o.Features < 0 || (o.Features > 0 && o.Nodes > math.MaxInt/4/o.Features):
		return fmt.Errorf("features: got %d, expected a dimension >= 0 with nodes*features*4 bytes addressable", o.Features)
	case !(o.SNR >= 0 && o.SNR <= 1e6):
		return fmt.Errorf("snr: got %g, expected a value in [0, 1e6]", o.SNR)
	case o.Communities < 0 || o.Communities > o.Nodes:
		return fmt.Errorf("communities: got %d, expected a count in [0, nodes = %d]", o.Communities, o.Nodes)
	case !(o.Locality >= 0 && o.Locality <= 1):
		return fmt.Errorf("locality: got %g, expected a fraction in [0, 1]", o.Locality)
	case o.Locality > 0 && o.Communities == 0:
		return fmt.Errorf("locality: got %g with no communities, expected communities > 0", o.Locality)
	case o.Communities*o.Classes > maxCommunityGroups:
		return fmt.Errorf("communities: got %d, expected communities x classes (%d) at most %d", o.Communities, o.Classes, maxCommunityGroups)
	case !(o.TrainFrac > 0 && o.TrainFrac < 1):
		return fmt.Errorf("train fraction: got %g, expected a value in (0, 1)", o.TrainFrac)
	case !(o.ValidFrac > 0 && o.ValidFrac < 1):
		return fmt.Errorf("valid fraction: got %g, expected a value in (0, 1)", o.ValidFrac)
	case !(o.TrainFrac+o.ValidFrac < 1):
		return fmt.Errorf("train fraction + valid fraction: got %g, expected less than 1 (the rest is test)", o.TrainFrac+o.ValidFrac)
	}
	nTrain, nValid := o.splitSizes()
	if nTrain < 1 || nValid < 1 || o.Nodes-nTrain-nValid < 1 {
		return fmt.Errorf("nodes: got %d, too few for non-empty train/valid/test parts with fractions %g/%g", o.Nodes, o.TrainFrac, o.ValidFrac)
	}
	return nil
}

func (o *Options) splitSizes() (train, valid int) {
	n := float64(o.Nodes)
	return int(math.Round(o.TrainFrac * n)), int(math.Round(o.ValidFrac * n))
}

// genRNG returns the stream for one (seed, purpose, block). SplitMix64
// finalisers decorrelate neighbouring seeds and blocks before they seed PCG.
func genRNG(seed uint64, purpose, block int) *rand.Rand {
	s := rng.Mix64(seed ^ rng.Mix64(uint64(purpose)))
	return rand.New(rand.NewPCG(s, rng.Mix64(s+uint64(block)+1)))
}

// forBlocks calls body for every block of genBlock nodes in [0, n), spread
// over GOMAXPROCS workers that take blocks in turn (blocks can cost
// different amounts, so a static split would leave workers idle).
func forBlocks(n int, body func(b, lo, hi int)) {
	blocks := (n + genBlock - 1) / genBlock
	workers := min(runtime.GOMAXPROCS(0), blocks)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				b := int(next.Add(1) - 1)
				if b >= blocks {
					return
				}
				body(b, b*genBlock, min((b+1)*genBlock, n))
			}
		}()
	}
	wg.Wait()
}

// classMeans returns C x F class means (row-major) of norm scale: Gaussian
// directions, Gram-Schmidt orthonormalised while that is possible (the first
// F of them; later ones are plain random directions), scaled to length scale.
func classMeans(seed uint64, c, f int, scale float64) []float64 {
	r := genRNG(seed, streamMeans, 0)
	mu := make([]float64, c*f)
	for k := 0; k < c; k++ {
		v := mu[k*f : (k+1)*f]
		for norm := 0.0; norm < 1e-6; { // redraw a degenerate direction (vanishingly rare)
			for j := range v {
				v[j] = r.NormFloat64()
			}
			for p := 0; k < f && p < k; p++ { // earlier rows are unit vectors here
				u := mu[p*f : (p+1)*f]
				var dot float64
				for j := range v {
					dot += v[j] * u[j]
				}
				for j := range v {
					v[j] -= dot * u[j]
				}
			}
			norm = 0
			for j := range v {
				norm += v[j] * v[j]
			}
			norm = math.Sqrt(norm)
			if norm >= 1e-6 {
				for j := range v {
					v[j] /= norm
				}
			}
		}
	}
	for j := range mu {
		mu[j] *= scale
	}
	return mu
}

// genEdges draws the undirected pairs and builds the symmetric CSR. Pass 1
// counts each block's pairs, so pass 2 can write every block's pairs straight
// into one src/dst pair of int32 arrays at a fixed offset.
func genEdges(opt Options, labels, byClass []int32, start []int, comm *communityIndex) (*data.Graph, error) {
	n := opt.Nodes
	half := opt.AvgDegree / 2
	base := int(half)
	frac := half - float64(base)
	proposals := func(r *rand.Rand) int {
		if r.Float64() < frac {
			return base + 1
		}
		return base
	}

	blocks := (n + genBlock - 1) / genBlock
	offset := make([]int, blocks+1)
	forBlocks(n, func(b, lo, hi int) {
		r := genRNG(opt.Seed, streamDegree, b)
		total := 0
		for i := lo; i < hi; i++ {
			total += proposals(r)
		}
		offset[b+1] = total
	})
	for b := 0; b < blocks; b++ {
		offset[b+1] += offset[b]
	}
	pairs := offset[blocks]
	src := make([]int32, pairs)
	dst := make([]int32, pairs)
	forBlocks(n, func(b, lo, hi int) {
		rd := genRNG(opt.Seed, streamDegree, b) // replays pass 1's counts
		rp := genRNG(opt.Seed, streamPartners, b)
		at := offset[b]
		for i := lo; i < hi; i++ {
			y := labels[i]
			for k := proposals(rd); k > 0; k-- {
				// The local coin is drawn only with communities, so graphs
				// without them keep the stream (and the edges) they had.
				local := comm != nil && rp.Float64() < opt.Locality
				same := rp.Float64() < opt.Homophily
				j, ok := int32(0), false
				if local {
					j, ok = comm.partner(rp, int32(i), y, same)
				}
				if !ok {
					j = globalPartner(rp, int32(i), byClass, start[y], start[y+1], same)
				}
				src[at], dst[at] = int32(i), j
				at++
			}
		}
	})
	return data.BuildGraph(n, src, dst, data.BuildOptions{AddInverse: true})
}

// globalPartner draws i's partner among all nodes: uniform over the other
// nodes of i's class (byClass[cs:ce]) when same, else uniform over the nodes
// of other classes. Same is overridden when its side has no candidate.
func globalPartner(rp *rand.Rand, i int32, byClass []int32, cs, ce int, same bool) int32 {
	n, size := len(byClass), ce-cs
	if size == 1 {
		same = false
	} else if size == n {
		same = true
	}
	if same {
		return drawOther(rp, i, byClass[cs:ce])
	}
	// Uniform over byClass with class y's range cut out.
	t := rp.IntN(n - size)
	if t >= cs {
		t += size
	}
	return byClass[t]
}

// drawOther draws uniformly from group until the draw is not i (group holds
// i and at least one other node, or only other nodes).
func drawOther(rp *rand.Rand, i int32, group []int32) int32 {
	for {
		if j := group[rp.IntN(len(group))]; j != i {
			return j
		}
	}
}

// communityIndex groups the nodes by (community block, class): the class-y
// nodes of block b are members[group[b*C+y]:group[b*C+y+1]], ascending, and
// block b is members[group[b*C]:group[(b+1)*C]].
type communityIndex struct {
	blocks, classes, nodes int
	members                []int32
	group                  []int
}

// maxCommunityGroups bounds communities x classes (the index costs 8 bytes
// per group).
const maxCommunityGroups = 1 << 26

func newCommunityIndex(opt Options, labels []int32) *communityIndex {
	if opt.Communities == 0 || opt.Locality == 0 {
		return nil
	}
	ci := &communityIndex{blocks: opt.Communities, classes: opt.Classes, nodes: opt.Nodes}
	ci.group = make([]int, ci.blocks*ci.classes+1)
	for i, y := range labels {
		ci.group[ci.block(int32(i))*ci.classes+int(y)+1]++
	}
	for g := 1; g < len(ci.group); g++ {
		ci.group[g] += ci.group[g-1]
	}
	next := append([]int(nil), ci.group[:len(ci.group)-1]...)
	ci.members = make([]int32, len(labels))
	for i, y := range labels {
		g := ci.block(int32(i))*ci.classes + int(y)
		ci.members[next[g]] = int32(i)
		next[g]++
	}
	return ci
}

func (ci *communityIndex) block(i int32) int {
	return int(int64(i) * int64(ci.blocks) / int64(ci.nodes))
}

// partner draws i's partner inside i's block by the same-class rule; ok is
// false when the block has no candidate on the chosen side.
func (ci *communityIndex) partner(rp *rand.Rand, i, y int32, same bool) (int32, bool) {
	g := ci.block(i)*ci.classes + int(y)
	blo, bhi := ci.group[g-int(y)], ci.group[g-int(y)+ci.classes]
	clo, chi := ci.group[g], ci.group[g+1]
	if same {
		if chi-clo < 2 {
			return 0, false
		}
		return drawOther(rp, i, ci.members[clo:chi]), true
	}
	others := (bhi - blo) - (chi - clo)
	if others == 0 {
		return 0, false
	}
	t := blo + rp.IntN(others)
	if t >= clo {
		t += chi - clo
	}
	return ci.members[t], true
}

// genName names a generated dataset by its options.
func genName(o Options) string {
	name := fmt.Sprintf("csbm-n%d-c%d-d%g-h%g-f%d-snr%g-s%d",
		o.Nodes, o.Classes, o.AvgDegree, o.Homophily, o.Features, o.SNR, o.Seed)
	if o.Communities > 0 && o.Locality > 0 {
		name += fmt.Sprintf("-k%d-l%g", o.Communities, o.Locality)
	}
	return name
}

// genSplit shuffles the nodes with one stream (a sequential Fisher-Yates, so
// independent of the worker count) and cuts the order into the three parts.
// Marking each node's part and scanning the ids yields sorted parts without
// sorting.
func genSplit(opt Options) *data.Split {
	n := opt.Nodes
	nTrain, nValid := opt.splitSizes()
	perm := make([]int32, n)
	for i := range perm {
		perm[i] = int32(i)
	}
	r := genRNG(opt.Seed, streamSplit, 0)
	r.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	part := make([]uint8, n)
	for k, id := range perm {
		switch {
		case k < nTrain:
			part[id] = 0
		case k < nTrain+nValid:
			part[id] = 1
		default:
			part[id] = 2
		}
	}
	s := &data.Split{
		Train: make([]int32, 0, nTrain),
		Valid: make([]int32, 0, nValid),
		Test:  make([]int32, 0, n-nTrain-nValid),
	}
	for i, p := range part {
		switch p {
		case 0:
			s.Train = append(s.Train, int32(i))
		case 1:
			s.Valid = append(s.Valid, int32(i))
		default:
			s.Test = append(s.Test, int32(i))
		}
	}
	return s
}
