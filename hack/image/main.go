// Command image builds berth's container image without a container engine:
// a static berth binary per platform on a minimal base built here (the
// equivalent of gcr.io/distroless/static:nonroot, which cannot be pulled on
// machines without a registry), written as an OCI image layout tarball that
// holds a multi-platform index.
//
//	go run . -o ../../bin/berth-image.tar -version v0.1.0
//
// Load it with `skopeo copy oci-archive:bin/berth-image.tar docker://...`,
// `crane push bin/berth-image.tar ...` or `podman load`.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		opts      Options
		platforms string
		out       string
		epoch     int64
	)
	flag.StringVar(&out, "o", "berth-image.tar", "OCI image layout tarball to write")
	flag.StringVar(&opts.Root, "root", "../..", "berth's repository root (the main module)")
	flag.StringVar(&opts.Version, "version", "dev", "version written into the binary and the image labels")
	flag.StringVar(&opts.Revision, "revision", "", "source revision (git commit) for the labels")
	flag.StringVar(&opts.Source, "source", "https://github.com/berth-dev/berth", "source repository for the labels")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
	flag.Int64Var(&epoch, "source-date-epoch", 0, "creation time (Unix seconds) of the image and its files, for reproducible builds; default $SOURCE_DATE_EPOCH or 0")
	flag.Parse()

	if epoch == 0 {
		if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
			if _, err := fmt.Sscan(s, &epoch); err != nil {
				return fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)
			}
		}
	}
	opts.Created = time.Unix(epoch, 0).UTC()
	for _, p := range strings.Split(platforms, ",") {
		plat, err := ParsePlatform(p)
		if err != nil {
			return err
		}
		opts.Platforms = append(opts.Platforms, plat)
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return err
	}
	opts.Root = root
	tmp, err := os.MkdirTemp("", "berth-image-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	opts.WorkDir = tmp

	idx, err := Build(opts)
	if err != nil {
		return err
	}
	if err := WriteArchive(out, idx, opts); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%s, %d platforms)\n", out, opts.Version, len(opts.Platforms))
	return nil
}
