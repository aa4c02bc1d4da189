package common

import (
	"crypto/sha256"
	"encoding/json"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// The applied record: for each child this process applied, a digest of the
// configuration it sent and the object the API server answered with (uid,
// resourceVersion). A reconcile pass applies every child, and most passes change none:
// at 10,000 Workers the applies that change nothing are most of the API server's
// writes. Applying the same configuration again changes nothing as long as the object
// is the one answered (any change by anyone, spec, metadata or status, moves its
// resourceVersion; a deleted and recreated object has another uid), so it is skipped.
// The record is in memory only: a restarted manager applies everything once.
type appliedRecord struct {
	sum [sha256.Size]byte
	uid types.UID
	rv  string
}

// maxApplied bounds the record (about 250 bytes an entry: 32 MiB at most; 10,000
// Workers have about 50,000 children). Entries of deleted children stay until then;
// past it, the record starts over and the next pass of each owner applies its children.
const maxApplied = 1 << 17

var applied = struct {
	sync.Mutex
	m map[string]appliedRecord
}{m: map[string]appliedRecord{}}

// appliedKey is the record's key of u (kind, namespace, name) and the digest of its
// configuration.
func appliedKey(u *unstructured.Unstructured) (string, [sha256.Size]byte, error) {
	b, err := json.Marshal(u.Object) // map keys sorted: the same configuration, the same bytes
	if err != nil {
		return "", [sha256.Size]byte{}, err
	}
	return u.GroupVersionKind().String() + "/" + u.GetNamespace() + "/" + u.GetName(), sha256.Sum256(b), nil
}

// appliedBefore: live is the object the apply of the configuration sum answered with.
func appliedBefore(key string, sum [sha256.Size]byte, live metav1.Object) bool {
	applied.Lock()
	defer applied.Unlock()
	r, ok := applied.m[key]
	return ok && r.sum == sum && r.uid == live.GetUID() && r.rv != "" && r.rv == live.GetResourceVersion()
}

// rememberApplied records answer, the API server's answer to the apply of sum.
func rememberApplied(key string, sum [sha256.Size]byte, answer *unstructured.Unstructured) {
	applied.Lock()
	defer applied.Unlock()
	if len(applied.m) >= maxApplied {
		applied.m = map[string]appliedRecord{}
	}
	applied.m[key] = appliedRecord{sum: sum, uid: answer.GetUID(), rv: answer.GetResourceVersion()}
}
