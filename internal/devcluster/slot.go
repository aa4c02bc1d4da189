package devcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// maxSlots bounds how many local clusters may run at once on one machine: slot k uses
// 127.<1+2k>/16 and 127.<2+2k>/16, so k < 63 stays inside 127.0.0.0/8.
const maxSlots = 32

// acquireSlot takes the lowest free slot: an exclusive flock on
// <tmp>/workerd-operator-devcluster/slot-<k>.lock, held until the returned file is
// closed (Stop) or the process dies, so two clusters on one machine (a `make dev` and a
// `make test`, or two test binaries) never hand out the same pod or Service addresses.
func acquireSlot() (int, *os.File, error) {
	dir := filepath.Join(os.TempDir(), "workerd-operator-devcluster")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, nil, fmt.Errorf("devcluster: address slots: %w", err)
	}
	for k := 0; k < maxSlots; k++ {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("slot-%d.lock", k)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return 0, nil, fmt.Errorf("devcluster: address slots: %w", err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return k, f, nil
		}
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return 0, nil, fmt.Errorf("devcluster: address slot %d: %w", k, err)
		}
	}
	return 0, nil, fmt.Errorf("devcluster: %d local clusters already run on this machine (address slots under %s); stop one", maxSlots, dir)
}
