package demo

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/natefinch/atomic"
)

// Files ListenESS writes in ESSOptions.Dir, named as Open Horizon's agent
// names them (open-horizon/anax config/constants.go: HZN_FSS_CERT_FILE,
// HZN_FSS_DOMAIN_SOCKET).
const (
	ESSCertFile   = "cert.pem"    // the certificate services trust: $HZN_ESS_CERT
	ESSKeyFile    = "key.pem"     // its private key, 0600
	ESSSocketFile = "essapi.sock" // the default unix socket: $HZN_ESS_API_ADDRESS
)

// ESSOptions configure ListenESS.
type ESSOptions struct {
	// Addr is a loopback TCP address to serve HTTPS on ("127.0.0.1:0" for
	// a free port); "" serves on the socket only.
	Addr string
	// AddrFile, when set, receives the HTTPS URL once listening.
	AddrFile string
	// Socket is the unix socket to serve HTTPS on; "" serves on Addr only.
	Socket string
	// Dir receives the certificate and its key.
	Dir string
	// Handler is what is served.
	Handler http.Handler
	// Logger receives the server's errors. Default: discard.
	Logger *slog.Logger
}

// ESSServer serves a handler as Open Horizon's agent serves its
// service-facing ESS API, the secrets API included: HTTPS with a
// certificate the agent creates and gives its services (a container gets
// it mounted, its path in $HZN_ESS_CERT), on a unix socket
// ($HZN_ESS_API_ADDRESS) and, for the examples, on a loopback port.
// Services call https://localhost/api/v1/secrets over the socket
// (open-horizon/examples edge/services/helloSecretWorld/service.sh lines
// 18-24).
type ESSServer struct {
	// URL is the HTTPS base URL on the loopback port, or "".
	URL string
	// Socket is the unix socket's path, or "".
	Socket string
	// CertFile is the certificate to trust (curl --cacert).
	CertFile string

	srv     *http.Server
	serving int
	done    chan error
}

// ListenESS creates a fresh self-signed certificate for localhost,
// 127.0.0.1 and ::1 in opts.Dir and serves opts.Handler over HTTPS on the
// socket and the loopback address.
func ListenESS(opts ESSOptions) (*ESSServer, error) {
	if opts.Addr == "" && opts.Socket == "" {
		return nil, errors.New("ESS: give a loopback address, a unix socket or both")
	}
	if opts.Addr != "" {
		if err := checkLoopback(opts.Addr); err != nil {
			return nil, err
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cert, err := writeESSCertificate(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("ESS certificate: %w", err)
	}
	s := &ESSServer{
		CertFile: filepath.Join(opts.Dir, ESSCertFile),
		srv: &http.Server{
			Handler:           opts.Handler,
			TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn),
		},
		done: make(chan error, 2),
	}
	var listeners []net.Listener
	closeAll := func() {
		for _, ln := range listeners {
			_ = ln.Close() // never served; the setup error is the one to report
		}
	}
	if opts.Socket != "" {
		if err := os.Remove(opts.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("ESS socket: %w", err)
		}
		ln, err := net.Listen("unix", opts.Socket)
		if err != nil {
			return nil, fmt.Errorf("ESS socket: %w", err)
		}
		if err := os.Chmod(opts.Socket, 0o660); err != nil {
			_ = ln.Close() // never served; the setup error is the one to report
			return nil, fmt.Errorf("ESS socket: %w", err)
		}
		listeners = append(listeners, ln)
		s.Socket = opts.Socket
	}
	if opts.Addr != "" {
		ln, err := net.Listen("tcp", opts.Addr)
		if err != nil {
			closeAll()
			return nil, err
		}
		listeners = append(listeners, ln)
		s.URL = "https://" + ln.Addr().String()
		if opts.AddrFile != "" {
			if err := atomic.WriteFile(opts.AddrFile, strings.NewReader(s.URL+"\n")); err != nil {
				closeAll()
				return nil, fmt.Errorf("writing the address file: %w", err)
			}
		}
	}
	for _, ln := range listeners {
		s.serving++
		go func() { s.done <- s.srv.ServeTLS(ln, "", "") }()
	}
	return s, nil
}

// Shutdown stops the server, letting requests in flight finish for up to
// five seconds, and removes the socket.
func (s *ESSServer) Shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	for range s.serving {
		if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
	}
	if s.Socket != "" {
		if rerr := os.Remove(s.Socket); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

// ESSClient returns a client that trusts the certificate in certFile and,
// when socket is not empty, sends every request over that unix socket
// whatever the URL's host (curl --cacert certFile --unix-socket socket).
func ESSClient(certFile, socket string) (*http.Client, error) {
	pemBytes, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("%s holds no PEM certificate", certFile)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	if socket != "" {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}, nil
}

// writeESSCertificate makes a self-signed ECDSA P-256 certificate valid
// for a year for localhost, 127.0.0.1 and ::1, writes it (0644, for
// services to read) and its key (0600) to dir, and returns it.
func writeESSCertificate(dir string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "localhost", Organization: []string{"edgesecrets example agent"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.AddDate(1, 0, 0),
		// Its own trust anchor: curl --cacert and Go's verifier take it as a CA.
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	if err := WritePrivateFile(filepath.Join(dir, ESSKeyFile), keyPEM); err != nil {
		return tls.Certificate{}, err
	}
	certPath := filepath.Join(dir, ESSCertFile)
	if err := atomic.WriteFile(certPath, strings.NewReader(string(certPEM))); err != nil {
		return tls.Certificate{}, err
	}
	if err := os.Chmod(certPath, 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}
