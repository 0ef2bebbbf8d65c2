package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/elf"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestImageArchive builds the image as `make image` does and reads the
// tarball back as a registry client would: an OCI layout whose index.json
// names a multi-platform index of linux/amd64 and linux/arm64 images, each
// running a static berth of its architecture as the nonroot user, with the
// OCI labels, and a base with nonroot in /etc/passwd and CA certificates.
func TestImageArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("builds berth for two platforms")
	}
	tmp := t.TempDir()
	o := Options{Root: "../..", WorkDir: tmp, Version: "v0.0.0-test", Revision: "abc123", Source: "https://github.com/berth-dev/berth",
		Created: time.Unix(1700000000, 0).UTC()}
	for _, s := range []string{"linux/amd64", "linux/arm64"} {
		p, err := ParsePlatform(s)
		if err != nil {
			t.Fatal(err)
		}
		o.Platforms = append(o.Platforms, p)
	}
	idx, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(tmp, "berth-image.tar")
	if err := WriteArchive(archive, idx, o); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(tmp, "unpacked")
	untar(t, archive, dir)
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("the tarball is not an OCI image layout: %v", err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 || topManifest.Manifests[0].Annotations[RefNameAnnotation] != o.Version {
		t.Fatalf("index.json: %+v, want one index named %s", topManifest.Manifests, o.Version)
	}
	multi, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	if err != nil {
		t.Fatalf("index.json does not point at an image index: %v", err)
	}
	mm, err := multi.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	var platforms []string
	for _, desc := range mm.Manifests {
		if desc.Platform == nil {
			t.Fatalf("manifest %s has no platform", desc.Digest)
		}
		platforms = append(platforms, desc.Platform.OS+"/"+desc.Platform.Architecture)
		img, err := multi.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, img, *desc.Platform, machines[desc.Platform.Architecture], o)
	}
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, platforms); diff != "" {
		t.Errorf("platforms (-want +got):\n%s", diff)
	}
}

func checkImage(t *testing.T, img v1.Image, p v1.Platform, machine elf.Machine, o Options) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != p.OS || cfg.Architecture != p.Architecture {
		t.Errorf("%s: config says %s/%s", p.Architecture, cfg.OS, cfg.Architecture)
	}
	if diff := cmp.Diff([]string{"/berth"}, cfg.Config.Entrypoint); diff != "" {
		t.Errorf("%s: entrypoint (-want +got):\n%s", p.Architecture, diff)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("%s: user %q, want the nonroot user 65532:65532", p.Architecture, cfg.Config.User)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.title": "berth", "org.opencontainers.image.version": o.Version,
		"org.opencontainers.image.revision": o.Revision, "org.opencontainers.image.source": o.Source,
		"org.opencontainers.image.created": "2023-11-14T22:13:20Z",
	} {
		if got := cfg.Config.Labels[k]; got != want {
			t.Errorf("%s: label %s = %q, want %q", p.Architecture, k, got, want)
		}
	}
	files := imageFiles(t, img)
	bin, ok := files["berth"]
	if !ok {
		t.Fatalf("%s: no /berth in the image", p.Architecture)
	}
	if bin.Mode&0o111 == 0 {
		t.Errorf("%s: /berth is not executable (%o)", p.Architecture, bin.Mode)
	}
	ef, err := elf.NewFile(bytes.NewReader(bin.data))
	if err != nil {
		t.Fatalf("%s: /berth is not an ELF binary: %v", p.Architecture, err)
	}
	if ef.Machine != machine {
		t.Errorf("%s: /berth is built for %s", p.Architecture, ef.Machine)
	}
	for _, prog := range ef.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("%s: /berth is dynamically linked; the image has no libc", p.Architecture)
		}
	}
	if p.Architecture == runtime.GOARCH {
		// The binary of this machine's architecture runs and knows its version.
		exe := filepath.Join(t.TempDir(), "berth")
		if err := os.WriteFile(exe, bin.data, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(exe, "version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "berth "+o.Version) {
			t.Errorf("%s: /berth version: %v %q, want it to print %s", p.Architecture, err, out, o.Version)
		}
	}
	if passwd := string(files["etc/passwd"].data); !strings.Contains(passwd, "nonroot:x:65532:65532:") {
		t.Errorf("%s: /etc/passwd has no nonroot user:\n%s", p.Architecture, passwd)
	}
	if h := files["home/nonroot"]; h.Uid != 65532 {
		t.Errorf("%s: /home/nonroot owned by %d, want 65532", p.Architecture, h.Uid)
	}
	if tmp := files["tmp"]; tmp.Mode&0o1777 != 0o1777 {
		t.Errorf("%s: /tmp mode %o, want 1777", p.Architecture, tmp.Mode)
	}
	pool := x509.NewCertPool()
	if certs := files["etc/ssl/certs/ca-certificates.crt"].data; !pool.AppendCertsFromPEM(certs) || strings.Count(string(certs), "BEGIN CERTIFICATE") < 100 {
		t.Errorf("%s: the CA bundle has fewer than 100 certificates", p.Architecture)
	}
	if blk, _ := pem.Decode(files["etc/ssl/certs/ca-certificates.crt"].data); blk == nil {
		t.Errorf("%s: the CA bundle is not PEM", p.Architecture)
	}
}

// file is a regular file or directory of an image's flattened file system.
type file struct {
	*tar.Header
	data []byte
}

// imageFiles flattens the image's layers (later layers win), keyed by path
// without the leading "/" or a trailing "/".
func imageFiles(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]file{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			out[strings.Trim(h.Name, "/")] = file{Header: h, data: data}
		}
		_ = rc.Close()
	}
	return out
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(target, dir) {
			t.Fatalf("archive entry %q escapes the layout", h.Name)
		}
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDockerfileMatches: the Dockerfile (for people who build with Docker)
// keeps the entrypoint, user and base this builder reproduces.
func TestDockerfileMatches(t *testing.T) {
	data, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`ENTRYPOINT ["` + Entrypoint + `"]`,
		"USER " + User,
		"FROM gcr.io/distroless/static:nonroot",
		"CGO_ENABLED=0",
		"-tags timetzdata",
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the Dockerfile lacks %q", want)
		}
	}
}
