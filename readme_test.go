package edgesecrets_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readmeEmbeddingHeading introduces the README's code block that must be
// example_test.go verbatim, so the embedding a reader copies is the one the
// test command compiles and runs.
const readmeEmbeddingHeading = "### Embed an agbot and an agent together"

// maxEmbeddingLines is the size the README promises for the embedding:
// shorter than the 100 lines of the in-process embedding it replaced,
// which had no HTTP, no identity and no deploy step.
const maxEmbeddingLines = 98

func TestREADMEShowsTheCompiledEmbedding(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	example, err := os.ReadFile("example_test.go")
	require.NoError(t, err)

	block, err := goBlockAfter(string(readme), readmeEmbeddingHeading)
	require.NoError(t, err)
	require.Equal(t, string(example), block, "README's embedding differs from example_test.go: copy the file into the block")
	lines := strings.Count(block, "\n")
	require.LessOrEqual(t, lines, maxEmbeddingLines, "the embedding is %d lines, the README promises at most %d", lines, maxEmbeddingLines)
}

func TestGoBlockAfter(t *testing.T) {
	tests := []struct {
		name, doc, want, err string
	}{
		{"first block after the heading", "# x\n```go\nno\n```\n### H\ntext\n```go\nyes\n```\n```go\nlater\n```\n", "yes\n", ""},
		{"heading missing", "### Other\n```go\nx\n```\n", "", "heading"},
		{"block missing", "### H\ntext only\n", "", "no ```go block"},
		{"block unterminated", "### H\n```go\nx\n", "", "unterminated"},
		{"next section before a block", "### H\ntext\n### Next\n```go\nx\n```\n", "", "no ```go block"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := goBlockAfter(tt.doc, "### H")
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// goBlockAfter returns the body of the first ```go block of the section
// that heading opens (the heading's own line, exactly).
func goBlockAfter(doc, heading string) (string, error) {
	lines := strings.SplitAfter(doc, "\n")
	i := 0
	for i < len(lines) && strings.TrimRight(lines[i], "\n") != heading {
		i++
	}
	if i == len(lines) {
		return "", fmt.Errorf("README: heading %q not found", heading)
	}
	for i++; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], "\n")
		if strings.HasPrefix(line, "#") {
			break // the next section began
		}
		if line != "```go" {
			continue
		}
		var body strings.Builder
		for i++; i < len(lines); i++ {
			if strings.TrimRight(lines[i], "\n") == "```" {
				return body.String(), nil
			}
			body.WriteString(lines[i])
		}
		return "", errors.New("README: unterminated ```go block after " + heading)
	}
	return "", fmt.Errorf("README: no ```go block after %q", heading)
}
