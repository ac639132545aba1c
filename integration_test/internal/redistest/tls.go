package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs are a certificate authority made for one test and a server
// certificate it signed for 127.0.0.1 and localhost, written as PEM files
// that redis-server reads (tls-cert-file, tls-key-file, tls-ca-cert-file).
// A client trusts the server by CAFile (or ClientConfig); it needs no
// certificate of its own unless the server is started with
// Options.TLSAuthClients.
type Certs struct {
	Dir      string // where the files are
	CAFile   string // the CA certificate (PEM): what a client must trust
	CertFile string // the server's certificate (PEM)
	KeyFile  string // the server's private key (PEM)
	// ClientCertFile and ClientKeyFile are a client certificate signed by
	// the same CA, for servers that demand one.
	ClientCertFile, ClientKeyFile string

	pool   *x509.CertPool
	client tls.Certificate
}

// NewCerts makes a fresh CA, a server certificate and a client certificate
// (ECDSA P-256, valid from an hour ago for a day) in a temporary directory
// of t.
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	dir := t.TempDir()
	c := &Certs{
		Dir:            dir,
		CAFile:         filepath.Join(dir, "ca.crt"),
		CertFile:       filepath.Join(dir, "redis.crt"),
		KeyFile:        filepath.Join(dir, "redis.key"),
		ClientCertFile: filepath.Join(dir, "client.crt"),
		ClientKeyFile:  filepath.Join(dir, "client.key"),
	}
	caKey, caDER := mustCert(t, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "redisrate test CA"},
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
	}, nil, nil)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, c.CAFile, "CERTIFICATE", caDER)
	c.pool = x509.NewCertPool()
	c.pool.AddCert(ca)

	srvKey, srvDER := mustCert(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		// Redis uses the server certificate for its replication and
		// Cluster bus connections too, as a client.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, ca, caKey)
	writePEM(t, c.CertFile, "CERTIFICATE", srvDER)
	writeKey(t, c.KeyFile, srvKey)

	cliKey, cliDER := mustCert(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "redisrate test client"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, caKey)
	writePEM(t, c.ClientCertFile, "CERTIFICATE", cliDER)
	writeKey(t, c.ClientKeyFile, cliKey)
	c.client = tls.Certificate{Certificate: [][]byte{cliDER}, PrivateKey: cliKey}
	return c
}

// ClientConfig is a TLS configuration that trusts the test's CA (and
// presents the client certificate, which a server ignores unless it asks
// for one).
func (c *Certs) ClientConfig() *tls.Config {
	return &tls.Config{
		RootCAs:      c.pool,
		ServerName:   "127.0.0.1",
		Certificates: []tls.Certificate{c.client},
		MinVersion:   tls.VersionTLS12,
	}
}

// serverConfig lines make a server listen with TLS only: the plain port is
// off, so a plain-text client has nothing to talk to but the TLS port.
func (c *Certs) serverConfig(port int, authClients bool) []string {
	auth := "no"
	if authClients {
		auth = "yes"
	}
	return []string{
		"port 0",
		"tls-port " + itoa(port),
		"tls-cert-file " + quote(c.CertFile),
		"tls-key-file " + quote(c.KeyFile),
		"tls-ca-cert-file " + quote(c.CAFile),
		"tls-auth-clients " + auth,
		"tls-replication yes",
		"tls-cluster yes",
	}
}

func mustCert(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62)); err != nil {
		t.Fatal(err)
	}
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	signer := key
	if parent == nil {
		parent = tmpl
	} else {
		signer = parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func writeKey(t testing.TB, path string, key *ecdsa.PrivateKey) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, path, "PRIVATE KEY", der)
}
