package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// HyperdriveKeys are the keys a hyperdrive binding's Secret must hold.
var HyperdriveKeys = []string{"host", "port", "database", "user", "password", "scheme"}

// hyperdriveKind: workerd's hyperdrive binding. Its database, user, password and scheme
// are embedded from the binding's Secret, mounted at ConfigDir/hyperdrive/<name>; its
// designator is an external TCP service whose address, host:port from the same Secret,
// comes by --external-addr from env vars. No credential passes through a ConfigMap.
type hyperdriveKind struct{ entries []hyperdriveEntry }

type hyperdriveEntry struct{ name, secret string }

func hyperdriveService(name string) string { return "hyperdrive:" + name }

func hyperdriveDir(name string) string { return podcontract.HyperdriveSubdir + "/" + name }

func (k *hyperdriveKind) bind(field string, b v1alpha1.Binding) (string, error) {
	secret := b.Hyperdrive.SecretRef.Name
	if secret == "" {
		return "", fmt.Errorf("%s.hyperdrive.secretRef.name: required", field)
	}
	k.entries = append(k.entries, hyperdriveEntry{b.Name, secret})
	file := func(key string) string { return embed(hyperdriveDir(b.Name) + "/" + key) }
	return kv("hyperdrive", tuple(kv("designator", Quote(hyperdriveService(b.Name))),
		kv("database", file("database")), kv("user", file("user")), kv("password", file("password")),
		kv("scheme", file("scheme")))), nil
}

func (k *hyperdriveKind) contribute(x *extras) error {
	for _, e := range k.entries {
		env := func(key string) corev1.EnvVar {
			return corev1.EnvVar{Name: HyperdriveEnv(e.name, key), ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: e.secret}, Key: key}}}
		}
		x.env = append(x.env, env("host"), env("port"))
		x.args = append(x.args, fmt.Sprintf("--external-addr=%s=$(%s):$(%s)", hyperdriveService(e.name), HyperdriveEnv(e.name, "host"), HyperdriveEnv(e.name, "port")))
		x.services.item(named(hyperdriveService(e.name)), "external = (tcp = ())")
		sum := sha256.Sum256([]byte(e.name))
		x.secretVolumes = append(x.secretVolumes, SecretVolume{Name: "hyperdrive-" + hex.EncodeToString(sum[:])[:12], Secret: e.secret, Dir: hyperdriveDir(e.name), Keys: HyperdriveKeys})
	}
	return nil
}

// HyperdriveEnv is the env var of key (host or port) of hyperdrive binding name.
func HyperdriveEnv(name, key string) string {
	return fmt.Sprintf("%s%s_%s", podcontract.HyperdriveEnvPrefix, name, map[string]string{"host": "HOST", "port": "PORT"}[key])
}
