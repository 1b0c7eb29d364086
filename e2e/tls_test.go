package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"voicesvc/e2e/harness"
)

// selfSigned writes a certificate for 127.0.0.1 and its key into dir, and
// returns the paths and a pool that trusts it (what NODE_EXTRA_CA_CERTS
// does for the vendors' Node clients).
func selfSigned(t testing.TB, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "voicesvc test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return certFile, keyFile, pool
}

// TestTLS: with --tls-cert/--tls-key the same routes answer over HTTPS,
// speak streams its audio, and the realtime WebSocket works over wss
// (docs/dialects.md#tls: some official clients dial only https/wss).
func TestTLS(t *testing.T) {
	cert, key, pool := selfSigned(t, t.TempDir())
	srv := harness.Start(t, harness.Options{Args: refArgs(0, "--tls-cert", cert, "--tls-key", key)})
	if !strings.HasPrefix(srv.URL, "https://") {
		t.Fatalf("listening on %s, want https", srv.URL)
	}
	tlsConf := &tls.Config{RootCAs: pool}
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: tlsConf}}
	_, apiKey := harness.Workspace(t, srv.DB, "pro")

	get := func(path string) (int, []byte) {
		req, _ := http.NewRequest("GET", srv.API+path, nil)
		req.Header.Set("X-API-Key", apiKey)
		r, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s over TLS: %v", path, err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, b
	}
	status, body := get("/voices?page_size=1&status=ready&visibility=public")
	var list struct {
		Data struct {
			Voices []struct{ ID string } `json:"voices"`
		} `json:"data"`
	}
	if status != 200 || json.Unmarshal(body, &list) != nil || len(list.Data.Voices) == 0 {
		t.Fatalf("voices over TLS: %d %.200s", status, body)
	}
	voice := list.Data.Voices[0].ID

	req, _ := http.NewRequest("POST", srv.API+"/voices/"+voice+"/speak",
		strings.NewReader(`{"text":"Hello over TLS.","output_format":"s16le"}`))
	req.Header.Set("X-API-Key", apiKey)
	r, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	audio, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || len(audio) < 1000 {
		t.Fatalf("speak over TLS: %d, %d bytes", r.StatusCode, len(audio))
	}

	d := &websocket.Dialer{TLSClientConfig: tlsConf, HandshakeTimeout: 10 * time.Second}
	ws, resp, err := d.Dial("wss://"+srv.Addr+harness.APIPath+"/stream", http.Header{"X-Api-Key": {apiKey}})
	if err != nil {
		t.Fatalf("wss handshake: %v (%v)", err, resp)
	}
	defer ws.Close()
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	if err := ws.WriteJSON(map[string]any{"type": "task_start", "context_id": "a", "voice_id": voice,
		"text": "Hello over wss.", "finalize": true}); err != nil {
		t.Fatal(err)
	}
	var frames, audioBytes int
	for {
		mt, msg, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("reading the session: %v after %d frames", err, frames)
		}
		frames++
		if mt == websocket.BinaryMessage {
			audioBytes += len(msg)
			continue
		}
		var ev struct{ Type string }
		json.Unmarshal(msg, &ev)
		if ev.Type == "error" || ev.Type == "task_failed" {
			t.Fatalf("session: %s", msg)
		}
		if ev.Type == "task_done" {
			break
		}
	}
	if audioBytes == 0 {
		t.Fatal("no audio over wss")
	}
}
