package suggest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b  string
		limit int
		want  int
	}{
		{"", "", 3, 0},
		{"paths", "path", 3, 1},
		{"read_fille", "read_file", 3, 1},
		{"kitten", "sitting", 5, 3},
		{"abc", "xyz", 2, 3}, // gave up: limit+1
		{strings.Repeat("a", 1000), "a", 3, 4},
	}
	for _, tt := range tests {
		if got := Distance(tt.a, tt.b, tt.limit); got != tt.want {
			t.Errorf("Distance(%.10q, %q, %d) = %d, want %d", tt.a, tt.b, tt.limit, got, tt.want)
		}
	}
}

func TestNearest(t *testing.T) {
	names := []string{"read_file", "write_file", "grep", "list_files", "edit_file"}
	if got := Closest("reed_file", names, 2); got != "read_file" {
		t.Errorf("Closest = %q", got)
	}
	if got := Closest("compile", names, 2); got != "" {
		t.Errorf("Closest of a stranger = %q", got)
	}
	if diff := cmp.Diff([]string{"gran", "grep"}, Nearest("grap", []string{"grip", "grep", "gran", "grape!!"}, 1, 2)); diff != "" {
		t.Errorf("Nearest (-want +got):\n%s", diff)
	}
}
