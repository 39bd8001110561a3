package main

import (
	"os"

	"pdsoak/server/cli"
)

func main() {
	if err := cli.NewRootCommand().Execute(); err != nil {
		os.Exit(cli.ExitCode(err))
	}
}
