package devcluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

const (
	// StorageClassName is the default StorageClass: a directory per claim under <dir>/volumes.
	StorageClassName = "devcluster-hostpath"
	// ProvisionerName is the provisioner of StorageClassName.
	ProvisionerName = "devcluster.workerd-operator.io/hostpath"
)

var metav1GetOptions = metav1.GetOptions{}

func nodeCapacity() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
}

func (c *Cluster) startNode(ctx context.Context) error {
	var err error
	// Built first: NewProvisionController registers core/v1 into client-go's global
	// scheme (a map write), which must not race with the informers and the node's lease
	// controller that decode with that scheme ("concurrent map read and map write").
	pv := controller.NewProvisionController(c.ctx, c.client, ProvisionerName, &hostPathProvisioner{dir: filepath.Join(c.dir, "volumes")},
		controller.LeaderElection(false), controller.FailedProvisionThreshold(5), controller.ResyncPeriod(30*time.Second))
	if c.net, err = newNetwork(c); err != nil {
		return err
	}
	if err := c.net.run(c.ctx); err != nil {
		return err
	}
	c.startEventRecorder()
	if err := c.runNode(ctx); err != nil {
		return err
	}
	pdone := make(chan struct{})
	c.done = append(c.done, pdone)
	go func() { defer close(pdone); pv.Run(c.ctx) }()
	if err := c.createDefaultStorageClass(ctx); err != nil {
		return err
	}
	// Pods need the default ServiceAccount (kube-controller-manager creates it).
	if err := waitFor(ctx, 5*time.Minute, nil, func() bool {
		_, err := c.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}); err != nil {
		return fmt.Errorf("devcluster: the default ServiceAccount did not appear (is kube-controller-manager running? log %s):\n%s", filepath.Join(c.dir, "logs", "kube-controller-manager.log"), c.logTail("kube-controller-manager"))
	}
	return nil
}

// startEventRecorder records pod events as the node's kubelet until the cluster stops.
func (c *Cluster) startEventRecorder() {
	eb := record.NewBroadcaster()
	eb.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	c.recorder = eb.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: NodeName})
	go func() { <-c.ctx.Done(); eb.Shutdown() }()
}

// runNode registers the virtual-kubelet node backed by the provider, serves its
// kubelet API on a free loopback port and waits until the node is Ready.
func (c *Cluster) runNode(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	c.provider = newProvider(c)
	mux := http.NewServeMux()
	n, err := nodeutil.NewNode(NodeName, func(cfg nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
		c.provider.apiPods = cfg.Pods
		describeNode(cfg.Node, port)
		return c.provider, nil, nil
	},
		nodeutil.WithClient(c.client),
		func(cfg *nodeutil.NodeConfig) error {
			cfg.HTTPListenAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			cfg.Handler = mux
			cfg.NumWorkers = 4
			cfg.SkipDownwardAPIResolution = true
			cfg.EventRecorder = c.recorder
			cfg.InformerResyncPeriod = time.Minute
			return nil
		},
		nodeutil.AttachProviderRoutes(mux),
		nodeutil.WithTLSConfig(nodeutil.WithKeyPairFromPath(c.pki.NodeCert, c.pki.NodeKey), nodeutil.WithCAFromPath(c.pki.CAFile)),
	)
	if err != nil {
		return fmt.Errorf("devcluster: virtual-kubelet node: %w", err)
	}
	done := make(chan struct{})
	c.done = append(c.done, done)
	go func() {
		defer close(done)
		if err := n.Run(c.ctx); err != nil && c.ctx.Err() == nil {
			fmt.Fprintf(c.cfg.Log, "devcluster: node stopped: %v\n", err)
		}
	}()
	if err := n.WaitReady(ctx, 2*time.Minute); err != nil {
		return fmt.Errorf("devcluster: node %s did not become ready: %w", NodeName, err)
	}
	return nil
}

// describeNode sets the node's labels, capacity, addresses and kubelet port.
func describeNode(nd *corev1.Node, port int) {
	nd.Labels["kubernetes.io/os"] = "linux"
	nd.Labels["node.kubernetes.io/instance-type"] = "devcluster"
	nd.Status.Capacity = nodeCapacity()
	nd.Status.Allocatable = nodeCapacity()
	nd.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: NodeName}}
	nd.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	nd.Status.NodeInfo = corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: "amd64", KubeletVersion: "v1.37.2-devcluster", ContainerRuntimeVersion: "process://devcluster"}
}

// createDefaultStorageClass makes the hostPath provisioner's class the default one.
func (c *Cluster) createDefaultStorageClass(ctx context.Context) error {
	immediate := storagev1.VolumeBindingImmediate
	reclaim := corev1.PersistentVolumeReclaimDelete
	_, err := c.client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: StorageClassName, Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       ProvisionerName,
		VolumeBindingMode: &immediate,
		ReclaimPolicy:     &reclaim,
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("devcluster: default StorageClass: %w", err)
	}
	return nil
}

// hostPathProvisioner provisions each claim as a directory <dir>/<namespace>-<claim>-<pv>
// and a hostPath PersistentVolume with node affinity to the one node.
type hostPathProvisioner struct{ dir string }

func (p *hostPathProvisioner) Provision(_ context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	path := filepath.Join(p.dir, fmt.Sprintf("%s-%s-%s", o.PVC.Namespace, o.PVC.Name, o.PVName))
	if err := os.MkdirAll(path, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	hpType := corev1.HostPathDirectoryOrCreate
	reclaim := corev1.PersistentVolumeReclaimDelete
	if o.StorageClass.ReclaimPolicy != nil {
		reclaim = *o.StorageClass.ReclaimPolicy
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: o.PVName},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   o.PVC.Spec.AccessModes,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: o.PVC.Spec.Resources.Requests[corev1.ResourceStorage]},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &hpType}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{NodeName}}},
			}}}},
			StorageClassName: o.StorageClass.Name,
		},
	}, controller.ProvisioningFinished, nil
}

func (p *hostPathProvisioner) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	if pv.Spec.HostPath == nil || filepath.Dir(pv.Spec.HostPath.Path) != p.dir {
		return &controller.IgnoredError{Reason: "not provisioned by the devcluster hostpath provisioner"}
	}
	return os.RemoveAll(pv.Spec.HostPath.Path)
}
