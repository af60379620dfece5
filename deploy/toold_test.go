package deploy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"

	"github.com/toold/toold/internal/config"
)

// deployedConfig returns the toold config the Deployment runs: the file its
// -config flag names, looked up in the ConfigMap mounted at that path.
func deployedConfig(m *manifests) (data []byte, file string, err error) {
	c := &m.deployment.Spec.Template.Spec.Containers[0]
	for i, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "-config="); ok {
			file = v
		} else if (a == "-config" || a == "--config") && i+1 < len(c.Args) {
			file = c.Args[i+1]
		}
	}
	if file == "" {
		return nil, "", errors.New("the container's args have no -config FILE")
	}
	dir, key := path.Split(file)
	for _, vm := range c.VolumeMounts {
		if path.Clean(vm.MountPath) != path.Clean(dir) || vm.SubPath != "" {
			continue
		}
		for _, v := range m.deployment.Spec.Template.Spec.Volumes {
			if v.Name != vm.Name || v.ConfigMap == nil {
				continue
			}
			cm, ok := m.configMaps[v.ConfigMap.Name]
			if !ok {
				return nil, "", fmt.Errorf("volume %s mounts ConfigMap %s, which the base does not render", v.Name, v.ConfigMap.Name)
			}
			if d, ok := cm.Data[key]; ok {
				return []byte(d), file, nil
			}
			return nil, "", fmt.Errorf("ConfigMap %s has no key %q for -config %s", cm.Name, key, file)
		}
	}
	return nil, "", fmt.Errorf("-config %s: no ConfigMap volume is mounted at %s", file, dir)
}

// deploymentEnv is the environment the Deployment gives toold, with Secret
// references resolved from secrets (name -> key -> value). Only those
// variables: a ${VAR} the config needs and the Deployment does not set
// fails here as it would in the pod.
func deploymentEnv(t testing.TB, c *corev1.Container, secrets map[string]map[string]string) []string {
	t.Helper()
	if len(c.EnvFrom) > 0 {
		t.Fatal("envFrom: this test resolves env entries only")
	}
	var env []string
	for _, e := range c.Env {
		v := e.Value
		switch src := e.ValueFrom; {
		case src == nil:
		case src.SecretKeyRef != nil:
			ref := src.SecretKeyRef
			var ok bool
			if v, ok = secrets[ref.Name][ref.Key]; !ok {
				if derefOr(ref.Optional, false) {
					continue // the kubelet leaves the variable unset
				}
				t.Fatalf("env %s: no value for Secret %s key %s", e.Name, ref.Name, ref.Key)
			}
		case src.FieldRef != nil && src.FieldRef.FieldPath == "metadata.name":
			v = podName
		case src.ResourceFieldRef != nil:
			q, ok := c.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(src.ResourceFieldRef.Resource, "limits."))]
			if !ok {
				t.Fatalf("env %s: the container has no %s", e.Name, src.ResourceFieldRef.Resource)
			}
			v = strconv.FormatInt(q.Value(), 10)
		default:
			t.Fatalf("env %s: a valueFrom this test cannot resolve", e.Name)
		}
		env = append(env, e.Name+"="+v)
	}
	return env
}

// podName stands for the name the kubelet gives a pod (the downward API's
// metadata.name).
const podName = "toold-7c9f8d6b5-x2x9k"

// podSecrets are the Secret values the tests give a pod: the example
// Secrets of deploy/examples, and for any other key the container reads
// (the chart's values name others) a placeholder: a well-formed hash for
// a *_SHA256 variable, else a string long enough for any secret. Optional
// keys no example holds stay unset, as the kubelet leaves them.
func podSecrets(t testing.TB, c *corev1.Container) map[string]map[string]string {
	t.Helper()
	secrets := exampleSecrets(t)
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || derefOr(e.ValueFrom.SecretKeyRef.Optional, false) {
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		if _, ok := secrets[ref.Name][ref.Key]; ok {
			continue
		}
		if secrets[ref.Name] == nil {
			secrets[ref.Name] = map[string]string{}
		}
		v := "placeholder-" + ref.Name + "-" + ref.Key + "-0123456789abcdef0123456789abcdef"
		if strings.HasSuffix(e.Name, "_SHA256") {
			v = strings.Repeat("0", 64)
		}
		secrets[ref.Name][ref.Key] = v
	}
	return secrets
}

// writeDeployedConfig writes the ConfigMap's config to a file and returns
// it with the environment the Deployment gives toold (the example Secrets'
// placeholder values, podSecrets).
func writeDeployedConfig(t testing.TB, m *manifests) (string, []string) {
	t.Helper()
	data, _, err := deployedConfig(m)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "toold.yaml")
	if err := os.WriteFile(f, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return f, deploymentEnv(t, m.container(t), podSecrets(t, m.container(t)))
}

// loadDeployedConfig loads the deployed config with toold's own loader,
// defaults included, in the environment the Deployment gives it (the
// example Secret's placeholder hash).
func loadDeployedConfig(t testing.TB, m *manifests) (*config.Config, []string) {
	t.Helper()
	f, env := writeDeployedConfig(t, m)
	cfg, err := config.Load(f, func(k string) (string, bool) {
		for _, kv := range env {
			if name, v, _ := strings.Cut(kv, "="); name == k {
				return v, true
			}
		}
		return "", false
	})
	if err != nil {
		t.Fatalf("the deployed config:\n%v", err)
	}
	return cfg, env
}

// processEnv is what a toold process needs besides the Deployment's
// variables (nothing, today; PATH for command tools later).
func processEnv(env []string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}, env...)
}

// The ConfigMap's config passes toold's own -check-config: its rules, every
// tool built, the registry compiled. Run with exactly the Deployment's
// variables (the placeholder hashes of podSecrets).
func TestConfigPassesTooldCheck(t *testing.T) {
	forEachRendering(t, func(t *testing.T, r *rendering) {
		m := r.m
		f, env := writeDeployedConfig(t, m)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, toolBin, "-check-config", f, "-workspace", t.TempDir())
		cmd.Env = processEnv(env)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("toold -check-config: %v\n%s", err, out)
		}
		// And the config really needs the Secrets: without the first
		// variable the pod must have, toold refuses, naming it.
		var required string
		for _, e := range m.container(t).Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && !derefOr(e.ValueFrom.SecretKeyRef.Optional, false) {
				required = e.Name
				break
			}
		}
		if required == "" {
			return // the config reads no Secret (ci/minimal-values.yaml)
		}
		cmd = exec.CommandContext(ctx, toolBin, "-check-config", f, "-workspace", t.TempDir())
		cmd.Env = processEnv(slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, required+"=") }))
		if out, err := cmd.CombinedOutput(); err == nil || !bytes.Contains(out, []byte(required)) {
			t.Errorf("toold -check-config without %s: err %v, output:\n%s", required, err, out)
		}
	})
}

// liveToold is a toold process started from the deployed config on
// loopback ports.
type liveToold struct {
	cmd          *exec.Cmd
	api, admin   string // host:port
	key          string // an API key the process accepts
	listenPort   int32  // the ports the config gives listen and admin_listen
	adminPort    int32
	stdout       *syncBuffer
	done         chan error
	deploy       *manifests
	workspaceDir string
	exited       bool // the exit status was received from done
}

// testKey is the API key the live toold accepts; its hash stands in for the
// Secret's.
const testKey = "toold_deploy_test_key_0123456789abcdef"

// startToold runs the Deployment's command line (its args, with the config
// file and ports swapped for local ones) in the Deployment's environment,
// the key hash replaced by testKey's, against the real nats-server run on
// the NATS configuration nm renders.
func startToold(t *testing.T, m *manifests, nm *natsManifests) *liveToold {
	t.Helper()
	return startTooldWith(t, m, nm, func(dir string, data []byte) string {
		local := filepath.Join(dir, "toold.yaml")
		if err := os.WriteFile(local, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return local
	})
}

// singleNodeConfig rewrites a deployed config for the tests' one-node
// NATS, where streams cannot have the cluster's replicas.
func singleNodeConfig(t testing.TB, data []byte) []byte {
	t.Helper()
	re := regexp.MustCompile(`(?m)^(\s+replicas:) \d+$`)
	if !re.Match(data) {
		t.Fatal("the deployed config's state.nats.replicas line is not where the test rewrites it")
	}
	return re.ReplaceAll(data, []byte("$1 1"))
}

// startTooldWith is startToold with the config put in place by place,
// which returns the file toold is given.
func startTooldWith(t *testing.T, m *manifests, nm *natsManifests, place func(dir string, data []byte) string) *liveToold {
	t.Helper()
	cfg, _ := loadDeployedConfig(t, m)
	data, file, err := deployedConfig(m)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The test's NATS is one node: streams cannot have the cluster's 3
	// replicas there.
	if cfg.State.NATS.Replicas > 1 {
		data = singleNodeConfig(t, data)
	}
	local := place(dir, data)
	ws := filepath.Join(dir, "workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	c := m.container(t)
	var args []string
	for _, a := range c.Args {
		args = append(args, strings.ReplaceAll(a, file, local))
	}
	// The NATS of deploy/nats, run from its own configuration, stands in
	// for the cluster's; the Service name becomes its loopback address.
	nats := startNATS(t, nm)
	args = append(args, "-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-workspace", ws, "-nats-url", nats.url)

	// Every Secret value the Deployment reads, optional ones included, is
	// testKey's hash: the key hash it must be, and 64 characters are a
	// valid confirmation secret too; but the NATS password is the one the
	// NATS server was given.
	sum := sha256.Sum256([]byte(testKey))
	secrets := map[string]map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			ref := e.ValueFrom.SecretKeyRef
			if secrets[ref.Name] == nil {
				secrets[ref.Name] = map[string]string{}
			}
			secrets[ref.Name][ref.Key] = hex.EncodeToString(sum[:])
		}
	}
	if ref := envSecret(c, "TOOLD_NATS_PASSWORD"); ref != nil {
		secrets[ref.Name][ref.Key] = nats.password
	}
	lt := &liveToold{key: testKey, stdout: &syncBuffer{}, done: make(chan error, 1), deploy: m, workspaceDir: ws,
		listenPort: portOf(t, cfg.Listen), adminPort: portOf(t, cfg.AdminListen)}
	lt.cmd = exec.Command(toolBin, args...)
	lt.cmd.Env = processEnv(deploymentEnv(t, c, secrets))
	lt.cmd.Stderr = lt.stdout // zap's JSON lines and start-up errors, for failure messages
	pr, pw := io.Pipe()
	lt.cmd.Stdout = pw
	if err := lt.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { err := lt.cmd.Wait(); pw.Close(); lt.done <- err }()
	t.Cleanup(func() {
		if !lt.exited {
			_ = lt.cmd.Process.Kill()
			<-lt.done
		}
	})
	lt.readAddresses(t, pr)
	return lt
}

var (
	apiLine   = regexp.MustCompile(`listening on http://(\S+?),`)
	adminLine = regexp.MustCompile(`metrics on http://(\S+)/metrics`)
)

// readAddresses waits (10s at most) for the start-up lines, and keeps
// draining stdout into lt.stdout for failure messages.
func (lt *liveToold) readAddresses(t *testing.T, r io.Reader) {
	t.Helper()
	addrs := make(chan [2]string, 1)
	go func() {
		var api string
		sent := false
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			line := sc.Text()
			lt.stdout.WriteString(line + "\n")
			if m := apiLine.FindStringSubmatch(line); m != nil {
				api = m[1]
			}
			if m := adminLine.FindStringSubmatch(line); m != nil && !sent {
				addrs <- [2]string{api, m[1]} // toold prints it after the API line
				sent = true
			}
		}
	}()
	select {
	case a := <-addrs:
		lt.api, lt.admin = a[0], a[1]
	case err := <-lt.done:
		lt.exited = true
		t.Fatalf("toold exited before listening: %v\n%s", err, lt.stdout)
	case <-time.After(10 * time.Second):
		t.Fatalf("toold printed no listen addresses within 10s:\n%s", lt.stdout)
	}
	if lt.api == "" {
		t.Fatalf("no API address in toold's output:\n%s", lt.stdout)
	}
}

func portOf(t testing.TB, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return int32(n)
}

// addrFor maps a container port to the local listener serving it.
func (lt *liveToold) addrFor(t testing.TB, port int32) string {
	t.Helper()
	switch port {
	case lt.listenPort:
		return lt.api
	case lt.adminPort:
		return lt.admin
	}
	t.Fatalf("port %d is neither the config's listen port %d nor its admin_listen port %d", port, lt.listenPort, lt.adminPort)
	return ""
}

var client = &http.Client{Timeout: 10 * time.Second}

func (lt *liveToold) do(t testing.TB, method, url, key, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b
}

// exercise makes the calls that bring every metric family into existence
// (histograms and HTTP counters appear with their first observation): a
// successful call, a call whose output holds a secret-looking string (for
// the sanitizer's redaction counter once it is wired), a refused one.
func (lt *liveToold) exercise(t testing.TB) {
	t.Helper()
	secret := "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nAKIAIOSFODNN7EXAMPLE\n"
	if err := os.WriteFile(filepath.Join(lt.workspaceDir, "notes.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	base := "http://" + lt.api
	for _, c := range []struct {
		method, path, key, body string
		want                    int
	}{
		{"GET", "/tools", lt.key, "", 200},
		{"POST", "/tools/list_files/execute", lt.key, `{}`, 200},
		{"POST", "/tools/read_file/execute", lt.key, `{"paths":["notes.txt"]}`, 200},
		{"POST", "/tools/list_files/execute", lt.key, `{"patterns":["a\u0001"]}`, 0},
		{"POST", "/tools/list_files/execute", "", `{}`, 401},
		{"POST", "/tools/list_files/execute", "not-the-key-0123456789", `{}`, 401},
	} {
		code, body := lt.do(t, c.method, base+c.path, c.key, c.body)
		if c.want != 0 && code != c.want {
			t.Errorf("%s %s: %d, want %d\n%s", c.method, c.path, code, c.want, body)
		}
	}
}

// families scrapes the admin listener's /metrics.
func (lt *liveToold) families(t testing.TB) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := lt.do(t, "GET", "http://"+lt.admin+"/metrics", "", "")
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// Probes hit real routes: each probe of the Deployment, sent to the
// listener its port maps to, answers 200; after SIGTERM readiness fails and
// toold exits 0 within the termination grace period.
func TestProbesHitRealRoutes(t *testing.T) {
	forEachRendering(t, func(t *testing.T, r *rendering) {
		if r.nats == nil {
			return // the renderings with an external NATS have nothing to run it from
		}
		probesHitRealRoutes(t, r.m, r.nats)
	})
}

func probesHitRealRoutes(t *testing.T, m *manifests, nm *natsManifests) {
	lt := startToold(t, m, nm)
	c := m.container(t)
	probes := map[string]*corev1.Probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe, "startupProbe": c.StartupProbe}
	for name, p := range probes {
		if p == nil {
			if name != "startupProbe" {
				t.Errorf("no %s", name)
			}
			continue
		}
		path, port := probePort(t, c, name, p)
		if port != lt.listenPort {
			t.Errorf("%s on port %d: probes belong on the API port %d (the admin port may be off)", name, port, lt.listenPort)
		}
		url := "http://" + lt.addrFor(t, port) + path
		if code, body := lt.do(t, "GET", url, "", ""); code != 200 {
			t.Errorf("%s GET %s: %d, want 200\n%s", name, path, code, body)
		}
	}
	// The Service and the ServiceMonitor reach the right listeners: the
	// port named by the ServiceMonitor (without one, the Service's
	// "metrics") serves /metrics.
	endpoints := []monitoringv1.Endpoint{{Port: "metrics"}}
	if m.serviceMonitor != nil {
		endpoints = m.serviceMonitor.Spec.Endpoints
	}
	for _, ep := range endpoints {
		for _, sp := range m.service.Spec.Ports {
			if sp.Name != ep.Port {
				continue
			}
			port, ok := containerPort(c, sp.TargetPort)
			if !ok {
				t.Fatalf("Service port %s: no container port %s", sp.Name, sp.TargetPort.String())
			}
			path := ep.Path
			if path == "" {
				path = "/metrics" // the ServiceMonitor's default
			}
			url := "http://" + lt.addrFor(t, port) + path
			if code, body := lt.do(t, "GET", url, "", ""); code != 200 || !bytes.Contains(body, []byte("toold_build_info")) {
				t.Errorf("ServiceMonitor endpoint %s (%s): %d, no toold_build_info", sp.Name, url, code)
			}
		}
	}

	readiness, port := probePort(t, c, "readinessProbe", c.ReadinessProbe)
	if err := lt.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !eventually(5*time.Second, func() bool { return !ok200(lt.addrFor(t, port) + readiness) }) {
		t.Errorf("readiness %s still 200 five seconds after SIGTERM", readiness)
	}
	grace := time.Duration(derefOr(m.deployment.Spec.Template.Spec.TerminationGracePeriodSeconds, 30)) * time.Second
	select {
	case err := <-lt.done:
		lt.exited = true
		if err != nil {
			t.Errorf("toold after SIGTERM: %v, want exit status 0\n%s", err, lt.stdout)
		}
	case <-time.After(grace):
		t.Errorf("toold still running %v (the termination grace) after SIGTERM", grace)
	}
}

func ok200(hostPath string) bool {
	c := &http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + hostPath)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

// eventually polls cond every 20ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

// syncBuffer collects a process's output for failure messages.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
