package failpoint

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
)

// AdminPrefix is the path under which AdminHandler serves.
const AdminPrefix = "/admin/failpoints"

// maxBody bounds a PUT body.
const maxBody = MaxTermsLen + 1024

// AdminHandler serves Default's failpoints over HTTP. See Registry.AdminHandler.
func AdminHandler(token string) http.Handler { return Default.AdminHandler(token) }

// AdminHandler returns an http.Handler for the registry, meant to be mounted at "/admin/"
// (it sees full paths):
//
//	GET    /admin/failpoints          → {"failpoints":[Status...]}
//	GET    /admin/failpoints/{name}   → Status (404 if never enabled)
//	PUT    /admin/failpoints/{name}   body: terms (text/plain, or JSON {"terms":"..."}) → Status
//	DELETE /admin/failpoints/{name}   → Status (404 if not enabled)
//
// Names may contain '/', e.g. PUT /admin/failpoints/engine/step with body "pause".
//
// Every request must come from a loopback address (else 403) and carry
// "Authorization: Bearer <token>" (else 401); the token is compared in constant time.
// An empty token refuses every request. Errors use the OpenAI JSON error shape.
// X-Forwarded-For and similar headers are ignored on purpose.
func (r *Registry) AdminHandler(token string) http.Handler {
	want := sha256.Sum256([]byte(token))
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+AdminPrefix, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"failpoints": r.List()})
	})
	mux.HandleFunc("GET "+AdminPrefix+"/{name...}", func(w http.ResponseWriter, req *http.Request) {
		name := req.PathValue("name")
		s, ok := r.Get(name)
		if !ok {
			writeError(w, http.StatusNotFound, "not_found", "failpoint: unknown failpoint "+quote(name))
			return
		}
		writeJSON(w, http.StatusOK, s)
	})
	mux.HandleFunc("PUT "+AdminPrefix+"/{name...}", func(w http.ResponseWriter, req *http.Request) {
		name := req.PathValue("name")
		body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxBody))
		if err != nil {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "failpoint: body too large")
			return
		}
		terms := string(body)
		if strings.HasPrefix(req.Header.Get("Content-Type"), "application/json") {
			var in struct {
				Terms string `json:"terms"`
			}
			if err := json.Unmarshal(body, &in); err != nil {
				writeError(w, http.StatusBadRequest, "invalid_request_error", "failpoint: bad JSON body: "+err.Error())
				return
			}
			terms = in.Terms
		}
		if err := r.Enable(name, terms); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
			return
		}
		s, _ := r.Get(name)
		writeJSON(w, http.StatusOK, s)
	})
	mux.HandleFunc("DELETE "+AdminPrefix+"/{name...}", func(w http.ResponseWriter, req *http.Request) {
		name := req.PathValue("name")
		if err := r.Disable(name); err != nil {
			if errors.Is(err, ErrNotEnabled) {
				writeError(w, http.StatusNotFound, "not_found", err.Error())
				return
			}
			writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
			return
		}
		s, _ := r.Get(name)
		writeJSON(w, http.StatusOK, s)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !isLoopback(req.RemoteAddr) {
			writeError(w, http.StatusForbidden, "forbidden", "failpoint: admin API is loopback-only")
			return
		}
		got, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if !ok || token == "" || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="failpoints"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "failpoint: missing or wrong bearer token")
			return
		}
		mux.ServeHTTP(w, req)
	})
}

func isLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, typ, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}})
}
