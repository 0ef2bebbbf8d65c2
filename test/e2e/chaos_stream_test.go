package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// statusWriter remembers the status code the proxy answered.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) { s.code = code; s.ResponseWriter.WriteHeader(code) }
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Message: msg, Reason: reason, Code: int32(code)}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(st)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

type chunk struct {
	data []byte
	at   time.Time
	err  error
}

// chaosBody is a watch stream that delivers each chunk lag after it
// arrived and ends when cut is closed: cleanly (EOF) or, with reset, with
// an error that makes the proxy abort the stream.
type chaosBody struct {
	up          io.ReadCloser
	lag         time.Duration
	reset       bool
	ch          chan chunk
	cut, closed chan struct{}
	timer       *time.Timer
	buf         []byte
	once        sync.Once
}

var errWatchReset = errors.New("chaos: watch reset")

func (b *chaosBody) pump() {
	for {
		buf := make([]byte, 32<<10)
		n, err := b.up.Read(buf)
		c := chunk{data: buf[:n], at: time.Now(), err: err}
		select {
		case b.ch <- c:
		case <-b.closed:
			return
		}
		if err != nil {
			return
		}
	}
}

func (b *chaosBody) cutErr() error {
	if b.reset {
		return errWatchReset
	}
	return io.EOF
}

func (b *chaosBody) Read(out []byte) (int, error) {
	for len(b.buf) == 0 {
		select {
		case <-b.cut:
			return 0, b.cutErr()
		case c := <-b.ch:
			if wait := time.Until(c.at.Add(b.lag)); wait > 0 {
				select {
				case <-b.cut:
					return 0, b.cutErr()
				case <-time.After(wait):
				}
			}
			if len(c.data) == 0 && c.err != nil {
				return 0, c.err
			}
			b.buf = c.data
		}
	}
	n := copy(out, b.buf)
	b.buf = b.buf[n:]
	return n, nil
}

func (b *chaosBody) Close() error {
	b.once.Do(func() { b.timer.Stop(); close(b.closed) })
	return b.up.Close()
}

// selfSignedCert is a serving certificate for 127.0.0.1.
func selfSignedCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "berth-chaos-proxy"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
