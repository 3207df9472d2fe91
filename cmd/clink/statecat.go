package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
)

func newStateCatCmd() *cobra.Command {
	var id uint64
	cmd := &cobra.Command{
		Use:   "state-cat DIR",
		Short: "Print the checkpoints in a checkpoint directory",
		Long: `Print the contents of a checkpoint directory: its checkpoints, markers and
snapshots. With --checkpoint, only that checkpoint.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var sel *checkpoint.ID
			if cmd.Flags().Changed("checkpoint") {
				if id == 0 {
					return errors.New("--checkpoint must be at least 1 (0 is not a checkpoint id)")
				}
				c := checkpoint.ID(id)
				sel = &c
			}
			return store.Cat(cmd.OutOrStdout(), args[0], sel, store.CatOptions{})
		},
	}
	cmd.Flags().Uint64Var(&id, "checkpoint", 0, "print only checkpoint `N`")
	return cmd
}
