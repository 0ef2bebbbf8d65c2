package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The image's fixed facts, which the chart and the Dockerfile rely on.
const (
	// Entrypoint is the berth binary in the image.
	Entrypoint = "/berth"
	// User is distroless' nonroot user and group.
	User = "65532:65532"
	// CACertificates is where Go (and OpenSSL) look for trusted roots.
	CACertificates = "/etc/ssl/certs/ca-certificates.crt"
	versionVar     = "github.com/berth-dev/berth/internal/version.Version"
)

// Options say what to build.
type Options struct {
	Root      string // the main module
	WorkDir   string // scratch space for the binaries
	Version   string
	Revision  string
	Source    string
	Created   time.Time
	Platforms []v1.Platform
}

// ParsePlatform reads "os/arch" or "os/arch/variant".
func ParsePlatform(s string) (v1.Platform, error) {
	parts := strings.Split(strings.TrimSpace(s), "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] != "linux" || parts[1] == "" {
		return v1.Platform{}, fmt.Errorf("platform %q: want linux/<arch>[/<variant>]", s)
	}
	p := v1.Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	return p, nil
}

// Labels are the OCI annotations of the image, written as config labels
// and as annotations of the index and of every manifest.
func (o Options) Labels() map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "berth",
		"org.opencontainers.image.description": "berth: headroom-aware node autoscaler for Kubernetes (controller, local control plane, offline planner)",
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.url":         o.Source,
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.created":     o.Created.Format(time.RFC3339),
	}
	if o.Revision != "" {
		l["org.opencontainers.image.revision"] = o.Revision
	}
	return l
}

// Build returns the multi-platform index: one image per platform, each a
// base layer (users, CA certificates, /tmp, home) and a layer with the
// static binary.
func Build(o Options) (v1.ImageIndex, error) {
	base, err := baseLayer(o.Created)
	if err != nil {
		return nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.Platforms {
		img, err := platformImage(o, p, base)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", platformString(p), err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	annotated, ok := mutate.Annotations(idx, o.Labels()).(v1.ImageIndex)
	if !ok {
		return nil, fmt.Errorf("annotating the index")
	}
	return annotated, nil
}

func platformString(p v1.Platform) string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

func platformImage(o Options, p v1.Platform, base v1.Layer) (v1.Image, error) {
	bin, err := buildBinary(o, p)
	if err != nil {
		return nil, err
	}
	app, err := layer([]entry{{name: strings.TrimPrefix(Entrypoint, "/"), mode: 0o755, data: bin}}, o.Created)
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: "berth hack/image: static base (passwd with nonroot 65532, CA certificates, /tmp)", Comment: "built from Go modules"}},
		mutate.Addendum{Layer: app, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: "berth hack/image: CGO_ENABLED=0 go build -tags timetzdata ./cmd/berth"}},
	)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Created = v1.Time{Time: o.Created}
	cfg.Author = "berth"
	cfg.Config.Entrypoint = []string{Entrypoint}
	cfg.Config.User = User
	cfg.Config.WorkingDir = "/home/nonroot"
	cfg.Config.Env = []string{"PATH=/", "SSL_CERT_FILE=" + CACertificates}
	cfg.Config.Labels = o.Labels()
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, err
	}
	annotated, ok := mutate.Annotations(img, o.Labels()).(v1.Image)
	if !ok {
		return nil, fmt.Errorf("annotating the image")
	}
	return annotated, nil
}

// buildBinary cross-compiles a static berth (no cgo, so no libc in the
// image) with the time zone database linked in (-tags timetzdata), so the
// image needs no /usr/share/zoneinfo for Headroom schedules.
func buildBinary(o Options, p v1.Platform) ([]byte, error) {
	out := filepath.Join(o.WorkDir, "berth-"+p.OS+"-"+p.Architecture+p.Variant)
	cmd := exec.Command("go", "build", "-trimpath", "-tags", "timetzdata",
		"-ldflags", "-s -w -buildid= -X "+versionVar+"="+o.Version, "-o", out, "./cmd/berth")
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if p.Architecture == "arm" && p.Variant != "" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %w\n%s", err, msg)
	}
	return os.ReadFile(out)
}

// entry is one file or directory of a layer.
type entry struct {
	name     string
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

// baseLayer is what distroless/static:nonroot gives a static Go binary:
// the root, nobody and nonroot users, trusted CA certificates, a writable
// /tmp and nonroot's home.
func baseLayer(created time.Time) (v1.Layer, error) {
	certs, err := caBundle()
	if err != nil {
		return nil, err
	}
	return layer([]entry{
		{name: "etc", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "etc/ssl", mode: 0o755, dir: true},
		{name: "etc/ssl/certs", mode: 0o755, dir: true},
		{name: strings.TrimPrefix(CACertificates, "/"), mode: 0o644, data: certs},
		{name: "home", mode: 0o755, dir: true},
		{name: "home/nonroot", mode: 0o700, uid: 65532, gid: 65532, dir: true},
		{name: "root", mode: 0o700, dir: true},
		{name: "tmp", mode: 0o1777, dir: true},
	}, created)
}

// caBundle is the Mozilla NSS trust store as pinned by the Go module
// golang.org/x/crypto/x509roots/fallback, in PEM. Roots with a
// distrust-after constraint, which PEM cannot express, are left out.
func caBundle() ([]byte, error) {
	var buf bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, err
		}
	}
	if buf.Len() == 0 {
		return nil, fmt.Errorf("the CA bundle is empty")
	}
	return buf.Bytes(), nil
}

// layer writes entries into an uncompressed tar with fixed times and
// owners; go-containerregistry gzips it.
func layer(entries []entry, created time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: created, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, e.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}
