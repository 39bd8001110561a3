package k8s

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// Label keys and values every rendered object carries.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelPartOf    = "app.kubernetes.io/part-of"
	LabelComponent = "app.kubernetes.io/component"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelRunID     = "pdsoak.dev/run-id"
	AppName        = "pdsoak"
)

// NonRootUID is distroless's nonroot user (and group), the image's USER.
const NonRootUID = 65532

// Resources are a container's CPU and memory requests; limits are derived from them.
type Resources struct {
	CPU    string // e.g. "1", "500m"
	Memory string // e.g. "1Gi"
}

// requirements parses r: limits are twice the CPU request (a harness pinned at its
// request would be throttled, which its self-check then reports as an invalid run) and
// equal to the memory request (memory is not compressible: a pod over it is killed, so
// ask for what it needs).
func (r Resources) requirements(field string) (corev1.ResourceRequirements, error) {
	cpu, err := resource.ParseQuantity(r.CPU)
	if err != nil {
		return corev1.ResourceRequirements{}, fmt.Errorf("k8s: --%scpu %q: %w", field, r.CPU, err)
	}
	mem, err := resource.ParseQuantity(r.Memory)
	if err != nil {
		return corev1.ResourceRequirements{}, fmt.Errorf("k8s: --%smemory %q: %w", field, r.Memory, err)
	}
	if cpu.Sign() <= 0 || mem.Sign() <= 0 {
		return corev1.ResourceRequirements{}, fmt.Errorf("k8s: --%scpu and --%smemory must be > 0 (got %s, %s)", field, field, r.CPU, r.Memory)
	}
	cpuLimit := *resource.NewMilliQuantity(2*cpu.MilliValue(), resource.DecimalSI)
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: cpuLimit, corev1.ResourceMemory: mem.DeepCopy()},
	}, nil
}

// podSecurity is the pod-level context of every rendered pod: a non-root user, the
// runtime's default seccomp profile, and an fsGroup so the shared volume is writable.
func podSecurity() *corev1.PodSecurityContext {
	uid := int64(NonRootUID)
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr(true),
		RunAsUser:      &uid,
		RunAsGroup:     &uid,
		FSGroup:        &uid,
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// containerSecurity is every rendered container's context: unprivileged, no escalation,
// no capabilities, a read-only root filesystem (scratch space is an emptyDir on /tmp).
func containerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		Privileged:               ptr(false),
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		RunAsNonRoot:             ptr(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// tmpVolume is the writable scratch directory a read-only root filesystem needs.
func tmpVolume() (corev1.Volume, corev1.VolumeMount) {
	return corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.VolumeMount{Name: "tmp", MountPath: "/tmp"}
}

func ptr[T any](v T) *T { return &v }

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// dnsLabel turns s into a DNS-1123 label fragment of at most max characters.
func dnsLabel(s string, max int) string {
	s = notDNS.ReplaceAllString(strings.ToLower(s), "-")
	if len(s) > max {
		s = s[:max]
	}
	s = strings.Trim(s, "-")
	if s == "" {
		s = "x"
	}
	return s
}

// YAML serialises objects as one multi-document YAML stream, in order.
func YAML(objs []runtime.Object) ([]byte, error) {
	var b bytes.Buffer
	for i, o := range objs {
		y, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("k8s: marshal object %d: %w", i, err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}
