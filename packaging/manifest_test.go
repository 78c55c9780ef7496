package packaging_test

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strconv"
	"testing"

	"gopkg.in/yaml.v3"
)

// The parts of the Kubernetes objects the chart renders that the tests
// read.

type meta struct {
	Name        string            `yaml:"name"`
	Namespace   string            `yaml:"namespace"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type podTemplate struct {
	Metadata meta    `yaml:"metadata"`
	Spec     podSpec `yaml:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds int         `yaml:"terminationGracePeriodSeconds"`
	Containers                    []container `yaml:"containers"`
	Volumes                       []struct {
		Name      string `yaml:"name"`
		ConfigMap struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type container struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Env   []struct {
		Name      string `yaml:"name"`
		ValueFrom struct {
			FieldRef struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe probe `yaml:"readinessProbe"`
	LivenessProbe  probe `yaml:"livenessProbe"`
	Lifecycle      struct {
		PreStop struct {
			Sleep struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
	} `yaml:"resources"`
	SecurityContext struct {
		RunAsNonRoot           bool `yaml:"runAsNonRoot"`
		RunAsUser              int  `yaml:"runAsUser"`
		RunAsGroup             int  `yaml:"runAsGroup"`
		ReadOnlyRootFilesystem bool `yaml:"readOnlyRootFilesystem"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// flags is the container's args as flag -> value; every flag the chart
// passes takes a value.
func (c container) flags(t *testing.T) map[string]string {
	t.Helper()
	if len(c.Args)%2 != 0 {
		t.Fatalf("args %q: want flag and value pairs", c.Args)
	}
	out := map[string]string{}
	for i := 0; i < len(c.Args); i += 2 {
		out[c.Args[i]] = c.Args[i+1]
	}
	return out
}

// port resolves a probe's port, a name or a number, to the number.
func (c container) port(t *testing.T, p string) int {
	t.Helper()
	if n, err := strconv.Atoi(p); err == nil {
		return n
	}
	for _, cp := range c.Ports {
		if cp.Name == p {
			return cp.ContainerPort
		}
	}
	t.Fatalf("no container port named %q", p)
	return 0
}

type selector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type deployment struct {
	Spec struct {
		Replicas int         `yaml:"replicas"`
		Selector selector    `yaml:"selector"`
		Template podTemplate `yaml:"template"`
	} `yaml:"spec"`
}

type service struct {
	Spec struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type pdb struct {
	Spec struct {
		MaxUnavailable int      `yaml:"maxUnavailable"`
		Selector       selector `yaml:"selector"`
	} `yaml:"spec"`
}

// rendered is one rendering of the chart, by kind.
type rendered struct {
	objects    []string          // kinds, in order
	configMaps map[string]string // name -> shardproxy.yml
	deployment *deployment
	sidecar    *podTemplate // a PodTemplate's template
	service    *service
	pdb        *pdb
}

func (r *rendered) kinds() []string {
	k := slices.Clone(r.objects)
	slices.Sort(k)
	return k
}

// pod is the pod template of either layout.
func (r *rendered) pod(t *testing.T) podTemplate {
	t.Helper()
	switch {
	case r.deployment != nil:
		return r.deployment.Spec.Template
	case r.sidecar != nil:
		return *r.sidecar
	}
	t.Fatal("the chart rendered no pod")
	return podTemplate{}
}

// parseRendered reads helm template's output, one YAML document per
// object.
func parseRendered(t *testing.T, out []byte) *rendered {
	t.Helper()
	r := &rendered{configMaps: map[string]string{}}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return r
		}
		if err != nil {
			t.Fatalf("rendered YAML: %v", err)
		}
		var head struct {
			Kind     string            `yaml:"kind"`
			Metadata meta              `yaml:"metadata"`
			Data     map[string]string `yaml:"data"`
			Template *podTemplate      `yaml:"template"`
		}
		decode(t, &n, &head)
		r.objects = append(r.objects, head.Kind)
		switch head.Kind {
		case "ConfigMap":
			r.configMaps[head.Metadata.Name] = head.Data["shardproxy.yml"]
		case "Deployment":
			r.deployment = &deployment{}
			decode(t, &n, r.deployment)
		case "PodTemplate":
			r.sidecar = head.Template
		case "Service":
			r.service = &service{}
			decode(t, &n, r.service)
		case "PodDisruptionBudget":
			r.pdb = &pdb{}
			decode(t, &n, r.pdb)
		}
	}
}

func decode(t *testing.T, n *yaml.Node, v any) {
	t.Helper()
	if err := n.Decode(v); err != nil {
		t.Fatalf("rendered YAML: %v", err)
	}
}
