package backup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/go-logr/logr"
)

// Replicator ships every database file of a store's directory to its Target, from the
// moment the file appears until it is removed (Start, Close).
type Replicator struct {
	opts  Options
	log   logr.Logger
	store *litestream.Store

	mu  sync.Mutex
	dbs map[string]*litestream.DB // by path relative to opts.Dir

	started time.Time
	stop    chan struct{}
	done    chan struct{}
}

// Start opens the replicator and begins shipping the files already in o.Dir; it
// lists o.Dir every o.ScanInterval for new and removed files until Close.
func Start(ctx context.Context, o Options, log logr.Logger) (*Replicator, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	detachAWSEnvironment()
	if o.Dir == "" || o.StateDir == "" {
		return nil, errors.New("backup: the store's directory and the state directory are required")
	}
	o.defaults()
	store := litestream.NewStore(nil, litestream.DefaultCompactionLevels)
	store.SnapshotInterval, store.SnapshotRetention = o.SnapshotInterval, o.Retention
	store.Logger = slog.New(logr.ToSlogHandler(log.WithName("litestream")))
	if err := store.Open(ctx); err != nil {
		return nil, fmt.Errorf("backup: open: %w", err)
	}
	r := &Replicator{opts: o, log: log, store: store, dbs: map[string]*litestream.DB{}, started: time.Now(),
		stop: make(chan struct{}), done: make(chan struct{})}
	if err := r.Scan(ctx); err != nil {
		_ = store.Close(ctx)
		return nil, err
	}
	go r.loop()
	return r, nil
}

func (r *Replicator) loop() {
	defer close(r.done)
	t := time.NewTicker(r.opts.ScanInterval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			if err := r.Scan(context.Background()); err != nil {
				r.log.Error(err, "backup: scan failed; retrying", "dir", r.opts.Dir)
			}
		}
	}
}

// Scan registers the database files of the directory not yet shipped and stops
// shipping those that are gone.
func (r *Replicator) Scan(ctx context.Context) error {
	found, err := databaseFiles(r.opts.Dir)
	if err != nil {
		return fmt.Errorf("backup: list %s: %w", r.opts.Dir, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for rel := range r.dbs {
		if _, ok := found[rel]; !ok {
			r.log.Info("backup: database removed; its backup stays", "file", rel)
			if err := r.store.UnregisterDB(ctx, r.dbs[rel].Path()); err != nil {
				r.log.Error(err, "backup: stop shipping", "file", rel)
			}
			delete(r.dbs, rel)
		}
	}
	var errs []error
	for rel := range found {
		if _, ok := r.dbs[rel]; ok {
			continue
		}
		if err := r.register(ctx, rel); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (r *Replicator) register(ctx context.Context, rel string) error {
	key, ok := r.opts.keyOf(rel, r.opts.Ordinal)
	if !ok {
		return nil
	}
	db := litestream.NewDB(filepath.Join(r.opts.Dir, rel))
	db.SetMetaPath(filepath.Join(r.opts.StateDir, rel+litestream.MetaDirSuffix))
	client := r.opts.client(key)
	if err := client.Init(ctx); err != nil {
		return fmt.Errorf("backup: %s: %w", rel, err)
	}
	db.Replica = litestream.NewReplicaWithClient(db, client)
	if err := os.MkdirAll(filepath.Dir(db.MetaPath()), 0o700); err != nil {
		return fmt.Errorf("backup: %s: %w", rel, err)
	}
	if err := r.store.RegisterDB(db); err != nil {
		return fmt.Errorf("backup: %s: %w", rel, err)
	}
	r.dbs[rel] = db
	r.log.Info("backup: shipping", "file", rel, "key", key)
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
	// TXID is the last transaction shipped; LastSync when a sync last succeeded.
	TXID     uint64
	LastSync time.Time
	// Pending is true while the file holds a committed transaction not yet shipped.
	Pending bool
}

// Positions reports every shipped database's position, by file.
func (r *Replicator) Positions() []Position {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Position, 0, len(r.dbs))
	for rel, db := range r.dbs {
		p := Position{File: rel, LastSync: db.LastSuccessfulSyncAt()}
		if db.Replica != nil {
			p.TXID = uint64(db.Replica.Pos().TXID)
		}
		if local, err := db.Pos(); err == nil && uint64(local.TXID) > p.TXID {
			p.Pending = true
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out
}

// Sync ships every database's committed transactions now and waits for the upload.
func (r *Replicator) Sync(ctx context.Context) error {
	r.mu.Lock()
	dbs := make([]*litestream.DB, 0, len(r.dbs))
	for _, db := range r.dbs {
		dbs = append(dbs, db)
	}
	r.mu.Unlock()
	var errs []error
	for _, db := range dbs {
		if err := db.SyncAndWait(ctx); err != nil {
			errs = append(errs, fmt.Errorf("backup: sync %s: %w", db.Path(), err))
		}
	}
	return errors.Join(errs...)
}

// Close ships what is committed and stops.
func (r *Replicator) Close(ctx context.Context) error {
	close(r.stop)
	<-r.done
	return r.store.Close(ctx)
}
