package kafkatest

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

// MutualTLS is a CA, a broker certificate for 127.0.0.1 and a client
// certificate, made for one test.
type MutualTLS struct {
	// Broker is the listener's configuration: it requires a client
	// certificate signed by the CA.
	Broker *tls.Config
	// Client is a kgo/sarama client's configuration with the client
	// certificate.
	Client *tls.Config
	// CAFile, CertFile and KeyFile are the client's PEM files.
	CAFile, CertFile, KeyFile string
	// ServerCertFile and ServerKeyFile are the broker's certificate and key
	// (PEM), for another server on 127.0.0.1 (PostgreSQL).
	ServerCertFile, ServerKeyFile string
}

// NewMutualTLS generates the certificates and writes the client's files to
// a temporary directory.
func NewMutualTLS(t testing.TB) *MutualTLS {
	t.Helper()
	caKey, caCert, caDER := newCert(t, "outbox-relay test CA", nil, nil, func(c *x509.Certificate) {
		c.IsCA, c.BasicConstraintsValid = true, true
		c.KeyUsage = x509.KeyUsageCertSign
	})
	brokerKey, _, brokerDER := newCert(t, "broker", caCert, caKey, func(c *x509.Certificate) {
		c.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	})
	clientKey, clientCert, clientDER := newCert(t, "relay", caCert, caKey, func(c *x509.Certificate) {
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	})
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	dir := t.TempDir()
	m := &MutualTLS{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "client.pem"), KeyFile: filepath.Join(dir, "client.key")}
	keyDER, err := x509.MarshalECPrivateKey(clientKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, m.CAFile, "CERTIFICATE", caDER)
	writePEM(t, m.CertFile, "CERTIFICATE", clientDER)
	writePEM(t, m.KeyFile, "EC PRIVATE KEY", keyDER)
	serverKeyDER, err := x509.MarshalECPrivateKey(brokerKey)
	if err != nil {
		t.Fatal(err)
	}
	m.ServerCertFile, m.ServerKeyFile = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	writePEM(t, m.ServerCertFile, "CERTIFICATE", brokerDER)
	writePEM(t, m.ServerKeyFile, "EC PRIVATE KEY", serverKeyDER)
	broker := tls.Certificate{Certificate: [][]byte{brokerDER}, PrivateKey: brokerKey}
	m.Broker = &tls.Config{Certificates: []tls.Certificate{broker}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: pool, MinVersion: tls.VersionTLS12}
	m.Client = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12,
		Certificates: []tls.Certificate{{Certificate: [][]byte{clientDER}, PrivateKey: clientKey, Leaf: clientCert}}}
	return m
}

// newCert makes a key and a certificate signed by parent (self-signed when
// parent is nil), shaped by edit.
func newCert(t testing.TB, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey,
	edit func(*x509.Certificate)) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature}
	edit(tmpl)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert, der
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
