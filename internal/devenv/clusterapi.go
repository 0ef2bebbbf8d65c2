package devenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"golang.org/x/mod/modfile"
)

// clusterAPIModule builds Cluster API's core controller manager, relative
// to the repository root.
const clusterAPIModule = "hack/clusterapi"

// ClusterAPI is Cluster API's core controller manager built from its Go
// module, and where its CRDs are.
type ClusterAPI struct {
	Version string
	// Manager is the path of the built sigs.k8s.io/cluster-api/core.
	Manager string
	// CRDs is the folder of Cluster API core's CRDs (core/config/crd/bases
	// of the module).
	CRDs string
}

// EnsureClusterAPI builds Cluster API's core manager at the version pinned
// in root/hack/clusterapi/go.mod unless it is built already (cached in
// .cache/clusterapi/<version>), and returns it. Concurrent callers wait on
// a file lock. It takes about 6 minutes on a cold 2-core machine.
func EnsureClusterAPI(ctx context.Context, root string, progress io.Writer) (ClusterAPI, error) {
	c, err := LocateClusterAPI(ctx, root)
	if err != nil {
		return c, err
	}
	if st, err := os.Stat(c.Manager); err == nil && st.Mode()&0o111 != 0 {
		return c, nil
	}
	cache := filepath.Dir(c.Manager)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return c, err
	}
	unlock, err := lockFile(filepath.Join(cache, ".lock"))
	if err != nil {
		return c, err
	}
	defer unlock()
	if _, err := os.Stat(c.Manager); err == nil {
		return c, nil // built by another process meanwhile
	}
	_, _ = fmt.Fprintf(progress, "building Cluster API core %s; this takes about 6 minutes on a cold 2-core machine\n", c.Version)
	start := time.Now()
	tmp := c.Manager + ".tmp"
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", tmp, "sigs.k8s.io/cluster-api/core")
	build.Dir = filepath.Join(root, clusterAPIModule)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return c, fmt.Errorf("building Cluster API core in %s: %w\n%s", build.Dir, err, out)
	}
	if err := os.Rename(tmp, c.Manager); err != nil {
		return c, fmt.Errorf("installing Cluster API core: %w", err)
	}
	_, _ = fmt.Fprintf(progress, "Cluster API core built in %s into %s\n", time.Since(start).Round(time.Second), c.Manager)
	return c, nil
}

// LocateClusterAPI reads the pinned Cluster API version and finds its CRDs
// in the module cache (downloading the module if needed) and where its
// manager is cached, without building it.
func LocateClusterAPI(ctx context.Context, root string) (ClusterAPI, error) {
	dir := filepath.Join(root, clusterAPIModule)
	path := filepath.Join(dir, "go.mod")
	data, err := os.ReadFile(path)
	if err != nil {
		return ClusterAPI{}, fmt.Errorf("reading the Cluster API module: %w", err)
	}
	f, err := modfile.ParseLax(path, data, nil)
	if err != nil {
		return ClusterAPI{}, fmt.Errorf("parsing %s: %w", path, err)
	}
	var c ClusterAPI
	for _, r := range f.Require {
		if r.Mod.Path == "sigs.k8s.io/cluster-api" {
			c.Version = r.Mod.Version
		}
	}
	if c.Version == "" {
		return c, fmt.Errorf("%s must require sigs.k8s.io/cluster-api", path)
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "sigs.k8s.io/cluster-api")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return c, fmt.Errorf("downloading sigs.k8s.io/cluster-api (go mod download in %s): %w", dir, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return c, fmt.Errorf("locating sigs.k8s.io/cluster-api: no module folder in %q (run 'go mod download' in %s)", out, dir)
	}
	c.CRDs = filepath.Join(mod.Dir, "core", "config", "crd", "bases")
	c.Manager = filepath.Join(root, ".cache", "clusterapi", c.Version, "cluster-api-core")
	return c, nil
}
