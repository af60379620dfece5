package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// kubeletWrite puts files into dir the way the kubelet updates a
// ConfigMap volume (its atomic writer): the files in a new timestamped
// directory, the symlink ..data swapped to it by a rename, each file a
// symlink through ..data, the old directory removed. A watcher of the
// file's path sees no write to it: the path's target changes under it.
func kubeletWrite(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	ts := fmt.Sprintf("..%s", time.Now().UTC().Format("2006_01_02_15_04_05.000000000"))
	if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, ts, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// listedTools are the names GET /tools lists to the live toold's key.
func listedTools(t testing.TB, lt *liveToold) []string {
	t.Helper()
	code, body := lt.do(t, "GET", "http://"+lt.api+"/tools?format=anthropic", lt.key, "")
	if code != 200 {
		t.Fatalf("GET /tools: %d\n%s", code, body)
	}
	var list []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("GET /tools: %v\n%s", err, body)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name)
	}
	return names
}

// TestChartConfigReloadsWithoutARollout: the chart's promise that a config
// change rolls nothing. toold runs with the chart's command line (-config
// on the mounted ConfigMap, -watch) in a directory laid out as the kubelet
// mounts a ConfigMap; the kubelet's update of it to the config of
// `helm upgrade --set config.tools.grep.enabled=false` reaches the running
// process: grep leaves the listing, the process is the same one.
func TestChartConfigReloadsWithoutARollout(t *testing.T) {
	helmBin(t)
	r := renderChart(t, "")
	if c := r.m.container(t); !slices.Contains(c.Args, "-watch") {
		t.Fatalf("the chart's args %q have no -watch", c.Args)
	}
	out, err := helmTemplate(t, "--set", "config.tools.grep.enabled=false")
	if err != nil {
		t.Fatal(err)
	}
	var changed []byte
	for _, d := range splitYAML(out) {
		obj, err := decodeObject(d)
		if err != nil {
			t.Fatal(err)
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Data["toold.yaml"] != "" {
			changed = singleNodeConfig(t, []byte(cm.Data["toold.yaml"]))
		}
	}
	if changed == nil {
		t.Fatal("the upgraded rendering has no toold.yaml")
	}

	var mount string
	lt := startTooldWith(t, r.m, r.nats, func(dir string, data []byte) string {
		mount = filepath.Join(dir, "config")
		kubeletWrite(t, mount, map[string][]byte{"toold.yaml": data})
		return filepath.Join(mount, "toold.yaml")
	})
	if names := listedTools(t, lt); !slices.Contains(names, "grep") {
		t.Fatalf("before the update the listing %v has no grep", names)
	}
	kubeletWrite(t, mount, map[string][]byte{"toold.yaml": changed})
	if !eventually(30*time.Second, func() bool { return !slices.Contains(listedTools(t, lt), "grep") }) {
		t.Fatalf("30s after the kubelet's update grep is still listed: the new config was not reloaded\n%s", lt.stdout)
	}
	select {
	case err := <-lt.done:
		lt.exited = true
		t.Fatalf("toold exited on the update: %v\n%s", err, lt.stdout)
	default: // the same process serves: nothing restarted
	}
}

// TestKubeletWrite: the stand-in for the kubelet leaves what the kubelet
// leaves: the file's path reads the latest content through ..data, and one
// timestamped directory remains.
func TestKubeletWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "config")
	for _, content := range []string{"one", "two", "three"} {
		kubeletWrite(t, dir, map[string][]byte{"toold.yaml": []byte(content)})
		if got, err := os.ReadFile(filepath.Join(dir, "toold.yaml")); err != nil || string(got) != content {
			t.Fatalf("after writing %q the file reads %q, %v", content, got, err)
		}
		if fi, err := os.Lstat(filepath.Join(dir, "toold.yaml")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("toold.yaml is no symlink: %v %v", fi, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 3 || !slices.Contains(names, "..data") || !slices.Contains(names, "toold.yaml") {
		t.Errorf("the directory holds %v, want ..data, toold.yaml and one timestamped directory", names)
	}
}
