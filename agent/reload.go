package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agentapi"
)

// Defaults of Reload.
const (
	defaultReloadDebounce = 2 * time.Second
	defaultReloadTimeout  = 30 * time.Second
	// maxPIDFileBytes bounds the pid file read.
	maxPIDFileBytes = 64
)

// ServiceOptions configure one service instance, by its id
// (Options.Services): the options of its files and what to do after
// they change.
type ServiceOptions struct {
	// Files are the options of the instance's files, by service secret
	// name (owner, group, mode, template: agentapi.FileOptions). The
	// agent sets them on the instances Assign returns without Files.
	Files map[string]agentapi.FileOptions
	// Reload, when set, runs after the instance's files changed.
	Reload *Reload
}

// Reload says how to tell a service that its files changed: exactly one
// of Command, PIDFile and Hook. Changes within Debounce of the first
// (several secrets of one message, or of messages close together) make
// one reload; a reload that fails or times out is logged and counted, and
// the new files stay. A change while a reload runs makes another once it
// is done.
type Reload struct {
	// Command is run (argv; no shell) with the agent's environment and
	// its output discarded; a non-zero exit is a failure.
	Command []string
	// PIDFile names a file holding the decimal pid of the process to send
	// Signal to.
	PIDFile string
	// Signal is sent to the PIDFile's process; nil means SIGHUP.
	Signal os.Signal
	// Hook is the embedder's own reload, called with the instance id and
	// the changed secret names (sorted). It must return once ctx ends.
	Hook func(ctx context.Context, instanceID string, changed []string) error
	// Debounce is how long changes are gathered into one reload; zero
	// means 2 s.
	Debounce time.Duration
	// Timeout bounds a reload; zero means 30 s. A command still running
	// then is killed.
	Timeout time.Duration
}

// check refuses a Reload that is not exactly one action, with
// edgesecrets.ErrInvalid.
func (r Reload) check(id string) error {
	n := 0
	for _, set := range []bool{len(r.Command) > 0, r.PIDFile != "", r.Hook != nil} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		return fmt.Errorf("%w: instance %q: a reload needs exactly one of Command, PIDFile and Hook", edgesecrets.ErrInvalid, id)
	case len(r.Command) > 0 && r.Command[0] == "":
		return fmt.Errorf("%w: instance %q: the reload command has no program", edgesecrets.ErrInvalid, id)
	case r.Signal != nil && r.PIDFile == "":
		return fmt.Errorf("%w: instance %q: a reload signal needs a PIDFile", edgesecrets.ErrInvalid, id)
	case r.Debounce < 0 || r.Timeout < 0:
		return fmt.Errorf("%w: instance %q: the reload's debounce and timeout cannot be negative", edgesecrets.ErrInvalid, id)
	}
	return nil
}

// checkServices checks every instance's file options and reload.
func checkServices(services map[string]ServiceOptions) error {
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(services)) {
		so := services[id]
		errs = append(errs, agentapi.Instance{ID: id, Files: so.Files}.Check())
		if so.Reload != nil {
			errs = append(errs, so.Reload.check(id))
		}
	}
	return errors.Join(errs...)
}

// Reload outcomes, the attribute of the reloads counter.
const (
	reloadOK      = "ok"
	reloadFailed  = "failed"
	reloadTimeout = "timeout"
)

// reloader runs the instances' reloads, debounced.
type reloader struct {
	log     *slog.Logger
	count   func(outcome string)
	reloads map[string]Reload // with defaults

	mu      sync.Mutex
	ctx     context.Context // Run's; nil before start and after stop
	pending map[string]*pendingReload
	wg      sync.WaitGroup // scheduled and running reloads
}

// pendingReload is one instance's gathered changes and reload state.
type pendingReload struct {
	names   map[string]bool
	timer   *time.Timer // set while changes wait for the debounce
	running bool
}

func newReloader(services map[string]ServiceOptions, log *slog.Logger, count func(string)) *reloader {
	r := &reloader{log: log, count: count, reloads: map[string]Reload{}, pending: map[string]*pendingReload{}}
	for id, so := range services {
		if so.Reload == nil {
			continue
		}
		rl := *so.Reload
		if rl.Debounce == 0 {
			rl.Debounce = defaultReloadDebounce
		}
		if rl.Timeout == 0 {
			rl.Timeout = defaultReloadTimeout
		}
		if rl.PIDFile != "" && rl.Signal == nil {
			rl.Signal = syscall.SIGHUP
		}
		r.reloads[id] = rl
	}
	return r
}

// start lets changes schedule reloads, until ctx ends and stop is called.
func (r *reloader) start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctx = ctx
}

// stop drops the reloads still waiting for their debounce and waits for
// the running ones.
func (r *reloader) stop() {
	r.mu.Lock()
	r.ctx = nil
	for _, p := range r.pending {
		if p.timer != nil && p.timer.Stop() {
			p.timer = nil
			r.wg.Done()
		}
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// changed records that the instance's named files changed, and schedules
// its reload (if it has one) after the debounce.
func (r *reloader) changed(id string, names []string) {
	rl, ok := r.reloads[id]
	if !ok || len(names) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil {
		return
	}
	p := r.pending[id]
	if p == nil {
		p = &pendingReload{}
		r.pending[id] = p
	}
	if p.names == nil {
		p.names = map[string]bool{}
	}
	for _, n := range names {
		p.names[n] = true
	}
	if p.timer == nil && !p.running {
		r.schedule(id, p, rl)
	}
}

// schedule sets the instance's debounce timer. r.mu is held.
func (r *reloader) schedule(id string, p *pendingReload, rl Reload) {
	r.wg.Add(1)
	p.timer = time.AfterFunc(rl.Debounce, func() {
		defer r.wg.Done()
		r.fire(id, p, rl)
	})
}

// fire runs the instance's reload over the changes gathered, then
// schedules another if more came meanwhile.
func (r *reloader) fire(id string, p *pendingReload, rl Reload) {
	r.mu.Lock()
	ctx := r.ctx
	if ctx == nil || p.timer == nil {
		r.mu.Unlock()
		return
	}
	names := slices.Sorted(maps.Keys(p.names))
	p.names, p.timer, p.running = nil, nil, true
	r.mu.Unlock()

	r.run(ctx, id, names, rl)

	r.mu.Lock()
	defer r.mu.Unlock()
	p.running = false
	if len(p.names) > 0 && r.ctx != nil {
		r.schedule(id, p, rl)
	}
}

// run runs one reload with its timeout and reports the outcome.
func (r *reloader) run(ctx context.Context, id string, names []string, rl Reload) {
	ctx, cancel := context.WithTimeout(ctx, rl.Timeout)
	defer cancel()
	start := time.Now()
	err := r.do(ctx, id, names, rl)
	outcome := reloadOK
	switch {
	case err == nil:
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		outcome = reloadTimeout
	default:
		outcome = reloadFailed
	}
	r.count(outcome)
	attrs := []any{slog.String("instance", id), slog.Any("changed", names), slog.String("action", rl.action()),
		slog.String("outcome", outcome), slog.Duration("took", time.Since(start))}
	if err != nil {
		r.log.Warn("the reload after a rotation did not succeed; the new files stay", append(attrs, slog.String("err", err.Error()))...)
		return
	}
	r.log.Info("reloaded after a rotation", attrs...)
}

// action names the kind of reload, for logs.
func (rl Reload) action() string {
	switch {
	case len(rl.Command) > 0:
		return "command"
	case rl.PIDFile != "":
		return "signal"
	}
	return "hook"
}

func (r *reloader) do(ctx context.Context, id string, names []string, rl Reload) error {
	switch {
	case len(rl.Command) > 0:
		cmd := exec.CommandContext(ctx, rl.Command[0], rl.Command[1:]...)
		// Output is discarded (it may hold anything); a child keeping
		// the pipes open does not hold the reload past the kill.
		cmd.WaitDelay = time.Second
		if err := cmd.Run(); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("the command %s did not finish within %s and was killed", rl.Command[0], rl.Timeout)
			}
			return fmt.Errorf("the command %s: %w", rl.Command[0], err)
		}
		return nil
	case rl.PIDFile != "":
		pid, err := readPID(rl.PIDFile)
		if err != nil {
			return err
		}
		p, err := os.FindProcess(pid)
		if err == nil {
			err = p.Signal(rl.Signal)
		}
		if err != nil {
			return fmt.Errorf("signalling pid %d (from %s): %w", pid, rl.PIDFile, err)
		}
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- rl.Hook(ctx, id, slices.Clone(names)) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("the reload hook: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the reload hook did not return within %s", rl.Timeout)
	}
}

// readPID reads a pid file: one decimal pid above 1, and whitespace.
func readPID(name string) (int, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, fmt.Errorf("reading the pid file: %w", err)
	}
	defer func() { _ = f.Close() }() // read-only
	b, err := io.ReadAll(io.LimitReader(f, maxPIDFileBytes+1))
	if err != nil {
		return 0, fmt.Errorf("reading the pid file %s: %w", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if len(b) > maxPIDFileBytes || err != nil || pid <= 1 {
		return 0, fmt.Errorf("the pid file %s does not hold a pid above 1", name)
	}
	return pid, nil
}
