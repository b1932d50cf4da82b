package partition

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gnn-spmd/gnn-spmd/data/h5"
	"github.com/gnn-spmd/gnn-spmd/data/outfile"
)

// Output is the partition directory the ranks of a distributed partition
// write: every rank its part file, into a temporary sibling of the
// directory, which is renamed to it once every rank has written its files,
// so that the directory holds a whole partition or is left as it was. The
// ranks that share a file system share the temporary directory, whose
// creator (its leader) locks the directory, writes meta.h5 and renames;
// ranks on another file system (another host's disk) get a directory of
// their own, with its own meta.h5.
type Output struct {
	dir, tmp string
	leader   bool
	unlock   func()
}

// writerFile names a temporary directory's creator: "host pid".
const writerFile = ".writer"

// PrepareOutput claims dir for a distributed partition before any work:
// each file system's leader checks that the directory can be written,
// locks it, removes what killed partitions into it left, and creates the
// temporary directory. Every failure is agreed on.
func PrepareOutput(c Comm, dir string) (*Output, error) {
	dir = filepath.Clean(dir)
	token := make([]byte, 8)
	if c.Rank() == 0 {
		rand.Read(token)
	}
	step(c, "output token broadcast")
	if err := c.Bcast(token, 0); err != nil {
		return nil, err
	}
	o := &Output{dir: dir, tmp: filepath.Join(filepath.Dir(dir), fmt.Sprintf(".%s.partition-%016x.tmp", filepath.Base(dir), binary.LittleEndian.Uint64(token)))}
	host, _ := os.Hostname()
	mark := fmt.Sprintf("%s %d", host, os.Getpid())
	pending := make([]bool, c.Size())
	for r := range pending {
		pending[r] = true
	}
	for first := 0; first < c.Size(); {
		var err error
		if c.Rank() == first {
			o.leader = true
			err = o.create(mark)
		}
		if err := agree(c, "creating the output directory", err); err != nil {
			o.Abort()
			return nil, err
		}
		sees := int64(0)
		if pending[c.Rank()] {
			if b, err := os.ReadFile(filepath.Join(o.tmp, writerFile)); err == nil && string(b) != "" {
				sees = 1
			}
		}
		all, err := allGather(c, "finding the ranks that share a file system", []int64{sees})
		if err != nil {
			return nil, err
		}
		next := -1
		for r := range pending {
			if pending[r] && all[r][0] == 1 {
				pending[r] = false
			}
			if pending[r] && next < 0 {
				next = r
			}
		}
		if pending[first] {
			o.Abort()
			if c.Rank() != first {
				return nil, &RankFailed{Rank: first, Code: 1}
			}
			return nil, fmt.Errorf("partition: rank %d does not see the output directory it created: %s", first, o.tmp)
		}
		if next < 0 {
			break
		}
		first = next
	}
	return o, nil
}

// create is a leader's part of PrepareOutput.
func (o *Output) create(mark string) error {
	if err := outfile.Probe(outfile.Path{Flag: "--out", Name: o.dir, Dir: true}); err != nil {
		return err
	}
	unlock, err := outfile.Lock("--out", o.dir)
	if err != nil {
		return err
	}
	o.unlock = unlock
	removeStaleOutputs(o.dir)
	if err := os.Mkdir(o.tmp, 0o755); err != nil {
		return fmt.Errorf("--out %s: %w", o.dir, err)
	}
	return os.WriteFile(filepath.Join(o.tmp, writerFile), []byte(mark), 0o644)
}

// removeStaleOutputs removes the temporary directories of partitions into
// dir whose writer, on this host, is gone.
func removeStaleOutputs(dir string) {
	host, _ := os.Hostname()
	names, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".partition-*.*"))
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(name, writerFile))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) != 2 || f[0] != host {
			continue
		}
		if pid, err := strconv.Atoi(f[1]); err == nil && pid > 0 && !outfile.Alive(pid) {
			os.RemoveAll(name)
		}
	}
}

// Abort removes what a leader made, and releases its lock.
func (o *Output) Abort() {
	if o == nil || !o.leader {
		return
	}
	os.RemoveAll(o.tmp)
	if o.unlock != nil {
		o.unlock()
		o.unlock = nil
	}
}

// Write writes every rank's part file and, on each leader, meta.h5 (its
// /parts gathered from the ranks in rounds, never whole in one message),
// then, once every rank has succeeded, renames each temporary directory
// to the output directory (an older partition there is replaced). The
// files hold what WritePartition writes for the same partition.
func (o *Output) Write(c Comm, d *Distributed) error {
	m := d.Meta
	attrs, arrays := partContent(d.Shard, m)
	err := h5.WriteFile(filepath.Join(o.tmp, PartFileName(c.Rank())), attrs, arrays)
	if err := agree(c, "writing the part files", err); err != nil {
		o.Abort()
		return err
	}
	err = o.writeMeta(c, d)
	if err := agree(c, "writing meta.h5", err); err != nil {
		o.Abort()
		return err
	}
	var perr error
	if o.leader {
		perr = o.publish()
	}
	err = agree(c, "publishing the output directory", perr)
	if o.unlock != nil {
		o.unlock()
		o.unlock = nil
	}
	return err
}

// writeMeta writes meta.h5 on the leaders: every rank broadcasts its
// slice's parts in turn, in pieces of at most roundBytes. A leader that
// fails to write goes on taking part in the broadcasts.
func (o *Output) writeMeta(c Comm, d *Distributed) error {
	var w *h5.Writer
	var werr error
	if o.leader {
		attrs, arrays := metaContent(d.Meta)
		if w, werr = h5.NewWriter(filepath.Join(o.tmp, partMetaName), attrs); werr == nil {
			w.Begin("/parts", []int32(nil), []uint{uint(d.Meta.NumNodes)})
			for _, a := range arrays[1:] { // arrays[0] is /parts, written below
				w.Array(a)
			}
		}
	}
	chunk := max(int(roundBytes/4), 1)
	for k := range c.Size() {
		n := int(d.bounds[k+1] - d.bounds[k])
		for lo := 0; lo < n; lo += chunk {
			buf := make([]int32, min(n, lo+chunk)-lo)
			if k == c.Rank() {
				copy(buf, d.sliceParts[lo:])
			}
			step(c, "meta.h5 /parts broadcast")
			if err := c.Bcast(view(buf), k); err != nil {
				if w != nil {
					w.Abort()
				}
				return err
			}
			if w != nil {
				w.Rows("/parts", buf)
			}
		}
	}
	if w == nil {
		return werr
	}
	w.End("/parts")
	return w.Close()
}

// publish renames the leader's temporary directory to the output
// directory, moving an older one aside first and removing it after.
func (o *Output) publish() error {
	old := ""
	if _, err := os.Lstat(o.dir); err == nil {
		old = strings.TrimSuffix(o.tmp, ".tmp") + ".old"
		if err := os.Rename(o.dir, old); err != nil {
			return fmt.Errorf("--out %s: moving the older partition aside: %w", o.dir, err)
		}
	}
	os.Remove(filepath.Join(o.tmp, writerFile))
	if err := os.Rename(o.tmp, o.dir); err != nil {
		if old != "" {
			os.Rename(old, o.dir)
		}
		return fmt.Errorf("--out %s: %w", o.dir, err)
	}
	if old != "" {
		os.RemoveAll(old)
	}
	if f, err := os.Open(filepath.Dir(o.dir)); err == nil {
		f.Sync()
		f.Close()
	}
	return nil
}
