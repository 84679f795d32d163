// Command crossbuild measures how long p2pc's plugin cross-build takes per
// platform: cold (empty Go build cache and plugin cache), warm Go cache
// (plugin cache empty) and cached (a plugin cache hit, what every run after
// the first pays).
//
//	go run ./results/adhoc/crossbuild -dir plugins/mandelbrot
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/p2pc/p2pc/internal/pluginbuild"
)

func main() {
	dir := flag.String("dir", "plugins/mandelbrot", "Go package folder of the plugin")
	plats := flag.String("platforms", "linux/amd64,linux/arm64,darwin/arm64,windows/amd64", "GOOS/GOARCH list")
	flag.Parse()
	if err := run(*dir, strings.Split(*plats, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "crossbuild:", err)
		os.Exit(1)
	}
}

func run(dir string, plats []string) error {
	tmp, err := os.MkdirTemp("", "p2pc-crossbuild-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ctx := context.Background()
	fmt.Println("| platform | cold (empty Go cache) | warm Go cache, plugin cache miss | plugin cache hit | size |")
	fmt.Println("| --- | --- | --- | --- | --- |")
	for i, plat := range plats {
		goos, goarch, ok := strings.Cut(plat, "/")
		if !ok {
			return fmt.Errorf("platform %q is not GOOS/GOARCH", plat)
		}
		// A fresh Go build cache and plugin cache for the cold build.
		os.Setenv("GOCACHE", filepath.Join(tmp, fmt.Sprint("gocache", i)))
		var took [3]time.Duration
		var p *pluginbuild.Plugin
		for k, cache := range []string{"cold", "warm", "warm"} {
			start := time.Now()
			if p, err = pluginbuild.Build(ctx, dir, filepath.Join(tmp, fmt.Sprint(cache, i)), goos, goarch, nil); err != nil {
				return err
			}
			took[k] = time.Since(start)
		}
		fi, err := os.Stat(p.Path)
		if err != nil {
			return err
		}
		fmt.Printf("| %s | %.1f s | %.2f s | %.1f ms | %.1f MB |\n", plat, took[0].Seconds(), took[1].Seconds(),
			float64(took[2].Microseconds())/1000, float64(fi.Size())/1e6)
	}
	return nil
}
