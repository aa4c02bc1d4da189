package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// The backup reads a database workerd may open, write or close at any moment, and
// workerd sets no busy handler: any SQLite lock it cannot take at once fails the call.
// So the backup never takes one workerd could contend for:
//   - it never opens a WAL database first: the first connection rebuilds the WAL index
//     ("recovery") under an exclusive lock; a database nobody has open is read from a
//     private copy (readQuiet) instead;
//   - before it opens one in place it pins it (pinDatabase): shared locks, of the kind
//     connections take, on the WAL index's DMS byte, so its own connection never
//     resets the index, and on the file's shared range, so neither its own connection's
//     close nor workerd's can take the exclusive lock that checkpoints and removes the
//     WAL while the read runs.
//
// Lock offsets are those of SQLite's unix VFS (os_unix.c: SHARED_FIRST, UNIX_SHM_DMS;
// https://www.sqlite.org/walformat.html#locks, https://www.sqlite.org/lockingv3.html).
const (
	sharedFirst = 0x40000000 + 2 // PENDING_BYTE + 2
	sharedSize  = 510
	dmsOffset   = 120 + 8 // after the WAL index's eight lock bytes at 120
)

// errPinBusy: another connection holds a lock the pin would wait on (it is closing the
// database, or building its index); the read is tried again shortly.
var errPinBusy = errors.New("the database is being opened or closed")

// pin holds shared locks on a database's file and WAL index while the backup reads it.
// They are open-file-description locks: unlike POSIX ones they conflict with the locks
// of this process's own SQLite connections, and its queries see them. A pin is released
// only after the reader's connection closed: closing any descriptor of a file drops
// every POSIX lock the process holds on it, the connection's included.
type pin struct{ files []*os.File }

func (p pin) release() {
	for _, f := range p.files {
		f.Close()
	}
}

// pinDatabase pins the database at path when another connection has it open (holds
// the WAL index's DMS byte), and tells whether one does. It looks before it locks: a
// database nobody has open is left without any lock, so the first connection to open
// it still resets and rebuilds its index. Unless it returns others, nothing is held.
func pinDatabase(path string) (p pin, others bool, err error) {
	shm, err := os.Open(path + "-shm")
	if errors.Is(err, fs.ErrNotExist) {
		return pin{}, false, nil
	}
	if err != nil {
		return pin{}, false, err
	}
	p.files = []*os.File{shm}
	defer func() {
		if err != nil || !others {
			p.release()
			p = pin{}
		}
	}()
	if others, err = dmsHeld(shm); err != nil || !others {
		return p, others, err
	}
	db, err := os.Open(path)
	if err != nil {
		return p, false, err
	}
	p.files = append(p.files, db)
	if err := readLock(db, sharedFirst, sharedSize); err != nil {
		return p, false, err
	}
	if err := readLock(shm, dmsOffset, 1); err != nil {
		return p, false, err
	}
	others, err = dmsHeld(shm) // the connection seen first may have closed meanwhile
	return p, others, err
}

// readLock takes an open-file-description read lock on len bytes of f at start.
func readLock(f *os.File, start, len int64) error {
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: io.SeekStart, Start: start, Len: len}
	err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
		return errPinBusy
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return nil
}

// dmsHeld tells whether a connection other than this pin's holds the DMS byte of the
// WAL index shm (a connection has the database open).
func dmsHeld(shm *os.File) (bool, error) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: dmsOffset, Len: 1}
	if err := unix.FcntlFlock(shm.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return false, fmt.Errorf("query the lock of %s: %w", shm.Name(), err)
	}
	return lk.Type != unix.F_UNLCK, nil
}

// openElsewhere tells, without taking any lock, whether a connection has the database
// at path open.
func openElsewhere(path string) bool {
	shm, err := os.Open(path + "-shm")
	if err != nil {
		return false
	}
	defer shm.Close()
	held, err := dmsHeld(shm)
	return err == nil && held
}

// pinned runs read with the database at path pinned, when another connection has it
// open; it reports false, having run and held nothing, when nobody has it open. A pin
// that must wait is tried again for up to a second.
func pinned(path string, read func() error) (bool, error) {
	for wait := time.Millisecond; ; wait *= 2 {
		p, others, err := pinDatabase(path)
		if errors.Is(err, errPinBusy) && wait < time.Second {
			time.Sleep(wait)
			continue
		}
		if err != nil || !others {
			return false, err
		}
		err = read()
		p.release()
		return true, err
	}
}

// errNotQuiet: the database was opened or written while it was being copied.
var errNotQuiet = errors.New("the database was opened while it was copied")

// readQuiet reads the database at path, which nobody had open, from a copy of its
// file and WAL made in a fresh directory under tmp. It fails with errNotQuiet when
// anything wrote either during the copy.
func readQuiet(ctx context.Context, path, tmp string, keep func(no uint32, h uint64) bool) (header, []page, []uint64, error) {
	before, err := statOf(path)
	if err != nil {
		return header{}, nil, nil, err
	}
	dir, err := os.MkdirTemp(tmp, "copy-*")
	if err != nil {
		return header{}, nil, nil, err
	}
	defer os.RemoveAll(dir)
	copyPath := filepath.Join(dir, filepath.Base(path))
	if err := copyFile(path, copyPath); err != nil {
		return header{}, nil, nil, err
	}
	if err := copyFile(path+"-wal", copyPath+"-wal"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return header{}, nil, nil, err
	}
	after, err := statOf(path)
	if err != nil {
		return header{}, nil, nil, err
	}
	if after != before {
		return header{}, nil, nil, errNotQuiet
	}
	return readOpen(ctx, copyPath, keep)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
