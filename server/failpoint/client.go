package failpoint

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client talks to a server's failpoint admin API (AdminHandler).
type Client struct {
	// BaseURL is the server's base URL, e.g. "http://127.0.0.1:8001" (no /admin suffix).
	BaseURL string
	Token   string
	// HTTP is the client used; nil means one with a 5 s timeout.
	HTTP *http.Client
}

// NewClient returns a client for the server at baseURL.
func NewClient(baseURL, token string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), Token: token}
}

// APIError is a non-2xx answer from the admin API.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("failpoint: admin API: %d: %s", e.Status, e.Message)
}

// Enable sets name's terms on the server.
func (c *Client) Enable(ctx context.Context, name, terms string) (Status, error) {
	var s Status
	err := c.do(ctx, http.MethodPut, AdminPrefix+"/"+name, terms, &s)
	return s, err
}

// Disable clears name on the server. A failpoint that was not enabled is not an error.
func (c *Client) Disable(ctx context.Context, name string) error {
	err := c.do(ctx, http.MethodDelete, AdminPrefix+"/"+name, "", nil)
	if ae, ok := err.(*APIError); ok && ae.Status == http.StatusNotFound {
		return nil
	}
	return err
}

// Get returns name's status on the server.
func (c *Client) Get(ctx context.Context, name string) (Status, error) {
	var s Status
	err := c.do(ctx, http.MethodGet, AdminPrefix+"/"+name, "", &s)
	return s, err
}

// List returns every failpoint the server knows.
func (c *Client) List(ctx context.Context) ([]Status, error) {
	var out struct {
		Failpoints []Status `json:"failpoints"`
	}
	err := c.do(ctx, http.MethodGet, AdminPrefix, "", &out)
	return out.Failpoints, err
}

func (c *Client) do(ctx context.Context, method, path, body string, out any) error {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, rd)
	if err != nil {
		return fmt.Errorf("failpoint: admin API: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != "" {
		req.Header.Set("Content-Type", "text/plain")
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("failpoint: admin API: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("failpoint: admin API: %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Message
		}
		return &APIError{Status: resp.StatusCode, Message: msg}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("failpoint: admin API: %s %s: bad JSON: %w", method, path, err)
		}
	}
	return nil
}
