package mock_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"

	"github.com/edgesecrets/edgesecrets/mock"
)

// A service developer tests secret handling without a hub: the dev agent
// serves a local file as the service secret "db" and simulates a rotation.
func ExampleNewDevAgent() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	secretFile := filepath.Join(dir, "db")
	if err := os.WriteFile(secretFile, []byte(`{"password":"local"}`), 0o600); err != nil {
		fmt.Println(err)
		return
	}

	agent, err := mock.NewDevAgent(ctx, mock.DevAgentOptions{SecretFiles: []string{secretFile}})
	if err != nil {
		log.Fatal(err)
	}
	defer agent.Close()
	// Run the container with agent.MountSource bind-mounted read-only at
	// /open-horizon-secrets and agent.URL, InstanceID and Token() in its
	// environment. Here the test plays the service:
	get := func(path string) string {
		req, _ := http.NewRequest("GET", agent.URL+path, nil)
		req.SetBasicAuth(agent.InstanceID, agent.Token())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return fmt.Sprint(resp.StatusCode, " ", string(body))
	}
	fmt.Println(get("/secrets"))
	if _, err := agent.UpdateSecret(ctx, "db", []byte(`{"password":"rotated"}`)); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(get("/secrets"))
	content, _ := os.ReadFile(filepath.Join(agent.MountSource, "db"))
	fmt.Println(string(content))
	// Output:
	// 404 {"error":"no secrets have been updated"}
	// 200 ["db"]
	// {"password":"rotated"}
}
