package k8s_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"pdsoak/internal/testutil"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"

	"pdsoak/harness/k8s"
	servercli "pdsoak/server/cli"
)

func freePort(t *testing.T) int { return testutil.FreePort(t) }

// TestReferenceArgsServe runs the rendered pdserver command lines, with the Services'
// names and ports mapped onto loopback (every pod listens on 30000 in the cluster), and
// sends a completion through the router: the wiring (router → prefill, router → decode,
// decode → prefill's bootstrap port) is the one the manifests give.
func TestReferenceArgsServe(t *testing.T) {
	objs, err := k8s.RenderReference(k8s.ReferenceOptions{Prefill: 1, Decode: 1, Image: "i"})
	require.NoError(t, err)
	ports := map[string]int{}
	var deps []*appsv1.Deployment
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok {
			deps = append(deps, d)
			ports[d.Name] = freePort(t)
		}
	}
	boot := freePort(t)
	// The mapping a cluster's DNS and Services do.
	mapArg := func(self, a string) string {
		if a == "0.0.0.0" {
			return "127.0.0.1"
		}
		if a == strconv.Itoa(k8s.HTTPPort) {
			return strconv.Itoa(ports[self])
		}
		if a == strconv.Itoa(k8s.BootstrapPort) {
			return strconv.Itoa(boot)
		}
		for name, p := range ports {
			a = strings.ReplaceAll(a, fmt.Sprintf("%s:%d", name, k8s.HTTPPort), fmt.Sprintf("127.0.0.1:%d", p))
			a = strings.ReplaceAll(a, fmt.Sprintf("%s:%d", name, k8s.BootstrapPort), fmt.Sprintf("127.0.0.1:%d", boot))
		}
		return a
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	start := func(d *appsv1.Deployment) {
		c := d.Spec.Template.Spec.Containers[0]
		require.Equal(t, []string{k8s.PDServerBin}, c.Command)
		args := make([]string, len(c.Args))
		for i, a := range c.Args {
			args[i] = mapArg(d.Name, a)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := servercli.Execute(ctx, args, io.Discard, io.Discard)
			if ctx.Err() == nil {
				t.Errorf("%s (%s) exited %d before the test ended", d.Name, strings.Join(args, " "), code)
			}
		}()
		testutil.WaitHealthy(t, fmt.Sprintf("http://127.0.0.1:%d/health", ports[d.Name]), 30*time.Second)
	}
	// Workers first, as readiness gates the router's traffic in the cluster.
	for _, d := range deps {
		if d.Name != k8s.RouterService {
			start(d)
		}
	}
	for _, d := range deps {
		if d.Name == k8s.RouterService {
			start(d)
		}
	}
	router := fmt.Sprintf("http://127.0.0.1:%d", ports[k8s.RouterService])
	resp, err := http.Get(router + "/v1/models")
	require.NoError(t, err)
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&models))
	resp.Body.Close()
	require.NotEmpty(t, models.Data)
	// ignore_eos (SGLang's extension): without it a sampled EOS ends the answer early with
	// "stop", which a random seed does now and then.
	body := fmt.Sprintf(`{"model":%q,"prompt":"hello","max_tokens":4,"ignore_eos":true}`, models.Data[0].ID)
	resp, err = http.Post(router+"/v1/completions", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	var out struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	require.NoError(t, json.Unmarshal(b, &out))
	require.Len(t, out.Choices, 1)
	assert.Equal(t, "length", out.Choices[0].FinishReason)
	assert.Equal(t, 4, out.Usage.CompletionTokens)
}
