package main

import "github.com/p2pc/p2pc/plugins/sdk"

func main() {
	if isSupervisor() { // this binary, started again by run to watch a command
		supervise()
		return
	}
	sdk.Serve(&execTask{log: sdk.Logger()})
}
