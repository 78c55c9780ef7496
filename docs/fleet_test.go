package docs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"shardproxy/config"
	_ "shardproxy/proxy" // every pool kind, for config.Parse
)

// manifest is what TestKubernetesManifests reads of a Kubernetes object.
type manifest struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	Spec struct {
		ClusterIP string `yaml:"clusterIP"`
		Ports     []struct {
			Name string `yaml:"name"`
		} `yaml:"ports"`
	} `yaml:"spec"`
	Data map[string]string `yaml:"data"`
}

// TestKubernetesManifests reads the manifests of fleet.md's Kubernetes
// section: each is YAML with an apiVersion; the ConfigMap's shardproxy.yml
// is a valid configuration whose pool takes its servers from the SRV name
// the headless Service's named port gives.
func TestKubernetesManifests(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "fleet.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "\n## Kubernetes\n")
	section, _, _ = strings.Cut(section, "\n## ")
	var objs []manifest
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(section, -1) {
		dec := yaml.NewDecoder(strings.NewReader(block[1]))
		for {
			var m manifest
			err := dec.Decode(&m)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("a YAML block of the Kubernetes section: %v\n%s", err, block[1])
			}
			if m.Kind != "" {
				if m.APIVersion == "" || m.Metadata.Name == "" {
					t.Errorf("%s %q: no apiVersion or name", m.Kind, m.Metadata.Name)
				}
				objs = append(objs, m)
			}
		}
	}
	var srv, conf string
	for _, m := range objs {
		switch {
		case m.Kind == "Service" && m.Spec.ClusterIP == "None" && len(m.Spec.Ports) > 0:
			srv = "_" + m.Spec.Ports[0].Name + "._tcp." + m.Metadata.Name + "." + m.Metadata.Namespace + ".svc.cluster.local"
		case m.Kind == "ConfigMap":
			conf = m.Data["shardproxy.yml"]
		}
	}
	if srv == "" || conf == "" {
		t.Fatalf("the Kubernetes section has no headless Service (%q) or no ConfigMap with shardproxy.yml", srv)
	}
	if _, err := config.Parse([]byte(conf), "fleet.md ConfigMap"); err != nil {
		t.Errorf("the ConfigMap's shardproxy.yml: %v", err)
	}
	var pools map[string]struct {
		ServersFrom struct {
			DNS string `yaml:"dns"`
		} `yaml:"servers_from"`
	}
	if err := yaml.NewDecoder(bytes.NewReader([]byte(conf))).Decode(&pools); err != nil {
		t.Fatal(err)
	}
	for name, p := range pools {
		if p.ServersFrom.DNS != srv {
			t.Errorf("pool %s takes its servers from %q; the headless Service's SRV name is %q", name, p.ServersFrom.DNS, srv)
		}
	}
}
