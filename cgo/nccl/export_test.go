//go:build !cpu

package nccl

// Steps replaces Join's local work in tests (there is no GPU).
type Steps struct {
	Load     func() error
	UniqueID func() (UniqueID, error)
	InitRank func(nranks int, id UniqueID, rank int) (*Comm, error)
}

func (s Steps) load() error                 { return s.Load() }
func (s Steps) uniqueID() (UniqueID, error) { return s.UniqueID() }
func (s Steps) initRank(n int, id UniqueID, rank int) (*Comm, error) {
	return s.InitRank(n, id, rank)
}

// JoinWith is Join with its local steps given.
func JoinWith(host Host, ready error, s Steps) (*Comm, error) { return join(host, ready, s) }

// Bounded is the wait Join puts on ncclCommInitRank.
var Bounded = bounded

// RemoteError is the error NCCL gives a rank whose peer failed.
func RemoteError(fn string) error {
	return &Error{Fn: fn, Code: ncclRemoteError, Msg: "remote process exited or there was a network error"}
}
