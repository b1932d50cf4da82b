// Package docs holds the reference pages (docs/*.md), the generated results
// (docs/results) and the dated notes (docs/notes). Its test keeps the
// README and the reference pages free of what belongs in the notes.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README and the reference pages describe the project as it is: dates
// and commit hashes belong to the dated notes.
var (
	datePattern = regexp.MustCompile(`\b20\d\d-[01]\d-[0-3]\d\b`)
	hexWord     = regexp.MustCompile(`\b([0-9a-f]{7,12}|[0-9a-f]{40})\b`)
	hasLetter   = regexp.MustCompile(`[a-f]`)
	hasDigit    = regexp.MustCompile(`[0-9]`)
	notesLink   = regexp.MustCompile(`notes/[^ )\]]*`)
)

// maxReadme is the README's length in lines: a guide, not a reference.
const maxReadme = 210

func referencePages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(pages, filepath.Join("..", "README.md"))
}

func TestNoDatesOrCommits(t *testing.T) {
	for _, page := range referencePages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			line = notesLink.ReplaceAllString(line, "") // a note's file name carries its date
			if d := datePattern.FindString(line); d != "" {
				t.Errorf("%s:%d: a date (%s): dated measurements go in docs/notes", page, i+1, d)
			}
			for _, w := range hexWord.FindAllString(line, -1) {
				if hasLetter.MatchString(w) && hasDigit.MatchString(w) {
					t.Errorf("%s:%d: %q looks like a commit hash: histories go in docs/notes", page, i+1, w)
				}
			}
		}
	}
}

func TestReadmeLength(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxReadme {
		t.Errorf("README.md has %d lines, more than %d: move reference material to docs/", n, maxReadme)
	}
}

// TestNoTextTwice: no paragraph of the README, the reference pages or the
// generated results is kept in two places (a copy drifts from its
// original); the notes are logs and may quote.
func TestNoTextTwice(t *testing.T) {
	pages := referencePages(t)
	results, _ := filepath.Glob(filepath.Join("results", "*.md"))
	seen := map[string]string{}
	for _, page := range append(pages, results...) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range strings.Split(string(b), "\n\n") {
			p = strings.Join(strings.Fields(p), " ")
			if len(p) < 160 || strings.HasPrefix(p, "|") || strings.HasPrefix(p, "```") {
				continue // short, a table, or code, which may repeat
			}
			if first, ok := seen[p]; ok && first != page {
				t.Errorf("%s repeats a paragraph of %s: %.80q...", page, first, p)
			}
			seen[p] = page
		}
	}
}
