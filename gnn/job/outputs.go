package job

import (
	"github.com/gnn-spmd/gnn-spmd/data/outfile"
)

// claimOutputs checks, before the data are read, everything the run will
// write (on rank 0, which writes it): no output is an input or another
// output, every one can be created where it is named, and no other run
// writes the same metrics or checkpoint (outfile.Claim). It holds locks on
// those until release. --resume may name the checkpoint or one of its
// versions: a resumed run continues that run's files.
func (s *Spec) claimOutputs() (release func(), err error) {
	metrics := outfile.Path{Flag: "--metrics", Name: s.Metrics, Lock: true}
	checkpoint := outfile.Path{Flag: "--checkpoint", Name: s.Checkpoint, Versions: s.Keep, Lock: true}
	profile := outfile.Path{Flag: "--cpuprofile", Name: s.CPUProfile}
	predictions := outfile.Path{Flag: "--predict", Name: s.Predict.Out}
	if s.Weights != "" {
		predictions.Flag = "--out"
	}
	resume := []outfile.Path{{Flag: "--resume", Name: s.Resume}}
	if err := outfile.Distinct(resume, []outfile.Path{metrics, profile, predictions}); err != nil {
		return nil, err
	}
	data := []outfile.Path{{Flag: "--data", Name: s.Data}, {Flag: "--parts", Name: s.Parts}, {Flag: "--checkpoint", Name: s.Weights}}
	return outfile.Claim(data, []outfile.Path{metrics, checkpoint, profile, predictions})
}
