//go:build !unix

package main

import "os"

// termWidth assumes a console of 80 columns where it cannot ask.
func termWidth(*os.File) int { return 80 }
