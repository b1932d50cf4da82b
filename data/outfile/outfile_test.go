package outfile

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// TestWriteKeepsVersionsOnFailure: a failed write rotates nothing; a
// successful one shifts every version by one.
func TestWriteKeepsVersionsOnFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c")
	put := func(s string) error {
		return Write(path, 3, func(tmp string) error {
			if s == "" {
				os.WriteFile(tmp, []byte("half"), 0o644)
				return errors.New("disk full")
			}
			return os.WriteFile(tmp, []byte(s), 0o644)
		})
	}
	for _, s := range []string{"1", "2", "3"} {
		if err := put(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := put(""); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("failed write: %v", err)
	}
	if got := []string{read(path), read(path + ".1"), read(path + ".2")}; strings.Join(got, ",") != "3,2,1" {
		t.Errorf("after a failed write: %v, want 3, 2, 1", got)
	}
	if tmp, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*.tmp")); len(tmp) > 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
	if err := put("4"); err != nil {
		t.Fatal(err)
	}
	if got := []string{read(path), read(path + ".1"), read(path + ".2")}; strings.Join(got, ",") != "4,3,2" {
		t.Errorf("after a write: %v, want 4, 3, 2", got)
	}
}

// TestTempNameFits: the temporary and lock names of a 255-byte file name
// fit the file-name limit.
func TestTempNameFits(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("a", 255))
	if n := len(filepath.Base(TempName(long, 1<<22))); n > nameMax {
		t.Errorf("temporary name of %d bytes", n)
	}
	if err := WriteAtomic(long, func(tmp string) error { return os.WriteFile(tmp, []byte("x"), 0o644) }); err != nil {
		t.Errorf("a 255-byte name: %v", err)
	}
	if err := Probe(Path{Flag: "--out", Name: long, Versions: 2}); err == nil || !strings.Contains(err.Error(), "257 bytes") {
		t.Errorf("a version name of 257 bytes: %v", err)
	}
}

func TestDistinct(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "g.h5")
	write(t, in, "data")
	os.Link(in, filepath.Join(dir, "hard.h5"))
	os.Symlink(in, filepath.Join(dir, "soft.h5"))
	os.Mkdir(filepath.Join(dir, "ogb"), 0o755)
	write(t, filepath.Join(dir, "ogb", "edge.csv"), "0,1")
	inputs := []Path{{Flag: "--data", Name: in}, {Flag: "--dir", Name: filepath.Join(dir, "ogb")}}
	for _, c := range []struct {
		out  []Path
		want string // "" = accepted
	}{
		{[]Path{{Flag: "--metrics", Name: in}}, "--metrics " + in + " is the input --data"},
		{[]Path{{Flag: "--metrics", Name: filepath.Join(dir, ".", "g.h5")}}, "is the input --data"},
		{[]Path{{Flag: "--metrics", Name: filepath.Join(dir, "hard.h5")}}, "is the input --data"},
		{[]Path{{Flag: "--metrics", Name: filepath.Join(dir, "soft.h5")}}, "is the input --data"},
		{[]Path{{Flag: "--out", Name: filepath.Join(dir, "ogb", "edge.csv")}}, "is the input --dir"},
		{[]Path{{Flag: "--out", Name: filepath.Join(dir, "ogb", "new.h5")}}, ""},
		{[]Path{{Flag: "--checkpoint", Name: filepath.Join(dir, "g"), Versions: 1}}, ""},
		{[]Path{{Flag: "--checkpoint", Name: filepath.Join(dir, "g"), Versions: 3}, {Flag: "--metrics", Name: filepath.Join(dir, "g.2")}}, "are the same file"},
		{[]Path{{Flag: "--checkpoint", Name: filepath.Join(dir, "g.h5.x")}, {Flag: "--metrics", Name: filepath.Join(dir, "m")}}, ""},
	} {
		err := Distinct(inputs, c.out)
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.out, err, c.want)
		}
		var oe *Error
		if err != nil && (!errors.As(err, &oe) || oe.ExitCode() != 2) {
			t.Errorf("%v: %T, want an *Error with exit code 2", c.out, err)
		}
	}
	if read(in) != "data" {
		t.Errorf("the input changed")
	}
}

func TestProbe(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		p    Path
		want string
	}{
		{Path{Flag: "--metrics", Name: filepath.Join(dir, "no", "m")}, "the directory " + filepath.Join(dir, "no") + " does not exist"},
		{Path{Flag: "--checkpoint", Name: dir}, "is a directory, expected a file name"},
		{Path{Flag: "--metrics", Name: "/proc/m.jsonl"}, "cannot create files in /proc"},
		{Path{Flag: "--out", Name: filepath.Join(dir, "parts"), Dir: true}, ""},
		{Path{Flag: "--metrics", Name: filepath.Join(dir, "m")}, ""},
	} {
		err := Probe(c.p)
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.p, err, c.want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("probing left %v", ents)
	}
}

// TestLock: a second writer of a locked path is refused, naming the
// holder; after release the path can be locked again, and locking removes
// the temporary files of dead writers only.
func TestLock(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ck.h5")
	cmd := exec.Command("true")
	cmd.Run()
	dead := TempName(path, cmd.Process.Pid)
	live := TempName(path, 1)
	write(t, dead, "x")
	write(t, live, "x")
	release, err := Lock("--checkpoint", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); err == nil {
		t.Errorf("the temporary file of a dead writer was left")
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the temporary file of a live process was removed")
	}
	if _, err := Lock("--checkpoint", path); err == nil || !strings.Contains(err.Error(), "--checkpoint "+path+": another process (pid") {
		t.Errorf("second lock: %v", err)
	}
	release()
	release2, err := Lock("--checkpoint", path)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	release2()
	if ents, _ := filepath.Glob(filepath.Join(dir, ".*.lock")); len(ents) != 0 {
		t.Errorf("lock files left: %v", ents)
	}
}

func TestRemoveStaleIn(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("true")
	cmd.Run()
	for _, n := range []string{"part-0.h5", "part-1.h5", "meta.h5"} {
		write(t, TempName(filepath.Join(dir, n), cmd.Process.Pid), "x")
	}
	keep := []string{TempName(filepath.Join(dir, "meta.h5"), 1), filepath.Join(dir, "part-0.h5"), filepath.Join(dir, ".hidden.tmp")}
	for _, k := range keep {
		write(t, k, "x")
	}
	if got := RemoveStaleIn(dir); len(got) != 3 {
		t.Errorf("removed %v, want the 3 temporary files of the dead writer", got)
	}
	for _, k := range keep {
		if _, err := os.Stat(k); err != nil {
			t.Errorf("%s removed", k)
		}
	}
}

// TestAliveZombie: a process that has exited but was not reaped (a
// zombie, as a killed writer is under an init that does not reap) is not
// alive, so the next writer removes what it left.
func TestAliveZombie(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	pid := cmd.Process.Pid
	defer cmd.Wait()
	for start := time.Now(); Alive(pid) && time.Since(start) < 5*time.Second; {
		time.Sleep(10 * time.Millisecond)
	}
	if Alive(pid) {
		t.Errorf("process %d exited (a zombie until waited for) but counts as alive", pid)
	}
	if !Alive(os.Getpid()) {
		t.Errorf("this process counts as gone")
	}
}
