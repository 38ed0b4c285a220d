package mock

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/edgesecrets/edgesecrets"
)

// Printing a DevAgent or its options never shows the instance's token:
// fmt (every verb), slog and encoding/json show [redacted].

// Format prints the options with the token redacted.
func (o DevAgentOptions) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "{SecretFiles:%v InstanceID:%s Token:%s Dir:%s Addr:%s GroupReadable:%t Group:%d StatusFiles:%t}",
		o.SecretFiles, o.InstanceID, o.Token, o.Dir, o.Addr, o.GroupReadable, o.Group, o.StatusFiles)
}

// LogValue logs the options with the token redacted.
func (o DevAgentOptions) LogValue() slog.Value {
	return slog.GroupValue(slog.Any("secretFiles", o.SecretFiles), slog.String("instanceID", o.InstanceID),
		slog.Any("token", o.Token), slog.String("dir", o.Dir), slog.String("addr", o.Addr))
}

// MarshalJSON encodes what LogValue logs.
func (o DevAgentOptions) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"secretFiles": o.SecretFiles, "instanceID": o.InstanceID,
		"token": o.Token, "dir": o.Dir, "addr": o.Addr})
}

// Format prints the agent's instance and URL, never its token.
func (a *DevAgent) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "DevAgent{Instance:%s URL:%s Token:%s}", a.id, a.URL, edgesecrets.Redacted)
}

// LogValue logs the agent's instance and URL, never its token.
func (a *DevAgent) LogValue() slog.Value {
	return slog.GroupValue(slog.String("instance", a.id), slog.String("url", a.URL))
}

// MarshalJSON encodes what LogValue logs.
func (a *DevAgent) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"instance": a.id, "url": a.URL})
}
