package testkit_test

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
)

func TestProcessWaitReady(t *testing.T) {
	notYet := errors.New("not ready yet")
	tests := []struct {
		name    string
		command []string
		ready   func(calls int) error
		wantErr string
	}{
		{name: "ready on the third check", command: []string{"sleep", "30"},
			ready: func(calls int) error {
				if calls < 3 {
					return notYet
				}
				return nil
			}},
		{name: "the process exits first", command: []string{"true"},
			ready: func(int) error { return notYet }, wantErr: "the server process exited"},
		{name: "never ready: the last check's error", command: []string{"sleep", "30"},
			ready: func(int) error { return notYet }, wantErr: "not ready yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := testkit.StartProcess(exec.Command(tt.command[0], tt.command[1:]...))
			require.NoError(t, err)
			t.Cleanup(p.Kill)
			calls := 0
			err = p.WaitReady(t.Context(), 2*time.Second, 10*time.Millisecond, func(context.Context) error {
				calls++
				return tt.ready(calls)
			})
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, 3, calls)
				assert.True(t, p.Running())
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestProcessKillEndsItOnce(t *testing.T) {
	p, err := testkit.StartProcess(exec.Command("sleep", "30"))
	require.NoError(t, err)
	require.True(t, p.Running())
	p.Kill()
	select {
	case <-p.Exited():
	default:
		t.Fatal("Kill returned before the process exited")
	}
	assert.False(t, p.Running())
	p.Kill() // a second call does nothing
}

func TestStartProcessNamesAMissingBinary(t *testing.T) {
	_, err := testkit.StartProcess(exec.Command("/nonexistent/server-binary"))
	require.ErrorContains(t, err, "/nonexistent/server-binary")
}

func TestRetryPortTaken(t *testing.T) {
	other := errors.New("no binary")
	tests := []struct {
		name      string
		results   []error
		wantCalls int
		wantErr   error
	}{
		{name: "started at once", results: []error{nil}, wantCalls: 1},
		{name: "started after a taken port", results: []error{testkit.ErrPortTaken, nil}, wantCalls: 2},
		{name: "another error ends it", results: []error{other}, wantCalls: 1, wantErr: other},
		{name: "three taken ports end it", results: []error{testkit.ErrPortTaken, testkit.ErrPortTaken, testkit.ErrPortTaken, nil}, wantCalls: 3, wantErr: testkit.ErrPortTaken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			got, err := testkit.RetryPortTaken(func() (int, error) {
				err := tt.results[calls]
				calls++
				return calls, err
			})
			assert.Equal(t, tt.wantCalls, calls)
			assert.Equal(t, tt.wantCalls, got, "the last call's value")
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
		})
	}
}

func TestNotReady(t *testing.T) {
	cause := errors.New("health: HTTP 503")
	tests := []struct {
		name      string
		output    string
		portTaken bool
	}{
		{name: "a taken port (Go servers)", output: "listen tcp 127.0.0.1:8200: bind: address already in use", portTaken: true},
		{name: "a taken port (PostgreSQL)", output: `LOG:  could not bind IPv4 address "127.0.0.1": Address in use`, portTaken: true},
		{name: "another failure", output: "FATAL: data directory has wrong ownership"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := testkit.NotReady("server", cause, tt.output)
			assert.Equal(t, tt.portTaken, errors.Is(err, testkit.ErrPortTaken))
			require.ErrorIs(t, err, cause)
			assert.Contains(t, err.Error(), tt.output, "the server's output is in the error")
		})
	}
}
