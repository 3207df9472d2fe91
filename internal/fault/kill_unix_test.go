//go:build unix

package fault

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// helperEnv makes the test binary act as the crashing subprocess in
// TestEnvKillsAtArmedOccurrence.
const helperEnv = "CLINK_FAULT_TEST_HELPER"

func TestHelperReachPoints(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process for TestEnvKillsAtArmedOccurrence")
	}
	for i := 1; i <= 3; i++ {
		_ = Point("fault.test.other")
		fmt.Printf("before %d\n", i)
		_ = Point("fault.test.crash")
		fmt.Printf("after %d\n", i)
	}
	os.Exit(0)
}

func TestEnvKillsAtArmedOccurrence(t *testing.T) {
	tests := []struct {
		spec       string
		wantKilled bool
		wantLast   string // last line printed before the end
	}{
		{spec: "fault.test.crash", wantKilled: true, wantLast: "before 1"},
		{spec: "fault.test.crash@2", wantKilled: true, wantLast: "before 2"},
		{spec: "fault.test.crash@3", wantKilled: true, wantLast: "before 3"},
		{spec: "fault.test.crash@4", wantKilled: false, wantLast: "after 3"},
		{spec: "fault.test.unrelated", wantKilled: false, wantLast: "after 3"},
		{spec: "fault.test.other@2,fault.test.crash@3", wantKilled: true, wantLast: "after 1"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperReachPoints$", "-test.count=1")
			cmd.Env = append(os.Environ(), helperEnv+"=1", EnvVar+"="+tt.spec)
			out, err := cmd.Output()
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			last := lines[len(lines)-1]
			if last != tt.wantLast {
				t.Errorf("last line = %q, want %q (output %q)", last, tt.wantLast, out)
			}
			var ee *exec.ExitError
			killed := errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() &&
				ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
			if killed != tt.wantKilled {
				t.Fatalf("killed by SIGKILL = %v (err %v), want %v", killed, err, tt.wantKilled)
			}
			if !killed && err != nil {
				t.Fatalf("helper failed: %v", err)
			}
		})
	}
}

func TestMalformedEnvExits(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperReachPoints$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1", EnvVar+"=x@0")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("err = %v, want exit status 2 (output %q)", err, out)
	}
	if !strings.Contains(string(out), "CLINK_FAULT") {
		t.Fatalf("output %q does not name CLINK_FAULT", out)
	}
}
