package k8s

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Ports of the reference topology (pdserver's defaults, SGLang's).
const (
	HTTPPort      = 30000
	BootstrapPort = 8998
	// PDServerBin is the pdserver binary in the image (Dockerfile).
	PDServerBin = "/usr/local/bin/pdserver"
	// RouterService is the router's Service: a scenario's target.url in the cluster is
	// http://RouterService.<namespace>.svc:HTTPPort.
	RouterService = "pdsoak-router"
)

// ReferenceOptions configure RenderReference.
type ReferenceOptions struct {
	Prefill, Decode int
	Image           string
	Namespace       string
	Semantics       string // strict or sglang; empty: pdserver's default (strict)
	Backend         string // empty: pdserver's default (tinyref)
	// WorkerArgs go to every prefill and decode worker, RouterArgs to the router.
	WorkerArgs, RouterArgs []string
	Worker, Router         Resources
}

// RouterURL is the router Service's URL from inside the cluster.
func RouterURL(namespace string) string {
	if namespace == "" {
		return fmt.Sprintf("http://%s:%d", RouterService, HTTPPort)
	}
	return fmt.Sprintf("http://%s.%s.svc:%d", RouterService, namespace, HTTPPort)
}

// RenderReference renders the reference PD topology: one Deployment and Service per
// prefill and decode worker (a request's KV lives on one prefill worker, so each worker
// needs its own address, not a load-balanced one) and the router in front of them.
func RenderReference(o ReferenceOptions) ([]runtime.Object, error) {
	if o.Prefill < 1 || o.Decode < 1 || o.Prefill > 64 || o.Decode > 64 {
		return nil, fmt.Errorf("k8s: --prefill and --decode must be in [1, 64] (got %d, %d)", o.Prefill, o.Decode)
	}
	if o.Image == "" {
		return nil, fmt.Errorf("k8s: --image is required (the pdsoak image: make image)")
	}
	switch o.Semantics {
	case "", "strict", "sglang":
	default:
		return nil, fmt.Errorf("k8s: --semantics %q is unknown (strict, sglang)", o.Semantics)
	}
	if o.Worker.CPU == "" {
		o.Worker.CPU = DefaultCPU
	}
	if o.Worker.Memory == "" {
		o.Worker.Memory = DefaultMemory
	}
	if o.Router.CPU == "" {
		o.Router.CPU = DefaultMergeCPU
	}
	if o.Router.Memory == "" {
		o.Router.Memory = "256Mi"
	}
	workerRes, err := o.Worker.requirements("worker-")
	if err != nil {
		return nil, err
	}
	routerRes, err := o.Router.requirements("router-")
	if err != nil {
		return nil, err
	}
	common := []string{"--host", "0.0.0.0", "--port", strconv.Itoa(HTTPPort)}
	if o.Semantics != "" {
		common = append(common, "--semantics", o.Semantics)
	}
	var objs []runtime.Object
	routerArgs := []string{"router"}
	routerArgs = append(routerArgs, common...)
	for i := 0; i < o.Prefill; i++ {
		name := fmt.Sprintf("pdsoak-prefill-%d", i)
		args := append([]string{"prefill"}, common...)
		args = append(args, "--disaggregation-bootstrap-port", strconv.Itoa(BootstrapPort))
		if o.Backend != "" {
			args = append(args, "--backend", o.Backend)
		}
		args = append(args, o.WorkerArgs...)
		ports := []corev1.ContainerPort{{Name: "http", ContainerPort: HTTPPort}, {Name: "bootstrap", ContainerPort: BootstrapPort}}
		objs = append(objs, o.deployment(name, "prefill", args, ports, workerRes), o.service(name, "prefill", ports))
		routerArgs = append(routerArgs, "--prefill", fmt.Sprintf("http://%s:%d", name, HTTPPort),
			"--prefill-bootstrap", fmt.Sprintf("%s:%d", name, BootstrapPort))
	}
	for i := 0; i < o.Decode; i++ {
		name := fmt.Sprintf("pdsoak-decode-%d", i)
		args := append([]string{"decode"}, common...)
		if o.Backend != "" {
			args = append(args, "--backend", o.Backend)
		}
		args = append(args, o.WorkerArgs...)
		ports := []corev1.ContainerPort{{Name: "http", ContainerPort: HTTPPort}}
		objs = append(objs, o.deployment(name, "decode", args, ports, workerRes), o.service(name, "decode", ports))
		routerArgs = append(routerArgs, "--decode", fmt.Sprintf("http://%s:%d", name, HTTPPort))
	}
	routerArgs = append(routerArgs, o.RouterArgs...)
	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: HTTPPort}}
	objs = append(objs, o.deployment(RouterService, "router", routerArgs, ports, routerRes), o.service(RouterService, "router", ports))
	return objs, nil
}

func referenceLabels(name, component string) map[string]string {
	return map[string]string{LabelName: AppName, LabelPartOf: AppName, LabelComponent: component,
		LabelInstance: name, LabelManagedBy: "harness-k8s-render"}
}

func (o ReferenceOptions) deployment(name, component string, args []string, ports []corev1.ContainerPort, res corev1.ResourceRequirements) *appsv1.Deployment {
	labels := referenceLabels(name, component)
	selector := map[string]string{LabelName: AppName, LabelInstance: name}
	tmpVol, tmpMount := tmpVolume()
	health := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http")}},
			PeriodSeconds:    period,
			TimeoutSeconds:   2,
			FailureThreshold: failures,
		}
	}
	readiness := health("/health", 2, 3)
	// Liveness is lenient: a worker's /health also fails while it is wedged, which is
	// what a soak is there to observe, not to hide by a restart; only a worker that stays
	// unhealthy for minutes is restarted. The router's /liveness fails only while it
	// shuts down: workers down for longer (a decode's model reload) must not restart the
	// router in front of them.
	livePath := "/health"
	if component == "router" {
		livePath = "/liveness"
	}
	liveness := health(livePath, 10, 18)
	liveness.InitialDelaySeconds = 10
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			// One pod per worker: each has its own Service, hence its own address.
			Replicas: ptr(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			// A worker's replacement must not overlap it (two pods behind one address).
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr(false),
					SecurityContext:              podSecurity(),
					Volumes:                      []corev1.Volume{tmpVol},
					Containers: []corev1.Container{{
						Name: component, Image: o.Image, ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{PDServerBin}, Args: args, Ports: ports,
						Env:            []corev1.EnvVar{{Name: "TMPDIR", Value: "/tmp"}},
						Resources:      res,
						VolumeMounts:   []corev1.VolumeMount{tmpMount},
						ReadinessProbe: readiness, LivenessProbe: liveness,
						SecurityContext: containerSecurity(),
					}},
				},
			},
		},
	}
}

func (o ReferenceOptions) service(name, component string, ports []corev1.ContainerPort) *corev1.Service {
	sp := make([]corev1.ServicePort, 0, len(ports))
	for _, p := range ports {
		sp = append(sp, corev1.ServicePort{Name: p.Name, Port: p.ContainerPort, TargetPort: intstr.FromString(p.Name), Protocol: corev1.ProtocolTCP})
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: referenceLabels(name, component)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{LabelName: AppName, LabelInstance: name},
			Ports:    sp,
		},
	}
}
