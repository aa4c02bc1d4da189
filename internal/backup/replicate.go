package backup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"
)

// Replicator ships every database file of a store's directory to its Target, from the
// moment the file appears (Start, Close). It only ever reads the files, in read
// transactions: workerd's SQLite has no busy handler, so a lock taken by another
// process would fail the Worker's writes.
type Replicator struct {
	opts Options
	log  logr.Logger
	mc   *minio.Client

	blobs *blobShipper // nil without opts.BlobsDir

	mu  sync.Mutex
	dbs map[string]*shipper // by path relative to opts.Dir
	// guarded: opts.Dir held VolumeMarker at Start; lost: it no longer does (the
	// directory was wiped under the pod), so nothing is recorded as deleted.
	guarded, lost bool
	// caughtUp: a pass completed without error, so every database the pod had when it
	// started is in the bucket (Status.Shipped). mirrored: the volume was filled from
	// this target when the pod started (MirroredMarker; Status.Restored until caughtUp).
	caughtUp, mirrored bool

	// passMu makes passes one at a time: a shipper is shipped by one pass.
	passMu       sync.Mutex
	shippedBytes atomic.Int64
	started      time.Time
	stop, done   chan struct{}
}

// shipConcurrency bounds the files read and uploaded at once.
const shipConcurrency = 4

// Start begins shipping o.Dir: every o.ScanInterval it lists the directory and ships
// what changed, until Close.
func Start(ctx context.Context, o Options, log logr.Logger) (*Replicator, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Dir == "" || o.StateDir == "" {
		return nil, errors.New("backup: the store's directory and the state directory are required")
	}
	o.defaults()
	mc, err := o.minio()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
		return nil, err
	}
	if err := removeLeftovers(o.StateDir); err != nil {
		return nil, err
	}
	r := &Replicator{opts: o, log: log, mc: mc, dbs: map[string]*shipper{}, started: time.Now(),
		guarded: o.RequireMarker || exists(filepath.Join(o.Dir, VolumeMarker)), stop: make(chan struct{}), done: make(chan struct{})}
	if o.BlobsDir != "" {
		r.blobs = &blobShipper{dir: o.BlobsDir, prefix: o.blobsPrefix()}
	}
	// Read once: a later start on the same volume has its own passes to rely on.
	if b, err := os.ReadFile(filepath.Join(o.Dir, MirroredMarker)); err == nil {
		r.mirrored = string(b) == o.Target.Identity()
		if err := os.Remove(filepath.Join(o.Dir, MirroredMarker)); err != nil {
			return nil, err
		}
	}
	if !o.Background {
		r.firstPass(ctx)
	}
	go r.loop(o.Background)
	return r, nil
}

func (r *Replicator) firstPass(ctx context.Context) {
	if err := r.pass(ctx, false); err != nil {
		r.log.Error(err, "backup: first pass failed; retrying", "dir", r.opts.Dir)
	}
}

// loop passes every ScanInterval until Close, after a first pass when first is set.
func (r *Replicator) loop(first bool) {
	defer close(r.done)
	// Close cancels the pass under way: a pod told to stop ships what is committed in
	// its final pass, which must fit in its grace period, rather than finishing a long
	// first pass or periodic full copy.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if first {
		r.firstPass(ctx)
	}
	t := time.NewTicker(r.opts.ScanInterval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			if err := r.pass(ctx, false); err != nil && ctx.Err() == nil {
				r.log.Error(err, "backup: pass failed; retrying", "dir", r.opts.Dir)
			}
		}
	}
}

// pass lists the directory and ships every file that changed (all, with force).
func (r *Replicator) pass(ctx context.Context, force bool) error {
	r.passMu.Lock()
	defer r.passMu.Unlock()
	ships, gone, err := r.scan()
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range gone {
		errs = append(errs, r.forget(ctx, s))
	}
	if err := r.shipBlobs(ctx); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(shipConcurrency)
	var mu sync.Mutex
	for _, s := range ships {
		g.Go(func() error {
			err := s.ship(gctx, r, force)
			if errors.Is(err, errGone) {
				err = r.forget(ctx, s)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("backup: %s: %w", s.rel, err))
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.mu.Lock()
	r.caughtUp = !r.lost
	r.mu.Unlock()
	return nil
}

// shipBlobs uploads the blobs not yet shipped; a database's pages are uploaded only
// after the blobs that existed when they were read.
func (r *Replicator) shipBlobs(ctx context.Context) error {
	if r.blobs == nil {
		return nil
	}
	if err := r.blobs.ship(ctx, r); err != nil {
		return fmt.Errorf("backup: blobs: %w", err)
	}
	return nil
}

// scan registers the directory's new database files and returns every registered one
// and those that are gone.
func (r *Replicator) scan() (ships, gone []*shipper, err error) {
	found, err := databaseFiles(r.opts.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("backup: list %s: %w", r.opts.Dir, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.guarded && !r.lost && !exists(filepath.Join(r.opts.Dir, VolumeMarker)) {
		r.lost = true
		r.log.Error(errors.New("volume marker gone"), "backup: the store's directory was wiped under the pod; shipping stops and nothing is recorded as deleted; the pod must be restarted to restore it (docs/backup.md)", "dir", r.opts.Dir)
	}
	if r.lost {
		return nil, nil, nil
	}
	for name, db := range r.opts.Bolt {
		if _, ok := r.dbs[name]; !ok {
			r.dbs[name] = boltShipper(name, r.opts.shardKey(name, r.opts.Ordinal), db)
		}
		found[name] = struct{}{}
	}
	for rel, s := range r.dbs {
		if _, ok := found[rel]; !ok {
			gone = append(gone, s)
		}
	}
	for rel := range found {
		if _, ok := r.dbs[rel]; ok {
			continue
		}
		if key, ok := r.opts.keyOf(rel, r.opts.Ordinal); ok {
			r.dbs[rel] = sqliteShipper(rel, filepath.Join(r.opts.Dir, rel), key, r.opts.StateDir)
		}
	}
	for _, s := range r.dbs {
		ships = append(ships, s)
	}
	return ships, gone, nil
}

// forget stops shipping a removed file and records its removal, so a restore to a
// later time does not bring it back. A record that did not go up is an error of the
// pass, so no seal follows it.
func (r *Replicator) forget(ctx context.Context, s *shipper) error {
	r.mu.Lock()
	if r.dbs[s.rel] != s || r.lost {
		r.mu.Unlock()
		return nil
	}
	delete(r.dbs, s.rel)
	r.mu.Unlock()
	if err := s.upload(ctx, r, kindDeleted, func(*os.File) error { return nil }); err != nil {
		return fmt.Errorf("backup: record the removal of %s: %w", s.rel, err)
	}
	r.log.Info("backup: database removed; recorded", "file", s.rel)
	return nil
}

// databaseFiles lists dir's database files in workerd's layout, as paths relative to
// dir ("<uniqueKey>/<file>.sqlite"). A missing dir has none.
func databaseFiles(dir string) (map[string]struct{}, error) {
	out := map[string]struct{}{}
	keys, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if !k.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(dir, k.Name()))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if f.Type().IsRegular() && filepath.Ext(f.Name()) == sqliteExt {
				out[k.Name()+"/"+f.Name()] = struct{}{}
			}
		}
	}
	return out, nil
}

// Position is where one database's backup stands.
type Position struct {
	// File is the database's path relative to the store's directory.
	File string
	// Shipped is when its last change was shipped (or found unchanged).
	Shipped time.Time
	// Pending is true while the file holds a change not yet shipped.
	Pending bool
	// Full is when its last full copy was shipped by this process.
	Full time.Time
}

// Positions reports every database's position, by file.
func (r *Replicator) Positions() []Position {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Position, 0, len(r.dbs))
	for rel, s := range r.dbs {
		p := Position{File: rel, Pending: s.pending.Load() || s.shipped.Load() == 0}
		if n := s.shipped.Load(); n > 0 {
			p.Shipped = time.Unix(0, n)
		}
		if n := s.full.Load(); n > 0 {
			p.Full = time.Unix(0, n)
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out
}

// Sync ships every change committed before it was called and returns once uploaded.
func (r *Replicator) Sync(ctx context.Context) error { return r.pass(ctx, true) }

// Close stops the loop and ships what is committed, within ctx: a pass under way is
// cancelled by the stop or waited for until ctx ends.
func (r *Replicator) Close(ctx context.Context) error {
	close(r.stop)
	select {
	case <-r.done:
	case <-ctx.Done():
		return fmt.Errorf("backup: the pass under way did not end before the final one could start: %w", ctx.Err())
	}
	return r.pass(ctx, true)
}

// removeLeftovers removes the database copies (readQuiet) and upload files a run that
// crashed left in the state directory: they hold nothing the next passes need.
func removeLeftovers(dir string) error {
	for _, pattern := range []string{"copy-*", "upload-*"} {
		found, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return err
		}
		for _, f := range found {
			if err := os.RemoveAll(f); err != nil {
				return err
			}
		}
	}
	return nil
}
