package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/spf13/cobra"
	bolt "go.etcd.io/bbolt"

	"github.com/workerd-operator/workerd-operator/internal/backup"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/workflows"
	"github.com/workerd-operator/workerd-operator/internal/workflows/store"
)

// newRestoreStoreCommand: `workerd-operator restore-store`, the restore init container
// of a store's pod (podcontract.RestoreContainer, docs/backup.md).
func newRestoreStoreCommand() *cobra.Command {
	var dir, blobs string
	cmd := &cobra.Command{
		Use:   podcontract.RestoreCommand,
		Short: "Fill an empty store volume from its backup before workerd starts (a pod's init container)",
		Long: "Reads the store's backup target ($" + podcontract.BackupConfigEnv + ") and restore source ($" +
			podcontract.RestoreConfigEnv + "),\nwith their credentials, and $" + render.PodNameEnv + " for the shard. An initialised volume is\n" +
			"left alone; an empty one is restored from the store's own backup when it holds this shard's\n" +
			"data (the volume was lost), else from the restore source; with neither it starts empty.\n" +
			"It exits 1 when the backup cannot be read: the pod must not serve a store that may be missing data.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runRestoreStore(ctx, dir, blobs, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&dir, "dir", render.DOStorageDir, "the store's directory on the pod's volume: workerd's localDisk path, or a Workflow engine's data directory")
	cmd.Flags().StringVar(&blobs, "blobs-dir", "", "a KV host's directory of values over 64 KiB ("+render.DataBlobsDir+"), restored with the databases")
	return cmd
}

func runRestoreStore(ctx context.Context, dir, blobs string, stderr io.Writer) error {
	log := stderrLogger(stderr)
	o := backup.RecoverOptions{Dir: dir, BlobsDir: blobs}
	var shards int32
	var reshard *backup.Reshard
	for _, src := range []struct {
		name, key, secret string
		dst               **backup.Source
	}{
		{podcontract.BackupConfigEnv, podcontract.BackupAccessKeyIDEnv, podcontract.BackupSecretAccessKeyEnv, &o.Backup},
		{podcontract.RestoreConfigEnv, podcontract.RestoreAccessKeyIDEnv, podcontract.RestoreSecretAccessKeyEnv, &o.Restore},
	} {
		c, t, ok, err := backup.ConfigFromEnv(src.name, src.key, src.secret)
		if err != nil {
			return fmt.Errorf("%s: %w", podcontract.RestoreCommand, err)
		}
		if !ok {
			continue
		}
		at, err := c.PointInTimeValue()
		if err != nil {
			return fmt.Errorf("%s: $%s: pointInTime: %w", podcontract.RestoreCommand, src.name, err)
		}
		*src.dst, shards = &backup.Source{Target: t, PointInTime: at}, c.Shards
		if src.dst == &o.Backup {
			reshard = c.Reshard
		}
		if c.Engine {
			o.Files = []string{store.FileName}
		}
	}
	if o.Backup == nil && o.Restore == nil {
		fmt.Fprintf(stderr, "%s: neither $%s nor $%s is set; nothing to do\n", podcontract.RestoreCommand, podcontract.BackupConfigEnv, podcontract.RestoreConfigEnv)
		return nil
	}
	var err error
	if o.Ordinal, o.Owns, err = shardOwnership(shards); err != nil {
		return fmt.Errorf("%s: %w", podcontract.RestoreCommand, err)
	}
	if reshard != nil {
		o.Reshard = reshard
		if _, err := render.ShardFor("", reshard.From); err != nil {
			return fmt.Errorf("%s: reshard: %w", podcontract.RestoreCommand, err)
		}
		o.OldOwner = func(id string) int32 { s, _ := render.ShardFor(id, reshard.From); return s }
	}
	what, err := backup.Recover(ctx, o, log)
	if err != nil {
		return fmt.Errorf("%s: %w; the pod does not start (docs/backup.md)", podcontract.RestoreCommand, err)
	}
	fmt.Fprintf(stderr, "%s: %s\n", podcontract.RestoreCommand, what)
	return nil
}

// shardOwnership is this pod's ordinal ($POD_NAME) and which object ids it owns among
// shards (render.ShardFor, as the router routes them).
func shardOwnership(shards int32) (int32, func(id string) bool, error) {
	ordinal, err := backup.OrdinalOf(os.Getenv(render.PodNameEnv))
	if err != nil {
		return 0, nil, fmt.Errorf("$%s: %w", render.PodNameEnv, err)
	}
	if _, err := render.ShardFor("", shards); err != nil {
		return 0, nil, err
	}
	return ordinal, func(id string) bool {
		s, _ := render.ShardFor(id, shards)
		return s == ordinal
	}, nil
}

// finalPassTimeout bounds the last pass and the seal at shutdown.
const finalPassTimeout = 30 * time.Second

// attachBackup ships the store's directory to $WORKERD_OPERATOR_BACKUP, set on the
// pods of a store with spec.backup, until the sidecar shuts down.
func attachBackup(ctx context.Context, srv *sidecar.Server, o *sidecarOptions, engine *workflows.Engine, stderr io.Writer) error {
	c, t, ok, err := backup.ConfigFromEnv(podcontract.BackupConfigEnv, podcontract.BackupAccessKeyIDEnv, podcontract.BackupSecretAccessKeyEnv)
	if err != nil || !ok {
		return err
	}
	ordinal, err := backup.OrdinalOf(os.Getenv(render.PodNameEnv))
	if err != nil {
		return fmt.Errorf("sidecar: backup: $%s: %w", render.PodNameEnv, err)
	}
	bo := backup.Options{Target: t, Dir: o.backupDir, BlobsDir: o.backupBlobsDir, Ordinal: ordinal, RequireMarker: true, Background: true,
		StateDir: filepath.Join(o.dataDir, podcontract.BackupStateSubdir, "ship")}
	if c.Engine {
		if engine == nil {
			return fmt.Errorf("sidecar: $%s names a Workflow engine's store, but no engine runs here (--workflows-config)", podcontract.BackupConfigEnv)
		}
		bo.Dir, bo.Bolt = srv.DataDir(), map[string]*bolt.DB{store.FileName: engine.Store()}
	}
	if bo.Dir == "" {
		return fmt.Errorf("sidecar: $%s is set but --backup-dir is not: the store's directory to ship", podcontract.BackupConfigEnv)
	}
	if bo.Retention, bo.SnapshotInterval, err = c.Durations(); err != nil {
		return fmt.Errorf("sidecar: $%s: %w", podcontract.BackupConfigEnv, err)
	}
	r, err := backup.Start(ctx, bo, stderrLogger(stderr))
	if err != nil {
		return fmt.Errorf("sidecar: %w", err)
	}
	for _, col := range r.Collectors() {
		srv.Registry().MustRegister(col)
	}
	srv.Handle(backup.StatusPrefix, r)
	// On shutdown workerd has exited (the sidecar is a native sidecar, stopped after
	// it): the last pass holds every acknowledged write, and the seal says so to a
	// reshard's new shard set (docs/scaling.md).
	srv.OnShutdown(func(ctx context.Context) error {
		// Not the shutdown's context, which may have run out waiting for open
		// requests: the kubelet's grace period bounds this, and a pass cut short only
		// means no seal.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalPassTimeout)
		defer cancel()
		if err := r.Close(ctx); err != nil {
			return err
		}
		return r.Seal(ctx)
	})
	fmt.Fprintf(stderr, "sidecar: backing up %s to s3 %s/%s/%s\n", bo.Dir, t.Endpoint, t.Bucket, t.Prefix)
	return nil
}

// stderrLogger logs one line per entry to stderr (the container log).
func stderrLogger(stderr io.Writer) logr.Logger {
	return funcr.New(func(prefix, args string) {
		fmt.Fprintln(stderr, prefix, args)
	}, funcr.Options{})
}
