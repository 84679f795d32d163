package main

import "github.com/p2pc/p2pc/plugins/sdk"

func main() { sdk.Serve(queens{}) }
