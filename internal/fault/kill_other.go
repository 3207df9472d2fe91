//go:build !unix

package fault

import (
	"os"
	"time"
)

// killSelf ends this process as abruptly as the platform allows.
func killSelf() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
	}
	for {
		time.Sleep(time.Hour)
	}
}
