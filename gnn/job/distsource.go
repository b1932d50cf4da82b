package job

import (
	"errors"
	"strings"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/partition"
)

// distributable reports whether MPI ranks partition s's dataset together,
// each reading only its slice of the file: PT-Scotch always, and the
// random method (the same assignment as in one process) on a .h5 file.
func distributable(s *Spec) bool {
	l := strings.ToLower(s.Data)
	h5 := strings.HasSuffix(l, ".h5") || strings.HasSuffix(l, ".hdf5")
	return s.Partition == partition.MethodPTScotch || (s.Partition == partition.MethodRandom && h5 && s.Build == data.BuildOptions{})
}

// loadDistributed is load for an MPI rank whose data the ranks partition
// together (partition.DistributeShard, collective): its shard, with the
// identity the one-process path gives the same assignment.
func (j *job) loadDistributed(c comm.Comm, rank, q int) (*source, error) {
	s := j.spec
	sh, meta, err := partition.DistributeShard(c, s.Data, s.Split, s.Partition, s.PartitionSeed, s.Normalize)
	if err != nil {
		var rf *partition.RankFailed
		if errors.As(err, &rf) {
			return nil, &Exit{Code: rf.Code} // that rank reports
		}
		return nil, err
	}
	if meta.NumFeatures == 0 {
		return nil, data.InputErrorf(s.Data, 0, "features", "the dataset has none: training needs node features")
	}
	src := &source{shards: map[int]*partition.Shard{rank: sh}}
	src.info.Ranks, src.id.Ranks = q, q
	src.fromMeta(meta)
	src.info.Partition = s.Partition + " (by slices)"
	src.identify(s)
	return src, nil
}
