package render

import (
	"encoding/json"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Split is a gradual deployment as the ingress shim keeps it (docs/versions.md): every
// pod runs one version and picks a version for each request; a request for another
// version goes on to that version's pods, with the hop token the receiving ingress
// trusts in place of its own peer.
type Split struct {
	// Worker is the Worker's name, as Cloudflare-Workers-Version-Overrides names it.
	Worker string
	// Self is the version the pods being rendered run.
	Self string
	// Versions are the deployed versions in spec.deployment's order; none for pods
	// that only receive what the other version's pods send on (a split begun or ending).
	Versions []SplitVersion
	// TokenSecret is the Secret whose SplitTokenKey is the hop token.
	TokenSecret string
}

// SplitVersion is one deployed version.
type SplitVersion struct {
	// ID is the version's id; Percentage its share of the requests.
	ID         string `json:"id"`
	Percentage int32  `json:"percentage"`
	// Address is "host:port" of the http socket of the version's pods; unused for Self.
	Address string `json:"-"`
}

// SplitTokenKey is the key of the hop token in Split.TokenSecret.
const SplitTokenKey = "token"

// splitTokenEnv is the workerd container's env var holding the hop token.
const splitTokenEnv = "WORKERD_SPLIT_TOKEN"

func versionService(id string) string { return "workerd-operator:version:" + id }

// addSplit adds the other versions' external services and the hop token's env var.
func addSplit(s *Split, x *extras) error {
	x.split = s
	if s == nil {
		return nil
	}
	if len(s.Versions) != 0 && (len(s.Versions) != 2 || (s.Self != s.Versions[0].ID && s.Self != s.Versions[1].ID)) {
		return fmt.Errorf("render: Split: none or two versions, one of them Self (%q), are required", s.Self)
	}
	for _, v := range s.Versions {
		if v.ID != s.Self {
			x.services.item(named(versionService(v.ID)), kv("external", tuple(kv("address", Quote(v.Address)), "http = ()")))
		}
	}
	x.env = append(x.env, corev1.EnvVar{Name: splitTokenEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: s.TokenSecret}, Key: SplitTokenKey}}})
	sort.Slice(x.env, func(i, j int) bool { return x.env[i].Name < x.env[j].Name })
	return nil
}

// splitBindings are the ingress shim's bindings of a split: the versions and their
// shares, its own, the other's service and the hop token.
func splitBindings(s *Split) []string {
	if s == nil {
		return nil
	}
	out := []string{tuple(named("SPLIT_TOKEN"), kv("fromEnvironment", Quote(splitTokenEnv)))}
	if len(s.Versions) == 0 {
		return out
	}
	vs, _ := json.Marshal(s.Versions)
	out = append(out,
		tuple(named("WORKER_NAME"), kv("text", Quote(s.Worker))),
		tuple(named("VERSIONS"), kv("json", Quote(string(vs)))),
		tuple(named("SELF_VERSION"), kv("text", Quote(s.Self))))
	for _, v := range s.Versions {
		if v.ID != s.Self {
			out = append(out, tuple(named("OTHER_VERSION"), kv("service", Quote(versionService(v.ID)))))
		}
	}
	return out
}
