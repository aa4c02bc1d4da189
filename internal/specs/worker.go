package specs

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// WorkerChildren are the objects a Worker owns, built by BuildWorkerChildren.
type WorkerChildren struct {
	ConfigMap  *corev1.ConfigMap
	Deployment *appsv1.Deployment
	Service    *corev1.Service
	// RPCService is "<name>-rpc": ClusterIP only, the rpc socket (podcontract.RPCPort)
	// where other Workers' service bindings connect; never exposed like Service may be.
	RPCService *corev1.Service
	// NetworkPolicy admits callers to the Worker's pods (buildNetworkPolicy); the
	// reconciler applies it when Options.NetworkPolicies is on.
	NetworkPolicy *networkingv1.NetworkPolicy
}

// configMapName is content-addressed: a new version is a new ConfigMap, so pods of
// the old ReplicaSet keep reading the config they started with during a rollout.
func configMapName(w *fleetv1alpha1.Worker, version string) string {
	return fmt.Sprintf("%s-%s", w.Name, shortHash(version))
}

func shortHash(v string) string {
	if len(v) > 10 {
		return v[:10]
	}
	return v
}

// WorkerURL is the in-cluster URL shown in status.url.
func WorkerURL(w *fleetv1alpha1.Worker, clusterDomain string) string {
	return "http://" + render.ServiceAddress(w, render.Options{ClusterDomain: clusterDomain})
}

// BuildWorkerChildren builds the ConfigMap, Deployment and Service of a Worker from
// its rendered config, and the NetworkPolicy of its pods. inputsHash covers the referenced Secrets and ConfigMaps (so a
// change of their data rolls the pods). Pure: no API calls.
func BuildWorkerChildren(w *fleetv1alpha1.Worker, out *render.Output, inputsHash string, opts Options) WorkerChildren {
	dep := buildWorkerDeployment(w, out, inputsHash, opts)
	return WorkerChildren{
		ConfigMap:  buildWorkerConfigMap(w, out),
		Deployment: dep,
		Service:    buildWorkerService(w),
		RPCService: buildWorkerRPCService(w),
		NetworkPolicy: buildNetworkPolicy(metav1.ObjectMeta{
			Name: w.Name, Namespace: w.Namespace, Labels: workerLabels(w), OwnerReferences: []metav1.OwnerReference{ownerRef(w)},
		}, WorkerSelector(w.Name), &dep.Spec.Template.Spec, opts, w),
	}
}

func ownerRef(w *fleetv1alpha1.Worker) metav1.OwnerReference {
	return *metav1.NewControllerRef(w, fleetv1alpha1.GroupVersion.WithKind("Worker"))
}

func workerLabels(w *fleetv1alpha1.Worker) map[string]string {
	return commonLabels(podcontract.ComponentWorker, podcontract.LabelWorker, w.Name)
}

func buildWorkerConfigMap(w *fleetv1alpha1.Worker, out *render.Output) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            configMapName(w, out.Version),
			Namespace:       w.Namespace,
			Labels:          workerLabels(w),
			Annotations:     map[string]string{podcontract.AnnotationVersion: out.Version},
			OwnerReferences: []metav1.OwnerReference{ownerRef(w)},
		},
		Immutable: ptr.To(true),
	}
	for _, f := range out.Files {
		if f.Binary {
			if cm.BinaryData == nil {
				cm.BinaryData = map[string][]byte{}
			}
			cm.BinaryData[f.Key] = f.Data
		} else {
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[f.Key] = string(f.Data)
		}
	}
	return cm
}

func buildWorkerService(w *fleetv1alpha1.Worker) *corev1.Service {
	svc := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            w.Name,
			Namespace:       w.Namespace,
			Labels:          workerLabels(w),
			OwnerReferences: []metav1.OwnerReference{ownerRef(w)},
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: WorkerSelector(w.Name),
			// Only the http socket: health, trigger and sidecar stay off the Service.
			Ports: []corev1.ServicePort{{
				Name:        podcontract.HTTPPortName,
				Port:        render.HTTPPort(w),
				TargetPort:  intstr.FromString(podcontract.HTTPPortName),
				Protocol:    corev1.ProtocolTCP,
				AppProtocol: ptr.To(podcontract.HTTPAppProtocol),
			}},
		},
	}
	if s := w.Spec.Service; s != nil {
		if s.Type != "" {
			svc.Spec.Type = s.Type
		}
		if len(s.Annotations) > 0 {
			svc.Annotations = s.Annotations
		}
	}
	return svc
}

// buildWorkerRPCService is the Worker's rpc Service: always ClusterIP (whatever
// spec.service.type says), one port "rpc". Service bindings from other Workers connect
// here (render.RPCAddress); a NetworkPolicy can admit only workerd pods to it.
func buildWorkerRPCService(w *fleetv1alpha1.Worker) *corev1.Service {
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            render.WorkerRPCServiceName(w),
			Namespace:       w.Namespace,
			Labels:          workerLabels(w),
			OwnerReferences: []metav1.OwnerReference{ownerRef(w)},
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: WorkerSelector(w.Name),
			Ports: []corev1.ServicePort{{
				Name:       podcontract.RPCSocket,
				Port:       podcontract.RPCPort,
				TargetPort: intstr.FromString(podcontract.RPCSocket),
				Protocol:   corev1.ProtocolTCP,
			}},
		},
	}
}

// workerdResources derives the container's resources from spec.limits unless
// spec.pod.resources is set. The memory limit is the V8 heap limit plus headroom
// (podcontract.WorkerdMemoryMiB).
func workerdResources(w *fleetv1alpha1.Worker) corev1.ResourceRequirements {
	if w.Spec.Pod != nil && w.Spec.Pod.Resources != nil {
		return *w.Spec.Pod.Resources.DeepCopy()
	}
	mem := resource.MustParse(fmt.Sprintf("%dMi", podcontract.WorkerdMemoryMiB(int64(render.MemoryMiB(w)))+w.SharedWorkersMiB()))
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("100m"),
			corev1.ResourceMemory: mem,
		},
		// workerd runs a Worker's isolate on one thread: one CPU.
		Limits: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("1"),
			corev1.ResourceMemory: mem,
		},
	}
}

func restrictedSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To[int64](podcontract.RunAsUser),
		RunAsGroup:               ptr.To[int64](podcontract.RunAsUser),
		ReadOnlyRootFilesystem:   ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func podIPEnv() corev1.EnvVar {
	return corev1.EnvVar{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"},
	}}
}

// memoryLimitEnv gives the sidecar its container's memory limit in bytes.
func memoryLimitEnv() corev1.EnvVar {
	return corev1.EnvVar{Name: podcontract.MemoryLimitEnv, ValueFrom: &corev1.EnvVarSource{
		ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: podcontract.SidecarContainer, Resource: "limits.memory"},
	}}
}

// livenessProbe is GET path on port, failing only after livenessTimeout unanswered
// for livenessFailures periods in a row (about a minute). A failed liveness probe kills
// the container, and a shard's workerd is the only owner of its objects: every call in
// flight on it is lost. A probe answered on the isolates' thread (the health socket)
// waits behind their work, so a process that is busy, or starved of CPU on a crowded
// node, must not be taken for a hung one; a process hung for a minute still is.
func livenessProbe(path string, port int32) *corev1.Probe {
	p := httpProbe(path, port, livenessPeriod, livenessFailures)
	p.TimeoutSeconds = livenessTimeout
	return p
}

const (
	livenessPeriod   = 10
	livenessFailures = 6
	livenessTimeout  = 5
)

func httpProbe(path string, port int32, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP,
		}},
		PeriodSeconds:    period,
		TimeoutSeconds:   2,
		FailureThreshold: failures,
		SuccessThreshold: 1,
	}
}

// frontArg is the sidecar's flag fronting workerd socket name (podcontract.Fronted):
// --front=<name>=$(POD_IP):<port>=127.0.0.1:<inner port>.
func frontArg(name string) string {
	f, _ := podcontract.Fronted(name)
	return fmt.Sprintf("--front=%s=$(%s):%d=%s:%d", f.Name, podcontract.PodIPEnv, f.Port, podcontract.LoopbackHost, f.InnerPort)
}

// sidecarContainerSpec is the native sidecar (an init container that keeps running)
// next to workerd: it starts before workerd and stops after it.
func sidecarContainerSpec(opts Options) corev1.Container {
	args := []string{
		podcontract.SidecarCommand,
		fmt.Sprintf("--listen=%s:%d", podcontract.LoopbackHost, podcontract.SidecarPort),
		fmt.Sprintf("--listen-tls=$(%s):%d", podcontract.PodIPEnv, podcontract.SidecarPort),
		"--tls-dir=" + podcontract.InternalTLSDir,
		"--data-dir=" + podcontract.SidecarDataDir,
		frontArg(podcontract.RPCSocket), frontArg(podcontract.TriggerSocket),
	}
	if opts.OTLPEndpoint != "" {
		args = append(args, "--otlp-endpoint="+opts.OTLPEndpoint)
	}
	args = append(args, opts.RequestCF.args()...)
	return corev1.Container{
		Name:          podcontract.SidecarContainer,
		Image:         opts.OperatorImage,
		Args:          args,
		Env:           []corev1.EnvVar{podIPEnv(), memoryLimitEnv()},
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Ports: []corev1.ContainerPort{{
			Name: podcontract.SidecarPortName, ContainerPort: podcontract.SidecarPort, Protocol: corev1.ProtocolTCP,
		}},
		ReadinessProbe:           httpsProbe(httpProbe("/healthz", podcontract.SidecarPort, 2, 3)),
		LivenessProbe:            httpsProbe(livenessProbe("/healthz", podcontract.SidecarPort)),
		Resources:                corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("32Mi")}, Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
		SecurityContext:          restrictedSecurityContext(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		VolumeMounts: []corev1.VolumeMount{
			{Name: "sidecar-data", MountPath: podcontract.SidecarDataDir},
			internalTLSMount(),
		},
	}
}

func buildWorkerDeployment(w *fleetv1alpha1.Worker, out *render.Output, inputsHash string, opts Options) *appsv1.Deployment {
	tmpl := workerPodTemplate(w, out, inputsHash, opts)
	defaultSpread(&tmpl.Spec, WorkerSelector(w.Name), deploymentSpreadKeys)
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            w.Name,
			Namespace:       w.Namespace,
			Labels:          workerLabels(w),
			OwnerReferences: []metav1.OwnerReference{ownerRef(w)},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(ptr.Deref(w.Spec.Replicas, 1)),
			Selector: &metav1.LabelSelector{MatchLabels: WorkerSelector(w.Name)},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				// Surge first, never drop below the desired count: no failed request
				// during a rollout (with preStop and readiness).
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr.To(intstr.FromInt32(0)),
					MaxSurge:       ptr.To(intstr.FromString("25%")),
				},
			},
			RevisionHistoryLimit: ptr.To[int32](3),
			Template:             tmpl,
		},
	}
}

// workerPodTemplate is the pod of a Worker: the sidecar and workerd, the rendered
// config, the source's modules and the user's pod fields (spec.pod).
func workerPodTemplate(w *fleetv1alpha1.Worker, out *render.Output, inputsHash string, opts Options) corev1.PodTemplateSpec {
	podLabels := map[string]string{}
	podAnnotations := map[string]string{}
	if p := w.Spec.Pod; p != nil {
		for k, v := range p.Labels {
			podLabels[k] = v
		}
		for k, v := range p.Annotations {
			podAnnotations[k] = v
		}
	}
	// The operator's own labels and annotations win.
	for k, v := range workerLabels(w) {
		podLabels[k] = v
	}
	for k, v := range dispatchPodLabels(w) {
		podLabels[k] = v
	}
	podLabels[podcontract.LabelWorkerVersion] = w.Spec.VersionID()
	podLabels[podcontract.LabelSplit] = "false" // BuildSplitDeployment's pods: "true"
	podAnnotations[podcontract.AnnotationVersion] = out.Version
	podAnnotations[podcontract.AnnotationInputs] = inputsHash
	podAnnotations["kubectl.kubernetes.io/default-container"] = podcontract.WorkerdContainer

	volumes, mounts := workerVolumes(w, out)
	sidecar := sidecarContainerSpec(opts)
	if v, m, ok := opts.RequestCF.geoIPVolume(); ok {
		volumes = append(volumes, v)
		sidecar.VolumeMounts = append(sidecar.VolumeMounts, m)
	}
	sidecar.Env = append(sidecar.Env, out.SidecarEnv...) // the R2 and AI gateways' configs and credentials
	if len(render.R2Services(w))+len(render.AIServices(w)) > 0 {
		sidecar.Env = append(sidecar.Env, sidecarOutboundEnv(w, opts))
	}
	var inits []corev1.Container
	if c, ok := imageCheckContainer(w, opts, mounts); ok {
		inits = append(inits, c)
	}
	pod := corev1.PodSpec{
		InitContainers:                append(inits, sidecar),
		Containers:                    []corev1.Container{workerdContainer(w, out, opts, mounts)},
		Volumes:                       volumes,
		TerminationGracePeriodSeconds: ptr.To(opts.workerGraceSeconds()),
		AutomountServiceAccountToken:  ptr.To(false),
		EnableServiceLinks:            ptr.To(false),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			FSGroup:        ptr.To[int64](podcontract.RunAsUser),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
	if p := w.Spec.Pod; p != nil {
		pod.NodeSelector = p.NodeSelector
		pod.Tolerations = p.Tolerations
		pod.Affinity = p.Affinity
		pod.TopologySpreadConstraints = p.TopologySpreadConstraints
		pod.PriorityClassName = p.PriorityClassName
		pod.ServiceAccountName = p.ServiceAccountName
	}
	opts.isolate(&pod)
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnnotations},
		Spec:       pod,
	}
}

// workerVolumes are the pod's volumes and workerd's mounts: the rendered config, /tmp,
// the sidecar's store and the modules of spec.source (a ConfigMap or an image).
func workerVolumes(w *fleetv1alpha1.Worker, out *render.Output) ([]corev1.Volume, []corev1.VolumeMount) {
	volumes := []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: configMapName(w, out.Version)},
			Items:                configMapItems(out),
		}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "sidecar-data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		internalTLSVolume(),
	}
	mounts := []corev1.VolumeMount{
		{Name: "config", MountPath: podcontract.ConfigDir, ReadOnly: true},
		{Name: "tmp", MountPath: "/tmp"},
		internalTLSMount(),
	}
	for _, v := range out.SecretVolumes {
		volumes = append(volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: v.Secret, DefaultMode: ptr.To[int32](0o440)}}})
		mounts = append(mounts, corev1.VolumeMount{Name: v.Name, MountPath: podcontract.ConfigDir + "/" + v.Dir, ReadOnly: true})
	}
	switch src := w.Spec.Source; {
	case src.ConfigMap != nil:
		// The user's ConfigMap is mounted as is; the rendered config embeds its keys.
		volumes = append(volumes, corev1.Volume{Name: "modules", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: src.ConfigMap.Name}},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: "modules", MountPath: podcontract.ModulesDir, ReadOnly: true})
	case src.Image != nil:
		// An image volume (Kubernetes 1.35+, ImageVolume beta since 1.33): the bundle
		// directory of the image is mounted read-only where the config embeds it.
		volumes = append(volumes, corev1.Volume{Name: "modules", VolumeSource: corev1.VolumeSource{
			Image: &corev1.ImageVolumeSource{Reference: src.Image.Image, PullPolicy: src.Image.PullPolicy},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: "modules", MountPath: podcontract.ModulesDir, ReadOnly: true,
			SubPath: strings.TrimPrefix(src.Image.Path, "/")})
	}
	if a := w.Spec.Assets; a != nil {
		// The asset directory, an image volume too, where the assets service reads it.
		ref, policy := render.AssetsImage(w)
		volumes = append(volumes, corev1.Volume{Name: "assets", VolumeSource: corev1.VolumeSource{
			Image: &corev1.ImageVolumeSource{Reference: ref, PullPolicy: policy},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: "assets", MountPath: podcontract.AssetsDir, ReadOnly: true,
			SubPath: strings.TrimPrefix(render.AssetsPath(a), "/")})
	}
	return volumes, mounts
}

// sidecarOutboundEnv gives the sidecar the Worker's outbound rules, under which its R2
// gateway dials the stores: an R2Bucket's endpoint is the author's, and reaching it
// from the sidecar must not get past what the Worker itself may reach.
func sidecarOutboundEnv(w *fleetv1alpha1.Worker, opts Options) corev1.EnvVar {
	b, _ := json.Marshal(WorkerOutbound(w, opts)) // []string fields: never fails
	return corev1.EnvVar{Name: podcontract.SidecarOutboundEnv, Value: string(b)}
}

// imageCheckContainer is the init container that walks the pod's image volumes, mounted
// exactly as workerd mounts them, and exits 1 naming any symbolic link that leads out
// of its volume (internal/imagecheck): workerd would follow it to any file of its
// container, the internal TLS key included. It runs first, as workerd's user, and
// mounts nothing else. false when the pod has no image volume.
func imageCheckContainer(w *fleetv1alpha1.Worker, opts Options, mounts []corev1.VolumeMount) (corev1.Container, bool) {
	fields := map[string]string{"assets": "spec.assets"}
	if w.Spec.Source.Image != nil {
		fields["modules"] = "spec.source.image"
	}
	c := corev1.Container{
		Name:  podcontract.ImageCheckContainer,
		Image: opts.OperatorImage,
		Args:  []string{podcontract.ImageCheckCommand},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		SecurityContext:          restrictedSecurityContext(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	for _, m := range mounts {
		if f, ok := fields[m.Name]; ok {
			c.Args = append(c.Args, f+"="+m.MountPath)
			c.VolumeMounts = append(c.VolumeMounts, m)
		}
	}
	return c, len(c.VolumeMounts) > 0
}

// workerdContainer runs workerd on the rendered config with the Worker's runtime image.
func workerdContainer(w *fleetv1alpha1.Worker, out *render.Output, opts Options, mounts []corev1.VolumeMount) corev1.Container {
	var runtimeVersion, runtimeImage string
	if rt := w.Spec.Runtime; rt != nil {
		runtimeVersion, runtimeImage = rt.Version, rt.Image
	}
	var workDir string
	if w.Spec.Assets != nil {
		// The assets service's path is relative to the working directory (render/assets.go).
		workDir = podcontract.ConfigDir
	}
	return corev1.Container{
		Name:       podcontract.WorkerdContainer,
		Image:      opts.workerdImage(runtimeVersion, runtimeImage),
		WorkingDir: workDir,
		Args:       append(render.Args(w), out.Args...),
		Env:        append([]corev1.EnvVar{podIPEnv()}, out.Env...),
		Ports: []corev1.ContainerPort{
			{Name: podcontract.HTTPPortName, ContainerPort: render.HTTPPort(w), Protocol: corev1.ProtocolTCP},
			{Name: podcontract.RPCPortName, ContainerPort: podcontract.RPCPort, Protocol: corev1.ProtocolTCP},
			{Name: podcontract.HealthPortName, ContainerPort: podcontract.HealthPort, Protocol: corev1.ProtocolTCP},
			{Name: podcontract.TriggerPortName, ContainerPort: podcontract.TriggerPort, Protocol: corev1.ProtocolTCP},
		},
		StartupProbe:   httpProbe("/healthz", podcontract.HealthPort, 1, 60),
		ReadinessProbe: httpProbe("/readyz", podcontract.HealthPort, 2, 2),
		LivenessProbe:  livenessProbe("/healthz", podcontract.HealthPort),
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
			// workerd refuses new connections at SIGTERM; the sleep lets endpoints drop
			// the pod first. A sleep action needs no shell.
			Sleep: &corev1.SleepAction{Seconds: opts.PreStopSeconds},
		}},
		Resources:                workerdResources(w),
		SecurityContext:          restrictedSecurityContext(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		VolumeMounts:             mounts,
	}
}

// configMapItems maps each ConfigMap key to its path under /etc/workerd (module
// names may hold "/", ConfigMap keys may not).
func configMapItems(out *render.Output) []corev1.KeyToPath {
	items := make([]corev1.KeyToPath, 0, len(out.Files))
	for _, f := range out.Files {
		items = append(items, corev1.KeyToPath{Key: f.Key, Path: f.Path})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].Path < items[j].Path })
	return items
}

// httpsProbe is p over HTTPS (the sidecar's cross-pod listener; the kubelet presents no
// client certificate and checks none).
func httpsProbe(p *corev1.Probe) *corev1.Probe {
	p.HTTPGet.Scheme = corev1.URISchemeHTTPS
	return p
}

// internalTLSVolume is the namespace's internal TLS Secret without the CA key
// (docs/security-internal-plane.md).
func internalTLSVolume() corev1.Volume {
	var items []corev1.KeyToPath
	for _, k := range []string{podcontract.InternalTLSCA, podcontract.InternalTLSCert, podcontract.InternalTLSKey, podcontract.InternalTLSManagerCA} {
		items = append(items, corev1.KeyToPath{Key: k, Path: k})
	}
	return corev1.Volume{Name: podcontract.InternalTLSVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: podcontract.InternalTLSSecret, Items: items, DefaultMode: ptr.To[int32](0o440),
	}}}
}

func internalTLSMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: podcontract.InternalTLSVolume, MountPath: podcontract.InternalTLSDir, ReadOnly: true}
}
