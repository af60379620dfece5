package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// A brace bomb used to backtrack exponentially in the glob matcher, answer
// 504 and keep its slot until restart: with max_in_flight 2, two bombs
// disabled list_files for good (issue 16, finding 1). Every bomb now
// answers in time and the tool keeps serving.
func TestBraceBombFreesItsSlot(t *testing.T) {
	ws := t.TempDir()
	for i := range 100 {
		name := filepath.Join(ws, fmt.Sprintf("d%d", i%10), fmt.Sprintf("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa%d.txt", i))
		os.MkdirAll(filepath.Dir(name), 0o755)
		if err := os.WriteFile(name, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(t.TempDir(), "bomb.yaml")
	os.WriteFile(cfg, []byte(`
tools:
  list_files: {limits: {max_in_flight: 2, max_queue: 4, timeout: 2s}}
  grep: {limits: {max_in_flight: 2, max_queue: 4, timeout: 2s}}
`), 0o644)
	in := start(t, nil, "-config", cfg, "-workspace", ws)
	bomb := strings.Repeat("{*,*}", 40) + "zz"
	calls := []struct{ tool, body string }{
		{"list_files", mustJSON(map[string]any{"patterns": []string{bomb}})},
		{"grep", mustJSON(map[string]any{"pattern": "x", "path_glob": bomb})},
	}
	for _, c := range calls {
		var wg sync.WaitGroup
		for range 4 { // twice the slots, in two rounds
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, env := in.exec(c.tool, c.body)
				if code != 200 {
					t.Errorf("%s with a brace bomb: %d %v", c.tool, code, env["error"])
				}
			}()
		}
		wg.Wait()
	}
	code, env := in.exec("list_files", `{"patterns":["d1/*"]}`)
	if code != 200 {
		t.Fatalf("list_files after the bombs: %d %v", code, env["error"])
	}
	if _, body := in.get("/readyz"); strings.Contains(string(body), `"stuck"`) && !strings.Contains(string(body), `"stuck":0`) {
		t.Errorf("/readyz reports stuck calls after the bombs: %s", body)
	}
}
