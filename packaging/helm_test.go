package packaging_test

import (
	"bytes"
	"flag"
	"fmt"
	"io"
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

	"gopkg.in/yaml.v3"

	"shardproxy/internal/testserver"
)

var update = flag.Bool("update", false, "rewrite packaging/k8s/ from the chart (helm template)")

const (
	chart     = "helm/shardproxy"
	release   = "shardproxy"
	namespace = "cache"
	// helmModule is what make deps installs when helm is missing.
	helmModule = "helm.sh/helm/v3/cmd/helm@v3.22.0"
	// imageUID is the image's user (Dockerfile USER) and the chart's
	// runAsUser.
	imageUID = 65532
	// confPath is the file the unit, the image and the chart start with.
	confPath = "/etc/shardproxy/shardproxy.yml"
)

// manifests are the plain manifests the chart renders, committed: file ->
// helm template's flags.
var manifests = map[string][]string{
	"k8s/shardproxy.yaml":         nil,
	"k8s/shardproxy-sidecar.yaml": {"--set", "layout=sidecar"},
}

// helmBin returns helm's path: on PATH, or where go install puts it.
func helmBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output()
	if err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		dirs := []string{lines[0]}
		if len(lines) > 1 {
			dirs = append(dirs, filepath.Join(filepath.SplitList(lines[1])[0], "bin"))
		}
		for _, d := range dirs {
			if p := filepath.Join(d, "helm"); d != "" && isExec(p) {
				return p
			}
		}
	}
	t.Fatalf("helm is not installed: make deps installs it (go install %s)", helmModule)
	return ""
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// helm runs helm with args and returns its output.
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(helmBin(t), args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// template is helm template of the chart as release shardproxy in the
// namespace cache, with flags.
func template(t *testing.T, flags ...string) []byte {
	t.Helper()
	out, err := helm(t, append([]string{"template", release, chart, "--namespace", namespace}, flags...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// header opens each committed manifest.
func header(flags []string) string {
	cmd := strings.TrimSpace("helm template " + release + " packaging/" + chart + " --namespace " + namespace + " " + strings.Join(flags, " "))
	return "# Rendered from the chart by `" + cmd + "`.\n" +
		"# Do not edit: change the chart, then go test ./packaging/ -run TestHelmManifests -update.\n"
}

// TestHelmLint runs helm lint --strict on the chart in both layouts (and
// with etcd), and helm template refuses what the chart refuses (helm lint
// reports a template's fail as information only).
func TestHelmLint(t *testing.T) {
	for _, flags := range [][]string{nil, {"--set", "layout=sidecar"},
		{"--set", "etcd.endpoints=etcd-0.etcd:2379\\,etcd-1.etcd:2379", "--set", "etcd.prefix=/shardproxy/cache"}} {
		if out, err := helm(t, append([]string{"lint", "--strict", chart}, flags...)...); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
	bad := map[string][]string{
		`layout "daemonset"`:    {"--set", "layout=daemonset"},
		"kills the proxy":       {"--set", "drain.terminationGracePeriodSeconds=30"},
		"listen on 0.0.0.0":     {"--set", "config=x:\n  listen: 0.0.0.0:1\nshardproxy:\n  admin_listen: 127.0.0.1:22223\n"},
		"etcd.prefix":           {"--set", "etcd.endpoints=etcd:2379"},
		"config: not YAML":      {"--set", "config=[x"},
		"configuration file is": {"--set", "config="},
	}
	for reason, flags := range bad {
		_, err := helm(t, append([]string{"template", release, chart}, flags...)...)
		if err == nil || !strings.Contains(err.Error(), reason) {
			t.Errorf("helm template %q: %v, want a refusal naming %q", flags, err, reason)
		}
	}
}

// TestHelmManifests keeps packaging/k8s/ equal to what the chart renders,
// and checks each: the objects of its layout, and the pod against the
// proxy's flags and configuration.
func TestHelmManifests(t *testing.T) {
	for file, flags := range manifests {
		t.Run(filepath.Base(file), func(t *testing.T) {
			want := header(flags) + string(template(t, flags...))
			if *update {
				if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Fatalf("%s differs from the chart's rendering: go test ./packaging/ -run TestHelmManifests -update", file)
			}
			r := parseRendered(t, got)
			wantKinds := []string{"ConfigMap", "Deployment", "PodDisruptionBudget", "Service"}
			if slices.Contains(flags, "layout=sidecar") {
				wantKinds = []string{"ConfigMap", "PodTemplate"}
			}
			if kinds := r.kinds(); !slices.Equal(kinds, wantKinds) {
				t.Errorf("objects %v, want %v", kinds, wantKinds)
			}
			checkPod(t, r)
		})
	}
}

// TestHelmChecksum: the pods' checksum/config annotation follows the
// configuration, and the ConfigMap holds it as given.
func TestHelmChecksum(t *testing.T) {
	dir := t.TempDir()
	sum := func(conf string) string {
		t.Helper()
		p := filepath.Join(dir, "conf.yml")
		if err := os.WriteFile(p, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		r := parseRendered(t, template(t, "--set-file", "config="+p))
		if got := r.configMaps[release]; got != conf {
			t.Errorf("the ConfigMap holds %q, want %q", got, conf)
		}
		return r.pod(t).Metadata.Annotations["checksum/config"]
	}
	a := "mc:\n  listen: 0.0.0.0:22120\n  servers:\n    - 10.0.0.1:11211:1\n"
	b := strings.Replace(a, "10.0.0.1", "10.0.0.2", 1)
	sa, sa2, sb := sum(a), sum(a), sum(b)
	if sa == "" || sa != sa2 {
		t.Errorf("checksum of one configuration: %q then %q", sa, sa2)
	}
	if sa == sb {
		t.Errorf("checksum %q did not change with the configuration", sa)
	}
}

// TestHelmConfigCheck runs shardproxy -t on the default values' ConfigMap:
// its DNS pool resolved through a DNS server that answers the SRV name
// of packaging/k8s/memcached.yaml's headless Service (the file's only
// change: resolver, which the cluster's DNS makes needless).
func TestHelmConfigCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary")
	}
	bin := testserver.Shardproxy(t)
	conf := parseRendered(t, template(t)).configMaps[release]
	srv := memcachedSRV(t)
	if !strings.Contains(conf, "dns: "+srv+"\n") {
		t.Fatalf("the default configuration does not take its servers from %s:\n%s", srv, conf)
	}
	d := testserver.StartDNS(t)
	path := filepath.Join(t.TempDir(), "shardproxy.yml")
	if err := os.WriteFile(path, []byte(withResolver(t, conf, d.Addr)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-t", "-c", path).CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("SRV "+srv)) {
		t.Fatalf("-t without an answer for %s: %v\n%s", srv, err, out)
	}
	d.SetSRV(srv, testserver.SRVTarget{Target: "memcached-0.memcached.cache.svc.cluster.local", Port: 11211, Addr: "127.0.0.1"})
	out, err = exec.Command(bin, "-t", "-c", path).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("syntax is ok")) {
		t.Fatalf("shardproxy -t: %v\n%s", err, out)
	}
}

// TestHelmServe runs the binary with the rendered container's arguments
// (the file at -c from the ConfigMap) and finds each port the container
// declares served: the pool's answers through memcached, the admin serves
// /metrics where the scrape annotations point and the probes.
func TestHelmServe(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary and runs memcached")
	}
	bin := testserver.Shardproxy(t)
	mc := testserver.StartMemcached(t)
	srv := memcachedSRV(t)
	d := testserver.StartDNS(t)
	_, mcPort, _ := net.SplitHostPort(mc.Addr)
	port, _ := strconv.Atoi(mcPort)
	d.SetSRV(srv, testserver.SRVTarget{Target: "memcached-0.memcached.cache.svc.cluster.local", Port: port, Addr: "127.0.0.1"})

	dir := t.TempDir()
	conf := parseRendered(t, template(t)).configMaps[release]
	conf = withResolver(t, conf, d.Addr)
	conf = strings.Replace(conf, "listen: 0.0.0.0:22120", "listen: 0.0.0.0:"+strconv.Itoa(testserver.FreePort(t)), 1)
	values := filepath.Join(dir, "values.yml")
	if err := os.WriteFile(values, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	r := parseRendered(t, template(t, "--set-file", "config="+values,
		"--set", "adminPort="+strconv.Itoa(testserver.FreePort(t)), "--set", "statsPort="+strconv.Itoa(testserver.FreePort(t))))
	pod := r.pod(t)
	c := pod.Spec.Containers[0]
	file := filepath.Join(dir, "shardproxy.yml")
	if err := os.WriteFile(file, []byte(r.configMaps[release]), 0o644); err != nil {
		t.Fatal(err)
	}
	args := slices.Clone(c.Args)
	args[slices.Index(args, confPath)] = file
	cmd := exec.Command(bin, args...)
	logs := &testserver.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	for _, p := range c.Ports {
		addr := "127.0.0.1:" + strconv.Itoa(p.ContainerPort)
		waitDial(t, addr, logs)
		if p.Name == "cache" {
			roundTrip(t, addr, logs)
		}
	}
	admin := "http://127.0.0.1:" + pod.Metadata.Annotations["prometheus.io/port"]
	if code, body := get(t, admin+pod.Metadata.Annotations["prometheus.io/path"]); code != 200 || !strings.Contains(body, "shardproxy_") {
		t.Errorf("GET /metrics: %d\n%.300s", code, body)
	}
	t.Run("probes", func(t *testing.T) {
		port := strconv.Itoa(c.port(t, c.ReadinessProbe.HTTPGet.Port))
		live, _ := get(t, "http://127.0.0.1:"+strconv.Itoa(c.port(t, c.LivenessProbe.HTTPGet.Port))+c.LivenessProbe.HTTPGet.Path)
		ready, body := get(t, "http://127.0.0.1:"+port+c.ReadinessProbe.HTTPGet.Path)
		if live != 200 {
			t.Errorf("GET %s: %d, want 200", c.LivenessProbe.HTTPGet.Path, live)
		}
		// The pods' pool has no preconnect: ready as soon as it listens.
		if ready != 200 || body != "ready\n" {
			t.Errorf("GET %s: %d %q, want 200 \"ready\\n\"", c.ReadinessProbe.HTTPGet.Path, ready, body)
		}
	})
}

// TestHelmEtcd: with etcd values, the container joins the fleet under the
// pod's name, and the binary takes those flags.
func TestHelmEtcd(t *testing.T) {
	r := parseRendered(t, template(t, "--set", "etcd.endpoints=etcd-0.etcd:2379\\,etcd-1.etcd:2379", "--set", "etcd.prefix=/shardproxy/cache"))
	c := r.pod(t).Spec.Containers[0]
	for _, pair := range [][2]string{{"--etcd", "etcd-0.etcd:2379,etcd-1.etcd:2379"}, {"--etcd-prefix", "/shardproxy/cache"}, {"--fleet-id", "$(POD_NAME)"}} {
		if i := slices.Index(c.Args, pair[0]); i < 0 || i+1 >= len(c.Args) || c.Args[i+1] != pair[1] {
			t.Errorf("args %q: want %s %s", c.Args, pair[0], pair[1])
		}
	}
	if len(c.Env) != 1 || c.Env[0].Name != "POD_NAME" || c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("env %+v: want POD_NAME from metadata.name", c.Env)
	}
	if testing.Short() {
		return
	}
	bin := testserver.Shardproxy(t)
	file := filepath.Join(t.TempDir(), "shardproxy.yml")
	if err := os.WriteFile(file, []byte("mc:\n  listen: 127.0.0.1:0\n  servers:\n    - 127.0.0.1:1:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-t"}
	for _, a := range c.Args {
		args = append(args, strings.NewReplacer(confPath, file, "$(POD_NAME)", "shardproxy-0").Replace(a))
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil || !bytes.Contains(out, []byte("syntax is ok")) {
		t.Errorf("shardproxy %q: %v\n%s", args, err, out)
	}
}

// checkPod checks the rendered pod against the proxy: the file at -c is
// the ConfigMap's, the ports are the ones the configuration and flags
// make it serve, the probes and the scrape are on the admin port, the
// kubelet waits out the drain, and the container runs as the image's
// user.
func checkPod(t *testing.T, r *rendered) {
	t.Helper()
	pod := r.pod(t)
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	flags := c.flags(t)
	if flags["-c"] != confPath {
		t.Errorf("-c %q, want %s (the unit's and the image's)", flags["-c"], confPath)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != filepath.Dir(confPath) ||
		len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].Name != c.VolumeMounts[0].Name {
		t.Errorf("mounts %+v, volumes %+v: want the ConfigMap at %s", c.VolumeMounts, pod.Spec.Volumes, filepath.Dir(confPath))
	}
	conf, ok := r.configMaps[pod.Spec.Volumes[0].ConfigMap.Name]
	if !ok {
		t.Fatalf("no ConfigMap %q", pod.Spec.Volumes[0].ConfigMap.Name)
	}
	host, adminPort, err := net.SplitHostPort(flags["--admin"])
	if err != nil || host != "0.0.0.0" {
		t.Errorf("--admin %q: want 0.0.0.0:PORT, for the kubelet's probes", flags["--admin"])
	}
	want := poolPorts(t, conf)
	want["stats"], _ = strconv.Atoi(flags["-s"])
	want["admin"], _ = strconv.Atoi(adminPort)
	got := map[string]int{}
	for _, p := range c.Ports {
		got[p.Name] = p.ContainerPort
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("container ports %v, want %v (the configuration's and the flags')", got, want)
	}
	for path, p := range map[string]probe{"/ready": c.ReadinessProbe, "/live": c.LivenessProbe} {
		if p.HTTPGet.Path != path || c.port(t, p.HTTPGet.Port) != want["admin"] {
			t.Errorf("probe %+v: want GET %s on the admin port %d", p.HTTPGet, path, want["admin"])
		}
	}
	a := pod.Metadata.Annotations
	if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != adminPort || a["prometheus.io/path"] != "/metrics" {
		t.Errorf("annotations %v: want the scrape of /metrics on %s", a, adminPort)
	}
	if len(a["checksum/config"]) != 64 {
		t.Errorf("checksum/config %q: want the configuration's sha256", a["checksum/config"])
	}
	drain, err := time.ParseDuration(flags["--shutdown-timeout"])
	if err != nil {
		t.Errorf("--shutdown-timeout %q: %v", flags["--shutdown-timeout"], err)
	}
	preStop := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	if preStop <= 0 || time.Duration(pod.Spec.TerminationGracePeriodSeconds)*time.Second <= preStop+drain {
		t.Errorf("terminationGracePeriodSeconds %d: want more than the preStop sleep (%v) and the drain (%v)",
			pod.Spec.TerminationGracePeriodSeconds, preStop, drain)
	}
	s := c.SecurityContext
	if s.RunAsUser != imageUID || s.RunAsGroup != imageUID || !s.RunAsNonRoot || !s.ReadOnlyRootFilesystem {
		t.Errorf("securityContext %+v: want the image's user %d, non-root, a read-only root", s, imageUID)
	}
	if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" {
		t.Errorf("resources %+v: want cpu and memory requests", c.Resources)
	}
	if r.deployment != nil {
		checkService(t, r, want)
	}
}

// checkService: the Service and the PodDisruptionBudget select the
// Deployment's pods, and the Service publishes the pools' ports.
func checkService(t *testing.T, r *rendered, ports map[string]int) {
	t.Helper()
	labels := r.deployment.Spec.Template.Metadata.Labels
	selects := func(sel map[string]string) bool {
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	if !selects(r.service.Spec.Selector) || !selects(r.pdb.Spec.Selector.MatchLabels) || !selects(r.deployment.Spec.Selector.MatchLabels) {
		t.Errorf("selectors (Service %v, PDB %v, Deployment %v) do not all select the pods %v",
			r.service.Spec.Selector, r.pdb.Spec.Selector.MatchLabels, r.deployment.Spec.Selector.MatchLabels, labels)
	}
	got := map[string]int{}
	for _, p := range r.service.Spec.Ports {
		got[p.Name] = p.Port
		if p.TargetPort != p.Name {
			t.Errorf("Service port %+v: want the container's port %s", p, p.Name)
		}
	}
	delete(ports, "stats")
	delete(ports, "admin")
	if fmt.Sprint(got) != fmt.Sprint(ports) {
		t.Errorf("Service ports %v, want the pools' %v", got, ports)
	}
	if r.pdb.Spec.MaxUnavailable < 1 {
		t.Errorf("PodDisruptionBudget maxUnavailable %d", r.pdb.Spec.MaxUnavailable)
	}
}

// poolPorts is each pool's listen port in conf by the chart's port name
// (the pool's name, "_" made "-").
func poolPorts(t *testing.T, conf string) map[string]int {
	t.Helper()
	var doc map[string]struct {
		Listen string `yaml:"listen"`
	}
	if err := yaml.Unmarshal([]byte(conf), &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for name, pool := range doc {
		if name == "shardproxy" || name == "fleet" || strings.HasPrefix(pool.Listen, "/") {
			continue
		}
		_, p, err := net.SplitHostPort(pool.Listen)
		if err != nil {
			t.Fatalf("pool %s: listen %q: %v", name, pool.Listen, err)
		}
		out[strings.ReplaceAll(name, "_", "-")], _ = strconv.Atoi(p)
	}
	return out
}

// memcachedSRV is the SRV name of the memcached StatefulSet's headless
// Service in packaging/k8s/memcached.yaml.
func memcachedSRV(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("k8s/memcached.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var svc struct {
			Kind     string
			Metadata struct{ Name, Namespace string }
			Spec     struct {
				ClusterIP string `yaml:"clusterIP"`
				Ports     []struct{ Name, Protocol string }
			}
		}
		if err := dec.Decode(&svc); err == io.EOF {
			t.Fatal("k8s/memcached.yaml has no headless Service")
		} else if err != nil {
			t.Fatal(err)
		}
		if svc.Kind == "Service" && svc.Spec.ClusterIP == "None" && len(svc.Spec.Ports) > 0 {
			return fmt.Sprintf("_%s._tcp.%s.%s.svc.cluster.local", svc.Spec.Ports[0].Name, svc.Metadata.Name, svc.Metadata.Namespace)
		}
	}
}

// withResolver sets resolver in every servers_from of conf.
func withResolver(t *testing.T, conf, resolver string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^(\s+)servers_from:\n`)
	if !re.MatchString(conf) {
		t.Fatalf("no servers_from in\n%s", conf)
	}
	return re.ReplaceAllString(conf, "${0}${1}  resolver: "+resolver+"\n")
}

func waitDial(t *testing.T, addr string, logs *testserver.Buffer) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			nc.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing serves the declared port %s: %v\n%s", addr, err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// roundTrip sets and gets a key through the proxy at addr.
func roundTrip(t *testing.T, addr string, logs *testserver.Buffer) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(nc, "set k8s 0 0 2\r\nok\r\nget k8s\r\n")
	want := "STORED\r\nVALUE k8s 0 2\r\nok\r\nEND\r\n"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(nc, got); err != nil || string(got) != want {
		t.Fatalf("through %s: %q, %v; want %q\n%s", addr, got, err, want, logs.String())
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHelmValuesDocumented finds each value of values.yaml (to the second
// level, but for resources, Kubernetes' own) named in docs/kubernetes.md's
// table of values.
func TestHelmValuesDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "\n## Values\n")
	table, _, _ = strings.Cut(table, "\n## ")
	for k, v := range values {
		names := []string{k}
		if m, ok := v.(map[string]any); ok && len(m) > 0 && k != "resources" {
			names = names[:0]
			for k2 := range m {
				names = append(names, k+"."+k2)
			}
		}
		for _, n := range names {
			if !strings.Contains(table, "`"+n+"`") {
				t.Errorf("the value %s is not in docs/kubernetes.md's table of values", n)
			}
		}
	}
}

// TestHelmConfigPorts: the ports come from the configuration: each TCP
// pool's (a unix socket has none), and the admin and stats addresses of
// its shardproxy: section over the values.
func TestHelmConfigPorts(t *testing.T) {
	conf := "alpha_one:\n  listen: 0.0.0.0:30001\n  servers:\n    - 10.0.0.1:11211:1\n" +
		"beta:\n  listen: /run/shardproxy/beta.sock\n  servers:\n    - 10.0.0.1:11211:1\n" +
		"gamma:\n  listen: 0.0.0.0:30002\n  redis: true\n  servers:\n    - 10.0.0.2:6379:1\n" +
		"shardproxy:\n  admin_listen: 0.0.0.0:30003\n  stats_listen: 0.0.0.0:30004\n"
	p := filepath.Join(t.TempDir(), "conf.yml")
	if err := os.WriteFile(p, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	r := parseRendered(t, template(t, "--set-file", "config="+p))
	checkPod(t, r)
	c := r.pod(t).Spec.Containers[0]
	got := map[string]int{}
	for _, p := range c.Ports {
		got[p.Name] = p.ContainerPort
	}
	want := map[string]int{"alpha-one": 30001, "gamma": 30002, "admin": 30003, "stats": 30004}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ports %v, want %v", got, want)
	}
	if f := c.flags(t); f["--admin"] != "0.0.0.0:30003" || f["-s"] != "30004" {
		t.Errorf("args %q: want --admin 0.0.0.0:30003 and -s 30004", c.Args)
	}
}
