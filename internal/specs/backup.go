package specs

import (
	"encoding/json"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/backup"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// StoreBackup is a store's spec.backup and spec.restore as its pods need them
// (docs/backup.md): the sidecar ships the store, the restore init container fills an
// empty volume before workerd starts.
type StoreBackup struct {
	Backup  *fleetv1alpha1.BackupSpec
	Restore *fleetv1alpha1.RestoreSpec
	// Path is the backup's key prefix (spec.backup.path or its default).
	Path string
	// Shards is the store's shard count: a shard restores the objects it owns.
	Shards int32
	// Reshard is the latest change of the shard count (docs/scaling.md), nil if none.
	Reshard *backup.Reshard
	// Blobs: a KV host, whose blob directory is shipped too. Engine: a Workflow
	// engine, whose store is the sidecar's workflows.db.
	Blobs, Engine bool
}

// apply adds the backup's env and mounts to pod's sidecar and the restore init
// container before it; nothing without spec.backup or spec.restore.
func (b StoreBackup) apply(pod *corev1.PodSpec, opts Options) {
	if b.Backup == nil && b.Restore == nil {
		return
	}
	env := []corev1.EnvVar{podNameEnv()}
	if b.Backup != nil {
		c := b.config(b.Backup.S3, b.Path)
		c.Retention = b.Backup.RetentionOrDefault().String()
		c.SnapshotInterval = b.Backup.SnapshotIntervalOrDefault().String()
		env = append(env, configEnv(podcontract.BackupConfigEnv, c),
			secretEnv(podcontract.BackupAccessKeyIDEnv, b.Backup.S3.CredentialsSecret.Name, fleetv1alpha1.R2AccessKeyIDKey),
			secretEnv(podcontract.BackupSecretAccessKeyEnv, b.Backup.S3.CredentialsSecret.Name, fleetv1alpha1.R2SecretAccessKeyKey))
	}
	restoreEnv := append([]corev1.EnvVar(nil), env...)
	if r := b.Restore; r != nil {
		c := b.config(r.S3, r.Path)
		if r.PointInTime != nil {
			c.PointInTime = r.PointInTime.UTC().Format(time.RFC3339Nano)
		}
		restoreEnv = append(restoreEnv, configEnv(podcontract.RestoreConfigEnv, c),
			secretEnv(podcontract.RestoreAccessKeyIDEnv, r.S3.CredentialsSecret.Name, fleetv1alpha1.R2AccessKeyIDKey),
			secretEnv(podcontract.RestoreSecretAccessKeyEnv, r.S3.CredentialsSecret.Name, fleetv1alpha1.R2SecretAccessKeyKey))
	}
	mounts := b.mounts()
	for i := range pod.InitContainers {
		c := &pod.InitContainers[i]
		if c.Name != podcontract.SidecarContainer {
			continue
		}
		if b.Backup != nil {
			c.Env = append(c.Env, env...)
			c.VolumeMounts = append(c.VolumeMounts, mounts[:len(mounts)-1]...)
			c.Args = append(c.Args, b.dirArgs("--backup-dir", "--backup-blobs-dir")...)
		}
		restore := restoreContainer(opts, restoreEnv, mounts)
		restore.Args = append(restore.Args, b.dirArgs("--dir", "--blobs-dir")...)
		pod.InitContainers = append(pod.InitContainers[:i], append([]corev1.Container{restore}, pod.InitContainers[i:]...)...)
		return
	}
}

// egress lets the pods reach the backup's and the restore's S3 endpoints: their ports,
// at any address (a NetworkPolicy cannot name a DNS name; the endpoint may be a
// cluster Service or a cloud store). Nothing without spec.backup or spec.restore.
func (b StoreBackup) egress(np *networkingv1.NetworkPolicy) {
	if np == nil {
		return
	}
	seen := map[int32]bool{}
	var ports []networkingv1.NetworkPolicyPort
	for _, bk := range b.Buckets() {
		if p := endpointPort(bk.S3.Endpoint); !seen[p] {
			seen[p] = true
			port := intstr.FromInt32(p)
			ports = append(ports, networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: &port})
		}
	}
	if len(ports) > 0 {
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{Ports: ports})
	}
}

// endpointPort is the TCP port of an http(s) endpoint URL (80 or 443 by default).
func endpointPort(endpoint string) int32 {
	u, err := url.Parse(endpoint)
	if err != nil {
		return 443
	}
	if p, err := strconv.ParseInt(u.Port(), 10, 32); err == nil {
		return int32(p)
	}
	if u.Scheme == "http" {
		return 80
	}
	return 443
}

// Bucket is a bucket a store's pods reach: Field is "backup" or "restore".
type Bucket struct {
	Field string
	S3    *fleetv1alpha1.S3BucketSource
}

// Buckets are the store's spec.backup and spec.restore buckets, those that are set.
func (b StoreBackup) Buckets() []Bucket {
	var out []Bucket
	if b.Backup != nil {
		out = append(out, Bucket{"backup", &b.Backup.S3})
	}
	if b.Restore != nil {
		out = append(out, Bucket{"restore", &b.Restore.S3})
	}
	return out
}

// dirArgs name the store's directories with the flags dir and blobs: paths are
// arguments, not constants of the binary, so a runtime that maps mounts (make dev's
// local cluster) maps them too. A Workflow engine's store is the sidecar's data
// directory, which the sidecar knows from --data-dir.
func (b StoreBackup) dirArgs(dir, blobs string) []string {
	var args []string
	switch {
	case b.Engine && dir == "--dir":
		args = append(args, dir+"="+podcontract.SidecarDataDir)
	case !b.Engine:
		args = append(args, dir+"="+render.DOStorageDir)
	}
	if b.Blobs {
		args = append(args, blobs+"="+render.DataBlobsDir)
	}
	return args
}

// config is the backup.Config of a bucket and path for this store.
func (b StoreBackup) config(s fleetv1alpha1.S3BucketSource, path string) backup.Config {
	return backup.Config{Endpoint: s.Endpoint, Bucket: s.Bucket, Region: s.Region, Prefix: path,
		Shards: b.Shards, Engine: b.Engine, Reshard: b.Reshard}
}

// mounts are the store's directories on the PVC, the sidecar's data directory last
// (the sidecar has it already).
func (b StoreBackup) mounts() []corev1.VolumeMount {
	var m []corev1.VolumeMount
	if !b.Engine {
		m = append(m, corev1.VolumeMount{Name: shardDataVolume, MountPath: render.DOStorageDir, SubPath: shardDOSubPath})
	}
	if b.Blobs {
		m = append(m, corev1.VolumeMount{Name: shardDataVolume, MountPath: render.DataBlobsDir, SubPath: shardBlobsSubPath})
	}
	return append(m, corev1.VolumeMount{Name: shardDataVolume, MountPath: podcontract.SidecarDataDir, SubPath: shardSidecarSubDir})
}

// restoreContainer runs `workerd-operator restore-store` (podcontract.RestoreContainer).
func restoreContainer(opts Options, env []corev1.EnvVar, mounts []corev1.VolumeMount) corev1.Container {
	return corev1.Container{
		Name:  podcontract.RestoreContainer,
		Image: opts.OperatorImage,
		Args:  []string{podcontract.RestoreCommand},
		Env:   env,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
		VolumeMounts:             mounts,
		SecurityContext:          restrictedSecurityContext(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

func configEnv(name string, c backup.Config) corev1.EnvVar {
	b, _ := json.Marshal(c)
	return corev1.EnvVar{Name: name, Value: string(b)}
}

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key,
	}}}
}

func podNameEnv() corev1.EnvVar {
	return corev1.EnvVar{Name: render.PodNameEnv, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"},
	}}
}
