package main

import (
	"os"

	"github.com/p2pc/p2pc/plugins/sdk"
)

func main() { sdk.Serve(&echo{exit: os.Exit, log: sdk.Logger()}) }
