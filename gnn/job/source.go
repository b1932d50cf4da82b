package job

import (
	"fmt"
	"os"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/datafile"
	"github.com/gnn-spmd/gnn-spmd/data/ogb"
	"github.com/gnn-spmd/gnn-spmd/data/partition"
	"github.com/gnn-spmd/gnn-spmd/gnn"
	"github.com/gnn-spmd/gnn-spmd/gnn/ckpt"
)

// source is what the ranks of this process train on: the shards of the
// ranks it runs (or, for one rank on the whole graph, its view without a
// shard copy), with the run's description and the data's identity.
type source struct {
	info   Info
	id     ckpt.Data
	single *gnn.View                // one rank, whole graph
	shards map[int]*partition.Shard // by rank
}

// load reads the data for the given ranks of a q-rank job: their part
// files, or the dataset, partitioned on the fly. One rank on the whole
// graph (oneProcess) trains on the dataset itself.
func (j *job) load(ranks []int, q int, oneProcess bool) (*source, error) {
	s := j.spec
	src := &source{shards: map[int]*partition.Shard{}}
	src.info.Ranks, src.info.Partition, src.id.Ranks = q, s.Partition, q
	if s.Parts != "" {
		for _, r := range ranks {
			sh, meta, err := partition.ReadShard(s.Parts, r, q)
			if err != nil {
				if !oneProcess {
					// An MPI rank's part file is on its own host's disk:
					// say which host looked.
					host, _ := os.Hostname()
					return nil, fmt.Errorf("on host %s: %w", host, err)
				}
				return nil, err
			}
			src.shards[r] = sh
			src.fromMeta(meta)
		}
		src.identify(s)
		return src, nil
	}
	if !oneProcess && q > 1 && j.dist != nil && distributable(s) {
		return j.loadDistributed(ranks[0], q) // every rank reads only its slice
	}
	ds, split, err := loadDataset(s)
	if err != nil {
		return nil, err
	}
	if q > ds.Graph.N {
		return nil, specErrorf("train: %d ranks for %d nodes: every rank needs a node of its own", q, ds.Graph.N)
	}
	src.fromDataset(ds, split)
	var parts []int32
	if oneProcess && q == 1 && !s.NoComm {
		// One rank, whole graph: no shard copies.
		if src.single, err = gnn.SingleProcess(ds, split, s.Run.Model); err != nil {
			return nil, specErrorf("train: %v", err)
		}
	} else {
		if parts, err = partition.Partition(ds, split, q, s.Partition, s.PartitionSeed); err != nil {
			return nil, err
		}
		if oneProcess {
			shards, err := partition.BuildShards(ds, split, parts, q)
			if err != nil {
				return nil, err
			}
			for r, sh := range shards {
				src.shards[r] = sh
			}
		} else {
			for _, r := range ranks {
				if src.shards[r], err = partition.BuildShard(ds, split, parts, q, r); err != nil {
					return nil, err
				}
			}
		}
	}
	if s.checkpointing() || !oneProcess {
		// A checkpoint records the data's identity; MPI ranks compare it.
		src.id.PartitionMethod, src.id.PartitionSeed = s.Partition, s.PartitionSeed
		if q == 1 {
			src.id.PartitionMethod, src.id.PartitionSeed, parts = "none", 0, nil
		}
		src.id.Fingerprint = ds.Fingerprint()
		src.id.PartitionID = partition.PartitionID(ds, src.id.Fingerprint, split, parts, q)
	}
	src.identify(s)
	return src, nil
}

// identify completes the data's identity with the run's own settings.
func (src *source) identify(s *Spec) {
	src.id.Split, src.id.NormalizeFeatures, src.id.NoComm = src.info.Split, s.Normalize, s.NoComm
}

// view turns rank r's shard into its model view, dropping the cut edges
// first for --no-comm, with its rows in the --reorder order.
func (j *job) view(src *source, r int) (*gnn.View, *partition.Shard, error) {
	if src.single != nil {
		v, err := src.single.Reorder(j.spec.Reorder)
		if err != nil {
			return nil, nil, specErrorf("train: %v", err)
		}
		return v, nil, nil
	}
	sh := src.shards[r]
	if j.spec.NoComm {
		sh = sh.NoComm()
	}
	v, err := gnn.FromShard(sh, j.spec.Run.Model)
	if err == nil {
		v, err = v.Reorder(j.spec.Reorder)
	}
	if err != nil {
		return nil, nil, specErrorf("train: %v", err)
	}
	return v, sh, nil
}

// loadDataset reads --data, applies --normalize-features and picks the split.
func loadDataset(s *Spec) (*data.Dataset, string, error) {
	ds, err := datafile.Load(s.Data, ogb.Options{Build: s.Build})
	if err != nil {
		return nil, "", err
	}
	if s.Normalize {
		ds.NormalizeFeatureRows()
	}
	split, err := PickSplit(ds, s.Data, s.Split)
	if err != nil {
		return nil, "", err
	}
	if ds.NumFeatures == 0 {
		return nil, "", data.InputErrorf(s.Data, 0, "features", "the dataset has none: training needs node features")
	}
	return ds, split, nil
}

// PickSplit returns the named split, or the dataset's only or first split;
// path is where the dataset was read from.
func PickSplit(ds *data.Dataset, path, name string) (string, error) {
	names := ds.SplitNames()
	if name == "" {
		if len(names) == 0 {
			return "", data.InputErrorf(path, 0, "splits", "the dataset has none, expected a train/valid/test split")
		}
		return names[0], nil
	}
	if _, ok := ds.Splits[name]; !ok {
		return "", specErrorf("train: --split %q: %s has splits %v", name, path, names)
	}
	return name, nil
}

func (src *source) fromDataset(ds *data.Dataset, split string) {
	sp, i := ds.Splits[split], &src.info
	i.Dataset, i.Nodes, i.Edges = ds.Name, int64(ds.Graph.N), ds.Graph.NumEdges()
	i.Features, i.Classes, i.Split = ds.NumFeatures, ds.NumClasses, split
	i.Train, i.Valid, i.Test = len(sp.Train), len(sp.Valid), len(sp.Test)
}

func (src *source) fromMeta(m *partition.PartitionMeta) {
	i := &src.info
	i.Dataset, i.Nodes, i.Edges = m.DatasetName, int64(m.NumNodes), m.NumEdges
	i.Features, i.Classes, i.Split = m.NumFeatures, m.NumClasses, m.Split
	i.Train, i.Valid, i.Test = m.GlobalTrain, m.GlobalValid, m.GlobalTest
	i.Partition = m.Method + " (from file)"
	src.id.PartitionMethod, src.id.PartitionSeed = m.Method, m.Seed
	src.id.Fingerprint, src.id.PartitionID = m.Fingerprint, m.PartitionID
}
