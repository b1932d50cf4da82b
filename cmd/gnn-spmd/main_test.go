package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeOGB writes a tiny valid OGB-layout dataset (4 nodes, 2 features,
// 2 classes), with files overridden by the given name -> content map.
// With truncate set, gzip files lose their last bytes.
func writeOGB(t *testing.T, override map[string]string, truncate bool) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"raw/num-node-list.csv": "4\n",
		"raw/num-edge-list.csv": "4\n",
		"raw/edge.csv":          "0,1\n1,0\n2,3\n3,2\n",
		"raw/node-feat.csv":     "0.5,1\n1,0.25\n-1,2\n3,4\n",
		"raw/node-label.csv":    "0\n1\n0\n1\n",
		"split/s/train.csv":     "0\n1\n",
		"split/s/valid.csv":     "2\n",
		"split/s/test.csv":      "3\n",
	}
	for k, v := range override {
		files[k] = v
	}
	for name, content := range files {
		if content == "<absent>" {
			continue
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, ".gz") {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			zw.Write([]byte(content))
			zw.Close()
			content = b.String()
			if truncate {
				content = content[:len(content)-6]
			}
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// TestBadInput checks that each kind of bad input gives exit code 2, a single
// line naming the offending file and line or field, and no output file.
func TestBadInput(t *testing.T) {
	cases := []struct {
		name     string
		override map[string]string
		truncate bool
		want     []string // substrings of the error line
	}{
		{"missing file", map[string]string{"raw/edge.csv": "<absent>"}, false, []string{"edge.csv"}},
		{"wrong column count", map[string]string{"raw/edge.csv": "0,1\n1,0,5\n2,3\n3,2\n"}, false, []string{"edge.csv:2"}},
		{"non-numeric field", map[string]string{"raw/node-feat.csv": "0.5,1\n1,abc\n-1,2\n3,4\n"}, false, []string{"node-feat.csv:2"}},
		{"node id >= N", map[string]string{"raw/edge.csv": "0,1\n1,0\n2,3\n3,4\n"}, false, []string{"edge.csv:4"}},
		{"negative id", map[string]string{"raw/edge.csv": "0,1\n-1,0\n2,3\n3,2\n"}, false, []string{"edge.csv:2"}},
		{"NaN feature", map[string]string{"raw/node-feat.csv": "0.5,1\n1,0.25\nnan,2\n3,4\n"}, false, []string{"node-feat.csv:3"}},
		{"Inf feature", map[string]string{"raw/node-feat.csv": "0.5,1\n1,0.25\n-1,2\n3,inf\n"}, false, []string{"node-feat.csv:4"}},
		{"edge count disagrees", map[string]string{"raw/num-edge-list.csv": "5\n"}, false, []string{"edge"}},
		{"node count disagrees", map[string]string{"raw/num-node-list.csv": "5\n"}, false, []string{"node-"}},
		{"empty split", map[string]string{"split/s/valid.csv": ""}, false, []string{"valid.csv"}},
		{"overlapping splits", map[string]string{"split/s/test.csv": "1\n"}, false, []string{"test.csv"}},
		{"split id out of range", map[string]string{"split/s/test.csv": "9\n"}, false, []string{"test.csv:1"}},
		{"truncated gzip", map[string]string{"raw/edge.csv": "<absent>", "raw/edge.csv.gz": "0,1\n1,0\n2,3\n3,2\n"}, true, []string{"edge.csv.gz"}},
		{"ragged features", map[string]string{"raw/node-feat.csv": "0.5,1\n1\n-1,2\n3,4\n"}, false, []string{"node-feat.csv:2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeOGB(t, c.override, c.truncate)
			out := filepath.Join(t.TempDir(), "out.h5")
			code, _, stderr := runCLI("convert", "--data", dir, "--out", out)
			if code != exitBadInput {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, exitBadInput, stderr)
			}
			t.Log(strings.TrimSpace(stderr))
			if n := strings.Count(stderr, "\n"); n != 1 {
				t.Errorf("want a one-line error, got %d lines: %q", n, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("error %q does not name %q", stderr, w)
				}
			}
			if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 0 {
				t.Errorf("output directory not empty after a failed convert: %v", entries)
			}
		})
	}
}
