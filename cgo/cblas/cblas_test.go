package cblas

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSgemm multiplies small matrices through the loaded library, each
// operand plain and transposed, against the sums written out.
func TestSgemm(t *testing.T) {
	lib, err := Load()
	if err != nil {
		t.Skipf("no CBLAS library here (scripts/deps.sh installs OpenBLAS): %v", err)
	}
	t.Logf("loaded %s from %s (%s)", lib.Name, lib.Path, lib.Detail)
	// a = [[1 2 3] [4 5 6]] (2x3), b = [[1 0] [0 1] [1 1]] (3x2).
	a := []float32{1, 2, 3, 4, 5, 6}
	at := []float32{1, 4, 2, 5, 3, 6}
	b := []float32{1, 0, 0, 1, 1, 1}
	bt := []float32{1, 0, 1, 0, 1, 1}
	want := []float32{4, 5, 10, 11}
	for _, c := range []struct {
		ta, tb   bool
		a, b     []float32
		lda, ldb int
	}{{false, false, a, b, 3, 2}, {true, false, at, b, 2, 2}, {false, true, a, bt, 3, 3}, {true, true, at, bt, 2, 3}} {
		got := []float32{1, 1, 1, 1}
		Sgemm(c.ta, c.tb, 2, 2, 3, 2, c.a, c.lda, c.b, c.ldb, -1, got, 2)
		for i := range got {
			if got[i] != 2*want[i]-1 {
				t.Errorf("transA %v transB %v: %v, want 2*%v - 1", c.ta, c.tb, got, want)
				break
			}
		}
	}
}

// TestLoadNamed: GNN_SPMD_BLAS names the library, or none; a name that
// does not load says so.
func TestLoadNamed(t *testing.T) {
	if os.Getenv("CBLAS_CHILD") != "" {
		_, err := Load()
		os.Stdout.WriteString(strings.TrimSpace(os.Getenv(EnvLibrary)) + ": " + errText(err) + "\n")
		return
	}
	for _, c := range []struct{ env, want string }{
		{"none", "GNN_SPMD_BLAS=none"},
		{"libnosuch.so.1", "no CBLAS library found (libnosuch.so.1: cannot open shared object file"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestLoadNamed$")
		cmd.Env = append(os.Environ(), "CBLAS_CHILD=1", EnvLibrary+"="+c.env)
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%s=%s: %q (%v), want %q", EnvLibrary, c.env, out, err, c.want)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return "loaded"
	}
	return err.Error()
}
