package localenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// authority is a certificate authority of a local server setup: a sharded kcp needs
// three (clients, serving, the front-proxy's request headers), which the shards and
// the front-proxy are told to trust by file.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA certificate's PEM file.
	File string
}

// certValidity covers any test run and local session.
const certValidity = 30 * 24 * time.Hour

// newAuthority creates a CA named cn and writes its certificate to dir/<name>.crt.
func newAuthority(dir, name, cn string) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(certValidity),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("creating CA %s: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	a := &authority{cert: cert, key: key, File: filepath.Join(dir, name+".crt")}
	return a, os.WriteFile(a.File, pemBlock("CERTIFICATE", der), 0o600)
}

// PEM is the CA certificate, PEM-encoded.
func (a *authority) PEM() []byte { return pemBlock("CERTIFICATE", a.cert.Raw) }

// keyPair is an issued certificate and its key, PEM-encoded, with the files holding
// them.
type keyPair struct {
	Cert, Key         []byte
	CertFile, KeyFile string
}

// serve issues a serving certificate for 127.0.0.1 and localhost, written to
// dir/<name>.crt and .key.
func (a *authority) serve(dir, name string) (*keyPair, error) {
	return a.issue(dir, name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// client issues a client certificate for user in groups, written to dir/<name>.crt
// and .key.
func (a *authority) client(dir, name, user string, groups ...string) (*keyPair, error) {
	return a.issue(dir, name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (a *authority) issue(dir, name string, tmpl *x509.Certificate) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Minute), time.Now().Add(certValidity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, fmt.Errorf("issuing %s: %w", name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	kp := &keyPair{Cert: pemBlock("CERTIFICATE", der), Key: pemBlock("EC PRIVATE KEY", keyDER),
		CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key")}
	if err := os.WriteFile(kp.CertFile, kp.Cert, 0o600); err != nil {
		return nil, err
	}
	return kp, os.WriteFile(kp.KeyFile, kp.Key, 0o600)
}

// signingKey writes a ServiceAccount token signing key to dir/<name>.key and its
// public key to dir/<name>.pub; every shard of a kcp signs and checks tokens with it.
func signingKey(dir, name string) (private, public string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	private, public = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	if err := os.WriteFile(private, pemBlock("EC PRIVATE KEY", keyDER), 0o600); err != nil {
		return "", "", err
	}
	return private, public, os.WriteFile(public, pemBlock("PUBLIC KEY", pubDER), 0o600)
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}
