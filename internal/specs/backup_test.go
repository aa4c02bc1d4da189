package specs

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/backup"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

func bucket(secret string) fleetv1alpha1.S3BucketSource {
	return fleetv1alpha1.S3BucketSource{Endpoint: "http://s3.storage:7070", Bucket: "backups",
		CredentialsSecret: fleetv1alpha1.LocalObjectReference{Name: secret}}
}

func backupDONS(b *fleetv1alpha1.BackupSpec, r *fleetv1alpha1.RestoreSpec) *fleetv1alpha1.DurableObjectNamespace {
	return &fleetv1alpha1.DurableObjectNamespace{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rooms", UID: "uid-2"},
		Spec: fleetv1alpha1.DurableObjectNamespaceSpec{WorkerRef: fleetv1alpha1.LocalObjectReference{Name: "w"}, ClassName: "Room",
			Shards: ptr.To[int32](3), Backup: b, Restore: r},
	}
}

func containerNamed(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

func envConfig(t *testing.T, c *corev1.Container, name string) *backup.Config {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == name {
			var cfg backup.Config
			if err := json.Unmarshal([]byte(e.Value), &cfg); err != nil {
				t.Fatal(err)
			}
			return &cfg
		}
	}
	return nil
}

// spec.backup and spec.restore reach the shard pods as docs/backup.md describes: the
// sidecar gets the backup target (JSON), its credentials from the Secret and the store's
// directory; the restore init container runs before the sidecar (and so before
// workerd) with both; a store without them keeps its pods unchanged.
func TestBackupWiring(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 3, 10, 15, 0, 0, time.UTC))
	cases := []struct {
		name        string
		d           *fleetv1alpha1.DurableObjectNamespace
		wantBackup  *backup.Config
		wantRestore *backup.Config
	}{
		{"none", backupDONS(nil, nil), nil, nil},
		{"backup, defaults", backupDONS(&fleetv1alpha1.BackupSpec{S3: bucket("creds")}, nil),
			&backup.Config{Endpoint: "http://s3.storage:7070", Bucket: "backups", Prefix: "ns/durableobjectnamespaces/rooms", Shards: 3,
				Retention: "720h0m0s", SnapshotInterval: "1h0m0s"}, nil},
		{"backup and restore", backupDONS(&fleetv1alpha1.BackupSpec{S3: bucket("creds"), Path: "prod/rooms-2", Retention: &metav1.Duration{Duration: 48 * time.Hour}},
			&fleetv1alpha1.RestoreSpec{S3: bucket("old-creds"), Path: "prod/rooms", PointInTime: &at}),
			&backup.Config{Endpoint: "http://s3.storage:7070", Bucket: "backups", Prefix: "prod/rooms-2", Shards: 3,
				Retention: "48h0m0s", SnapshotInterval: "1h0m0s"},
			&backup.Config{Endpoint: "http://s3.storage:7070", Bucket: "backups", Prefix: "prod/rooms", Shards: 3, PointInTime: "2026-12-03T10:15:00Z"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := BuildDONSChildren(tc.d, fixtureWorker(), &render.Output{Version: "v"}, "inputs", DefaultOptions()).StatefulSet.Spec.Template.Spec
			sidecar := containerNamed(pod.InitContainers, podcontract.SidecarContainer)
			restore := containerNamed(pod.InitContainers, podcontract.RestoreContainer)
			if tc.wantBackup == nil && tc.wantRestore == nil {
				if restore != nil || envConfig(t, sidecar, podcontract.BackupConfigEnv) != nil {
					t.Fatalf("a store without backup got %+v / %v", restore, sidecar.Env)
				}
				return
			}
			if restore == nil || pod.InitContainers[len(pod.InitContainers)-1].Name != podcontract.SidecarContainer ||
				pod.InitContainers[len(pod.InitContainers)-2].Name != podcontract.RestoreContainer {
				t.Fatalf("init containers %v: want the restore container right before the sidecar", names(pod.InitContainers))
			}
			if got := envConfig(t, sidecar, podcontract.BackupConfigEnv); !reflect.DeepEqual(got, tc.wantBackup) {
				t.Errorf("sidecar $%s = %+v, want %+v", podcontract.BackupConfigEnv, got, tc.wantBackup)
			}
			if got := envConfig(t, restore, podcontract.RestoreConfigEnv); !reflect.DeepEqual(got, tc.wantRestore) {
				t.Errorf("restore $%s = %+v, want %+v", podcontract.RestoreConfigEnv, got, tc.wantRestore)
			}
			for _, e := range append(sidecar.Env, restore.Env...) {
				if e.Name == podcontract.BackupSecretAccessKeyEnv || e.Name == podcontract.RestoreSecretAccessKeyEnv {
					if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Key != fleetv1alpha1.R2SecretAccessKeyKey {
						t.Errorf("%s is not a secretKeyRef to %s: %+v", e.Name, fleetv1alpha1.R2SecretAccessKeyKey, e)
					}
				}
			}
			if !hasArg(sidecar, "--backup-dir="+render.DOStorageDir) || !hasArg(restore, "--dir="+render.DOStorageDir) {
				t.Errorf("args: sidecar %q, restore %q: want the store's directory named (--backup-dir, --dir)", sidecar.Args, restore.Args)
			}
			for _, c := range []*corev1.Container{sidecar, restore} {
				if !mounted(c, render.DOStorageDir, shardDOSubPath) || !mounted(c, podcontract.SidecarDataDir, shardSidecarSubDir) {
					t.Errorf("%s mounts %+v: want the store's directory and the sidecar's, from the PVC", c.Name, c.VolumeMounts)
				}
			}
		})
	}
}

func mounted(c *corev1.Container, path, subPath string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath == path && m.SubPath == subPath && m.Name == shardDataVolume && !m.ReadOnly {
			return true
		}
	}
	return false
}

func hasArg(c *corev1.Container, arg string) bool {
	for _, a := range c.Args {
		if a == arg {
			return true
		}
	}
	return false
}
