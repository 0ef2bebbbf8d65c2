package devenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/mod/modfile"
)

// The module that builds the control plane, relative to the repository root.
const controlPlaneModule = "hack/controlplane"

// Component names, which are also the binary names.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
	KWOK              = "kwok"
)

// buildPackages maps each binary to the Go package that builds it and the
// file name `go build -o dir/` gives it.
var buildPackages = []struct{ binary, pkg, goName string }{
	{APIServer, "k8s.io/kubernetes/cmd/kube-apiserver", "kube-apiserver"},
	{Scheduler, "k8s.io/kubernetes/cmd/kube-scheduler", "kube-scheduler"},
	{ControllerManager, "k8s.io/kubernetes/cmd/kube-controller-manager", "kube-controller-manager"},
	{Etcd, "go.etcd.io/etcd/server/v3", "server"},
	{KWOK, "sigs.k8s.io/kwok/cmd/kwok", "kwok"},
}

// Versions are the module versions the control plane is built from, read
// from hack/controlplane/go.mod so that there is one place to bump them.
type Versions struct {
	Kubernetes string
	Etcd       string
	KWOK       string
}

// Key names the cache folder of binaries built from these versions.
func (v Versions) Key() string {
	return fmt.Sprintf("k8s-%s_etcd-%s_kwok-%s", v.Kubernetes, v.Etcd, v.KWOK)
}

// Binaries are the paths of the five control-plane programs.
type Binaries struct {
	Dir string
}

// Path returns the path of one component's binary.
func (b Binaries) Path(component string) string { return filepath.Join(b.Dir, component) }

// missing lists the binaries that are not built yet.
func (b Binaries) missing() []string {
	var out []string
	for _, p := range buildPackages {
		if st, err := os.Stat(b.Path(p.binary)); err != nil || st.Mode()&0o111 == 0 {
			out = append(out, p.binary)
		}
	}
	return out
}

// ReadVersions reads the control-plane versions from the repository at root.
func ReadVersions(root string) (Versions, error) {
	path := filepath.Join(root, controlPlaneModule, "go.mod")
	data, err := os.ReadFile(path)
	if err != nil {
		return Versions{}, fmt.Errorf("reading control-plane module: %w", err)
	}
	f, err := modfile.ParseLax(path, data, nil)
	if err != nil {
		return Versions{}, fmt.Errorf("parsing %s: %w", path, err)
	}
	found := map[string]string{}
	for _, r := range f.Require {
		found[r.Mod.Path] = r.Mod.Version
	}
	v := Versions{Kubernetes: found["k8s.io/kubernetes"], Etcd: found["go.etcd.io/etcd/server/v3"], KWOK: found["sigs.k8s.io/kwok"]}
	if v.Kubernetes == "" || v.Etcd == "" || v.KWOK == "" {
		return Versions{}, fmt.Errorf("%s must require k8s.io/kubernetes, go.etcd.io/etcd/server/v3 and sigs.k8s.io/kwok, found %v", path, found)
	}
	return v, nil
}

// FindRoot walks up from dir to the root of the berth repository (the
// folder that holds hack/controlplane/go.mod).
func FindRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, controlPlaneModule, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside a berth checkout (no hack/controlplane/go.mod above the current folder); pass --bin-dir with prebuilt control-plane binaries")
		}
		dir = parent
	}
}

// CacheDir is where binaries built from the given versions live.
func CacheDir(root string, v Versions) string {
	return filepath.Join(root, ".cache", "controlplane", v.Key())
}

// EnsureBinaries builds the control-plane binaries for the versions pinned
// in root/hack/controlplane unless they are already built, and returns
// where they are. Concurrent callers (test packages run in parallel) wait
// on a file lock instead of building twice. Progress goes to progress.
func EnsureBinaries(ctx context.Context, root string, progress io.Writer) (Binaries, Versions, error) {
	v, err := ReadVersions(root)
	if err != nil {
		return Binaries{}, v, err
	}
	dir := CacheDir(root, v)
	bins := Binaries{Dir: dir}
	if len(bins.missing()) == 0 {
		return bins, v, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return bins, v, err
	}
	unlock, err := lockFile(filepath.Join(dir, ".lock"))
	if err != nil {
		return bins, v, err
	}
	defer unlock()
	missing := bins.missing() // another process may have built them meanwhile
	if len(missing) == 0 {
		return bins, v, nil
	}
	if err := build(ctx, root, v, dir, missing, progress); err != nil {
		return bins, v, err
	}
	return bins, v, nil
}

func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}

// build compiles the missing binaries into a temporary folder and renames
// them into dir, so a binary in dir is always complete.
func build(ctx context.Context, root string, v Versions, dir string, missing []string, progress io.Writer) error {
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	var pkgs []string
	goNames := map[string]string{}
	for _, p := range buildPackages {
		if slices.Contains(missing, p.binary) {
			pkgs = append(pkgs, p.pkg)
			goNames[p.binary] = p.goName
		}
	}
	minor := strings.Split(strings.TrimPrefix(v.Kubernetes, "v"), ".")
	ldflags := "-s -w -X k8s.io/component-base/version.gitVersion=" + v.Kubernetes +
		" -X k8s.io/component-base/version.gitMajor=" + minor[0] +
		" -X k8s.io/component-base/version.gitMinor=" + minor[1] +
		" -X k8s.io/component-base/version.gitTreeState=clean"
	args := append([]string{"build", "-v", "-trimpath", "-o", tmp + "/", "-ldflags", ldflags}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Join(root, controlPlaneModule)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintf(progress, "building control plane %s (%s); this takes about 6 minutes on a cold 2-core machine\n", v.Key(), strings.Join(missing, ", "))
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting go build: %w", err)
	}
	var compiled atomic.Int64
	tail := newTail(40)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			compiled.Add(1)
			tail.add(sc.Text())
		}
	}()
	ticker := time.NewTicker(15 * time.Second)
	defer ticker.Stop()
	waitErr := make(chan error, 1)
	go func() { <-done; waitErr <- cmd.Wait() }()
	for {
		select {
		case err := <-waitErr:
			if err != nil {
				return fmt.Errorf("building control plane in %s: %w\n%s", cmd.Dir, err, tail.String())
			}
			for _, m := range missing {
				if err := os.Rename(filepath.Join(tmp, goNames[m]), filepath.Join(dir, m)); err != nil {
					return fmt.Errorf("installing %s: %w", m, err)
				}
			}
			_, _ = fmt.Fprintf(progress, "control plane built in %s into %s\n", time.Since(start).Round(time.Second), dir)
			return nil
		case <-ticker.C:
			_, _ = fmt.Fprintf(progress, "  ... still building (%s, %d packages compiled)\n", time.Since(start).Round(time.Second), compiled.Load())
		}
	}
}
