package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"pdsoak/server/gen"
)

// BenchmarkStreamOverhead measures the cost of the handler per streamed request (128
// tokens, one per event) against a baseline handler that drains the same fake generator
// and writes minimal SSE events with no parsing, detokenizing or stop handling. The
// reported metric x_baseline is api time ÷ baseline time, measured in the same run.
func BenchmarkStreamOverhead(b *testing.B) {
	out := strings.Repeat("abcdefgh", 16)
	f := &fakeGen{script: textScript(out, "length")}
	apiSrv := httptest.NewServer(New(f, WithLogger(discardLogger()), WithContextLength(4096)))
	defer apiSrv.Close()
	base := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		ch, _ := f.Generate(r.Context(), &gen.Request{Prompt: []int{256, 1}, MaxTokens: len(out)})
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for ev := range ch {
			bs, _ := json.Marshal(ev.Tokens)
			_, _ = w.Write(append(append([]byte("data: "), bs...), '\n', '\n'))
			_ = rc.Flush()
		}
		_, _ = w.Write([]byte("data: [DONE]\n\n"))
	}))
	defer base.Close()
	body := `{"prompt":"x","max_tokens":128,"temperature":0,"stream":true}`
	one := func(url string) time.Duration {
		start := time.Now()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url+"/v1/completions", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(start)
	}
	var apiT, baseT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		baseT += one(base.URL)
		apiT += one(apiSrv.URL)
	}
	b.StopTimer()
	b.ReportMetric(float64(apiT)/float64(baseT), "x_baseline")
	b.ReportMetric(float64(apiT.Microseconds())/float64(b.N), "api_us/req")
	b.ReportMetric(float64(baseT.Microseconds())/float64(b.N), "baseline_us/req")
	http.DefaultClient.CloseIdleConnections()
	f.wg.Wait()
}
