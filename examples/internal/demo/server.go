package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/natefinch/atomic"
)

// Limits harden a server against clients that hold connections, send
// slowly or send too much. Every example server uses them; an embedder
// serving the library's handlers (agentapi.NewHandler, identity.Issuer.Handler,
// binding.Handler) should set the same on its own http.Server.
type Limits struct {
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included: a slow
	// body is cut off.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing the answer.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes int
	// MaxBodyBytes bounds a request's body (http.MaxBytesHandler): a
	// handler reading more gets an error and the client 413.
	MaxBodyBytes int64
	// MaxConns bounds the open connections. When it is reached, the
	// connection idle (or silent since it connected) the longest is closed
	// to make room, so clients holding connections open cannot lock out the
	// others; while every connection is busy with a request, new ones wait
	// in the listen queue. It is capped at a quarter of the process's
	// descriptor limit, so the program's own files (its state, its
	// secrets) always find descriptors.
	MaxConns int
}

// DefaultLimits are the example servers' limits: bodies up to 4 MiB (the
// relay's largest envelope, 2 MiB in base64, fits), 256 connections.
func DefaultLimits() Limits {
	return Limits{
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		MaxBodyBytes:      4 << 20,
		MaxConns:          256,
	}
}

// Server is a plain-HTTP server on a loopback address.
type Server struct {
	// URL is the server's base URL, "http://127.0.0.1:<port>".
	URL string

	srv   *http.Server
	conns *connLimiter
	done  chan error
}

// ServeOptions configures Serve.
type ServeOptions struct {
	// Addr must be a loopback address (the examples speak plain HTTP), for
	// example "127.0.0.1:0" for a free port.
	Addr string
	// AddrFile, when set, receives the server's URL once the port is open,
	// so a script or test can find it.
	AddrFile string
	// Handler serves the requests.
	Handler http.Handler
	// Limits; zero fields take DefaultLimits.
	Limits Limits
	// Logger receives the server's own errors.
	Logger *slog.Logger
}

// Listen serves h on addr with DefaultLimits (see ServeOptions).
func Listen(addr, addrFile string, h http.Handler, log *slog.Logger) (*Server, error) {
	return Serve(ServeOptions{Addr: addr, AddrFile: addrFile, Handler: h, Logger: log})
}

// Serve starts serving opts.Handler with opts.Limits.
func Serve(opts ServeOptions) (*Server, error) {
	if err := checkLoopback(opts.Addr); err != nil {
		return nil, err
	}
	lim := opts.Limits.withDefaults()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, err
	}
	conns := newConnLimiter(min(lim.MaxConns, maxConnsForDescriptors()))
	s := &Server{
		URL: "http://" + ln.Addr().String(),
		srv: &http.Server{
			Handler:           http.MaxBytesHandler(opts.Handler, lim.MaxBodyBytes),
			ReadHeaderTimeout: lim.ReadHeaderTimeout,
			ReadTimeout:       lim.ReadTimeout,
			WriteTimeout:      lim.WriteTimeout,
			IdleTimeout:       lim.IdleTimeout,
			MaxHeaderBytes:    lim.MaxHeaderBytes,
			ConnState:         conns.track,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		conns: conns,
		done:  make(chan error, 1),
	}
	if opts.AddrFile != "" {
		if err := atomic.WriteFile(opts.AddrFile, strings.NewReader(s.URL+"\n")); err != nil {
			_ = ln.Close() // never served; the write error is the one to report
			return nil, fmt.Errorf("writing the address file: %w", err)
		}
	}
	go func() { s.done <- s.srv.Serve(&limitedListener{Listener: ln, lim: conns}) }()
	return s, nil
}

func (l Limits) withDefaults() Limits {
	def := DefaultLimits()
	pick := func(v, d time.Duration) time.Duration {
		if v > 0 {
			return v
		}
		return d
	}
	l.ReadHeaderTimeout = pick(l.ReadHeaderTimeout, def.ReadHeaderTimeout)
	l.ReadTimeout = pick(l.ReadTimeout, def.ReadTimeout)
	l.WriteTimeout = pick(l.WriteTimeout, def.WriteTimeout)
	l.IdleTimeout = pick(l.IdleTimeout, def.IdleTimeout)
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = def.MaxHeaderBytes
	}
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = def.MaxBodyBytes
	}
	if l.MaxConns <= 0 {
		l.MaxConns = def.MaxConns
	}
	return l
}

// Shutdown stops the server, letting requests in flight finish for up to
// five seconds.
func (s *Server) Shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// connLimiter bounds a server's open connections (Limits.MaxConns). It
// sees each connection's state through http.Server.ConnState.
type connLimiter struct {
	max   int
	freed chan struct{} // a connection closed or went idle

	mu    sync.Mutex
	conns map[*limitedConn]struct{}
}

func newConnLimiter(max int) *connLimiter {
	return &connLimiter{max: max, freed: make(chan struct{}, 1), conns: map[*limitedConn]struct{}{}}
}

// limitedConn is a connection the limiter counts.
type limitedConn struct {
	net.Conn
	lim  *connLimiter
	once sync.Once
	// state and since are guarded by lim.mu.
	state http.ConnState
	since time.Time
}

// Close closes the connection and frees its place.
func (c *limitedConn) Close() error {
	c.once.Do(func() {
		c.lim.mu.Lock()
		delete(c.lim.conns, c)
		c.lim.mu.Unlock()
		c.lim.signal()
	})
	return c.Conn.Close()
}

func (l *connLimiter) signal() {
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// admit takes c in, closing the connection idle or silent the longest when
// the limit is reached, or waiting while every connection is busy.
func (l *connLimiter) admit(c *limitedConn) {
	for {
		l.mu.Lock()
		if len(l.conns) < l.max {
			c.state, c.since = http.StateNew, time.Now()
			l.conns[c] = struct{}{}
			l.mu.Unlock()
			return
		}
		var victim *limitedConn
		for v := range l.conns {
			if (v.state == http.StateNew || v.state == http.StateIdle) && (victim == nil || v.since.Before(victim.since)) {
				victim = v
			}
		}
		l.mu.Unlock()
		if victim != nil {
			// The limiter forgets the connection whatever Close returns;
			// an error only says the connection was already closed.
			_ = victim.Close()
			continue
		}
		// Every connection is in a request, each bounded by the read and
		// write timeouts.
		select {
		case <-l.freed:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// track is the server's ConnState hook.
func (l *connLimiter) track(conn net.Conn, st http.ConnState) {
	c, ok := conn.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	if _, counted := l.conns[c]; counted {
		c.state, c.since = st, time.Now()
	}
	l.mu.Unlock()
	if st == http.StateIdle || st == http.StateClosed {
		l.signal()
	}
}

// limitedListener admits each accepted connection through the limiter.
type limitedListener struct {
	net.Listener
	lim *connLimiter
}

func (l *limitedListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c := &limitedConn{Conn: conn, lim: l.lim}
	l.lim.admit(c)
	return c, nil
}
