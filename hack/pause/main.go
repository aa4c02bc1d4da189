// Command pause is the sandbox ("pause") container of the real-node test's pods
// (test/realnode): it holds the pod's namespaces, reaps orphans and exits on SIGINT or
// SIGTERM, like registry.k8s.io/pause, so the node needs no image from a registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 8)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
