package api

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
)

// TestModelsRetrieve: an OpenAI client's models.retrieve (GET /v1/models/{id}) finds the
// served model, ids with a slash included, and gets an OpenAI 404 for any other; it
// was a 404 "no route" for every id.
func TestModelsRetrieve(t *testing.T) {
	for _, model := range []string{"ref", "org/name-7b"} {
		f := &fakeGen{script: textScript("ok", "stop")}
		srv, _ := startServer(t, f, WithModelName(model))
		c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("x"), option.WithMaxRetries(0))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		m, err := c.Models.Get(ctx, model)
		require.NoError(t, err, model)
		require.Equal(t, model, m.ID)
		require.Equal(t, "model", string(m.Object))
		_, err = c.Models.Get(ctx, "gpt-9")
		var apiErr *openai.Error
		require.True(t, errors.As(err, &apiErr), "%v", err)
		require.Equal(t, http.StatusNotFound, apiErr.StatusCode)
		require.Equal(t, "model_not_found", apiErr.Code)
		cancel()
		r := do(t, http.MethodPost, srv.URL+"/v1/models/"+model, "", nil)
		require.Equal(t, http.StatusMethodNotAllowed, r.status)
		errorOf(t, r)
	}
}
