package backup

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is a store's backup target or restore source as the operator hands it to
// the pod (podcontract.BackupConfigEnv, podcontract.RestoreConfigEnv); the
// credentials come in their own variables, from a Secret.
type Config struct {
	Endpoint string `json:"endpoint"`
	Bucket   string `json:"bucket"`
	Region   string `json:"region,omitempty"`
	// Prefix is the store's key prefix in the bucket.
	Prefix string `json:"prefix"`
	// Shards is the store's shard count: a shard restores the objects it owns under it.
	Shards int32 `json:"shards"`
	// Retention and SnapshotInterval (Go durations) apply to a backup target.
	Retention        string `json:"retention,omitempty"`
	SnapshotInterval string `json:"snapshotInterval,omitempty"`
	// PointInTime (RFC 3339) applies to a restore source; empty is the newest position.
	PointInTime string `json:"pointInTime,omitempty"`
	// Engine is true on a Workflow engine pod: its store is the sidecar's
	// workflows.db (internal/workflows/store), not workerd's Durable Object directory.
	Engine bool `json:"engine,omitempty"`
	// Reshard is the last change of a Durable Object namespace's shard count: a pod
	// whose volume has not gone through it moves objects first (docs/scaling.md).
	Reshard *Reshard `json:"reshard,omitempty"`
}

// ConfigFromEnv reads the Config in the variable name and the credentials in
// keyEnv and secretEnv; ok is false when name is unset.
func ConfigFromEnv(name, keyEnv, secretEnv string) (c Config, t Target, ok bool, err error) {
	s := os.Getenv(name)
	if s == "" {
		return c, t, false, nil
	}
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		return c, t, true, fmt.Errorf("$%s: %w", name, err)
	}
	t = Target{Endpoint: c.Endpoint, Bucket: c.Bucket, Region: c.Region, Prefix: c.Prefix,
		AccessKeyID: os.Getenv(keyEnv), SecretAccessKey: os.Getenv(secretEnv)}
	if err := t.Validate(); err != nil {
		return c, t, true, fmt.Errorf("$%s (credentials $%s, $%s): %w", name, keyEnv, secretEnv, err)
	}
	if c.Shards < 1 {
		return c, t, true, fmt.Errorf("$%s: shards %d, want at least 1", name, c.Shards)
	}
	return c, t, true, nil
}

// Durations parses Retention and SnapshotInterval ("" is the default).
func (c Config) Durations() (retention, snapshots time.Duration, err error) {
	for _, d := range []struct {
		s   string
		dst *time.Duration
	}{{c.Retention, &retention}, {c.SnapshotInterval, &snapshots}} {
		if d.s == "" {
			continue
		}
		if *d.dst, err = time.ParseDuration(d.s); err != nil {
			return 0, 0, err
		}
	}
	return retention, snapshots, nil
}

// PointInTimeValue parses PointInTime ("" is the zero time: the newest position).
func (c Config) PointInTimeValue() (time.Time, error) {
	if c.PointInTime == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339, c.PointInTime)
}

// OrdinalOf is the ordinal of a StatefulSet pod named "<set>-<ordinal>".
func OrdinalOf(pod string) (int32, error) {
	i := strings.LastIndexByte(pod, '-')
	n, err := strconv.ParseInt(pod[i+1:], 10, 32)
	if i < 0 || err != nil || n < 0 {
		return 0, fmt.Errorf("pod name %q does not end in a StatefulSet ordinal", pod)
	}
	return int32(n), nil
}
