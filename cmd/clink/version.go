package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at link time: go build -ldflags "-X main.version=v1.2.3".
// When empty, the module version recorded in the binary is used.
var version string

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the clink version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "clink %s (%s, %s/%s)\n",
				versionString(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}

// versionString returns the link-time version, else the main module's
// version from the build info (set by go install module@version), else "dev".
func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
