package failpoint

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAdminHandlerAuth(t *testing.T) {
	r := NewRegistry(quiet())
	h := r.AdminHandler("s3cret")
	tests := []struct {
		name   string
		remote string
		auth   string
		want   int
	}{
		{"no token", "127.0.0.1:5555", "", http.StatusUnauthorized},
		{"wrong token", "127.0.0.1:5555", "Bearer nope", http.StatusUnauthorized},
		{"prefix of token", "127.0.0.1:5555", "Bearer s3cre", http.StatusUnauthorized},
		{"not bearer", "127.0.0.1:5555", "Basic s3cret", http.StatusUnauthorized},
		{"non-loopback with token", "10.1.2.3:5555", "Bearer s3cret", http.StatusForbidden},
		{"non-loopback v6", "[2001:db8::1]:80", "Bearer s3cret", http.StatusForbidden},
		{"loopback v4", "127.0.0.1:5555", "Bearer s3cret", http.StatusOK},
		{"loopback v6", "[::1]:5555", "Bearer s3cret", http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/admin/failpoints", nil)
			req.RemoteAddr = tc.remote
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, tc.want, rec.Body)
			}
			if tc.want != http.StatusOK {
				var e struct {
					Error struct {
						Message string `json:"message"`
						Code    int    `json:"code"`
					} `json:"error"`
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Message == "" || e.Error.Code != tc.want {
					t.Fatalf("error body %q is not a JSON error (%v)", rec.Body, err)
				}
			}
		})
	}
}

func TestAdminHandlerEmptyTokenRefusesAll(t *testing.T) {
	h := NewRegistry(quiet()).AdminHandler("")
	req := httptest.NewRequest(http.MethodGet, "/admin/failpoints", nil)
	req.RemoteAddr = "127.0.0.1:1"
	req.Header.Set("Authorization", "Bearer ")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("status = %d, want 401", rec.Code)
	}
}

// TestAdminOverLoopback drives the handler through a real loopback server with Client.
func TestAdminOverLoopback(t *testing.T) {
	r := NewRegistry(quiet())
	mux := http.NewServeMux()
	mux.Handle("/admin/", r.AdminHandler("tok"))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx := context.Background()
	c := NewClient(srv.URL, "tok")

	s, err := c.Enable(ctx, KVTransferSendFrame, "2*return(corrupt)")
	require.NoError(t, err)
	if !s.Enabled || s.Terms != "2*return(corrupt)" || s.Name != KVTransferSendFrame {
		t.Fatalf("Enable status = %+v", s)
	}
	for range 3 {
		_, _ = r.Eval(ctx, KVTransferSendFrame)
	}
	if s, err = c.Get(ctx, KVTransferSendFrame); err != nil || s.Hits != 2 || s.Evals != 3 {
		t.Fatalf("Get = %+v, %v", s, err)
	}
	list, err := c.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != KVTransferSendFrame {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if _, err := c.Enable(ctx, "x", "explode"); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("bad terms: %v", err)
	}
	if _, err := c.Get(ctx, "never"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("unknown Get: %v", err)
	}
	require.NoError(t, c.Disable(ctx, KVTransferSendFrame))
	if err := c.Disable(ctx, KVTransferSendFrame); err != nil {
		t.Fatalf("second Disable should be quiet: %v", err)
	}
	if _, err := NewClient(srv.URL, "bad").List(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("bad token: %v", err)
	}

	// JSON body form.
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/admin/failpoints/engine/step", strings.NewReader(`{"terms":"pause"}`))
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"terms":"pause"`) {
		t.Fatalf("JSON PUT = %d %s", resp.StatusCode, body)
	}
	r.DisableAll()
	srv.CloseClientConnections()
	http.DefaultClient.CloseIdleConnections()
}
