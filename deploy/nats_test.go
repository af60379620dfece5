package deploy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/toold/toold/internal/state/statetest"
)

// natsManifests are the objects `kubectl apply -k deploy/nats` creates.
type natsManifests struct {
	sts     *appsv1.StatefulSet
	svc     *corev1.Service
	pdb     *policyv1.PodDisruptionBudget
	netpol  *networkingv1.NetworkPolicy
	config  *corev1.ConfigMap
	objects int
}

func renderNATS(t testing.TB) *natsManifests {
	t.Helper()
	m := collectNATS(t, render(t, "deploy", "nats"), true)
	if m.objects != 5 {
		t.Fatalf("deploy/nats renders %d objects, not one StatefulSet, Service, PDB, NetworkPolicy and ConfigMap", m.objects)
	}
	return m
}

// TestNATSManifests holds deploy/nats together and to the toold base: the
// files listed, selectors matching the pods, a hardened pod, the image of
// the nats-server release toold embeds, the store on the volume, and the
// base's state.nats settings pointing at this Service and Secret.
func TestNATSManifests(t *testing.T) {
	forEachRendering(t, func(t *testing.T, r *rendering) {
		if r.nats == nil {
			return // an external NATS: nothing of it is rendered
		}
		checkNATS(t, r.nats, r.m)
	})
}

func checkNATS(t *testing.T, m *natsManifests, base *manifests) {
	pod := m.sts.Spec.Template.Labels
	selects(t, "StatefulSet .spec.selector", m.sts.Spec.Selector, pod)
	selects(t, "PodDisruptionBudget", m.pdb.Spec.Selector, pod)
	if m.netpol != nil {
		selects(t, "NetworkPolicy podSelector", &m.netpol.Spec.PodSelector, pod)
	}
	for _, tsc := range m.sts.Spec.Template.Spec.TopologySpreadConstraints {
		selects(t, "topologySpreadConstraints", tsc.LabelSelector, pod)
	}
	selects(t, "Service", mapSelector(m.svc.Spec.Selector), pod)
	if m.sts.Spec.ServiceName != m.svc.Name || m.svc.Spec.ClusterIP != "None" {
		t.Errorf("the StatefulSet's serviceName %q must be the headless Service %q", m.sts.Spec.ServiceName, m.svc.Name)
	}
	toold := base.deployment.Spec.Template.Labels
	if selectorMatches(mapSelector(base.service.Spec.Selector), pod) == nil {
		t.Error("the toold Service selects the NATS pods")
	}
	if m.netpol != nil {
		selects(t, "NATS NetworkPolicy client ingress from toold", m.netpol.Spec.Ingress[0].From[0].PodSelector, toold)
	}
	if base.netpol != nil && !egressTo(base.netpol, pod, 4222) {
		t.Error("the toold NetworkPolicy lets toold reach no NATS pod on 4222")
	}

	c := m.sts.Spec.Template.Spec.Containers[0]
	gomod := string(readRepoFile(t, "go.mod"))
	v := regexp.MustCompile(`github.com/nats-io/nats-server/v2 v(\S+)`).FindStringSubmatch(gomod)
	if v == nil || !strings.HasSuffix(c.Image, "nats:"+v[1]) {
		t.Errorf("image %q; want the release toold embeds (go.mod: %v)", c.Image, v)
	}
	csc, psc := c.SecurityContext, m.sts.Spec.Template.Spec.SecurityContext
	if csc == nil || psc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot ||
		csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation || !slices.Contains(csc.Capabilities.Drop, "ALL") {
		t.Error("the NATS container must run as non-root with a read-only root, no privilege escalation, all capabilities dropped")
	}
	conf := m.config.Data["nats.conf"]
	storeDir := regexp.MustCompile(`store_dir:\s*(\S+)`).FindStringSubmatch(conf)
	if storeDir == nil || !slices.ContainsFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool {
		return vm.MountPath == storeDir[1] && slices.ContainsFunc(m.sts.Spec.VolumeClaimTemplates, func(p corev1.PersistentVolumeClaim) bool { return p.Name == vm.Name })
	}) {
		t.Errorf("JetStream's store_dir %v is not a volume of the claim template", storeDir)
	}
	// Both sides read the password from the same Secret key.
	if nref, tref := envSecret(&c, "TOOLD_NATS_PASSWORD"), envSecret(base.container(t), "TOOLD_NATS_PASSWORD"); nref == nil || tref == nil ||
		nref.Name != tref.Name || nref.Key != tref.Key {
		t.Errorf("TOOLD_NATS_PASSWORD: NATS reads %v, toold reads %v; want the same Secret key", nref, tref)
	}

	cfg, _ := loadDeployedConfig(t, base)
	u := strings.TrimPrefix(cfg.State.NATS.URL, "nats://")
	host, port, _ := net.SplitHostPort(u)
	if host != m.svc.Name || !slices.ContainsFunc(m.svc.Spec.Ports, func(p corev1.ServicePort) bool { return strconv.Itoa(int(p.Port)) == port }) {
		t.Errorf("state.nats.url %q does not name the Service %s and one of its ports", cfg.State.NATS.URL, m.svc.Name)
	}
	if cfg.State.NATS.Replicas > int(*m.sts.Spec.Replicas) || !strings.Contains(conf, "user: "+cfg.State.NATS.User+",") {
		t.Errorf("state.nats: replicas %d for %d servers, user %q not in nats.conf", cfg.State.NATS.Replicas, *m.sts.Spec.Replicas, cfg.State.NATS.User)
	}
	// The routes name every pod of the StatefulSet through its Service.
	routes := regexp.MustCompile(`nats://(\S+):6222`).FindAllStringSubmatch(m.config.Data["cluster.conf"], -1)
	var want, got []string
	for i := range int(*m.sts.Spec.Replicas) {
		want = append(want, fmt.Sprintf("%s-%d.%s", m.sts.Name, i, m.svc.Name))
	}
	for _, r := range routes {
		got = append(got, r[1])
	}
	if *m.sts.Spec.Replicas > 1 && !slices.Equal(got, want) {
		t.Errorf("cluster.conf routes %v, want every pod %v", got, want)
	}
}

// envSecret is the Secret key an env variable of c reads, or nil.
func envSecret(c *corev1.Container, name string) *corev1.SecretKeySelector {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil {
			return e.ValueFrom.SecretKeyRef
		}
	}
	return nil
}

// egressTo reports whether some egress rule of np lets its pods reach pods
// with the labels l on port: any one rule suffices, whatever the others
// say.
func egressTo(np *networkingv1.NetworkPolicy, l map[string]string, port int) bool {
	reach := false
	for _, e := range np.Spec.Egress {
		for _, to := range e.To {
			if selectorMatches(to.PodSelector, l) == nil {
				reach = reach || slices.ContainsFunc(e.Ports, func(p networkingv1.NetworkPolicyPort) bool { return p.Port.IntValue() == port })
			}
		}
	}
	return reach
}

// TestEgressTo: a later rule to the same pods on another port does not
// hide an earlier rule on the port asked for, and no rule on it is no
// reach.
func TestEgressTo(t *testing.T) {
	nats := map[string]string{"app.kubernetes.io/name": "nats"}
	rule := func(port int) networkingv1.NetworkPolicyEgressRule {
		p := intstr.FromInt32(int32(port))
		return networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: nats}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: &p}},
		}
	}
	policy := func(rules ...networkingv1.NetworkPolicyEgressRule) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{Egress: rules}}
	}
	for _, tt := range []struct {
		name string
		np   *networkingv1.NetworkPolicy
		want bool
	}{
		{"4222 then 8222", policy(rule(4222), rule(8222)), true},
		{"8222 then 4222", policy(rule(8222), rule(4222)), true},
		{"8222 only", policy(rule(8222)), false},
		{"no egress", policy(), false},
	} {
		if got := egressTo(tt.np, nats, 4222); got != tt.want {
			t.Errorf("%s: egressTo = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// natsEnv is the environment the StatefulSet gives nats-server.
func natsEnv(password string) []string {
	return []string{"POD_NAME=toold-nats-0", "TOOLD_NATS_PASSWORD=" + password}
}

// TestNATSConfigPassesServerCheck: the rendered configuration, cluster
// routes included, passes the real nats-server's own check.
func TestNATSConfigPassesServerCheck(t *testing.T) {
	forEachRendering(t, func(t *testing.T, r *rendering) {
		if r.nats != nil {
			natsServerCheck(t, r.nats)
		}
	})
}

func natsServerCheck(t *testing.T, m *natsManifests) {
	bin, err := statetest.ServerBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range m.config.Data {
		os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-t", "-c", filepath.Join(dir, "nats.conf"))
	cmd.Env = natsEnv(testNATSPassword)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nats-server -t: %v\n%s", err, out)
	}
}

// testNATSPassword is the password the tests give both sides.
const testNATSPassword = "nats-test-password-0123456789abcdef"

// liveNATS is a nats-server run from a rendered NATS configuration.
type liveNATS struct {
	url      string
	password string
}

// startNATS runs the real nats-server on the rendered nats.conf, as one
// node (cluster.conf empty), its listeners on loopback, its store in a
// temporary directory, with testNATSPassword; and checks the StatefulSet's
// readiness probe against it.
func startNATS(t *testing.T, m *natsManifests) *liveNATS {
	t.Helper()
	bin, err := statetest.ServerBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	client, monitor := statetest.FreePort(t), statetest.FreePort(t)
	conf := m.config.Data["nats.conf"]
	for old, new := range map[string]string{
		"listen: 0.0.0.0:4222": fmt.Sprintf("listen: 127.0.0.1:%d", client),
		"http: 0.0.0.0:8222":   fmt.Sprintf("http: 127.0.0.1:%d", monitor),
		"store_dir: /data":     "store_dir: " + strconv.Quote(filepath.Join(dir, "data")),
	} {
		if !strings.Contains(conf, old) {
			t.Fatalf("nats.conf no longer says %q; update the test's loopback rewrite", old)
		}
		conf = strings.Replace(conf, old, new, 1)
	}
	os.WriteFile(filepath.Join(dir, "nats.conf"), []byte(conf), 0o600)
	os.WriteFile(filepath.Join(dir, "cluster.conf"), nil, 0o600)
	password := testNATSPassword
	cmd := exec.Command(bin, "-c", filepath.Join(dir, "nats.conf"))
	cmd.Env = natsEnv(password)
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	if err := statetest.StartReady(cmd); err != nil {
		t.Fatalf("the rendered NATS configuration: %v", err)
	}
	probe := m.sts.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Path
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", monitor, probe))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the StatefulSet's readiness probe %s: %v %v", probe, resp, err)
	}
	resp.Body.Close()
	return &liveNATS{url: fmt.Sprintf("nats://127.0.0.1:%d", client), password: password}
}

// TestTooldRefusedWithoutTheNATSPassword: the NATS side really enforces
// its user: toold with a wrong password cannot start, and says why.
func TestTooldRefusedWithoutTheNATSPassword(t *testing.T) {
	nats := startNATS(t, renderNATS(t))
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("state: {nats: {url: %q, user: toold, password: wrong-password}}\n", nats.url)), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, toolBin, "-config", cfg, "-workspace", t.TempDir(), "-listen", "127.0.0.1:0", "-admin-listen", "off")
	// An audit key, so that what stops toold is the password, not the
	// key it checks first.
	cmd.Env = append(os.Environ(), "TOOLD_AUDIT_SIGNING_KEY="+strings.Repeat("11", 32))
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "cannot reach NATS") || !strings.Contains(strings.ToLower(string(out)), "authorization") {
		t.Errorf("toold with a wrong NATS password: %v\n%s", err, out)
	}
}

// TestAuditKeyPlaceholderRefused: the example Secret's audit key is a
// placeholder toold refuses (so applying the example as it stands cannot
// leave replicas signing with a key anyone can read here), and without any
// key toold on the shared store refuses to start; both before NATS is
// reached, and both say what to do.
func TestAuditKeyPlaceholderRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("state: {nats: {url: \"nats://127.0.0.1:1\"}}\n"), 0o600)
	placeholder := exampleSecrets(t)["toold-audit-key"]["signing-key"]
	for _, tt := range []struct {
		env, want string
	}{
		{"TOOLD_AUDIT_SIGNING_KEY=" + placeholder, "not an ed25519 private key"},
		{"", "toold audit keygen"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, toolBin, "-config", cfg, "-workspace", t.TempDir(), "-listen", "127.0.0.1:0", "-admin-listen", "off")
		var env []string
		if tt.env != "" {
			env = append(env, tt.env)
		}
		cmd.Env = processEnv(env)
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), tt.want) || strings.Contains(string(out), "cannot reach NATS") {
			t.Errorf("toold with %q: %v\n%s", tt.env, err, out)
		}
	}
}
