package mpi

import (
	"testing"
)

// The calls into MPI are tested under mpirun by comm/testdata/mpicheck
// (comm/mpi_test.go); these tests cover what needs no MPI.

func TestThreadLevels(t *testing.T) {
	if !(ThreadSingle < ThreadFunneled && ThreadFunneled < ThreadSerialized && ThreadSerialized < ThreadMultiple) {
		t.Fatalf("thread levels out of order: %d %d %d %d", ThreadSingle, ThreadFunneled, ThreadSerialized, ThreadMultiple)
	}
	if ThreadSerialized.String() != "MPI_THREAD_SERIALIZED" {
		t.Fatal(ThreadSerialized.String())
	}
}

func TestSpan(t *testing.T) {
	big := make([]byte, 1000)
	for _, c := range []struct {
		bufs [][]byte
		want int
	}{
		{nil, 0},
		{[][]byte{{}, nil}, 0},
		{[][]byte{big[10:20]}, 10},
		{[][]byte{big[500:600], nil, big[10:20], big[0:0]}, 590},
		{[][]byte{big[10:20], big[10:20]}, 10},
	} {
		if got := Span(c.bufs); got != c.want {
			t.Errorf("Span = %d, want %d", got, c.want)
		}
	}
}
