package job

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/gnn/ckpt"
)

// Ranks that disagree. An MPI launcher can start ranks with different
// command lines (Open MPI's MPMD syntax), environments, files or builds;
// such ranks would train to a wrong result, crash or hang in a collective
// of different sizes. So before anything else every rank compares its
// settings with rank 0's (agreeSettings), and after loading its data it
// compares what the data decide (agreeData): the first difference stops
// every rank with one line naming the setting, both values and the ranks.

// A setting that every rank must share: what sets it (a flag) and its
// value.
type setting = ckpt.Setting

// settings lists what every rank of s's job must share before loading:
// the build, the run's identity as a checkpoint records it (without the
// data, not read yet), and the flags that change how ranks communicate.
// Left out, as they may differ between nodes without changing the result:
// paths (a node may mount the data elsewhere: the data are compared after
// loading), --threads (results do not depend on it), --gpu (nodes differ),
// --comm-timeout, --comm (a rank told local never joins), console output
// and rank 0's outputs (--metrics, --checkpoint and its cadence,
// --cpuprofile). --gpu-transport is compared although auto's choice is
// collective: a rank told nccl and one told mpi would otherwise wait in
// different setups.
func (s *Spec) settings(worldSize int) []setting {
	method, seed := s.Partition, s.PartitionSeed
	if s.Parts != "" {
		method, seed = "from --parts", 0 // --partition and its seed are ignored
	}
	id := ckpt.NewConfig(s.Run, ckpt.Data{Split: s.Split, NormalizeFeatures: s.Normalize, NoComm: s.NoComm,
		Ranks: worldSize, PartitionMethod: method, PartitionSeed: seed})
	out := []setting{
		{Name: "the build", Value: BuildID()},
		{Name: "the halo wire format", Value: strconv.Itoa(codec.WireVersion)},
		{Name: "--parts", Value: given(s.Parts)},
		{Name: "--resume", Value: given(s.Resume)},
		{Name: "the predict command's --checkpoint", Value: given(s.Weights)},
		{Name: "--predict or --out", Value: given(s.Predict.Out)},
		{Name: "--params", Value: s.Predict.Params},
		{Name: "--probabilities", Value: strconv.FormatBool(s.Predict.Probabilities)},
		{Name: "--embeddings", Value: strconv.Itoa(s.Predict.Embeddings)},
		{Name: "--device", Value: s.Device},
		{Name: "--gpu-transport", Value: s.GPUTransport},
		{Name: "--overlap", Value: strconv.FormatBool(s.Overlap)},
		{Name: "--reorder", Value: s.Reorder},
		{Name: "--recompute", Value: strconv.FormatBool(s.Recompute)},
		{Name: "--eval-every", Value: strconv.Itoa(s.EvalEvery)},
		{Name: "--add-inverse", Value: strconv.FormatBool(s.Build.AddInverse)},
		{Name: "--self-loops", Value: strconv.FormatBool(s.Build.AddSelfLoops)},
	}
	for _, st := range id.Settings() {
		if !st.Data { // those the data decide are compared after loading
			out = append(out, st)
		}
	}
	return out
}

func given(path string) string {
	if path == "" {
		return "not given"
	}
	return "given"
}

// dataSettings lists what a rank's loaded data decide (the run's full
// identity: dataset fingerprint, partition id, widths) and, for a resumed
// run, the checkpoint's epoch and parameters.
func dataSettings(id ckpt.Config, ck *checkpointer) []setting {
	out := id.Settings()
	if r := ck.resumed; r != nil {
		out = append(out, setting{Name: "the resumed epoch (--resume)", Value: strconv.Itoa(r.Epoch)},
			setting{Name: "the resumed parameters (--resume)", Value: fmt.Sprintf("%016x", r.ParamDigest())})
	}
	return out
}

// BuildID names this binary's build: the Go version, the module's
// version control revision and the build settings that change the code.
func BuildID() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	id := []string{bi.GoVersion}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision", "vcs.modified", "-tags", "GOAMD64", "GOARCH", "CGO_ENABLED":
			id = append(id, s.Key+"="+s.Value)
		}
	}
	return strings.Join(id, " ")
}

// agreeSettings stops every rank, with the lowest rank that differs
// reporting, unless every rank's settings equal rank 0's. err is this
// rank's failure before the comparison (it wins over a difference).
func agreeSettings(c comm.Comm, mine []setting, err error) error {
	b, berr := bcastBytes(c, encodeSettings(mine))
	if berr != nil {
		return berr
	}
	// Rank 0 sends none when it failed: it reports its own error.
	if theirs := decodeSettings(b); err == nil && c.Rank() != 0 && len(theirs) > 0 {
		err = differ(c.Rank(), mine, theirs)
	}
	return agree(c, err)
}

// differ is the first setting in which mine (rank's) and rank 0's differ,
// as a *SpecError, or nil.
func differ(rank int, mine, theirs []setting) error {
	for i, s := range mine {
		if i >= len(theirs) || theirs[i].Name != s.Name {
			return specErrorf("rank %d: its settings do not match rank 0's (%s): the ranks run different builds", rank, s.Name)
		}
		if s.Value != theirs[i].Value {
			return specErrorf("rank %d: %s is %s, rank 0 has %s: every rank must be started with the same settings and data", rank, s.Name, s.Value, theirs[i].Value)
		}
	}
	if len(theirs) != len(mine) {
		return specErrorf("rank %d: its settings do not match rank 0's: the ranks run different builds", rank)
	}
	return nil
}

func encodeSettings(ss []setting) []byte {
	var b bytes.Buffer
	for _, s := range ss {
		b.WriteString(s.Name + "\x00" + s.Value + "\x00")
	}
	return b.Bytes()
}

func decodeSettings(b []byte) []setting {
	f := strings.Split(string(b), "\x00")
	var ss []setting
	for i := 0; i+1 < len(f); i += 2 {
		ss = append(ss, setting{Name: f[i], Value: f[i+1]})
	}
	return ss
}

// bcastBytes sends rank 0's b to every rank: its length, then its bytes.
func bcastBytes(c comm.Comm, b []byte) ([]byte, error) {
	n := make([]byte, 8)
	binary.LittleEndian.PutUint64(n, uint64(len(b)))
	comm.Label(c, &opSettings)
	if err := c.Bcast(n, 0); err != nil {
		return nil, err
	}
	size := binary.LittleEndian.Uint64(n)
	if size > 1<<20 {
		return nil, fmt.Errorf("rank 0 sent %d bytes of settings, more than any build writes", size)
	}
	buf := make([]byte, size)
	if c.Rank() == 0 {
		copy(buf, b)
	}
	comm.Label(c, &opSettings)
	if err := c.Bcast(buf, 0); err != nil {
		return nil, err
	}
	return buf, nil
}

var opSettings = comm.Op{Name: "setup settings broadcast"}

// agree makes every rank learn whether any rank failed its setup. The
// lowest rank that holds a cause (an error other than an *Exit, which says
// that an earlier agreement was reported elsewhere) returns it, naming the
// other ranks that failed; the others return an *Exit with its class of
// exit code.
func agree(c comm.Comm, err error) error {
	q := c.Size()
	// failed[r] is rank r's exit code; failed[q+r] is 1 when it holds a cause.
	failed := make([]float64, 2*q)
	if err != nil {
		failed[c.Rank()] = float64(ExitCode(err))
		var ex *Exit
		if !errors.As(err, &ex) {
			failed[q+c.Rank()] = 1
		}
	}
	comm.Label(c, &opAgree)
	if rerr := c.AllReduceFloat64(failed); rerr != nil {
		if err != nil {
			return err
		}
		return rerr
	}
	reporter := -1
	for r := range q {
		if failed[r] != 0 && (reporter < 0 || failed[q+r] > failed[q+reporter]) {
			reporter = r
		}
	}
	switch {
	case reporter < 0:
		return nil
	case reporter != c.Rank():
		return &Exit{Code: int(failed[reporter])}
	}
	var others []string
	for r := range q {
		if failed[r] != 0 && r != c.Rank() && failed[q+r] != 0 {
			others = append(others, strconv.Itoa(r))
		}
	}
	if c.Rank() != 0 && !strings.HasPrefix(err.Error(), "rank ") {
		err = &rankError{rank: c.Rank(), err: err}
	}
	switch len(others) {
	case 0:
		return err
	case 1:
		return fmt.Errorf("%w (rank %s failed too)", err, others[0])
	}
	return fmt.Errorf("%w (ranks %s failed too)", err, strings.Join(others, ", "))
}

// rankError is a rank's own setup error, for a job of many ranks.
type rankError struct {
	rank int
	err  error
}

func (e *rankError) Error() string { return fmt.Sprintf("rank %d: %v", e.rank, e.err) }
func (e *rankError) Unwrap() error { return e.err }
